"""Table 6: layer swapping combined with model souping: the pairwise soup and layer swap, and the swaps of the
language soup and of the multilingual soup with the math soup (MGSM in the target language)."""

from __future__ import annotations

from layerswap.contracts import SOUP_SWAP, SOUPS, merge_model_id
from layerswap.merge.registry import METHODS
from layerswap.report.paper_tables import Builder
from layerswap.report.render import Table, fmt_pct


def build(b: Builder) -> Table:
    k = b.p.top_k
    cols = [
        ("soup_pairwise", f"model soup, pairwise (best config, avg of {k * k} pairs)"),
        ("swap_pairwise", f"layer swap, pairwise (default config, avg of {k * k} pairs)"),
        ("swap_langsoup", "layer swap, language soup w/ math soup (1 version)"),
        ("swap_multisoup", "layer swap, multilingual soup w/ math soup (1 version)"),
    ]
    soup = METHODS["soup"]
    if not b.p.best_of.get(soup.name):  # no soup configs to pick the best from: no pairwise soup column
        cols = cols[1:]
    cells, paper, rows, bounds, counts = {}, {}, [], {}, {}
    for lang in b.p.languages:
        models = {
            "soup_pairwise": b.column_models(soup.best_column, lang) if b.p.best_of.get(soup.name) else [],
            "swap_pairwise": b.column_models("swap_default", lang),
            **{f"swap_{m}": [merge_model_id(SOUP_SWAP, lang, m)] for m in SOUPS},
        }
        rows.append((lang, (b.name(lang),)))
        for col, _ in cols:
            b.fill(
                cells,
                bounds,
                counts,
                (lang, col),
                b.math_stats(models[col], lang).avg,
                models[col],
                [lang],
                "avg",
            )
            ref = b.paper_value("table6", b.paper_code(lang), col)
            if ref is not None:
                paper[(lang, col)] = ref
    notes = [
        "MGSM exact match (%) in the target language. Language soup: uniform soup of the language's top "
        f"{k} experts; multilingual soup: uniform soup of all language experts; each swapped with the math soup.",
        *b.math_notes(b.p.languages),
    ]
    return Table(
        "table6",
        b.title("Table 6: layer swapping combined with model souping"),
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
