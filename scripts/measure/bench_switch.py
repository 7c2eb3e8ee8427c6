"""Time the switch between merges of one evaluation job: before (every tensor of the merge rebuilt and loaded with
`load_state_dict`, the path of dd25adc) and after (only the tensors whose sources differ from what the model holds,
copied into its parameters in place; merges in `engine.switch_order`).

    python -m scripts.measure.bench_switch --workdir DIR --reps 3

Writes 3 task and 3 language experts once (Llama-3.2-1B shapes: 16 layers, hidden 2048, vocab 128256, tied head,
1.24B parameters, random bf16 weights, 2.47 GB each; kept for the next call) and a 3x3 grid of layer-swap recipes
(bottom/top as given), then, in one process with one `ModelHost` (bf16, CPU), loads the grid's 9 merges `--reps`
times each way, interleaved (before, after, before, ...). A switch is one `ModelHost.load` of a merge after another
merge (the first load of each pass is not counted). Prints, per switch, the bytes loaded and the seconds, and the
medians; peak RSS at the end.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time
from pathlib import Path

import torch

from layerswap.evaluation.hosts import ModelHost
from layerswap.merge.merger import Merger
from layerswap.merge.recipes import Recipe
from scripts.measure.common import LLAMA_1B, random_model, swap_recipe


def make_expert(path: Path, seed: int) -> None:
    """Random N(0, 0.02) weights (norms 1 + N(0, 0.02)), bf16, tied head as Llama-3.2-1B's, in shards of 1 GiB."""
    random_model(path, LLAMA_1B | {"tie_word_embeddings": True}, seed, record_base=False)


def grid(workdir: Path, bottom: int, top: int) -> list[tuple[str, Recipe]]:
    models = workdir / "models"
    for i in range(3):
        make_expert(models / f"task{i}", seed=10 + i)
        make_expert(models / f"lang{i}", seed=20 + i)
    out = []
    for i in range(3):  # the order `layerswap recipes` writes: language rank, then task rank
        for j in range(3):
            task, lang = models / f"task{j}", models / f"lang{i}"
            path = swap_recipe(workdir / f"{i + 1}x{j + 1}.json", task, lang, {"bottom": bottom, "top": top})
            out.append((f"{i + 1}x{j + 1}", Recipe.load(path)))
    return out


def one_pass(host: ModelHost, models: list[tuple[str, Recipe]], full: bool) -> list[dict]:
    """Load every merge in turn; `full`: forget what the model holds before each load (every tensor rebuilt and
    loaded: the path before this change)."""
    rows = []
    prev = None
    for model_id, source in models:
        if full:
            host.held = None
        t0 = time.perf_counter()
        host.load(source)
        dt = time.perf_counter() - t0
        n, total, nbytes, total_bytes = host.switched
        if prev is not None:
            rows.append(
                {
                    "switch": f"{prev}->{model_id}",
                    "s": dt,
                    "tensors": n,
                    "of": total,
                    "bytes": nbytes,
                    "model_bytes": total_bytes,
                    **{k: round(v, 3) for k, v in host.phase.items()},
                }
            )
        prev = model_id
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--bottom", type=int, default=5)
    ap.add_argument("--top", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    models = grid(args.workdir, args.bottom, args.top)
    print(f"experts ready in {time.perf_counter() - t0:.1f} s", flush=True)
    # ahead=0: each switch timed alone (a merge built ahead would overlap the switch it times)
    host = ModelHost(batch_size=1, device="cpu", dtype="bfloat16", merger=Merger(ahead=0))
    ordered = host.order(models)
    print("after: order", " ".join(m for m, _ in ordered), flush=True)
    host.load(models[0][1])  # the instance is built once (from_pretrained + the first merge), outside the timings
    before, after = [], []
    try:
        for rep in range(args.reps):
            rows = one_pass(host, models, full=True)
            before += rows
            print(f"rep {rep} before: " + ", ".join(f"{r['switch']} {r['s']:.2f}s" for r in rows), flush=True)
            host.held = None
            rows = one_pass(host, ordered, full=False)
            after += rows
            print(
                f"rep {rep} after:  "
                + ", ".join(f"{r['switch']} {r['s']:.2f}s {r['bytes'] / 1e9:.2f}GB" for r in rows),
                flush=True,
            )
    finally:
        host.close()
    gb = 1e9
    print(
        f"\nLlama-3.2-1B shapes, bf16, tied head; layer swap bottom {args.bottom} top {args.top}; "
        f"{args.reps} reps x 8 switches each way; torch threads {args.threads}"
    )
    print(f"{'':8} {'median s/switch':>16} {'min':>6} {'max':>6} {'GB loaded/switch':>17} {'GB/s':>6}")
    for label, rows in (("before", before), ("after", after)):
        s = [r["s"] for r in rows]
        b = statistics.mean(r["bytes"] for r in rows) / gb
        print(
            f"{label:8} {statistics.median(s):16.2f} {min(s):6.2f} {max(s):6.2f} {b:17.2f} "
            f"{sum(r['bytes'] for r in rows) / gb / sum(s):6.2f}"
        )
    print("\nafter, per switch kind (median s, GB loaded of the model's GB):")
    kinds: dict[tuple[int, int], list[float]] = {}
    for r in after:
        kinds.setdefault((r["tensors"], r["bytes"]), []).append(r["s"])
    for (n, nbytes), s in sorted(kinds.items()):
        print(
            f"  {n:4d} of {after[0]['of']} tensors, {nbytes / gb:.2f} of {after[0]['model_bytes'] / gb:.2f} GB: "
            f"{statistics.median(s):.2f} s (n={len(s)})"
        )
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB")


if __name__ == "__main__":
    main()
