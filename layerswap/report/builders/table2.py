"""Table 2: MGSM of Table 2's language (min, avg, max), in English and over every MGSM language, of the base, the
experts, the joint SFT and every merge method's columns."""

from __future__ import annotations

from layerswap.report.evals import mean, pct
from layerswap.report.paper_tables import Builder
from layerswap.report.render import Table, fmt_pct


def build(b: Builder) -> Table:
    lang = b.p.table2_language
    cols = b.columns(b.table_columns(2), lang=b.name(lang))
    name = b.name(lang)
    row_spec = [
        ("min", f"{name} min"),
        ("avg", f"{name} avg"),
        ("max", f"{name} max"),
        ("en_avg", "English avg"),
        ("all_avg", "All langs avg"),
    ]
    paper_lang = (b.paper.get("table2") or {}).get("language")
    use_paper = paper_lang is not None and b.paper_code(lang) == paper_lang
    cells, paper, bounds, counts = {}, {}, {}, {}
    for col, _ in cols:
        models = b.column_models(col, lang)
        target = b.math_stats(models, lang)
        values = {
            "min": target.min,
            "avg": target.avg,
            "max": target.max,
            "en_avg": mean([pct(b.ws.math_score(m, "en")) for m in models]),
            "all_avg": mean([pct(b.ws.math_all(m)) for m in models]),
        }
        langs = {"en_avg": ["en"], "all_avg": list(b.p.mgsm_languages)}
        for row, _ in row_spec:
            b.fill(
                cells,
                bounds,
                counts,
                (row, col),
                values[row],
                models,
                langs.get(row, [lang]),
                row if row in ("min", "max") else "avg",
            )
            if use_paper:
                ref = b.paper_value("table2", "rows", row, col)
                if ref is not None:
                    paper[(row, col)] = ref
    rows = [(key, (label,)) for key, label in row_spec]
    notes = [f"MGSM exact match (%). 'All langs avg' = mean over {', '.join(b.p.mgsm_languages)}."]
    if best := b.best_note(2, name):
        notes.append(
            f"{best}; the English and all-languages rows use the same winning models; winners in "
            "table2_best_configs.csv."
        )
    notes.append(f"Joint SFT: the top {b.p.top_k} checkpoints of selection joint_{lang}.")
    notes += b.math_notes([lang, *b.p.mgsm_languages])
    if b.p.world == "paper" and paper:
        notes.append(
            "The paper's 'All langs avg' (beside ours) is over the languages of its MGSM evaluation "
            "('all 9 languages', Table 2 caption)."
        )
    return Table(
        "table2",
        b.title(f"Table 2: MGSM results of layer swapping for {name}"),
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
