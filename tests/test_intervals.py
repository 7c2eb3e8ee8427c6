"""The tables' 95% bootstrap intervals, item counts, the summary paragraph built from them (and the README's copy)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import REPO
from test_tables import ITEMS, PARAMS, SWH, TEL, make_world

from layerswap.errors import UserError
from layerswap.layout import Layout, R
from layerswap.report import intervals, summary, tables
from layerswap.report.render import Table, fmt_pct


def test_bootstrap_matches_the_binomial_spread_and_is_seeded():
    items = np.array([1.0] * 200 + [0.0] * 200)  # 50% of 400 items: half-width about 1.96 * sqrt(.25 / 400) = 4.9
    lo, hi = intervals.bootstrap([{"x": items}], "avg", seed=0, draws=4000, name="a", scale=100)
    assert lo < 50 < hi and 4.2 < (hi - lo) / 2 < 5.6
    assert intervals.bootstrap([{"x": items}], "avg", seed=0, draws=4000, name="a", scale=100) == (lo, hi)
    assert intervals.bootstrap([{"x": items}], "avg", seed=1, draws=4000, name="a", scale=100) != (lo, hi)
    assert intervals.bootstrap([{"x": items}], "avg", seed=0, draws=4000, name="b", scale=100) != (lo, hi)


def test_avg_resamples_units_min_max_do_not():
    def unit(p):  # 100 items, the first 100 * p right
        return {"x": np.array([1.0] * int(100 * p) + [0.0] * (100 - int(100 * p)))}

    spread = [unit(p) for p in (0.1, 0.3, 0.5, 0.7, 0.9)]
    same = [unit(0.5) for _ in range(5)]
    w_spread = np.subtract(*intervals.bootstrap(spread, "avg", seed=0, draws=2000, name="c")[::-1])
    w_same = np.subtract(*intervals.bootstrap(same, "avg", seed=0, draws=2000, name="c")[::-1])
    assert w_spread > 2 * w_same  # the spread between experts / pairs counts, not only the items
    lo, hi = intervals.bootstrap(spread, "max", seed=0, draws=2000, name="d")
    assert lo <= 0.9 <= hi and lo > 0.8  # the max of fixed units: item noise only
    # paired items: identical models give identical replicates, so their min and max intervals coincide
    assert intervals.bootstrap(same, "min", seed=0, draws=500, name="e") == intervals.bootstrap(
        same, "max", seed=0, draws=500, name="e"
    )


def test_bootstrap_refuses_unpaired_items():
    with pytest.raises(UserError, match="different or no items in 'x'"):
        intervals.bootstrap([{"x": np.ones(10)}, {"x": np.ones(12)}], "avg", seed=0, draws=100, name="f")


def built(tmp_path, **overrides):
    sel, ev = make_world(tmp_path)
    params = tables.Params.from_json(json.dumps({**PARAMS, **overrides}))
    return tables.build_tables(sel, ev, params), sel, ev


def test_every_avg_min_max_cell_has_its_interval_and_count(tmp_path):
    tabs = built(tmp_path)[0]
    for name in ("table1", "table2", "table6"):
        t = tabs[name]
        for row, _ in t.rows:
            for col, _ in t.columns:
                lo, hi = t.intervals[(row, col)]
                assert lo <= t.cells[(row, col)] <= hi, (name, row, col)
                assert t.counts[(row, col)] == ITEMS
    t1 = tabs["table1"]
    # the base alone at 20% of 200 items: binomial half-width about 5.5 points
    lo, hi = t1.intervals[((SWH, "avg"), "base")]
    assert 4.5 < (hi - lo) / 2 < 6.5
    # Table 6's pairwise soup is Table 1's best-soup avg: the same models, the same interval
    assert tabs["table6"].intervals[(SWH, "soup_pairwise")] == t1.intervals[((SWH, "avg"), "soup_best")]
    t5 = tabs["table5"]
    assert ((("flores", f"en-{SWH}"), "base")) not in t5.intervals  # BLEU: a count, no interval
    assert t5.counts[(("flores", f"en-{SWH}"), "base")] == ITEMS
    assert (("mbpp", SWH), "math") not in t5.counts  # skipped
    lo, hi = t5.intervals[(("belebele", SWH), "math")]
    assert lo < 0.515 < hi


def test_intervals_in_csv_markdown_latex(tmp_path):
    sel, ev = make_world(tmp_path)
    out = tmp_path / "out"
    tables.run(
        argparse.Namespace(
            selection_dir=str(sel),
            evals_dir=str(ev),
            params_json=json.dumps(PARAMS),
            out_dir=str(out),
            paper_results=None,
        )
    )
    t1 = pd.read_csv(out / "table1.csv").set_index("Setting")
    col = "layer swap (best config, 4 pairs)"
    row = t1.loc["toy-Swahili (synthetic) avg"]
    assert row[col] == pytest.approx(33.5) and row[f"{col}_n"] == ITEMS
    assert row[f"{col}_lo"] < row[col] < row[f"{col}_hi"]
    md = (out / "table1.md").read_text()
    assert f"33.5 [{row[f'{col}_lo']:.1f}, {row[f'{col}_hi']:.1f}]" in md
    assert f"n = {ITEMS} items per model and language behind every number." in md
    assert "95% interval, seeded bootstrap" in md
    assert f"33.5 [{row[f'{col}_lo']:.1f}, {row[f'{col}_hi']:.1f}]" in (out / "table1.tex").read_text()
    t5 = (out / "table5.md").read_text()
    assert "Numbers without [lo, hi] are corpus BLEU" in t5
    # the same inputs and seed: byte-identical tables
    again = tmp_path / "again"
    tables.run(
        argparse.Namespace(
            selection_dir=str(sel),
            evals_dir=str(ev),
            params_json=json.dumps(PARAMS),
            out_dir=str(again),
            paper_results=None,
        )
    )
    for f in ("table1.csv", "table2.md", "table5.csv", "table6.tex", "summary.md"):
        assert (out / f).read_bytes() == (again / f).read_bytes(), f


def test_counts_per_row_when_benchmarks_differ(tmp_path):
    sel, ev = make_world(tmp_path)
    from test_tables import write_eval

    write_eval(ev, "base", "belebele", {"en": 0.80, SWH: 0.50, TEL: 0.40}, items=50)
    for etype in ("math", SWH, TEL, f"joint_{SWH}"):
        for run, ckpt in [
            (e["run"], e["checkpoint"])
            for e in json.loads((sel / f"{etype}.json").read_text())["selected"]
            if e["rank"] <= 2
        ]:
            doc = json.loads((ev / "ckpt" / run / ckpt / "belebele.json").read_text())
            write_eval(ev, f"ckpt/{run}/{ckpt}", "belebele", doc["scores"], items=50)
    t5 = tables.build_tables(sel, ev, tables.Params.from_json(json.dumps(PARAMS)))["table5"]
    assert t5.count_mode() == "row"
    frame = t5.frame(numeric=False).set_index(["Task", "Language"])
    assert frame.loc[("Belebele (accuracy)", "toy-Swahili (synthetic)"), "n"] == 50
    assert frame.loc[("MGSM (exact match)", "English"), "n"] == ITEMS


def test_missing_or_short_samples_file_names_it(tmp_path):
    sel, ev = make_world(tmp_path)
    params = tables.Params.from_json(json.dumps(PARAMS))
    samples = ev / "merge" / "swap_alt" / SWH / "l2m2" / "mgsm.samples.jsonl"
    lines = samples.read_text().splitlines()
    drop = next(i for i, line in enumerate(lines) if json.loads(line)["key"] == SWH)
    samples.write_text("\n".join(lines[:drop] + lines[drop + 1 :]) + "\n")
    with pytest.raises(
        UserError,
        match=rf"{samples}: {ITEMS - 1} per-item records for '{SWH}', the "
        rf"evaluation file says n = {ITEMS}",
    ):
        tables.build_tables(sel, ev, params)
    samples.unlink()
    with pytest.raises(UserError, match=rf"missing per-item file {samples}"):
        tables.build_tables(sel, ev, params)


def _table(intervals_by_col: dict[str, tuple[float, float]], name: str = "table1") -> Table:
    """A Table 1 with one language and the given avg intervals (cell = midpoint)."""
    row = (SWH, "avg")
    cells = {(row, c): (lo + hi) / 2 for c, (lo, hi) in intervals_by_col.items()}
    return Table(
        name,
        "t",
        ["Setting"],
        [(row, ("x",))],
        [(c, c) for c in intervals_by_col],
        cells,
        fmt_pct,
        intervals={(row, c): b for c, b in intervals_by_col.items()},
    )


def _table5(math=(0.80, 0.90), base=(0.10, 0.30), expert=(0.45, 0.55), ebase=(0.10, 0.20)) -> Table:
    spec = {
        (("mgsm", "en"), "math"): math,
        (("mgsm", "en"), "base"): base,
        (("belebele", SWH), SWH): expert,
        (("belebele", SWH), "base"): ebase,
    }
    cells = {k: (lo + hi) / 2 for k, (lo, hi) in spec.items()}
    cells[(("flores", f"en-{SWH}"), SWH)] = 20.0
    cells[(("flores", f"en-{SWH}"), "base")] = 0.1
    return Table("table5", "t", ["Task", "Language"], [], [], cells, fmt_pct, intervals=spec)


def test_summary_claims_a_difference_only_where_intervals_separate():
    names = {SWH: "toy-Swahili"}
    text = summary.summary(
        {
            "table5": _table5(),
            "table1": _table(
                {
                    "base": (10.0, 20.0),
                    "math_expert": (30.0, 40.0),
                    "soup_best": (25.0, 35.0),
                    "swap_best": (41.0, 50.0),
                }
            ),
        },
        [SWH],
        names,
    )
    assert "math experts score 85.0% [80.0, 90.0] exact match and the base 20.0% [10.0, 30.0]: higher" in text
    assert "the expert is above the base with non-overlapping intervals in every target language" in text
    assert "FLORES" in text and "no difference is claimed" in text and "language experts 20.0, base 0.1" in text
    assert (
        "layer swapping (best config) is above the base in every target language; above the math experts in "
        "every target language; above the best model soup in every target language"
    ) in text
    assert (
        "The paper's effect (the layer swap above both the math experts and the best model soup, intervals "
        "separate) shows in toy-Swahili." in text
    )
    # overlapping intervals: no direction is claimed, and the effect is not said to show
    text = summary.summary(
        {
            "table5": _table5(math=(0.25, 0.90)),
            "table1": _table(
                {
                    "base": (10.0, 20.0),
                    "math_expert": (30.0, 42.0),
                    "soup_best": (25.0, 35.0),
                    "swap_best": (41.0, 50.0),
                }
            ),
        },
        [SWH],
        names,
    )
    assert "the intervals overlap, so this run shows no difference" in text and "higher" not in text
    assert "not separable from the math experts in every target language" in text
    assert "shows in no target language of this run" in text


def test_cli_writes_the_summary(tmp_path):
    sel, ev = make_world(tmp_path)
    out = tmp_path / "out"
    tables.run(
        argparse.Namespace(
            selection_dir=str(sel),
            evals_dir=str(ev),
            params_json=json.dumps(PARAMS),
            out_dir=str(out),
            paper_results=None,
        )
    )
    text = (out / "summary.md").read_text()
    assert text.startswith("# What these tables show (toy world: synthetic languages)\n\n")
    para = summary.paragraph(text)
    # the synthetic world's swap (33.5% avg, best config) vs its base (20% of 200 items): separate
    t1 = tables.build_tables(sel, ev, tables.Params.from_json(json.dumps(PARAMS)))["table1"]
    sep = intervals.separated(t1.intervals[((SWH, "avg"), "swap_best")], t1.intervals[((SWH, "avg"), "base")])
    assert sep == 1 and "layer swapping (best config) is above the base in" in para


def _script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "scripts.tools.readme_summary", *args], capture_output=True, text=True, cwd=REPO
    )


def test_readme_summary_script_checks_and_writes(tmp_path):
    written = Path(Layout.at(tmp_path / R).table("summary", "md"))
    written.parent.mkdir(parents=True)
    written.write_text(summary.markdown("The run says A. " * 20, "toy"))
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n\n{summary.README_BEGIN}\nsomething old\n{summary.README_END}\n\nrest\n")
    args = ["--results", str(tmp_path / R), "--readme", str(readme)]
    proc = _script(*args)
    assert proc.returncode == 1 and "differs" in proc.stderr and "something old" in proc.stderr
    assert _script(*args, "--write").returncode == 0
    text = readme.read_text()
    assert text.startswith("intro\n\n") and text.endswith(f"{summary.README_END}\n\nrest\n")
    assert max(len(line) for line in text.splitlines()) <= 118  # wrapped
    assert _script(*args).returncode == 0


def test_readme_holds_one_generated_summary():
    """The README's paragraph sits between the markers the script checks (its text is the default run's)."""
    readme = (REPO / "README.md").read_text()
    assert readme.count(summary.README_BEGIN) == 1 and readme.count(summary.README_END) == 1
    inside = readme.split(summary.README_BEGIN, 1)[1].split(summary.README_END, 1)[0]
    assert "paper's effect" in inside and "[" in inside
