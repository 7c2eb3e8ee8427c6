"""Where the first generation of a freshly built HF model goes: `layerswap evaluate`'s HF path (ModelHost + HFLM +
lm-eval `generate_until`), the first model of a fresh host against the second (a weight swap into the same model).

    python -m scripts.measure.first_generation [--builds 2] [--batch-sizes 16] [--items 16] [--shots 4] \
        [--max-new-tokens 32] [--shape world|llama8b] [--hidden 128] [--layers 4] [--threads 1] [--device auto] \
        [--work DIR] [--out first_gen.json]

On one H100 (issue 34) the first model of every fresh model build took ~20-30 s longer to evaluate than the next
ones. This script builds a random Llama with a word-level tokenizer and MGSM-format items
(scripts/measure/bench_evaluate.py's world, `--hidden`/`--layers` setting its size; or `--shape llama8b`: Llama-3.1-8B
shapes in random bf16, scripts/measure/benchmark_costs.py's base, for a GPU), then runs
`layerswap.evaluation.evaluate.run`
`--builds` times in this process (each a fresh ModelHost, i.e. a fresh model build; the i-th at the i-th of
`--batch-sizes`, cycled), each over two models (the same checkpoint twice: the second is a weight swap). Every
`lm_eval.evaluator.evaluate` call is profiled on its own (cProfile) and reported as:
  seconds       the call's wall time (on CUDA: synchronized), and its CPU time (this process; less disturbed by
                other load on a shared machine)
  phases        cumulative seconds of lm-eval request building (`Task.build_all_requests`, with the request cache
                write), `HFLM.generate_until`, transformers `generate`, the model's forward passes, tokenizer
                encode/decode, lm-eval's stop-sequence checks
  request_cache how many times the call wrote and read lm-eval's request cache (the job's context writes it once,
                so each model's call only reads it)
  compiled      torch._dynamo graph counters: non-zero if anything was compiled (torch.compile, CUDA graphs through
                it) during the call
  cuda          on CUDA only: device allocations and frees (`num_device_alloc`/`num_device_free`), allocator retries,
                peak memory: the caching allocator growing for a new model's KV cache shows here
and, for the first model of each build, the functions whose cumulative time exceeds the second model's most.
The JSON (`--out`) holds all of it; the table printed compares first and second model per build.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import tempfile
import time
from pathlib import Path

#: phase name -> (file suffix, function name) whose cumulative time is the phase
PHASES = {
    "requests": ("lm_eval/api/task.py", "build_all_requests"),
    "generate_until": ("lm_eval/models/huggingface.py", "generate_until"),
    "generate": ("transformers/generation/utils.py", "generate"),
    "forward": ("transformers/models/llama/modeling_llama.py", "forward"),
    "tokenizer": ("lm_eval/models/huggingface.py", "tok_batch_encode"),
    "decode": ("lm_eval/models/huggingface.py", "tok_decode"),
    "stop_checks": ("lm_eval/models/utils_hf.py", "__call__"),
}
#: lm-eval's request cache: a call that builds its requests writes them, one that finds them reads them
REQUEST_CACHE = {"written": "save_to_cache", "read": "load_from_cache"}
CUDA_STATS = ("num_device_alloc", "num_device_free", "num_alloc_retries", "num_ooms")


def entries(stats: dict, suffix: str, name: str) -> list[tuple]:
    """The profile's entries (calls, primitive calls, own time, cumulative time, callers) of function `name` in a file
    whose path ends with `suffix`."""
    return [v for (file, _, func), v in stats.items() if func == name and file.replace("\\", "/").endswith(suffix)]


def phase_seconds(stats: dict) -> dict[str, float]:
    """The largest cumulative time of each phase's function (the outermost call when it nests, e.g. forward)."""
    return {
        phase: round(max((v[3] for v in entries(stats, suffix, name)), default=0.0), 4)
        for phase, (suffix, name) in PHASES.items()
    }


def request_cache(stats: dict) -> dict[str, int]:
    """How often the call wrote and read lm-eval's request cache (calls, not seconds: a structural fact that timing
    noise cannot flip)."""
    return {
        what: sum(v[1] for v in entries(stats, "lm_eval/caching/cache.py", name))
        for what, name in REQUEST_CACHE.items()
    }


def top_differences(first: dict, second: dict, n: int = 12) -> list[dict]:
    """Functions whose cumulative time in the first call exceeds that in the second the most."""

    def key(k):
        file, line, func = k
        return f"{file.split('site-packages/')[-1]}:{line}:{func}"

    rows = sorted(((v[3] - second.get(k, (0, 0, 0, 0.0))[3], k) for k, v in first.items()), reverse=True)[:n]
    return [
        {
            "function": key(k),
            "extra_s": round(d, 4),
            "first_s": round(first[k][3], 4),
            "second_s": round(second.get(k, (0, 0, 0, 0.0))[3], 4),
            "calls": first[k][1],
        }
        for d, k in rows
    ]


def dynamo_counters() -> dict:
    try:
        from torch._dynamo.utils import counters
    except Exception:  # noqa: BLE001 - a torch without dynamo compiles nothing
        return {}
    return {k: int(v) for k, v in counters["stats"].items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--builds", type=int, default=2, help="fresh model builds (evaluate runs) in this process")
    p.add_argument("--batch-sizes", default="16", help="comma-separated; build i uses the i-th (cycled)")
    p.add_argument("--items", type=int, default=16)
    p.add_argument("--shots", type=int, default=4)
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument(
        "--shape",
        choices=("world", "llama8b", "tiny_sharded"),
        default="world",
        help="world: bench_evaluate's random Llama (--hidden, --layers; 256 positions); llama8b: "
        "Llama-3.1-8B shapes, random bf16 (benchmark_costs.py's base, 16 GB of disk), for a GPU; "
        "tiny_sharded: that code path at a size for tests",
    )
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="auto")
    p.add_argument("--dtype", default="auto")
    p.add_argument("--work", type=Path, default=None)
    p.add_argument("--out", type=Path, default=None)
    a = p.parse_args()

    import lm_eval.evaluator
    import torch

    from layerswap.evaluation import evaluate as ev
    from scripts.measure.bench_evaluate import build_world
    from scripts.measure.common import evaluate_args

    calls: list[dict] = []
    original = lm_eval.evaluator.evaluate
    on_cuda = a.device.startswith("cuda") or (a.device == "auto" and torch.cuda.is_available())

    def profiled(*args, **kwargs):
        """lm-eval's evaluate, timed and profiled per call (the run loop imports it from lm_eval.evaluator)."""
        before = dynamo_counters()
        if on_cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            mem0 = torch.cuda.memory_stats()
        prof = cProfile.Profile()
        t0, c0 = time.perf_counter(), time.process_time()
        prof.enable()
        try:
            return original(*args, **kwargs)
        finally:
            if on_cuda:
                torch.cuda.synchronize()
            prof.disable()
            row = {
                "seconds": round(time.perf_counter() - t0, 4),
                "cpu_s": round(time.process_time() - c0, 4),
                "stats": pstats.Stats(prof).stats,
            }
            after = dynamo_counters()
            row["compiled"] = {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}
            if on_cuda:
                mem1 = torch.cuda.memory_stats()
                row["cuda"] = {k: mem1.get(k, 0) - mem0.get(k, 0) for k in CUDA_STATS}
                row["cuda"]["peak_gb"] = round(torch.cuda.max_memory_allocated() / 1e9, 3)
            calls.append(row)

    lm_eval.evaluator.evaluate = profiled
    batch_sizes = [int(b) for b in a.batch_sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="first-gen-") as tmp:
        work = a.work or Path(tmp)
        if a.shape != "world":
            from scripts.measure import benchmark_costs

            data = benchmark_costs.standin_data(work, a.items)
            make = {"llama8b": benchmark_costs.llama8b_base, "tiny_sharded": benchmark_costs.tiny_sharded_base}
            base = work / "base" if (work / "base" / "config.json").is_file() else make[a.shape](work)
        else:
            if not (work / "base" / "config.json").is_file():
                build_world(
                    work,
                    argparse.Namespace(
                        langs=1,
                        vocab=300,
                        items=a.items,
                        hidden=a.hidden,
                        layers=a.layers,
                        models=0,
                        standin_merge=True,
                    ),
                )
            base, data = work / "base", work / "data"
        records = []
        for build in range(a.builds):
            batch = batch_sizes[build % len(batch_sizes)]
            parser = argparse.ArgumentParser()
            ev.add_arguments(parser)
            bench = {"mgsm": {"shots": a.shots, "max_new_tokens": a.max_new_tokens, "limit": a.items}}
            argv = evaluate_args(
                data, work / f"evals-{build}", bench, batch, a.threads, [f"first={base}", f"second={base}"]
            )
            argv += ["--device", a.device, "--dtype", a.dtype]
            start = len(calls)
            timings = ev.run(parser.parse_args(argv))
            first, second = calls[start], calls[start + 1]
            for i, (row, per) in enumerate(zip((first, second), timings["per_model"])):
                records.append(
                    {
                        "build": build,
                        "batch_size": batch,
                        "model": per["model_id"],
                        "load_s": round(per["load"], 4),
                        "load_phases": per["load_phases"],
                        "evaluate_call_s": row["seconds"],
                        "evaluate_call_cpu_s": row["cpu_s"],
                        "phases": phase_seconds(row["stats"]),
                        "request_cache": request_cache(row["stats"]),
                        "compiled": row["compiled"],
                        **({"cuda": row["cuda"]} if "cuda" in row else {}),
                        **({"extra_vs_second": top_differences(first["stats"], second["stats"])} if i == 0 else {}),
                    }
                )
    from layerswap.machine import hardware

    hw = hardware()
    result = {
        "script": "scripts/measure/first_generation.py",
        "argv": sys.argv[1:],
        "machine": {
            "cpu": hw["cpu_model"],
            "gpus": hw["gpus"],
            "torch": torch.__version__,
            "device": "cuda" if on_cuda else "cpu",
        },
        "records": records,
    }
    if a.out:
        a.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"device: {result['machine']['device']} ({hw['gpus'][0] if on_cuda and hw['gpus'] else hw['cpu_model']})")
    names = list(PHASES)
    print(
        f"{'build':>5} {'batch':>5} {'model':>6} {'load s':>7} {'eval s':>7} {'cpu s':>7} "
        + " ".join(f"{n[:12]:>12}" for n in names)
        + "  compiled"
        + ("  cuda allocs/frees/retries  peak GB" if on_cuda else "")
    )
    for r in records:
        line = (
            f"{r['build']:>5} {r['batch_size']:>5} {r['model']:>6} {r['load_s']:>7.3f} "
            f"{r['evaluate_call_s']:>7.3f} {r['evaluate_call_cpu_s']:>7.3f} "
            + " ".join(f"{r['phases'][n]:>12.3f}" for n in names)
            + f"  {r['compiled'] or '-'}"
        )
        if "cuda" in r:
            c = r["cuda"]
            line += f"  {c['num_device_alloc']}/{c['num_device_free']}/{c['num_alloc_retries']}  {c['peak_gb']}"
        print(line)
    for r in records:
        if "extra_vs_second" in r:
            print(f"build {r['build']}: first model's evaluate call, most extra time against the second:")
            for d in r["extra_vs_second"][:6]:
                print(f"  +{d['extra_s']:.3f} s  {d['function']} ({d['calls']} calls)")


if __name__ == "__main__":
    main()
