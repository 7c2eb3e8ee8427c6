"""scripts/measure/benchmark_costs.py on the tiny random model: one JSON record, 9 merges timed, the SFT rate, skips
named."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import HANG_GUARD, REPO


def test_benchmark_costs_tiny(tmp_path):
    out = tmp_path / "costs.json"
    cmd = [
        sys.executable,
        "-m",
        "scripts.measure.benchmark_costs",
        "--out",
        str(out),
        "--models",
        "tiny",
        "--backends",
        "hf,vllm",
        "--limit",
        "2",
        "--shots",
        "1",
        "--max-new-tokens",
        "4",
        "--threads",
        "1",
        "--sft-steps",
        "2",
        "--sft-batch",
        "2",
        "--sft-seq-len",
        "32",
        "--work",
        str(tmp_path / "work"),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=HANG_GUARD)
    assert done.returncode == 0, done.stderr[-3000:]
    rec = json.loads(out.read_text())
    assert {"cpu", "gpu", "torch", "transformers", "vllm", "date"} <= set(rec["machine"])
    assert rec["task"]["name"] == "mgsm_standin" and rec["task"]["items"] == 2
    assert rec["task"]["paper"] == {"task": "mgsm", "shots": 8, "max_new_tokens": 512, "items_per_language": 250}
    (ev,) = [m for m in rec["measurements"] if m["kind"] == "merge_evaluation" and m["backend"] == "hf"]
    assert ev["model"] == "tiny" and ev["merges"] == 9 and len(ev["per_merge"]) == 9 and ev["items"] == 2
    assert len({m["model_id"] for m in ev["per_merge"]}) == 9 and ev["seconds"] > 0
    assert all(m["load_s"] >= 0 and m["evaluate_s"] > 0 for m in ev["per_merge"])
    assert all("state_dict" in m["load_phases"] for m in ev["per_merge"])  # built in memory by layerswap.merge
    (sft,) = [m for m in rec["measurements"] if m["kind"] == "sft"]
    assert sft["steps"] == 2 and sft["steps_per_s"] > 0 and sft["tokens_per_s"] > 0
    if rec["machine"]["vllm"] is None:
        assert {"model": "tiny", "backend": "vllm", "reason": "vllm not installed"} in rec["skipped"]
    assert "9 merges in" in done.stdout and "items per merge: 2" in done.stderr


def test_benchmark_costs_sharded_base_hard_linked_experts_and_a_batch_sweep(tmp_path):
    """The 8B code path at a size for tests: a sharded base with the index `check_model_dir` reads, experts that
    rewrite one weight file each and hard-link the rest, one evaluation run per batch size with tokens/s."""
    import os

    from layerswap.evaluation.hosts import check_model_dir

    out, work = tmp_path / "costs.json", tmp_path / "work"
    cmd = [
        sys.executable,
        "-m",
        "scripts.measure.benchmark_costs",
        "--out",
        str(out),
        "--models",
        "tiny_sharded",
        "--backends",
        "hf",
        "--limit",
        "2",
        "--shots",
        "1",
        "--max-new-tokens",
        "4",
        "--threads",
        "1",
        "--batch-sizes",
        "1,2",
        "--sweep-merges",
        "2",
        "--expert-shards",
        "1",
        "--no-sft",
        "--work",
        str(work),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=HANG_GUARD)
    assert done.returncode == 0, done.stderr[-3000:]
    base = work / "tiny_sharded" / "base"
    shards = sorted(base.glob("model-*-of-*.safetensors"))
    assert len(shards) > 2 and (base / "model.safetensors.index.json").is_file()
    check_model_dir(base)
    experts = sorted((work / "tiny_sharded" / "experts").iterdir())
    assert len(experts) == 6
    rewritten = []
    for expert in experts:
        check_model_dir(expert)
        own = [f.name for f in shards if not os.path.samefile(f, expert / f.name)]
        assert len(own) == 1, (expert, own)
        rewritten += own
    assert len(set(rewritten)) > 1  # experts differ from each other, not only from the base
    rec = json.loads(out.read_text())
    evs = [m for m in rec["measurements"] if m["kind"] == "merge_evaluation"]
    assert [m["batch_size"] for m in evs] == [1, 2] and all(m["merges"] == 2 for m in evs)
    for m in evs:
        assert m["generated_tokens"] == sum(x["generated_tokens"] for x in m["per_merge"]) > 0
        assert m["tokens_per_s"] > 0 and m["tokens_per_s_after_first"] > 0
    assert not [m for m in rec["measurements"] if m["kind"] == "sft"]
    assert "batch 1: 2 merges in" in done.stdout and "batch 2: 2 merges in" in done.stdout


def test_measure_first_generation_reports_each_phase_per_model(tmp_path):
    """scripts/measure/first_generation.py on the 8B code path at a size for tests: two fresh builds, each a first
    model and a weight swap, with the phases of each lm-eval call and nothing compiled."""
    out = tmp_path / "first.json"
    cmd = [
        sys.executable,
        "-m",
        "scripts.measure.first_generation",
        "--shape",
        "tiny_sharded",
        "--builds",
        "2",
        "--batch-sizes",
        "2,1",
        "--items",
        "2",
        "--shots",
        "1",
        "--max-new-tokens",
        "4",
        "--work",
        str(tmp_path / "work"),
        "--out",
        str(out),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=HANG_GUARD)
    assert done.returncode == 0, done.stderr[-3000:]
    rec = json.loads(out.read_text())
    rows = rec["records"]
    assert [(r["build"], r["batch_size"], r["model"]) for r in rows] == [
        (0, 2, "first"),
        (0, 2, "second"),
        (1, 1, "first"),
        (1, 1, "second"),
    ]
    for r in rows:
        assert r["evaluate_call_s"] > 0 and r["phases"]["generate"] > 0 and r["compiled"] == {}
        assert r["phases"]["generate"] <= r["phases"]["generate_until"] <= r["evaluate_call_s"]
    # the job's context built the requests once: every model's evaluate call reads them from lm-eval's request cache
    assert [r["request_cache"] for r in rows] == [{"written": 0, "read": 1}] * 4
    assert "build" in rows[0]["load_phases"] and "build" not in rows[1]["load_phases"]
    assert rows[0]["extra_vs_second"] and "extra_vs_second" not in rows[1]
