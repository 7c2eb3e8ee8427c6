"""How long a merge evaluation job waits for each merge's build, with the next merge built ahead on a thread
(`layerswap.merge.merger.Merger`, `AHEAD = 1`) and without (each merge built when the host asks for it), and the peak
memory of each.

    python -m scripts.measure.merge_ahead --workdir DIR [--evaluate-s 3] [--reps 2] [--threads 2] [--layers 8] \
        [--hidden 1024]

Writes 3 task and 3 language experts once (random Llama weights in fp32, as config/paper.yaml exports them; kept for
the next call) and their 3x3 grid of layer swaps (bottom 2, top 1). Then, in a fresh process per pass (interleaved:
without, with, without, ...), a stand-in host takes the grid's merges in `Merger.order` as the model hosts do
(`Merger.changes` with the tensors it holds; torch at the evaluation's `--threads`) and "evaluates" each for
`--evaluate-s` seconds of sleep: on a GPU node
the evaluation is the GPU's work and the CPU is free for the build, which a sleep reproduces (a CPU evaluation here
would compete with the build for this machine's cores). Prints per pass the seconds the host waited for each merge's
tensors after the first (the first has nothing to overlap with), their median, the pass's wall time and its peak RSS;
then the medians of each mode. At 8B (docs/MEASUREMENTS.md) a merge's build took 13.2-16.1 s and its MGSM evaluation
~55 s on one H100, so every build but a job's first hides behind the evaluation before it.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from scripts.measure.common import random_model, say, swap_recipe

PASS = """
import json, resource, sys, time
from layerswap.merge.merger import Merger
from layerswap.merge.recipes import Recipe

import torch
ahead, evaluate_s, threads, paths = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
torch.set_num_threads(threads)  # the evaluation's threads (evaluate --threads)
recipes = [Recipe.load(p) for p in paths]
merger = Merger(ahead=ahead)
t0 = time.perf_counter()
order = [recipes[i] for i in merger.order(recipes)]
held, waits = None, []
for recipe in order:
    t = time.perf_counter()
    keys, state = merger.changes(recipe, held)
    waits.append(time.perf_counter() - t)
    held, state = keys, None  # loaded into the model: the host keeps no copy
    time.sleep(evaluate_s)  # the evaluation: the GPU's work
merger.close()
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"waits": waits, "wall": time.perf_counter() - t0, "rss": rss, "ahead": merger.built_ahead}))
"""


def experts(workdir: Path, layers: int, hidden: int) -> list[Path]:
    cfg = dict(
        vocab_size=32000,
        hidden_size=hidden,
        intermediate_size=4 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=16,
        num_key_value_heads=8,
    )
    models = workdir / f"models-{layers}x{hidden}"
    out = []
    for kind, seed in (("task", 10), ("lang", 20)):
        for i in range(3):
            say(f"expert {kind}{i}")
            out.append(random_model(models / f"{kind}{i}", cfg, seed + i, base_seed=1, dtype="float32"))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--evaluate-s", type=float, default=3.0, help="seconds each merge's stand-in evaluation takes")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2, help="the evaluation process's torch threads (--threads)")
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=1024)
    args = ap.parse_args()
    paths = experts(args.workdir, args.layers, args.hidden)
    tasks, langs = paths[:3], paths[3:]
    recipes = [
        str(swap_recipe(args.workdir / "recipes" / f"l{i + 1}m{j + 1}.json", t, lang, {"bottom": 2, "top": 1}))
        for i, lang in enumerate(langs)
        for j, t in enumerate(tasks)
    ]
    runs: dict[int, list[dict]] = {0: [], 1: []}
    for rep in range(args.reps):
        for ahead in (0, 1):
            cmd = [sys.executable, "-c", PASS, str(ahead), str(args.evaluate_s), str(args.threads), *recipes]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
            row = json.loads(proc.stdout.strip().splitlines()[-1])
            runs[ahead].append(row)
            waits = row["waits"][1:]
            say(
                f"rep {rep} {'ahead' if ahead else 'asked'}: waits after the first "
                + " ".join(f"{w:.2f}" for w in waits)
                + f" s (median {statistics.median(waits):.2f}); first {row['waits'][0]:.2f} s;"
                f" wall {row['wall']:.1f} s; peak RSS {row['rss'] / 2**30:.2f} GiB; built ahead {row['ahead']}"
            )
    gib = 2**30
    print(
        f"\n{len(recipes)} layer swaps of fp32 experts ({args.layers} layers, hidden {args.hidden}, vocab 32000), "
        f"stand-in evaluation {args.evaluate_s:g} s per merge, torch threads {args.threads}, {args.reps} passes each "
        "way, "
        f"{time.strftime('%Y-%m-%d')}"
    )
    print(f"{'':8}{'median wait s/merge':>21}{'first merge s':>15}{'wall s':>9}{'peak RSS GiB':>14}")
    for ahead, rows in runs.items():
        waits = [w for r in rows for w in r["waits"][1:]]
        print(
            f"{'ahead' if ahead else 'asked':8}{statistics.median(waits):21.2f}"
            f"{statistics.median(r['waits'][0] for r in rows):15.2f}{statistics.median(r['wall'] for r in rows):9.1f}"
            f"{max(r['rss'] for r in rows) / gib:14.2f}"
        )
    print(f"(this process: peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB)")


if __name__ == "__main__":
    main()
