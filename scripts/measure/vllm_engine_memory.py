"""vLLM engine start on this machine's CPU: the memory the vLLM host sizes from the job against vLLM's own default
(issue 42), each in a fresh process of the CPU vLLM environment (`make vllm-cpu-venv`), one after another:

  sized     what `layerswap evaluate --backend vllm` builds (layerswap.evaluation.hosts.VLLMHost._new_lm): the KV
            cache of the job's batch at the model's context (`vllm_weights.engine_memory`), eager mode
  default   lm-eval's vLLM wrapper as a user would call it, eager mode, nothing sized: vLLM reserves its default
            share of the machine (gpu_memory_utilization 0.9 of the memory node) or refuses to start where less
            is free (not started where that much is free: the machine is shared)
  env1      the former test workaround: `default` with VLLM_CPU_KVCACHE_SPACE=1 (1 GiB)

    .venv/bin/python -m scripts.measure.vllm_engine_memory [--reps 2] [--batch 16]

The model: tests/test_evaluate.py's random Llama (word-level tokenizer) at hidden 128, 4 heads (head_dim 32), 2
layers, context 256, float32 (~1 MB of weights). Per run: the engine's start (wall seconds of the wrapper's
construction), the KV cache vLLM allocated (blocks x block size x bytes per token), the process's peak RSS, and the
machine's total and available memory before the start; or vLLM's error, one line. Prints one JSON line per run.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

from scripts import vllm_cpu_env

ROOT = Path(__file__).resolve().parents[2]

CHILD = r"""
import json, os, resource, sys, time
from pathlib import Path
import psutil
mode, model, batch = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
vm = psutil.virtual_memory()
out = {"mode": mode, "total_gib": round(vm.total / 2**30, 2), "available_gib": round(vm.available / 2**30, 2)}
if mode == "default" and vm.available >= 0.9 * vm.total:  # it would start, holding 90% of a shared machine
    print("RESULT " + json.dumps({**out, "skipped": "would reserve 0.9 of the machine's memory"}), flush=True)
    os._exit(0)
from lm_eval.models.vllm_causallms import VLLM
from layerswap.evaluation.hosts import VLLMHost
t0 = time.perf_counter()
try:
    if mode == "sized":
        lm = VLLMHost(batch, "cpu", "float32", Path(sys.argv[4]))._new_lm(model)
    else:
        lm = VLLM(pretrained=str(model), dtype="float32", batch_size=batch, seed=0, enforce_eager=True)
    out["start_s"] = round(time.perf_counter() - t0, 2)
    vc = lm.model.llm_engine.vllm_config
    cc, mc = vc.cache_config, vc.model_config
    layers = mc.get_num_layers(vc.parallel_config)
    per_token = 2 * layers * mc.get_total_num_kv_heads() * mc.get_head_size() * 4
    out["kv_cache_gib"] = round(cc.num_gpu_blocks * cc.block_size * per_token / 2**30, 4)
    out["kv_tokens"] = cc.num_gpu_blocks * cc.block_size
except Exception as err:
    out["start_s"] = round(time.perf_counter() - t0, 2)
    out["error"] = f"{type(err).__name__}: {str(err).splitlines()[0][:300]}"
out["peak_rss_gib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 3)
print("RESULT " + json.dumps(out), flush=True)
os._exit(0)
"""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--batch", type=int, default=16)
    a = p.parse_args()
    if why := vllm_cpu_env.unavailable():
        raise SystemExit(why)
    from scripts.fixture_world import make_data, make_model

    with tempfile.TemporaryDirectory() as tmp:
        model = make_model(Path(tmp) / "model", make_data(Path(tmp) / "data"), hidden=128, layers=2)
        for _ in range(a.reps):
            for mode in ("sized", "default", "env1"):
                extra = {"PYTHONPATH": str(ROOT)}
                if mode == "env1":
                    extra["VLLM_CPU_KVCACHE_SPACE"] = "1"
                proc = vllm_cpu_env.run(
                    ["python", "-c", CHILD, mode, str(model), str(a.batch), str(Path(tmp) / "m")],
                    env_extra=extra,
                    capture_output=True,
                    text=True,
                    timeout=900,
                )
                lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
                if not lines:
                    print(json.dumps({"mode": mode, "failed": proc.stderr[-500:]}))
                    continue
                print(lines[-1].removeprefix("RESULT "), flush=True)


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
