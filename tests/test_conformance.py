"""A new benchmark is its registry entry (layerswap/benchmarks.py) and its config: a synthetic lm-eval benchmark, added
to a copy of the repository as a contributor would add it, goes through check-config, `layerswap cost` and the paper
dry run, and the plan evaluates it. (Issue 50: a benchmark whose item counts or costs lived outside its entry passed
every test, and then the paper config stopped with a KeyError at parse time and `layerswap cost` in a traceback.)"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from conftest import HANG_GUARD, REPO

from layerswap.config import effective_runs

#: a paper benchmark scored by log-likelihood (an lm-eval task per language), declared as docs/EXTENDING.md says
ENTRY = """
    Benchmark(
        "xstory",
        "XStoryCloze",
        "XStoryCloze (accuracy)",
        "fraction",
        40,
        (("{lang}", "belebele.yaml"),),
        LmEvalTask(
            "acc",
            "none",
            "none (argmax loglikelihood over the two endings)",
            0,
            task="xstorycloze_{code}",
            folder="xstorycloze",
            marker="{task}.yaml",
            missing="XStoryCloze has no {code} ({task} not in lm-eval)",
            code="mgsm",
            hub=HubSplits("juletxara/xstory_cloze", "{code}", ("eval",), ("input_sentence_1", "sentence_quiz1")),
            work=ItemWork(1511, 2, 80, 80, 1.5, 1.0, True, 10, 0, "synthetic: a story and an ending ~80 tokens"),
        ),
        table5=("en", "targets"),
        selection=(("xstory", "{lang}"),),
    ),
"""


def _with_benchmark(tmp: Path) -> Path:
    """A copy of the repository (code, rules, configs) whose registry holds ENTRY, its schema block regenerated."""
    copy = tmp / "repo"
    skip = shutil.ignore_patterns(".venv*", ".git", "results", ".snakemake", "__pycache__", "*.egg-info", "tests")
    shutil.copytree(REPO, copy, ignore=skip)
    registry = copy / "layerswap" / "benchmarks.py"
    text = registry.read_text()
    head, tail = text.split("\n)\n\n\ndef by_name(", 1)
    registry.write_text(head + ENTRY.rstrip("\n") + "\n)\n\n\ndef by_name(" + tail)
    _run(copy, "-m", "layerswap.schema_blocks")
    return copy


def _run(copy: Path, *args: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHONPATH": str(copy),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    done = subprocess.run(
        [sys.executable, *args], cwd=copy, env=env, capture_output=True, text=True, timeout=HANG_GUARD
    )
    assert done.returncode == 0, (args, done.stderr[-3000:])
    return done


def test_a_new_lm_eval_benchmark_is_checked_costed_and_planned_from_its_entry(tmp_path):
    copy = _with_benchmark(tmp_path)
    config = yaml.safe_load((copy / "config" / "paper.yaml").read_text())
    evaluation = config["evaluation"]
    evaluation["tasks"]["xstory"] = {"shots": 0, "languages": ["en", *config["languages"]]}
    evaluation["checkpoint_tasks"].append("xstory")
    config["selection"]["weights"]["language"]["xstory"] = 0.5  # its selection metric, declared by the entry
    path = copy / "config" / "xstory.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))

    assert _run(copy, "-m", "layerswap.cli", "check-config", str(path)).stdout.strip() == "ok"
    cost = _run(copy, "-m", "layerswap.cli", "cost", "--configfile", str(path)).stdout
    assert "evaluation" in cost and "total" in cost
    dry = _run(copy, "-m", "snakemake", "-n", "--configfile", str(path), "--cores", "2", "--printshellcmds").stdout
    # the base is evaluated on it; every checkpoint of a language expert too (its selection reads the metric), the
    # math experts' selected checkpoints after selection (Table 5)
    assert "results/evals/base/xstory.json" in dry
    runs = effective_runs(config)
    for run, spec in runs.items():
        index = f"results/evals/ckpt/{run}/index.xstory.json"
        if spec["expert"] in config["languages"]:
            assert index in dry, run
        elif spec["expert"] == "math":
            assert index not in dry and f"results/evals/ckpt/{run}/index.other_xstory.json" in dry, run
