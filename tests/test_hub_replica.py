"""The paper path against the Hub replica (scripts/hub_replica): a real Hub-protocol server (olah) on 127.0.0.1 serving
a replica of every repository `config/paper.yaml` reads. The pre-flight check answers each broken artefact with its
one line and leaves the cache empty; the paper-shaped config (paper.yaml with only its sizes changed) runs from
`prestage` to the tables, offline but for the replica."""

from __future__ import annotations

import fnmatch
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import HANG_GUARD, REPO, snakemake

from layerswap.layout import Layout, R
from scripts.hub_replica import Replica, reset, status
from scripts.hub_replica.shaped import ALLOWED, NEW_TOKENS, PAPER, differences, external, shaped, write_shaped

LAYERSWAP = str(Path(sys.executable).parent / "layerswap")


def _env(hub: Replica, hf_home: Path, token: bool = True) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")}
    return {
        **env,
        **hub.env(token=token),
        "HF_HOME": str(hf_home),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}",
    }


def _prestage(cfg: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [LAYERSWAP, "prestage", "--configfile", str(cfg), *args],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
    )


def test_shaped_config_differs_from_paper_only_in_sizes(tmp_path):
    paper = yaml.safe_load(PAPER.read_text())
    cfg = shaped(paper)
    external(cfg, "http://127.0.0.1:1")
    diff = differences(paper, cfg)
    assert diff, "the shaped config must be smaller than the paper config"
    assert [p for p in diff if not any(fnmatch.fnmatchcase(p, pat) for pat in ALLOWED)] == []
    # same sources, normalisers, task set, grain and launcher
    assert cfg["data_sources"] == {**paper["data_sources"], "nllb": cfg["data_sources"]["nllb"]}
    assert set(cfg["evaluation"]["tasks"]) == set(paper["evaluation"]["tasks"])
    assert cfg["evaluation"]["tasks_per_job"] == "single" and cfg["sft"]["launcher"] == "accelerate"
    out = write_shaped(tmp_path / "shaped.yaml", "http://127.0.0.1:1")
    proc = subprocess.run([LAYERSWAP, "check-config", str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


#: deliberate faults -> the line the pre-flight check must print for the artefact they break
BREAKS = {
    "drop_column": ("lumatic-ai/BongChat-v1-253k", "output"),
    "rename_config": ("p1atdev/ichikara-instruction", "20231115-1", "20231115-9"),
    "script_only": "microsoft/orca-math-word-problems-200k",
    "language_value": ("CohereForAI/aya_dataset", "language", "Swahili", "Kiswahili"),
}
EXPECTED = {  # artefact line prefix -> the reason its line gives
    "dataset lumatic-ai/BongChat-v1-253k": "no column 'output'",
    "dataset p1atdev/ichikara-instruction subset=20231115-1": "no such config",
    "dataset microsoft/orca-math-word-problems-200k": "a loading-script dataset (orca-math-word-problems-200k.py)",
    "dataset CohereForAI/aya_dataset split=train  # SFT data aya (swh)": "language = 'Swahili' selects no rows",
    # gated repositories, asked without a token: both Llama bases, Inkuba-instruct, every FLORES+ split
    "model meta-llama/": "gated: accept its terms",
    "dataset lelapa/Inkuba-instruct": "gated: accept its terms",
    "dataset openlanguagedata/flores_plus": "gated: accept its terms",
}


def test_prestage_answers_each_broken_artefact_with_one_line_and_writes_nothing(tmp_path):
    with Replica(tmp_path / "hub", breaks=BREAKS, lifetime=900) as hub:
        cfg = write_shaped(tmp_path / "shaped.yaml", hub.url)
        hf_home = tmp_path / "hf"
        proc = _prestage(cfg, _env(hub, hf_home, token=False))
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    checks = [line for line in lines if line.startswith(("ok  ", "FAIL"))]
    listed = subprocess.run(
        [LAYERSWAP, "prestage", "--configfile", str(cfg), "--dry-run"], capture_output=True, text=True, cwd=REPO
    ).stdout.splitlines()
    assert len(checks) == len(listed) - 1  # one line per artefact (the dry run adds a count line)
    for artefact, reason in EXPECTED.items():
        hits = [line for line in checks if f"  {artefact}" in line]
        assert hits, f"no line for {artefact}"
        assert all(
            line.startswith("FAIL") and reason in line and "no token is set" * ("gated" in reason) in line
            for line in hits
        ), hits
    unexplained = [
        line for line in checks if line.startswith("FAIL") and not any(f"  {artefact}" in line for artefact in EXPECTED)
    ]
    assert unexplained == []  # nothing else fails (a reset or timeout of the loaded replica is retried)
    retried = [line for line in lines if line.startswith("retry ")]
    assert not [line for line in retried if any(f" {artefact}" in line for artefact in EXPECTED)], retried
    assert len([line for line in checks if line.startswith("ok")]) > 30
    assert "FAILED" in lines[-1]
    # nothing was downloaded: no dataset built, no data file or weights in the cache (only the cards `datasets` keeps)
    assert not any((hf_home / "datasets").glob("*/*")) and not any((hf_home / "hub").glob("models--*"))
    files = [p.name for p in hf_home.rglob("*") if p.is_file() or p.is_symlink()]
    assert not [
        f for f in files if f.endswith((".parquet", ".jsonl", ".json", ".csv", ".gz", ".arrow", ".safetensors"))
    ], files


def _lines(stdout: str, repo: str, prefix: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith(prefix) and f" {repo}" in line]


#: network faults for the retry tests: two transient answers that end in `ok`, a persistent reset, a missing repository
TRANSIENT = {
    "CohereForAI/Global-MMLU": reset(first=2),  # its first two requests reset
    "facebook/belebele": status(503, first=2),
    "juletxara/mgsm": status(429, first=1, retry_after=1),
}
PERSISTENT = {"openlanguagedata/flores_plus": reset()}  # every request reset
MISSING = {"kunishou/databricks-dolly-15k-ja": status(404)}  # every request: 404


def test_prestage_check_retries_transient_failures_and_fails_persistent_ones_after_bounded_tries(tmp_path):
    """`prestage --verify` against a replica that resets, rate-limits and fails: artefacts whose first requests fail
    end `ok` after printed retries; a persistently reset one is one FAIL line per artefact after exactly `--tries`
    attempts; a missing one fails at once, without a retry."""
    with Replica(tmp_path / "hub", faults={**TRANSIENT, **PERSISTENT, **MISSING}, lifetime=600) as hub:
        cfg = write_shaped(tmp_path / "shaped.yaml", hub.url)
        proc = _prestage(cfg, _env(hub, tmp_path / "hf"), "--verify", "--tries", "3", "--retry-wait", "0.2")
        broken = hub.broken()
    out = proc.stdout
    assert proc.returncode == 1, out[-3000:] + proc.stderr[-3000:]
    for repo in TRANSIENT:  # every fault was met, and ended in ok lines
        assert any(f"/{repo}/" in line for line in broken), (repo, broken)
        assert _lines(out, repo, "ok  ") and not _lines(out, repo, "FAIL"), _lines(out, repo, "")
    assert any("Connection reset by peer" in line for line in _lines(out, "CohereForAI/Global-MMLU", "retry "))
    flores = _lines(out, "openlanguagedata/flores_plus", "FAIL")
    assert flores and all("still failing after 3 tries" in line for line in flores), flores
    retries = _lines(out, "openlanguagedata/flores_plus", "retry ")
    assert len(retries) == 2 * len(flores)  # 3 tries: 2 retries per artefact, then its FAIL line
    assert all(line.startswith(("retry 1/2 ", "retry 2/2 ")) for line in retries), retries
    missing = _lines(out, "kunishou/databricks-dolly-15k-ja", "FAIL")
    assert missing and not [line for line in missing if "still failing" in line], missing
    assert not _lines(out, "kunishou/databricks-dolly-15k-ja", "retry ")
    failed = [line for line in out.splitlines() if line.startswith("FAIL")]
    assert len(failed) == len(flores) + len(missing), failed  # nothing else fails


def test_prestage_download_retries_transient_failures_and_fetches_the_rest_past_a_persistent_one(tmp_path):
    """`prestage --no-verify` (downloads only): the base model's and a dataset's first requests reset, retried to `ok`;
    a persistently reset artefact is one FAIL line after its tries, every other artefact is still fetched, and the
    command ends in one line that says how many failed."""
    faults = {"meta-llama/Llama-3.1-8B": reset(first=2), "CohereForAI/Global-MMLU": reset(first=2), **PERSISTENT}
    hf_home = tmp_path / "hf"
    with Replica(tmp_path / "hub", faults=faults, lifetime=600) as hub:
        cfg = write_shaped(tmp_path / "shaped.yaml", hub.url)
        proc = _prestage(cfg, _env(hub, hf_home), "--no-verify", "--tries", "3", "--retry-wait", "0.2")
        broken = hub.broken()
    out = proc.stdout
    assert proc.returncode == 1, out[-3000:] + proc.stderr[-3000:]
    assert {repo for repo in faults if any(f"/{repo}/" in line for line in broken)} == set(faults), broken
    failed = [line for line in out.splitlines() if line.startswith("FAIL")]
    flores = _lines(out, "openlanguagedata/flores_plus", "FAIL")
    assert failed == flores and all("still failing after 3 tries" in line for line in flores), failed
    listed = subprocess.run(
        [LAYERSWAP, "prestage", "--configfile", str(cfg), "--dry-run"], capture_output=True, text=True, cwd=REPO
    ).stdout.splitlines()
    assert f"{len(listed) - 1 - len(flores)} artefacts staged" in out
    err = proc.stderr.strip().splitlines()  # progress bars, then the one line
    assert f"{len(flores)} of {len(listed) - 1} artefacts could not be downloaded" in err[-1], err[-5:]
    assert "Traceback" not in proc.stderr
    # the retried model is in the cache, safetensors only
    snapshots = list((hf_home / "hub" / "models--meta-llama--Llama-3.1-8B" / "snapshots").glob("*/*.safetensors"))
    assert len(snapshots) == 4, snapshots


@pytest.mark.workflow
def test_paper_shaped_run_from_prestage_to_tables(tmp_path):
    """The paper config's rules, sources, normalisers and lm-eval tasks, sized down, against the replica."""
    work, hf_home = tmp_path / "work", tmp_path / "hf"
    with Replica(tmp_path / "hub", lifetime=900) as hub:
        cfg = write_shaped(tmp_path / "shaped.yaml", hub.url)
        env = _env(hub, hf_home)
        pre = _prestage(cfg, env)
        failed = [line for line in pre.stdout.splitlines() if line.lstrip().startswith("FAIL ")]
        assert pre.returncode == 0, "\n".join(failed) + "\n" + pre.stdout[-2000:] + pre.stderr[-3000:]
        assert "all passed" in pre.stdout
        # the jobs run offline (the rules set HF_*_OFFLINE); the replica stays up only to prove they do not need it
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "snakemake",
                "-s",
                str(REPO / "Snakefile"),
                "--directory",
                str(work),
                "--configfile",
                str(cfg),
                "--cores",
                "2",
                "--set-resources",
                "sft:gpu=2",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=HANG_GUARD,
        )
    assert proc.returncode == 0, proc.stderr[-5000:]
    results = work / R
    layout = Layout.at(results)
    for table in ("table1", "table2", "table5", "table6"):
        assert Path(layout.table(table, "csv")).is_file()
    table1 = Path(layout.table("table1", "md")).read_text()
    assert all(f"{name} avg" in table1 for name in ("Swahili", "Telugu", "Bengali", "Japanese"))
    # hub data: every (source, language) the mixes read, normalised, with its manifest
    from layerswap.config import load_config
    from layerswap.data.hub import needed_sources

    for source, lang in needed_sources(load_config(cfg)):
        manifest = json.loads(Path(layout.hub_manifest(f"{source}_{lang}.jsonl")).read_text())
        assert manifest["examples"] >= 4, (source, lang, manifest)
    indic = json.loads(Path(layout.hub_manifest("indic_align_ben.jsonl")).read_text())
    assert indic["blank"] == 0  # [user, assistant] pairs read as conversations
    # the base model: the replica's safetensors shards and index, never its pickle original/
    base = Path(layout.base())
    assert (
        len(list(base.glob("model-0000?-of-00004.safetensors"))) == 4
        and (base / "model.safetensors.index.json").exists()
    )
    assert not list((hf_home / "hub").rglob("*.pth"))
    # SFT under accelerate launch, 2 processes
    assert "2 training process(es)" in Path(layout.log("sft", "math_1")).read_text()
    # lm-eval's own task files for MGSM, Belebele and Global-MMLU; ours for FLORES and MBPP
    tasks = {
        b: json.loads(Path(layout.eval_file("base", b)).read_text())["lm_eval_tasks"]
        for b in ("mgsm", "belebele", "mmlu", "flores", "mbpp")
    }
    assert tasks["mgsm"]["swh"].startswith("mgsm_") and tasks["mgsm"]["swh"].endswith("_sw")
    assert tasks["belebele"]["swh"] == "belebele_swh_Latn" and tasks["mmlu"]["tel"] == "global_mmlu_full_te"
    assert tasks["flores"]["en-jpn"] == "layerswap_flores_en-jpn"
    mgsm = json.loads(Path(layout.eval_file("base", "mgsm")).read_text())
    assert mgsm["shots"] == 8 and mgsm["dtype"] == "float32"  # CPU here; bf16 on a GPU (--dtype auto)
    assert all(t.startswith("mgsm_native_cot_") for t in mgsm["lm_eval_tasks"].values())
    for key, ran in mgsm["lm_eval"].items():  # what lm-eval ran with, read back from the loaded task
        assert ran["num_fewshot"] == 8 and ran["generation"]["max_gen_toks"] == NEW_TOKENS, (key, ran)
        assert ran["generation"]["do_sample"] is False and ran["filter"] == "flexible-extract", (key, ran)
    flores = json.loads(Path(layout.eval_file("base", "flores")).read_text())
    assert flores["dtype"] == "float32" and "ja-mecab" in flores["filter"]
    assert {k: r["bleu_tokenize"] for k, r in flores["lm_eval"].items()} == {
        k: "ja-mecab" if k.endswith("-jpn") else "13a" for k in flores["lm_eval"]
    }
    assert all(
        r["num_fewshot"] == 0 and r["generation"]["max_gen_toks"] == NEW_TOKENS for r in flores["lm_eval"].values()
    )
    # selection constraints (paper 3.1, secondary measures) compared with the base's own evaluation, recorded
    swh = json.loads(Path(layout.selection("swh")).read_text())
    base_mmlu = json.loads(Path(layout.eval_file("base", "mmlu")).read_text())["scores"]["swh"]
    assert swh["constraints"] == {"mmlu": 1.0, "mgsm_target": 1.0} and swh["base"]["mmlu"] == base_mmlu
    assert all(c["failed"] == [] for c in swh["candidates"])
    # the settings that differ from the paper's, under the paper-vs-ours numbers
    assert "ja-mecab" in Path(layout.table("table5_paper_vs_ours", "md")).read_text()
    # only stale outputs rerun: nothing, right after
    nothing = snakemake(work, "-n", configfile=cfg)
    assert "Nothing to be done" in nothing.stdout + nothing.stderr, nothing.stdout[-2000:]
