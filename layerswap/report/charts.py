"""`layerswap charts <figure>`: figures and report pages from evaluation, selection and table files only.

Subcommands (every value through arguments, never the workflow config):

  swap-grid     MGSM in the target language over the layer-swap configuration grid. For every layer_swap config
                of --params-json "configs" ({name: {bottom, top, transition_bottom, transition_top} or
                {lang_layers}}) and every language, the mean over the top_k x top_k pairs of MGSM in the target
                language, read from <evals-dir>/merge/<config>/<lang>/l<i>m<j>/mgsm.json. Plotted as b x u cells
                (x = bottom b, y = top u), one facet column per (transition_bottom, transition_top), one row per
                language. Configs with lang_layers have no (b, u) cell: they are in the CSV with in_grid = false and
                a note, not in the chart; so is a config with the same four numbers as an earlier one.
                params: {"configs", "languages", "top_k", "default_swap", "world", "language_names" (optional)}
  table1-bars   Table 1 as bars with the individual values as points: per language, bars for the base model, the
                language experts, the math experts, the best config of each merge method Table 1 shows (model
                soup ...), layer swap (default config) and layer swap (best config) at the mean over experts /
                pairs (= Table 1 "avg") with its 95% interval as an error bar (= Table 1's), and a point per expert or
                pair. Models and "best config" are resolved exactly as in Table 1 (layerswap.report.tables).
                params: the Table params of `layerswap tables`.
  table-html    Self-contained HTML pages of tables from their Markdown files (title, table, notes), so that the
                Snakemake report shows them inline (layerswap/report/pages.py).
  config-html   The workflow config (JSON) as config_used.yaml and a self-contained config_used.html (pages.py).

Figures are written as <prefix>.svg, <prefix>.png (vl-convert, no CDN) and <prefix>.csv (the plotted numbers).
MGSM is in percent (exact match x 100), as in Table 1. In the paper world a language scored on a translation of MGSM
(AfriMGSM) gets a subtitle line saying so, as under the tables.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from layerswap.benchmarks import BENCHMARKS, MATH
from layerswap.command_params import AtLeast, parse
from layerswap.contracts import merge_model_id, merge_model_parts, pair_ids
from layerswap.errors import UserError
from layerswap.languages import math_notes
from layerswap.merge.methods.layer_swap import SWAP_KEYS
from layerswap.merge.params import filled_params
from layerswap.merge.registry import METHODS, SWAP
from layerswap.report.evals import Evals, mean, pct
from layerswap.report.pages import run_config_html, run_table_html
from layerswap.report.render import world_title

#: The figures' score columns, named by the math benchmark (the registry's MATH, "mgsm"): the swap grid's mean, min and
#: max over the pairs, the Table 1 bars' score and its 95% interval; the titles name its entry's title (MGSM).
MEAN, LOWEST, HIGHEST, SCORE, LO, HI = (f"{MATH}{end}" for end in ("_mean", "_min", "_max", "", "_lo", "_hi"))
TITLE = BENCHMARKS[MATH].title
GRID_COLUMNS = [
    "language",
    "language_name",
    "config",
    *SWAP_KEYS,
    "lang_layers",
    "in_grid",
    "is_default",
    "n_pairs",
    MEAN,
    LOWEST,
    HIGHEST,
    "note",
]
BAR_COLUMNS = [
    "language",
    "language_name",
    "setting",
    "setting_label",
    "kind",
    "member",
    "model_id",
    "config",
    SCORE,
    LO,
    HI,
    "n_items",
]


def _heading(text: str, subtitle: str, world: str, langs):
    """A figure's title (with the toy world's label there) and subtitle, plus in the paper world a line per language
    of `langs` scored on a translation of the math benchmark (layerswap/languages.py math_notes: AfriMGSM)."""
    import altair as alt

    notes = math_notes(langs) if world == "paper" else []
    return alt.Title(world_title(text, world), subtitle=[subtitle, *notes] if notes else subtitle)


# ----------------------------------------------------------------------------------------------------------------
# swap-grid


@dataclass
class SwapGridParams:
    """--params-json of `layerswap charts swap-grid`."""

    configs: Annotated[dict[str, dict[str, Any]], AtLeast(1)]  # the layer_swap configs, by name
    languages: Annotated[list[str], AtLeast(1)]
    top_k: Annotated[int, AtLeast(1)]
    default_swap: str | None = None
    world: Literal["toy", "hf", "paper"] = "toy"
    language_names: dict[str, str] = field(default_factory=dict)


def swap_grid_records(evals_dir: str | Path, params: SwapGridParams) -> list[dict]:
    """One record per (language, layer_swap config); see GRID_COLUMNS. MGSM numbers in percent."""
    names = params.language_names
    pairs = pair_ids(params.top_k)
    evals = Evals(evals_dir)
    swap = METHODS[SWAP]
    records = []
    for lang in params.languages:
        seen: dict[tuple, str] = {}
        for cfg, spec in params.configs.items():
            method = spec.get("method", SWAP)
            if method != SWAP:
                raise UserError(
                    f"--params-json: configs.{cfg} has method {method!r}; only layer_swap configs "
                    "belong on the swap grid"
                )
            scores = [pct(evals.score(merge_model_id(cfg, lang, pair), MATH, lang)) for pair in pairs]
            rec = {
                "language": lang,
                "language_name": names.get(lang, lang),
                "config": cfg,
                **dict.fromkeys(SWAP_KEYS),
                "lang_layers": "",
                "in_grid": True,
                "is_default": cfg == params.default_swap,
                "n_pairs": len(scores),
                MEAN: mean(scores),
                LOWEST: min(scores),
                HIGHEST: max(scores),
                "note": "",
            }
            if spec.get("lang_layers") is not None:
                rec["lang_layers"] = " ".join(str(x) for x in spec["lang_layers"])
                rec["in_grid"] = False
                rec["note"] = "lang_layers config: explicit language layers, no (bottom, top) cell"
            else:  # the layer swap's own checks (layerswap/merge/methods/layer_swap.py), transitions default 0
                given = {k: v for k, v in spec.items() if k not in ("method", "allow_different_base")}
                filled = filled_params(swap, given, f"--params-json: configs.{cfg}")
                rec.update({key: filled[key] for key in SWAP_KEYS})
                cell = tuple(rec[key] for key in SWAP_KEYS)
                if cell in seen:
                    rec["in_grid"] = False
                    rec["note"] = f"same bottom/top/transitions as {seen[cell]} (shown in the chart)"
                else:
                    seen[cell] = cfg
            records.append(rec)
    return records


def swap_grid_chart(frame, world: str = "toy"):
    import altair as alt

    grid = frame[frame["in_grid"]].copy()
    if grid.empty:
        raise UserError("no layer_swap config with bottom/top to plot (all use lang_layers)")
    for key in SWAP_KEYS:
        grid[key] = grid[key].astype(int)
    grid["transitions"] = [f"tb={a}, tu={b}" for a, b in zip(grid["transition_bottom"], grid["transition_top"])]
    grid["label"] = [f"{v:.1f}" + ("*" if d else "") for v, d in zip(grid[MEAN], grid["is_default"])]
    lo, hi = float(grid[MEAN].min()), float(grid[MEAN].max())
    domain = [lo, hi] if hi > lo else [max(0.0, lo - 1.0), hi + 1.0]
    b_values = sorted(set(grid["bottom"]))
    u_values = sorted(set(grid["top"]))
    facet_order = sorted(set(zip(grid["transition_bottom"], grid["transition_top"])))
    mid = (domain[0] + domain[1]) / 2
    grid["dark"] = grid[MEAN] < mid  # viridis: white text on the dark half, black on the light half
    base = alt.Chart().encode(
        x=alt.X("bottom:O", sort=b_values, title="b (bottom layers)", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("top:O", sort=u_values, title="u (top layers)"),
    )
    rect = base.mark_rect(stroke="#888888", strokeWidth=0.5).encode(
        color=alt.Color(f"{MEAN}:Q", title=f"{TITLE} target (%)", scale=alt.Scale(domain=domain, scheme="viridis")),
        tooltip=[
            "language_name:N",
            "config:N",
            "bottom:O",
            "top:O",
            "transition_bottom:O",
            "transition_top:O",
            alt.Tooltip(f"{MEAN}:Q", format=".2f"),
            alt.Tooltip(f"{LOWEST}:Q", format=".2f"),
            alt.Tooltip(f"{HIGHEST}:Q", format=".2f"),
            "n_pairs:Q",
        ],
    )
    text = base.mark_text(fontSize=11).encode(
        text="label:N",
        color=alt.condition(alt.datum.dark, alt.value("#ffffff"), alt.value("#000000")),
    )
    chart = alt.layer(rect, text, data=grid).properties(
        width=max(60, 44 * len(b_values)), height=max(64, 30 * len(u_values))
    )
    return chart.facet(
        column=alt.Column(
            "transitions:N",
            sort=[f"tb={a}, tu={b}" for a, b in facet_order],
            title="transition layers",
            header=alt.Header(labelFontSize=11),
        ),
        row=alt.Row(
            "language_name:N",
            sort=list(dict.fromkeys(grid["language_name"])),
            title=None,
            header=alt.Header(labelAngle=0, labelAlign="left", labelFontSize=11),
        ),
    ).properties(
        title=_heading(
            f"{TITLE} in the target language over the layer-swap grid",
            "mean over the expert pairs (%); b/u: bottom/top layers from the language expert, "
            "tb/tu: transition layers (averaged); * = default config",
            world,
            grid["language"],
        )
    )


def run_swap_grid(args: argparse.Namespace) -> None:
    import pandas as pd

    from layerswap.report.figures import save_chart

    params = parse(SwapGridParams, args.params_json)
    frame = pd.DataFrame.from_records(swap_grid_records(args.evals_dir, params), columns=GRID_COLUMNS)
    prefix = Path(args.out_prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    out = frame.copy()
    for col in (MEAN, LOWEST, HIGHEST):
        out[col] = out[col].round(6)
    for key in SWAP_KEYS:
        out[key] = out[key].astype("Int64")
    out.to_csv(prefix.with_name(prefix.name + ".csv"), index=False)
    save_chart(swap_grid_chart(frame, params.world), prefix)


# ----------------------------------------------------------------------------------------------------------------
# table1-bars


def table1_bar_records(selection_dir: str | Path, evals_dir: str | Path, params) -> list[dict]:
    """Per language and Table 1 column: one 'avg' record (the bar, = Table 1 avg, with its 95% interval and item
    count as in Table 1) and one 'point' per member."""
    from layerswap.report.paper_tables import Builder
    from layerswap.report.workspace import Workspace

    builder = Builder(Workspace(selection_dir, Evals(evals_dir), params), None)
    columns = builder.columns(builder.table_columns(1))
    records = []
    for lang in params.languages:
        for col, label in columns:
            models = builder.column_models(col, lang)
            points = []
            for rank, model in enumerate(models, start=1):
                if col == "base":
                    member, config = "base", ""
                elif col in ("language_expert", "math_expert"):
                    member, config = f"rank {rank}", ""
                else:
                    config, _, member = merge_model_parts(model)
                value = pct(builder.ws.math_score(model, lang))
                points.append({"kind": "point", "member": member, "model_id": model, "config": config, SCORE: value})
            common = {"language": lang, "language_name": builder.name(lang), "setting": col, "setting_label": label}
            lo, hi = builder.interval(models, [lang], "avg") or (None, None)
            records.append(
                {
                    **common,
                    "kind": "avg",
                    "member": "",
                    "model_id": "",
                    "config": "",
                    SCORE: mean([p[SCORE] for p in points]),
                    LO: lo,
                    HI: hi,
                    "n_items": builder.count(models, [lang]),
                }
            )
            records += [{**common, **p, LO: None, HI: None, "n_items": None} for p in points]
    return records


def table1_bars_chart(frame, world: str = "toy"):
    import altair as alt

    frame = frame.copy()
    order = list(dict.fromkeys(frame["setting_label"]))
    langs = list(dict.fromkeys(frame["language_name"]))
    # deterministic horizontal spread of the points inside their bar: member index -> offset in [-0.3, 0.3]
    frame["spread"] = 0.0
    points = frame[frame["kind"] == "point"]
    for _, group in points.groupby(["language", "setting"], sort=False):
        n = len(group)
        frame.loc[group.index, "spread"] = [(i / (n - 1) - 0.5) * 0.6 if n > 1 else 0.0 for i in range(n)]
    top = max(float(frame[SCORE].max()), float(frame[HI].max()) if frame[HI].notna().any() else 0.0)
    ymax = min(100.0, max(5.0, top * 1.08))  # an all-zero run still gets an axis
    x = alt.X("setting_label:N", sort=order, title=None, axis=alt.Axis(labelAngle=-35, labelLimit=260))
    bar = (
        alt.Chart()
        .transform_filter(alt.datum.kind == "avg")
        .mark_bar(color="#9ecae1")
        .encode(
            x=x,
            y=alt.Y(f"{SCORE}:Q", title=f"{TITLE} target language (%)", scale=alt.Scale(domain=[0, ymax])),
            tooltip=["language_name:N", "setting_label:N", alt.Tooltip(f"{SCORE}:Q", title="mean (%)", format=".2f")],
        )
    )
    dots = (
        alt.Chart()
        .transform_filter(alt.datum.kind == "point")
        .mark_point(filled=True, size=40, color="#08306b", opacity=0.85)
        .encode(
            x=x,
            xOffset=alt.XOffset("spread:Q", scale=alt.Scale(domain=[-1.0, 1.0])),
            y=f"{SCORE}:Q",
            tooltip=[
                "language_name:N",
                "setting_label:N",
                "member:N",
                "config:N",
                "model_id:N",
                alt.Tooltip(f"{SCORE}:Q", format=".2f"),
            ],
        )
    )
    interval = alt.Chart().transform_filter((alt.datum.kind == "avg") & alt.expr.isValid(getattr(alt.datum, LO)))
    whisker = interval.mark_rule(color="#d62728", strokeWidth=2).encode(
        x=x,
        y=f"{LO}:Q",
        y2=f"{HI}:Q",
        tooltip=[
            "language_name:N",
            "setting_label:N",
            alt.Tooltip(f"{LO}:Q", title="95% lo", format=".2f"),
            alt.Tooltip(f"{HI}:Q", title="95% hi", format=".2f"),
            alt.Tooltip("n_items:Q", title="items"),
        ],
    )
    caps = [interval.mark_tick(color="#d62728", thickness=2, size=14).encode(x=x, y=f"{end}:Q") for end in (LO, HI)]
    layered = alt.layer(bar, dots, whisker, *caps, data=frame).properties(width=max(220, 48 * len(order)), height=220)
    return layered.facet(column=alt.Column("language_name:N", sort=langs, title=None)).properties(
        title=_heading(
            "Table 1 as bars: mean over experts / pairs, a point per expert or pair",
            "red: 95% bootstrap interval of the mean (items and experts / pairs resampled, "
            "seeded; layerswap/report/intervals.py)",
            world,
            frame["language"],
        )
    )


def run_table1_bars(args: argparse.Namespace) -> None:
    import pandas as pd

    from layerswap.report.figures import save_chart
    from layerswap.report.table_params import Params

    params = Params.from_json(args.params_json, table2=False)
    frame = pd.DataFrame.from_records(
        table1_bar_records(args.selection_dir, args.evals_dir, params), columns=BAR_COLUMNS
    )
    prefix = Path(args.out_prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    out = frame.copy()
    for col in (SCORE, LO, HI):
        out[col] = out[col].round(6)
    out["n_items"] = out["n_items"].astype("Int64")
    out.to_csv(prefix.with_name(prefix.name + ".csv"), index=False)
    save_chart(table1_bars_chart(frame, params.world), prefix)


# ----------------------------------------------------------------------------------------------------------------
# CLI


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="figure", required=True, metavar="{swap-grid,table1-bars,table-html,config-html}")
    p = sub.add_parser("swap-grid", help="MGSM over the layer-swap configuration grid (heatmap)")
    p.add_argument("--evals-dir", required=True, help="directory of <model_id>/<benchmark>.json evaluations")
    p.add_argument("--params-json", required=True, help="JSON: configs, languages, top_k, default_swap, world")
    p.add_argument("--out-prefix", required=True, help="writes <prefix>.svg, <prefix>.png and <prefix>.csv")
    p.set_defaults(func=run_swap_grid)
    p = sub.add_parser("table1-bars", help="Table 1 as bars with a point per expert / pair")
    p.add_argument("--selection-dir", required=True, help="directory of <expert_type>.json selection files")
    p.add_argument("--evals-dir", required=True, help="directory of <model_id>/<benchmark>.json evaluations")
    p.add_argument("--params-json", required=True, help="the Table params JSON of `layerswap tables`")
    p.add_argument("--out-prefix", required=True, help="writes <prefix>.svg, <prefix>.png and <prefix>.csv")
    p.set_defaults(func=run_table1_bars)
    p = sub.add_parser("table-html", help="tables' Markdown files as self-contained HTML pages")
    p.add_argument("--markdown", required=True, nargs="+", help="<name>.md files written by `layerswap tables`")
    p.add_argument("--out-dir", required=True, help="writes <out-dir>/<name>.html for each Markdown file")
    p.set_defaults(func=run_table_html)
    p = sub.add_parser("config-html", help="the workflow config as YAML + HTML for the report")
    p.add_argument("--config-json", required=True, help="the config as one JSON object")
    p.add_argument("--out-prefix", required=True, help="writes <prefix>.yaml and <prefix>.html")
    p.set_defaults(func=run_config_html)


def run(args: argparse.Namespace) -> None:
    args.func(args)
