"""Every evaluation job keeps each finished model (issue 41, item 3b), and the store is audited (issue 43, item 3).

- A checkpoint-evaluation job (`layerswap evaluate --store`, as rules/select.smk runs it) killed with SIGKILL after
  its first model finished resumes without evaluating that model again, and writes what an uninterrupted run writes.
- A store entry edited together with its key.json (a score changed, the recorded sha256 fixed to match) feeds a
  result: the manifest lists what the store fed, `layerswap audit` names every such result and, with
  `--reevaluate-store`, the one that differs from a fresh evaluation.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("lm_eval")
pytest.importorskip("torch")

from tests.test_switch import BENCHMARKS, grid  # noqa: E402,F401 (fixture)

COUNT = re.compile(r"evaluate: store: reused (\d+), evaluated (\d+)")
# `layerswap` as a job runs it; with a model id as first argument, the process kills itself (SIGKILL, as a time limit
# or a preemption does) when it starts writing that model's results: every model before it is finished.
JOB = """
import os, signal, sys
from layerswap.evaluation import evaluate
victim = sys.argv[1]
real = evaluate.write_outputs
def write_outputs(out_dir, model_id, *a, **k):
    if model_id == victim:
        os.kill(os.getpid(), signal.SIGKILL)
    return real(out_dir, model_id, *a, **k)
evaluate.write_outputs = write_outputs
from layerswap.cli import main
sys.exit(main(sys.argv[2:]))
"""


def job(grid, out: Path, store: Path | None, victim: str = "") -> subprocess.CompletedProcess:
    argv = [sys.executable, "-c", JOB, victim, "evaluate", "--data-dir", str(grid["data"]), "--out-dir", str(out)]
    argv += ["--benchmarks-json", json.dumps(BENCHMARKS), "--batch-size", "16", "--threads", "1", "--run", "r"]
    argv += ["--index", str(out / "index.json")]
    for name in ("t0", "l0", "l1"):
        argv += ["--model", f"ckpt/r/{name}={grid['experts'][name]}"]
    if store is not None:
        argv += ["--store", str(store)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=600)


def files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def test_a_checkpoint_evaluation_killed_mid_run_resumes_after_its_finished_models(grid, tmp_path):
    store = tmp_path / "results" / "store" / "evals"
    killed = job(grid, tmp_path / "a", store, victim="ckpt/r/l0")
    assert killed.returncode == -9, killed.stderr
    assert "evaluate: ckpt/r/t0:" in killed.stderr and "evaluate: ckpt/r/l0:" not in killed.stderr
    assert len(list(store.rglob("key.json"))) == 1  # the finished model is kept
    resumed = job(grid, tmp_path / "a", store)
    assert resumed.returncode == 0, resumed.stderr
    assert COUNT.findall(resumed.stderr) == [("1", "2")], resumed.stderr
    assert "evaluate: ckpt/r/t0:" not in resumed.stderr  # not evaluated again
    clean = job(grid, tmp_path / "clean", None)
    assert clean.returncode == 0, clean.stderr
    resumed_files, clean_files = files(tmp_path / "a"), files(tmp_path / "clean")
    index = resumed_files.pop("index.json").replace(str(tmp_path / "a").encode(), str(tmp_path / "clean").encode())
    assert index == clean_files.pop("index.json")  # the index names the files by their paths
    assert resumed_files == clean_files and len(clean_files) == 3 * 2 * 2


# --------------------------------------------------------------------------------------------- store audit
def evaluate_merges(grid, out: Path, store: Path, models: dict, caplog) -> tuple[int, int]:
    from layerswap.evaluation import evaluate_merges as em

    parser = argparse.ArgumentParser()
    em.add_arguments(parser)
    argv = ["--data-dir", str(grid["data"]), "--out-dir", str(out), "--benchmarks-json", json.dumps(BENCHMARKS)]
    argv += ["--batch-size", "16", "--threads", "1", "--store", str(store)]
    for model_id, src in models.items():
        argv += ["--model", f"{model_id}={src}"]
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="layerswap.evaluate"):
        em.run(parser.parse_args(argv))
    (found,) = COUNT.findall(caplog.text)
    return int(found[0]), int(found[1])


def test_a_store_entry_edited_with_its_key_is_named_by_the_audit(grid, tmp_path, caplog):
    from layerswap.audit.manifest import build_manifest
    from layerswap.audit.reevaluate import reevaluate_entry
    from layerswap.audit.store_check import check_store
    from layerswap.layout import Layout

    root = tmp_path / "results"
    layout = Layout.at(root)
    evals, store = Path(layout.evals()), Path(layout.store())
    models = {f"merge/swap/toy_swh/{n}": grid["recipes"][n] for n in ("t0xl0", "t1xl1")}
    assert evaluate_merges(grid, evals, store, models, caplog) == (0, 2)
    clean = files(evals)
    # the case of issue 43: a score changed in a store entry, and its key.json's sha256 changed to match
    (entry,) = [k.parent for k in store.rglob("key.json") if "t0xl0" in k.read_text()]
    result = entry / "mgsm.json"
    doc = json.loads(result.read_text())
    lang = sorted(doc["scores"])[0]
    doc["scores"][lang] = 0.75 if doc["scores"][lang] != 0.75 else 0.5
    result.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    key = json.loads((entry / "key.json").read_text())
    key["files"]["mgsm.json"] = hashlib.sha256(result.read_bytes()).hexdigest()
    (entry / "key.json").write_text(json.dumps(key, indent=1, sort_keys=True) + "\n")
    # the job runs again (Snakemake deleted its outputs): both models come from the store, one of them forged
    for p in evals.rglob("*.json*"):
        p.unlink()
    assert evaluate_merges(grid, evals, store, models, caplog) == (2, 0)
    edited = str(evals / "merge/swap/toy_swh/t0xl0/mgsm.json")
    assert files(evals) != clean and json.loads(Path(edited).read_text())["scores"][lang] == doc["scores"][lang]
    manifest = build_manifest(root, root / "manifest.json", tmp_path / "no-metadata", tmp_path, None)
    fed = manifest["store"]
    assert len(fed) == 2 * 2 * 2 and fed[edited]["entry"] == entry.name  # 2 models x 2 benchmarks x (json, samples)
    problems, notes, _ = check_store(manifest, root)
    assert problems == [] and len(notes) == 8 and all("not evaluated by its job" in n for n in notes)
    assert any(n.startswith(f"store: {edited}: copied from entry") for n in notes)
    _, _, again = check_store(manifest, root, reevaluate=True)
    problems = [line for entry, doc, paths in again for line in reevaluate_entry(entry, doc, paths)]
    assert problems == [
        f"store: {edited}: differs from a fresh evaluation of merge/swap/toy_swh/t0xl0 (store entry {entry} is "
        f"wrong: rm -r {entry} && rm {edited} && snakemake {edited})"
    ]
    # an entry changed after it fed a result (its key.json left as it was) is named without re-evaluation
    other = str(evals / "merge/swap/toy_swh/t1xl1/belebele.json")
    (other_entry,) = [k.parent for k in store.rglob("key.json") if "t1xl1" in k.read_text()]
    (other_entry / "belebele.json").write_text("{}\n")
    problems, _, _ = check_store(manifest, root)
    assert len(problems) == 1 and problems[0].startswith(f"store: {other}: the entry's file"), problems
    # the store deleted (a cache): the manifest still says which entry fed each result, with what evaluates its
    # model again (issue 49)
    assert set(manifest["store_entries"]) == {entry.name, other_entry.name}
    shutil.rmtree(store)
    problems, _, _ = check_store(manifest, root)
    gone = f"store: {edited}: copied from entry {entry.name[:16]}…, which is gone"
    assert len(problems) == 8 and any(line.startswith(gone) for line in problems)
    _, _, again = check_store(manifest, root, reevaluate=True)
    problems = [line for e, doc, paths in again for line in reevaluate_entry(e, doc, paths)]
    assert problems == [
        f"store: {edited}: differs from a fresh evaluation of merge/swap/toy_swh/t0xl0 (store entry {entry} is "
        f"wrong: rm {edited} && snakemake {edited})"
    ]
