"""The best-config tables: each expert pair's winning config of every method with a best-config column in a table."""

from __future__ import annotations

from layerswap.report.evals import pct
from layerswap.report.paper_tables import Builder
from layerswap.report.render import Table, fmt_pct


def build(b: Builder, table: int) -> Table:
    """`table<table>_best_configs`: each pair's winning config of every method with a best-config column in Table
    `table`, in that table's languages (Table 1: every target language; Table 2: its own)."""
    langs, name = b.p.languages if table == 1 else [b.p.table2_language], f"table{table}_best_configs"
    rows, cells = [], {}
    cols = [("config", "winning config"), ("score", "MGSM target (%)"), ("candidates", "candidates (%)")]
    for lang in langs:
        for method in b.best_of_methods(table):
            for choice in b.best(method.name, lang):
                key = (lang, method.name, choice.pair)
                rows.append((key, (lang, method.label, choice.pair)))
                cells[(key, "config")] = choice.config
                cells[(key, "score")] = pct(choice.score)
                cells[(key, "candidates")] = "; ".join(f"{c}={pct(v):.1f}" for c, v in choice.candidates.items())
    return Table(
        name,
        b.title(f"Table {table}: best config per pair"),
        ["language", "method", "pair"],
        rows,
        cols,
        cells,
        fmt_pct,
        ["pair l<i>m<j>: language expert rank i, math expert rank j."],
    )
