"""`layerswap ablation-table`: an ablation's table (CSV + Markdown) and figure from evaluation files only.

One row per (variant, language) of the ablation (layerswap/workflow/ablations.py plans the variants; the rule passes
them, with their merge configs, in --params-json): avg and max over the expert pairs of each metric, with 95%
intervals and item counts computed as the paper tables' (layerswap/report/evals.py, layerswap/report/intervals.py).
Written: <out-dir>/table.{csv,md}, figure.{svg,png}.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal

from layerswap.benchmarks import BENCHMARKS, MATH, NAMES
from layerswap.command_params import AtLeast, parse
from layerswap.contracts import merge_model_id, pair_ids
from layerswap.errors import UserError
from layerswap.layout import Layout
from layerswap.report import intervals
from layerswap.report.evals import Evals, mean, pct
from layerswap.report.render import Table, fmt_pct

METRICS = NAMES  # the benchmarks (layerswap/benchmarks.py)
# table columns per language, after `language`/`variant`
COLUMNS = [
    "ablation",
    "variant",
    "config",
    "layers",
    "n_lang_layers",
    "language",
    "language_name",
    "n_pairs",
    *(f"{m}_{s}" for m in METRICS for s in ("avg", "max")),
    "note",
]
# per metric: 95% interval of avg and max (layerswap.report.intervals; none for a corpus metric) and items per model
COLUMNS += [
    f"{m}_{c}"
    for m in METRICS
    for c in (("n",) if BENCHMARKS[m].corpus else ("avg_lo", "avg_hi", "max_lo", "max_hi", "n"))
]


@dataclass
class Variant:
    """A row of the ablation: its merge config ('' and `skipped` the reason where it does not fit the model)."""

    label: str
    config: str
    layers: str
    n_lang_layers: int | None
    skipped: str


@dataclass
class Params:
    """--params-json of `layerswap ablation-table` (layerswap/workflow/ablation_jobs.py: AblationJobs.params)."""

    name: str
    variants: Annotated[list[Variant], AtLeast(1)]
    languages: Annotated[list[str], AtLeast(1)]
    top_k: Annotated[int, AtLeast(1)]
    metrics: Annotated[list[str], AtLeast(1)]  # benchmarks (layerswap/benchmarks.py)
    title: str | None = None  # None: the name
    plan: str = ""
    world: Literal["toy", "hf", "paper"] = "toy"
    language_names: dict[str, str] = field(default_factory=dict)
    seed: Annotated[int, AtLeast(0)] = 0
    bootstrap_draws: Annotated[int, AtLeast(100)] = intervals.DEFAULT_DRAWS

    def __post_init__(self):
        unknown = [m for m in self.metrics if m not in METRICS]
        if unknown:
            raise UserError(f"--params-json: 'metrics' has unknown entries {unknown}; known: {', '.join(METRICS)}")

    @property
    def heading(self) -> str:
        return self.name if self.title is None else self.title


def _metric_scores(evals: Evals, model_ids: list[str], bench: str, lang: str) -> list[float] | str:
    scores = []
    for model_id in model_ids:
        if evals.skipped(model_id, bench):
            return "skipped: " + str(evals.skipped(model_id, bench))
        keys = BENCHMARKS[bench].keys(lang)  # FLORES: the mean of the two directions
        value = sum(evals.score(model_id, bench, key) for key in keys) / len(keys)
        scores.append(value if BENCHMARKS[bench].unit == "bleu" else pct(value))  # BLEU: already 0..100
    return scores


def records(evals_dir: str | Path, params: Params) -> list[dict]:
    """One row per (variant, language): avg and max over the expert pairs of each metric (percent; FLORES BLEU,
    mean of en->lang and lang->en), with their 95% intervals (params seed, bootstrap_draws; none for BLEU) and the
    items per model (FLORES: sentences per direction)."""
    pairs = pair_ids(params.top_k)
    names = params.language_names
    evals = Evals(evals_dir)
    rows = []
    for var in params.variants:
        for lang in params.languages:
            row = {c: None for c in COLUMNS}
            row.update(
                ablation=params.name,
                variant=var.label,
                config=var.config,
                layers=var.layers,
                n_lang_layers=var.n_lang_layers,
                language=lang,
                language_name=names.get(lang, lang),
                note=var.skipped and f"skipped: {var.skipped}",
            )
            if not var.skipped:
                ids = [merge_model_id(var.config, lang, p) for p in pairs]
                row["n_pairs"] = len(ids)
                notes = []
                for bench in params.metrics:
                    scores = _metric_scores(evals, ids, bench, lang)
                    if isinstance(scores, str):
                        notes.append(f"{bench} {scores}")
                        continue
                    row[f"{bench}_avg"], row[f"{bench}_max"] = round(mean(scores), 4), round(max(scores), 4)
                    row[f"{bench}_n"] = evals.smallest_count(ids, bench, BENCHMARKS[bench].keys(lang))
                    for stat in ("avg", "max") if not BENCHMARKS[bench].corpus else ():  # no per-item scores
                        bounds = intervals.cell_interval(
                            evals.items, ids, [lang], stat, bench=bench, seed=params.seed, draws=params.bootstrap_draws
                        )
                        if bounds is not None:
                            row[f"{bench}_{stat}_lo"], row[f"{bench}_{stat}_hi"] = (round(b, 4) for b in bounds)
                row["note"] = "; ".join(notes)
            rows.append(row)
    return rows


def markdown(frame, params: Params) -> str:
    metrics = params.metrics
    lines = [f"## Ablation: {params.heading}", ""]
    if params.world == "toy":
        lines += [
            "**TOY WORLD**: synthetic toy languages and a tiny model; these numbers say nothing about the "
            "real languages or the paper's models.",
            "",
        ]
    if params.plan:
        lines += [f"Plan: {params.plan}", ""]
    percent = ", ".join(b.title for b in BENCHMARKS.values() if b.unit != "bleu")
    bleu = ", ".join(
        b.title + (" (mean of en->x and x->en)" if b.directions else "")
        for b in BENCHMARKS.values()
        if b.unit == "bleu"
    )
    corpus = ", ".join(f"{b.title} BLEU" if b.unit == "bleu" else b.title for b in BENCHMARKS.values() if b.corpus)
    lines += [
        f"Avg / max over the {params.top_k**2} expert pairs (language rank x math rank); {percent} "
        f"in %, {bleu} in BLEU, all in the target language.",
        "",
        "[lo, hi]: 95% interval, seeded bootstrap (layerswap/report/intervals.py): avg resamples the items (the "
        f"same draw for every pair) and the pairs, max the items only; {corpus} has none (corpus metric).",
        "",
    ]
    counts = []
    for m in metrics:
        found = sorted({int(v) for v in frame[f"{m}_n"] if _present(v)})
        if found:
            unit = "sentences per direction" if BENCHMARKS[m].directions else "items"
            counts.append(f"{m} {found[0]}" + (f"-{found[-1]}" if len(found) > 1 else "") + f" {unit}")
    if counts:
        lines += ["n per model and language: " + ", ".join(counts) + ".", ""]

    for lang in params.languages:
        table = language_table(frame[frame["language"] == lang], params, lang)
        lines += [f"### {table.title}", "", table.grid(), ""]
    return "\n".join(lines)


def language_table(part, params: Params, lang: str) -> Table:
    """One language's rows as a Table (layerswap/report/render.py, the paper tables' renderer): variant and layers,
    then avg and max of each metric with their 95% intervals, and the note."""
    keys = [f"{m}_{s}" for m in params.metrics for s in ("avg", "max")]
    rows, cells, bounds = [], {}, {}
    for i, r in enumerate(part.to_dict("records")):
        rows.append((i, (str(r["variant"]), str(r["layers"]))))
        for key in keys:
            if _present(r[key]):
                cells[(i, key)] = float(r[key])
            lo, hi = r.get(f"{key}_lo"), r.get(f"{key}_hi")
            if _present(lo) and _present(hi):
                bounds[(i, key)] = (float(lo), float(hi))
        cells[(i, "note")] = str(r["note"] or "").replace("|", "/")  # a Markdown cell holds no pipe
    return Table(
        name=f"{params.name}_{lang}",
        title=params.language_names.get(lang, lang),
        index=["variant", "layers"],
        rows=rows,
        columns=[(k, k) for k in keys + ["note"]],
        cells=cells,
        fmt=fmt_pct,
        intervals=bounds,
    )


def _present(value) -> bool:
    return value is not None and value == value  # NaN: pandas' missing number


def chart(frame, params: Params):
    import altair as alt

    avg, best, title = f"{MATH}_avg", f"{MATH}_max", BENCHMARKS[MATH].title  # the math benchmark's columns (mgsm_*)
    data = frame[frame[avg].notna()].copy()
    if data.empty:
        raise UserError(f"no variant has {title} scores to plot (all skipped)")
    order = list(dict.fromkeys(data["variant"]))
    base = alt.Chart(data).encode(
        x=alt.X("variant:N", sort=order, title=None, axis=alt.Axis(labelAngle=-35, labelLimit=260))
    )
    bars = base.mark_bar(color="#4c78a8").encode(
        y=alt.Y(f"{avg}:Q", title=f"{title} target language (%)"),
        tooltip=[
            "variant:N",
            "layers:N",
            alt.Tooltip(f"{avg}:Q", format=".2f"),
            alt.Tooltip(f"{best}:Q", format=".2f"),
        ],
    )
    ticks = base.mark_tick(color="#e45756", thickness=2, size=18).encode(y=f"{best}:Q")
    interval = base.transform_filter(alt.expr.isValid(getattr(alt.datum, f"{avg}_lo")))
    whisker = interval.mark_rule(color="#222222", strokeWidth=1.5).encode(y=f"{avg}_lo:Q", y2=f"{avg}_hi:Q")
    caps = [
        interval.mark_tick(color="#222222", thickness=1.5, size=10).encode(y=f"{avg}_{end}:Q") for end in ("lo", "hi")
    ]
    world = "TOY WORLD (synthetic): " if params.world == "toy" else ""
    return (
        alt.layer(bars, ticks, whisker, *caps)
        .properties(width=max(160, 34 * len(order)), height=180)
        .facet(row=alt.Row("language_name:N", title=None, header=alt.Header(labelAngle=0, labelAlign="left")))
        .properties(
            title=alt.Title(
                f"{world}ablation: {params.heading}",
                subtitle=f"bar: {title} mean over the expert pairs, with its 95% interval; red tick: best pair",
            )
        )
    )


def build(evals_dir: str | Path, params: Params, out_dir: str | Path) -> list[Path]:
    import pandas as pd

    from layerswap.report.figures import save_chart

    frame = pd.DataFrame.from_records(records(evals_dir, params), columns=COLUMNS)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    keep = [c for c in COLUMNS if not any(c.startswith(f"{m}_") for m in METRICS if m not in params.metrics)]
    frame[keep].to_csv(out / "table.csv", index=False)
    (out / "table.md").write_text(markdown(frame, params) + "\n")
    return [out / "table.csv", out / "table.md", *save_chart(chart(frame, params), out / "figure")]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--evals-dir", required=True, help=Layout().evals())
    parser.add_argument(
        "--params-json",
        required=True,
        help="{name, title, plan, metrics, variants, languages, top_k, world, language_names}",
    )
    parser.add_argument("--out-dir", required=True, help=Layout().ablation_dir("<name>"))


def run(args: argparse.Namespace) -> None:
    build(args.evals_dir, parse(Params, args.params_json), args.out_dir)
