"""Half-widths of Table 1's 95% intervals in a finished run, and the MGSM items per language a target needs.

    python -m scripts.measure.intervals --results results [--target 3] [--params-json JSON]

For every Table 1 avg cell: the value, its bootstrap interval (as `layerswap tables` computes it) and half-width,
and a model of how its two-level bootstrap variance changes with N items per language (percent points, U models):

    var(N) = sigma2_between / U + (s2_items + c / U) / N

s2_items: the variance over items of the per-item mean over the cell's models (items are paired); c: the mean over
models of the variance over items of a model's deviation from that mean (the item noise in the spread between
models); sigma2_between: the spread between the models' scores net of that noise, var(scores) - c / n, at least 0.
The half-width is about 1.96 * sqrt(var(N)); the script prints the N that brings it to --target points, or says that
the spread between experts / pairs alone exceeds it (no item count can). Assumes the accuracies stay as they are.
The params are the tables job's, read from <results>/manifest.json unless given.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path

import numpy as np

from layerswap.audit.trace import tables_params
from layerswap.layout import Layout
from layerswap.report import tables
from layerswap.report.evals import Evals
from layerswap.report.paper_tables import Builder
from layerswap.report.workspace import Workspace

REPO = Path(__file__).resolve().parents[2]

Z = 1.959964


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, required=True, help="a finished run's results/")
    parser.add_argument("--target", type=float, default=3.0, help="half-width to reach, in points (default 3)")
    parser.add_argument("--params-json", help="the tables' params (default: from <results>/manifest.json)")
    args = parser.parse_args(argv)
    layout = Layout.at(args.results)
    text = args.params_json or tables_params(json.loads(Path(layout.manifest()).read_text()))
    params = tables.Params.from_json(text)
    t1 = tables.build_tables(layout.selection_dir(), layout.evals(), params)["table1"]
    builder = Builder(Workspace(layout.selection_dir(), Evals(layout.evals()), params), None)
    print(
        f"{'cell':<56} {'value':>6} {'95% interval':>15} {'half':>5} {'n':>4} {'items part':>10} "
        f"{'spread part':>11}  N for <= {args.target:g}"
    )
    worst, needs = 0.0, []
    for row, labels in t1.rows:
        lang, stat = row
        if stat != "avg":
            continue
        for col, _ in t1.columns:
            models = builder.column_models(col, lang)
            items = np.stack([builder.ws.evals.items(m, "mgsm", lang) for m in models])
            n, units = items.shape[1], items.shape[0]
            per_item = items.mean(axis=0) * 100
            s2_items = float(np.var(per_item))
            c = float(np.mean(np.var(items * 100 - per_item, axis=1)))
            between = max(0.0, float(np.var(items.mean(axis=1) * 100)) - c / n)
            lo, hi = t1.intervals[(row, col)]
            half = (hi - lo) / 2
            worst = max(worst, half)
            room = (args.target / Z) ** 2 - between / units
            need = math.ceil((s2_items + c / units) / room) if room > 0 else None
            needs.append(need)
            items_part = Z * math.sqrt((s2_items + c / units) / n)
            units_part = Z * math.sqrt(between / units)
            print(
                f"{labels[0] + ' / ' + col:<56} {t1.cells[(row, col)]:6.1f} [{lo:5.1f}, {hi:5.1f}] {half:5.1f} "
                f"{n:4d} {items_part:10.1f} {units_part:11.1f}  "
                + (str(need) if need is not None else "none: the spread between models alone exceeds it")
            )
    print(f"largest half-width: {worst:.1f} points")
    if None in needs:
        print(f"no item count brings every avg cell to <= {args.target:g} points (see 'none' above)")
    else:
        print(f"MGSM items per language for every avg cell <= {args.target:g} points: {max(needs)}")
    rate = merge_eval_rate(args.results)
    if rate is not None:
        secs, items, models = rate
        per_item = secs / items
        total = mgsm_items(args.results)
        print(
            f"cost: the merge jobs evaluated {models} models on {items} MGSM items in {secs:.1f} s of evaluation "
            f"({1000 * per_item:.2f} ms per item, model loading and process start-up excluded); the run evaluated "
            f"{total} MGSM items in all ({total // n} model-language evaluations of {n} items: Tables 1, 2, 5 and "
            "checkpoint selection read the same per-language files, so all of them grow with it)"
        )
        for n_items in sorted({200, 400, 800} | ({max(needs)} if None not in needs else set())):
            print(
                f"  at {n_items:5d} items per language: about {total // n * n_items * per_item:6.0f} core-s of "
                f"MGSM evaluation (now {total * per_item:.0f}; estimate: the measured rate times the items)"
            )
    return 0


def mgsm_items(results: Path) -> int:
    """MGSM items evaluated in the run: one line per (model, language, item) in the samples files."""
    return sum(sum(1 for _ in path.open()) for path in Path(Layout.at(results).evals()).rglob("mgsm.samples.jsonl"))


def merge_eval_rate(results: Path) -> tuple[float, int, int] | None:
    """(evaluation seconds, MGSM items, models) over the merge-evaluation jobs' logs: their per-model line
    `evaluate: merge/...: load X s, evaluate Y s` and the item counts of the models' mgsm.json."""
    secs, items, models = 0.0, 0, 0
    layout = Layout.at(results)
    for log in sorted(results.glob(layout.relative(layout.log("evaluate", "merge_*")))):
        for model, took in re.findall(r"evaluate: (merge/\S+): load [\d.]+ s, evaluate ([\d.]+) s", log.read_text()):
            record = Path(layout.eval_file(model, "mgsm"))
            if record.is_file():
                secs += float(took)
                items += sum(json.loads(record.read_text())["n"].values())
                models += 1
    return (secs, items, models) if items else None


if __name__ == "__main__":
    sys.exit(main())
