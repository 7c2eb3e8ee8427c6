"""Faults and bad input through the commands users run (`layerswap merge`, `evaluate`, `heatmap`), interrupted
writes, and security properties of the package source.

Covered elsewhere (not repeated here): config faults (tests/test_config.py::test_bad_input_one_line and friends:
unknown key, wrong type, unknown language, impossible layer ranges, top-k > checkpoints, empty grids), merge-engine
faults on synthetic checkpoints (tests/test_merge_checks.py: truncated/corrupt header, NaN/Inf, pickle, shape and
architecture mismatches, previous output kept), SFT crash-safe export + resume (tests/test_sft.py), MBPP opt-in and
sandbox (tests/test_evaluate_sandbox.py, tests/test_evaluate.py).
"""

from __future__ import annotations

import ast
import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from layerswap.cli import main

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "layerswap"


# ----------------------------------------------------------------------------------------------- bad checkpoints
def _tensor_offsets(weights: Path) -> tuple[int, dict]:
    import struct

    raw = weights.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    return 8 + n, json.loads(raw[8 : 8 + n])


def make_bad(kind: str, base: Path, dest: Path) -> tuple[Path, str]:
    """A copy of `base` with one fault; returns (dir, the text the error line must contain)."""
    shutil.copytree(base, dest)
    # a directory no job recorded (its export record removed): these are the checks of what is read, not of the
    # record (a recorded model that changed is refused before, tests/test_verify_once.py)
    (dest / "layerswap_meta.json").unlink()
    weights = dest / "model.safetensors"
    if kind == "truncated":
        data = weights.read_bytes()
        weights.write_bytes(data[: len(data) // 2])
        return dest, f"{weights}: truncated"
    if kind in ("nan", "inf"):
        start, header = _tensor_offsets(weights)
        name = "model.layers.0.mlp.down_proj.weight"  # a matrix every command reads (merge: bottom layer)
        assert header[name]["dtype"] == "F32"
        begin = start + header[name]["data_offsets"][0]
        import numpy as np

        data = bytearray(weights.read_bytes())
        data[begin : begin + 4] = np.array([np.nan if kind == "nan" else np.inf], dtype="<f4").tobytes()
        weights.write_bytes(bytes(data))
        return dest, f"tensor {name} contains NaN or Inf"
    if kind == "pickle":
        weights.unlink()
        (dest / "pytorch_model.bin").write_bytes(b"\x80\x04K\x01.")  # a pickle; must never be loaded
        return dest, "pickle checkpoint (pytorch_model.bin) refused"
    if kind == "no_config":
        (dest / "config.json").unlink()
        return dest, "no config.json"
    if kind == "no_tokenizer":
        for p in dest.glob("tokenizer*"):
            p.unlink()
        return dest, "no tokenizer"
    raise ValueError(kind)


def one_line(capsys) -> str:
    """The one error line (progress bars and INFO logs of evaluate may precede it; no traceback)."""
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    lines = [l for l in err.strip().splitlines() if l.startswith("layerswap ")]
    assert len(lines) == 1 and err.strip().endswith(lines[0]), err
    return lines[0]


BAD = ["truncated", "nan", "inf", "pickle", "no_config", "no_tokenizer"]


@pytest.mark.parametrize("kind", BAD)
def test_evaluate_refuses_bad_checkpoint(kind, tiny_base, toy_world, tmp_path, capsys):
    bad, expected = make_bad(kind, tiny_base, tmp_path / kind)
    out = tmp_path / "evals"
    bench = json.dumps({"mgsm": {"languages": ["en"], "limit": 2, "shots": 0}})
    code = main(
        [
            "evaluate",
            "--data-dir",
            str(toy_world / "eval"),
            "--benchmarks-json",
            bench,
            "--model",
            f"good={tiny_base}",
            "--model",
            f"bad={bad}",
            "--out-dir",
            str(out),
            "--batch-size",
            "4",
            "--seed",
            "0",
            "--threads",
            "1",
            "--index",
            str(tmp_path / "index.json"),
        ]
    )
    line = one_line(capsys)
    print(f"evaluate/{kind}: {line}")
    assert code == 1 and expected in line and (str(bad) in line or str(tiny_base) not in line)
    assert not (out / "bad").exists() and not (tmp_path / "index.json").exists()


@pytest.mark.parametrize("kind", ["truncated", "nan", "pickle", "no_config"])
def test_merge_cli_refuses_bad_checkpoint(kind, tiny_base, tmp_path, capsys):
    bad, expected = make_bad(kind, tiny_base, tmp_path / kind)
    if kind == "nan":
        expected = "contains NaN or Inf"
    recipe = {
        "method": "layer_swap",
        "base": None,
        "inputs": {"task": str(tiny_base), "lang": str(bad)},
        "params": {"bottom": 1, "top": 0, "transition_bottom": 0, "transition_top": 0},
    }
    (tmp_path / "r.json").write_text(json.dumps(recipe))
    out = tmp_path / "merged"
    code = main(["merge", "--recipe", str(tmp_path / "r.json"), "--out", str(out)])
    line = one_line(capsys)
    print(f"merge/{kind}: {line}")
    assert code == 1 and expected in line and str(bad) in line
    assert not out.exists() and not list(tmp_path.glob(".merged*"))


@pytest.mark.parametrize("kind", ["truncated", "nan", "pickle"])
def test_heatmap_refuses_bad_checkpoint(kind, tiny_base, tmp_path, capsys):
    bad, expected = make_bad(kind, tiny_base, tmp_path / kind)
    expected = {
        "truncated": "not a readable safetensors file",
        "nan": "NaN or Inf",
        "pickle": "pickle checkpoint (pytorch_model.bin) refused",
    }[kind]
    prefix = tmp_path / "fig" / "param_change"
    code = main(
        [
            "heatmap",
            "--base",
            str(tiny_base),
            "--expert",
            f"x={bad}",
            "--threshold-json",
            '{"*": 0.0}',
            "--out-prefix",
            str(prefix),
        ]
    )
    line = one_line(capsys)
    print(f"heatmap/{kind}: {line}")
    assert code == 1 and expected in line and str(bad) in line
    assert not list(prefix.parent.glob("*")) if prefix.parent.exists() else True


# ----------------------------------------------------------------------------------------------- interrupted writes
def test_merge_killed_mid_write_leaves_no_model_dir(tiny_base, tmp_path):
    """SIGKILL while the first shard is half written: no output directory appears (only a hidden temp dir)."""
    recipe = {
        "method": "soup",
        "base": None,
        "inputs": {"models": [str(tiny_base), str(tiny_base)]},
        "params": {"weighting": "uniform"},
    }
    (tmp_path / "r.json").write_text(json.dumps(recipe))
    out = tmp_path / "merged"
    script = (
        "import os, signal, layerswap.checkpoints as e\n"
        "real = e.write_shard\n"
        "def dying(file, entries, fill, chunk):\n"
        "    real(file, entries[:1], fill, chunk)\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "e.write_shard = dying\n"
        "from layerswap.cli import main\n"
        f"main(['merge', '--recipe', {str(tmp_path / 'r.json')!r}, '--out', {str(out)!r}])\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert not out.exists()
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(".merged")]
    assert leftovers and all(".tmp-" in n for n in leftovers)  # hidden, never taken for the output
    assert main(["merge", "--recipe", str(tmp_path / "r.json"), "--out", str(out)]) == 0  # a rerun completes
    assert (out / "model.safetensors.index.json").is_file()


def test_evaluation_killed_mid_write_leaves_no_result(tiny_base, toy_world, tmp_path, monkeypatch):
    """The evaluation JSON (the declared output) is written last through a temp name: a crash while writing it
    leaves its sample log at most, never a JSON the workflow or `tables` would read."""
    real = Path.write_bytes

    def dying(self, data, *a, **k):
        if self.name.startswith(".mgsm.json.tmp"):
            real(self, data[: len(data) // 2], *a, **k)
            raise KeyboardInterrupt("killed mid-write")
        return real(self, data, *a, **k)

    monkeypatch.setattr(Path, "write_bytes", dying)
    bench = json.dumps({"mgsm": {"languages": ["en"], "limit": 2, "shots": 0}})
    with pytest.raises(KeyboardInterrupt):
        main(
            [
                "evaluate",
                "--data-dir",
                str(toy_world / "eval"),
                "--benchmarks-json",
                bench,
                "--model",
                f"m={tiny_base}",
                "--out-dir",
                str(tmp_path / "evals"),
                "--batch-size",
                "4",
                "--seed",
                "0",
                "--threads",
                "1",
                "--index",
                str(tmp_path / "index.json"),
            ]
        )
    assert not (tmp_path / "evals" / "m" / "mgsm.json").exists()
    assert not (tmp_path / "index.json").exists()
    monkeypatch.setattr(Path, "write_bytes", real)


# ----------------------------------------------------------------------------------------------------- security
# (file relative to the repo, what) -> why it is allowed
ALLOWED = {}


def _findings(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) else [])
            for n in names:
                if n and n.split(".")[0] in {"pickle", "cPickle", "dill", "cloudpickle", "joblib", "shelve", "marshal"}:
                    found.append(f"import {n}")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if (node.value.id, node.attr) in {
                ("torch", "load"),
                ("pd", "read_pickle"),
                ("pandas", "read_pickle"),
                ("np", "load"),
                ("numpy", "load"),
            }:
                found.append(f"{node.value.id}.{node.attr}")
        elif isinstance(node, ast.keyword) and node.arg in ("trust_remote_code", "weights_only"):
            if isinstance(node.value, ast.Constant) and node.value.value is (node.arg == "trust_remote_code"):
                found.append(f"{node.arg}={node.value.value}")
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and node.value.value is True:
            for t in node.targets:
                if (
                    isinstance(t, ast.Subscript)
                    and isinstance(t.slice, ast.Constant)
                    and t.slice.value == "trust_remote_code"
                ):
                    found.append("trust_remote_code=True")
    return found


def test_no_pickle_loading_or_remote_code_outside_allow_list():
    bad = []
    files = (
        sorted(PACKAGE.rglob("*.py"))
        + sorted((REPO / "measure").rglob("*.py"))
        + sorted((REPO / "tools").rglob("*.py"))
    )
    for f in files:
        rel = str(f.relative_to(REPO))
        for what in _findings(f):
            if (rel, what) not in ALLOWED:
                bad.append(f"{rel}: {what}")
    assert not bad, "unsafe loading outside the allow-list:\n" + "\n".join(bad)
    # the allow-list is not stale
    for rel, what in ALLOWED:
        assert what in _findings(REPO / rel), f"{rel}: {what} is allow-listed but no longer present"


def test_trust_remote_code_off_by_default():
    import inspect

    from layerswap.data import hub

    # datasets >= 4 runs no loading scripts at all (a script dataset is refused, and the pre-flight check says so):
    # the loaders take no trust_remote_code
    for fn in (hub.load_dataset, hub.open_dataset):
        assert "trust_remote_code" not in inspect.signature(fn).parameters
    schema = (REPO / "config" / "schema.yaml").read_text()
    assert "trust_remote_code" not in schema or "default: false" in schema.split("trust_remote_code", 1)[1][:120]


@pytest.mark.workflow
def test_hard_kill_then_unlock_and_run_again_rebuilds_incomplete_outputs(tmp_path):
    """The README's recovery after a hard kill: `snakemake --unlock`, then the same command again, with no extra flag.
    A job's output that exists while Snakemake still has it marked incomplete (killed between the job's end and
    Snakemake's bookkeeping, or between a job's two outputs) is rebuilt by the default profile's rerun-incomplete;
    without it the rerun stops on IncompleteFilesException. The state is made by conditions, not times: Snakemake is
    stopped (SIGSTOP) once the job has started, the job finishes on its own, then everything is killed (SIGKILL)."""
    import os
    import time

    from conftest import MICRO, snakemake

    from layerswap.layout import Layout, R

    target = str(Path(Layout.at(R).base_config()))  # toy_corpus, then toy_base (a pretraining of several seconds)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(tmp_path)]
    cmd += ["--configfile", str(MICRO), "--cores", "2", target]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    marker, log = tmp_path / ".snakemake" / "incomplete", tmp_path / Layout.at(R).log("toy_base")

    def wait_for(condition, what: str) -> None:
        deadline = time.monotonic() + 600  # a hang guard
        while not condition():
            assert time.monotonic() < deadline, f"{what} never happened"
            time.sleep(0.05)

    try:
        wait_for(lambda: log.exists() and any(marker.glob("*")), "toy_base starting")
        os.kill(proc.pid, signal.SIGSTOP)  # Snakemake stops; its job goes on
        wait_for(lambda: (tmp_path / target).exists(), "toy_base writing its output")
        os.killpg(proc.pid, signal.SIGKILL)  # Snakemake and its job, as a lost session does
    finally:
        proc.wait()
    assert any(marker.glob("*")) and any((tmp_path / ".snakemake" / "locks").glob("*"))
    assert snakemake(tmp_path, "--unlock").returncode == 0
    again = snakemake(tmp_path, target)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "toy_base" in again.stdout + again.stderr  # rebuilt, not taken as it was
    dry = snakemake(tmp_path, "-n", target)
    assert "Nothing to be done" in dry.stdout + dry.stderr


def test_toy_world_with_a_local_base_links_it_instead_of_pretraining(tmp_path):
    """A toy config whose base is a local HF directory (toy_model / toy_pretrain removed, as check-config asks): the
    dry run links the directory (prepare_base) and plans no toy base or pretraining corpus. (Once it planned toy_base,
    which died in a KeyError on the missing toy_pretrain.) Every later job is one any real base takes: the GGUF base
    of config/smollm2.yaml goes the same way."""
    import yaml
    from conftest import MICRO, snakemake

    base = tmp_path / "my-llama"
    base.mkdir()
    config = yaml.safe_load(MICRO.read_text())
    config["base"] = {"source": str(base), "num_layers": config["base"]["num_layers"]}
    path = tmp_path / "local_base.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["check-config", str(path)]) == 0
    dry = snakemake(tmp_path / "work", "-n", configfile=path)
    assert dry.returncode == 0, dry.stderr[-3000:]
    rules = {
        line.split()[1].rstrip(":") for line in dry.stdout.splitlines() if line.startswith(("rule ", "localrule "))
    }
    assert "prepare_base" in rules and not rules & {"toy_base", "toy_corpus"}, sorted(rules)
