"""scripts/benchmark_costs.py on the tiny random model: one JSON record, 9 merges timed, the SFT rate, skips named."""

from __future__ import annotations

import json
import subprocess
import sys
from conftest import HANG_GUARD, REPO


def test_benchmark_costs_tiny(tmp_path):
    out = tmp_path / "costs.json"
    cmd = [sys.executable, str(REPO / "scripts" / "benchmark_costs.py"), "--out", str(out), "--models", "tiny",
           "--backends", "hf,vllm", "--limit", "2", "--shots", "1", "--max-new-tokens", "4", "--threads", "1",
           "--sft-steps", "2", "--sft-batch", "2", "--sft-seq-len", "32", "--work", str(tmp_path / "work")]
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
