"""How many candidates the leaders' constraint evaluations reach (rule evaluate_checkpoint_leaders, issue 48 item 4):
a simulation of selection's own walk (layerswap/select.py: `walk`) on a config's shape, not a measurement.

    python -m scripts.measure.leaders_count                          # config/paper.yaml
    python -m scripts.measure.leaders_count --configfile my.yaml --draws 20000

Per expert type with constraint benchmarks no weight reads: its runs and their checkpoint counts, `top_k` and
`max_per_run` from the config; primary scores drawn at random (their order is all the walk reads); each candidate
fails the constraints with probability p, independently (a simplification: the paper's experts sit within noise of
the base, its Table 5, so p near 0.5 is the pessimistic reading). For p in 0 .. 1 it prints the mean and the largest
number of candidates evaluated (rounds of `layerswap evaluate-leaders`: the unknown candidates the walk reaches,
evaluated, until it reaches none), against every checkpoint of the type (constraint_evaluation: all). The plan
(layerswap/workflow/eval_plan.py) counts top_k per expert type: the p = 0 row.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import yaml

from layerswap.config import checkpoint_count, effective_runs, expert_type, validate_config
from layerswap.select import walk

REPO = Path(__file__).resolve().parents[2]
RATES = (0.0, 0.25, 0.5, 0.75, 1.0)


def evaluated(sizes: list[int], top_k: int, cap: int | None, p_fail: float, rng: random.Random) -> int:
    """Candidates evaluated for one draw: runs of `sizes` checkpoints, walked as `layerswap evaluate-leaders` does."""
    cands = [
        {"run": f"r{r}", "checkpoint": f"s{c}", "score": rng.random()} for r, n in enumerate(sizes) for c in range(n)
    ]
    cands.sort(key=lambda c: (-c["score"], c["run"], c["checkpoint"]))
    fails = [rng.random() < p_fail for _ in cands]
    for c in cands:
        c["failed"] = None
    done = 0
    while True:
        _, unknown, _ = walk(cands, top_k, cap, "best")
        if not unknown:
            return done
        for i in unknown:
            cands[i]["failed"] = [{"metric": "x"}] if fails[i] else []
        done += len(unknown)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configfile", type=Path, default=REPO / "config" / "paper.yaml")
    parser.add_argument("--draws", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    config = validate_config(yaml.safe_load(args.configfile.read_text()))
    sel = config["selection"]
    runs = effective_runs(config)
    rng = random.Random(args.seed)
    shapes = {}
    for expert in sorted({r["expert"] for r in runs.values()}):
        if sel["constraints"].get(expert_type(expert)):
            shapes[expert] = [checkpoint_count(r) for r in runs.values() if r["expert"] == expert]
    if not shapes:
        print(f"{args.configfile}: no expert type has selection constraints")
        return 0
    print(f"{args.configfile}: top_k {sel['top_k']}, max_per_run {sel['max_per_run']}, {args.draws} draws each")
    print(f"{'expert':<10}{'checkpoints':>12}  " + "".join(f"{f'p={p:g}':>14}" for p in RATES))
    for expert, sizes in shapes.items():
        cells = []
        for p in RATES:
            counts = [evaluated(sizes, sel["top_k"], sel["max_per_run"], p, rng) for _ in range(args.draws)]
            cells.append(f"{sum(counts) / len(counts):>8.2f} ({max(counts):>2})")
        print(f"{expert:<10}{sum(sizes):>12}  " + "".join(f"{c:>14}" for c in cells))
    print("cells: mean candidates evaluated (largest in any draw); p: the chance a candidate fails a constraint")
    return 0


if __name__ == "__main__":
    sys.exit(main())
