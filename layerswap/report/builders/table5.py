"""Table 5: every benchmark of each set of experts (base, math, each language), in each benchmark's row shape and
units (layerswap/benchmarks.py)."""

from __future__ import annotations

from typing import Any

from layerswap.benchmarks import BENCHMARKS
from layerswap.contracts import BASE_MODEL_ID
from layerswap.report.evals import MISSING, SKIPPED, mean
from layerswap.report.paper_tables import Builder
from layerswap.report.render import PAPER_TASK_NOTES, Table
from layerswap.report.workspace import below_base, selection_rule


def row_keys(b: Builder) -> list[tuple[str, str]]:
    """(benchmark, key) per row, benchmarks in registry order, each in its row shape (layerswap/benchmarks.py):
    en, the target languages, the avg over mgsm_languages, or both directions per target language."""
    targets = [l for l in b.p.languages if l != "en"]
    rows = []
    for name, bench in BENCHMARKS.items():
        for part in bench.table5:
            keys = {
                "en": ["en"],
                "avg": ["avg"],
                "targets": targets,
                "directions": [k for l in targets for k in bench.keys(l)],
            }[part]
            rows += [(name, key) for key in keys]
    return rows


def build(b: Builder) -> Table:
    ws = b.ws
    cols = [("base", "base model"), ("math", "math experts")]
    cols += [(lang, f"{b.name(lang)} experts") for lang in b.p.languages]
    models = {"base": [BASE_MODEL_ID], "math": ws.experts("math")}
    models.update({lang: ws.experts(lang) for lang in b.p.languages})
    cells, paper, rows, bounds, counts = {}, {}, [], {}, {}
    for bench, key in row_keys(b):
        if bench not in b.p.benchmarks:
            continue
        row = (bench, key)
        for col, _ in cols:
            if key == "avg":
                per_model = []
                for m in models[col]:
                    vals = [ws.evals.maybe_score(m, bench, l) for l in b.p.mgsm_languages]
                    if SKIPPED in vals:
                        per_model.append(SKIPPED)
                    elif MISSING in vals:
                        per_model.append(MISSING)
                    else:
                        per_model.append(mean(vals))
            else:
                per_model = [ws.evals.maybe_score(m, bench, key) for m in models[col]]
            if SKIPPED in per_model:
                cells[(row, col)] = SKIPPED
            elif MISSING in per_model:
                cells[(row, col)] = MISSING
            else:
                langs = list(b.p.mgsm_languages) if key == "avg" else [key]
                b.fill(cells, bounds, counts, (row, col), mean(per_model), models[col], langs, "avg", bench, scale=1.0)
            ref = _paper_table5(b, bench, key, col)
            if ref is not None:
                paper[(row, col)] = ref
        if all(cells[(row, col)] == MISSING for col, _ in cols):
            for col, _ in cols:
                del cells[(row, col)]
                paper.pop((row, col), None)
                bounds.pop((row, col), None)
                counts.pop((row, col), None)
            continue
        if key == "avg":
            label = f"{len(b.p.mgsm_languages)}-lang avg"
        elif "-" in key:
            src, tgt = key.split("-", 1)
            label = f"{b.name(src)} → {b.name(tgt)}"
        else:
            label = b.name(key)
        rows.append((row, (BENCHMARKS[bench].label, label)))
    notes = [
        f"Each expert column is the average over the top {b.p.top_k} selected checkpoints of that expert type.",
        "Accuracy / exact match / pass@1 as fractions, FLORES as BLEU (0-100); 'skipped' = benchmark not run "
        "(see the evaluation file's 'skipped' reason); 'n/a' = no score for that language in the file.",
        f"'{len(b.p.mgsm_languages)}-lang avg' = mean over {', '.join(b.p.mgsm_languages)}.",
        f"Selection (section 3.1): math experts {selection_rule(ws.selection_dir, 'math')}; language experts "
        f"(each in its language) {selection_rule(ws.selection_dir, b.p.languages[0])}.",
    ]
    for expert in ["math", *b.p.languages]:
        below = below_base(ws.selection_dir, expert, b.p.top_k)
        if below:
            notes.append(
                f"Below the base model on a selection constraint ({b.name(expert)} experts: too few "
                f"checkpoints pass, so the best of the others by score are taken; selection.on_no_pass: best): "
                + "; ".join(below)
                + "."
            )

    notes += b.math_notes([*b.p.languages, *b.p.mgsm_languages])
    if b.p.world == "paper":
        notes.append(
            "The paper's MGSM avg (beside ours) is its 10-language average (English, German, French, "
            "Chinese, Russian, Spanish, Japanese, Bengali, Swahili, Telugu)."
        )
        notes += PAPER_TASK_NOTES.values()

    def fmt(row: Any, value: float) -> str:
        return f"{value:.1f}" if BENCHMARKS[row[0]].unit == "bleu" else f"{value:.3f}"

    return Table(
        "table5",
        b.title("Table 5: results of each set of experts"),
        ["Task", "Language"],
        rows,
        cols,
        cells,
        fmt,
        notes,
        paper,
        bounds,
        counts,
    )


def _paper_table5(b: Builder, bench: str, key: str, col: str) -> float | None:
    """The paper's Table 5 number of a cell (its language codes mapped to the paper's), or None."""
    if key == "avg":
        pkey = "avg"
    elif "-" in key:
        src, tgt = key.split("-", 1)
        src_code, tgt_code = b.paper_code(src), b.paper_code(tgt)
        pkey = f"{src_code}-{tgt_code}" if src_code and tgt_code else None
    else:
        pkey = b.paper_code(key)
    pcol = col if col in ("base", "math") else b.paper_code(col)
    if pkey is None or pcol is None:
        return None
    return b.paper_value("table5", bench, pkey, pcol)
