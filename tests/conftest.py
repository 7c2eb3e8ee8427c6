"""Shared fixtures: a tiny toy world and base model built once per test session."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from layerswap.benchmarks import BENCHMARKS
from layerswap.layout import R

REPO = Path(__file__).resolve().parents[1]
# Hermetic runs: a site file of the developer's (cluster/site.yaml via the cluster profile, or this variable) must not
# reach the workflows the tests run; tests of the cluster path pass their own.
os.environ.pop("LAYERSWAP_SITE", None)
# Timeouts of the tests' subprocess runs guard against hangs; they are no benchmark: far above what a run takes on a
# machine twice as loaded as a quiet one.
HANG_GUARD = 3600
MICRO = REPO / "config" / "micro.yaml"
# every benchmark of the registry gets a tiny evaluation set (8 items per language; FLORES and MBPP 4)
TINY_SIZES = {
    "pretrain_docs": 300,
    "math_sft": 80,
    "aya_per_language": 80,
    "nllb_per_language": 60,
    **{name: 8 for name in BENCHMARKS},
    "flores": 4,
    "mbpp": 4,
}
TINY_LANGS = {"toy_swh": {"stands_for": "swh", "word_order": "sov"}}


@pytest.fixture(scope="session")
def toy_world(tmp_path_factory) -> Path:
    """Raw + eval files of a tiny toy world (one toy language)."""
    from layerswap.data.toyworld import generate

    root = tmp_path_factory.mktemp("toy")
    generate(root / "raw", root / "eval", 7, TINY_LANGS, TINY_SIZES)
    return root


@pytest.fixture(scope="session")
def tiny_base(toy_world, tmp_path_factory) -> Path:
    """A 2-layer toy base pretrained for a few steps (a real HF directory with a tokenizers tokenizer)."""
    from layerswap.train.pretrain import pretrain

    out = tmp_path_factory.mktemp("base") / "base"
    model = {
        "hidden_size": 16,
        "intermediate_size": 32,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "max_position_embeddings": 128,
    }
    train = {"steps": 3, "batch_size": 4, "seq_len": 32, "lr": 1e-3, "warmup_steps": 1, "threads": 1}
    pretrain(toy_world / "raw" / "pretrain.jsonl", toy_world / "raw" / "vocab.json", out, model, train, 2, 0)
    return out


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def snakemake(workdir: Path, *args: str, configfile: Path | None = MICRO) -> subprocess.CompletedProcess:
    """snakemake on the repo's Snakefile in `workdir`; configfile None: the embedded default."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    config = ["--configfile", str(configfile)] if configfile else []
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(REPO / "Snakefile"),
        "--directory",
        str(workdir),
        *config,
        "--cores",
        "2",
        *args,
    ]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=HANG_GUARD)


@pytest.fixture(scope="session")
def micro_run(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("micro")
    proc = snakemake(work)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return work / R
