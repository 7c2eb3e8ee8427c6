"""Table 1: MGSM in each target language of the base, the experts and every merge method's columns (avg and max over
the top-k experts or the k x k pairs), each with its 95% interval and item count."""

from __future__ import annotations

from layerswap.report.paper_tables import Builder
from layerswap.report.render import Table, fmt_pct


def build(b: Builder) -> Table:
    cols = b.columns(b.table_columns(1))
    rows, cells, paper, bounds, counts = [], {}, {}, {}, {}
    for lang in b.p.languages:
        models = {col: b.column_models(col, lang) for col, _ in cols}
        stats = {col: b.math_stats(models[col], lang) for col, _ in cols}
        for stat in ("avg", "max"):
            key = (lang, stat)
            rows.append((key, (f"{b.name(lang)} {stat}",)))
            for col, _ in cols:
                b.fill(cells, bounds, counts, (key, col), getattr(stats[col], stat), models[col], [lang], stat)
                ref = b.paper_value("table1", b.paper_code(lang), stat, col)
                if ref is not None:
                    paper[(key, col)] = ref
    k = b.p.top_k
    notes = [
        f"MGSM exact match (%) in the target language. Experts: the top {k} selected checkpoints; merges: the "
        f"{k}x{k} pairs (language expert rank x math expert rank).",
        f"Default layer-swap config: {b.p.default_swap}."
        + (f" {best}; winners in table1_best_configs.csv." if (best := b.best_note(1, "target-language")) else ""),
        *b.math_notes(b.p.languages),
    ]
    return Table(
        "table1",
        b.title("Table 1: MGSM results of layer swapping"),
        ["Setting"],
        rows,
        cols,
        cells,
        fmt_pct,
        notes,
        paper,
        bounds,
        counts,
    )
