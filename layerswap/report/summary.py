"""What a run's tables show, in sentences built only from their numbers and 95% intervals (`summary.md`).

`layerswap tables` writes it beside the tables; the README's "what the toy world shows" paragraph is this text for the
default run, between the markers README_BEGIN / README_END (`python -m scripts.tools.readme_summary` checks or
updates it).

A difference is stated only where the two cells' 95% intervals (layerswap.report.intervals) do not overlap; where they
overlap the text says the run cannot tell the two apart. Corpus BLEU cells have no interval: their numbers are given,
no difference is claimed.

Read from the tables (keys as in layerswap.report.tables): Table 5 rows (<math benchmark>, en) and each key of the
language experts' skills in their languages (LANGUAGE_SKILLS: (belebele, <lang>), (flores, en-<lang>), (flores,
<lang>-en)), columns base / math / <lang>; Table 1 rows (<lang>, avg), columns base, math_expert, soup_best,
swap_best.
"""

from __future__ import annotations

from typing import Any

from layerswap.benchmarks import BENCHMARKS, LANGUAGE_SKILLS, MATH, Benchmark
from layerswap.report.intervals import separated

README_BEGIN = (
    "<!-- BEGIN summary: `layerswap tables` -> results/tables/summary.md; check: scripts/tools/readme_summary.py -->"
)
README_END = "<!-- END summary -->"


def _pct(value: float) -> str:
    return f"{100 * value:.1f}"


def _num(value: float) -> str:
    return f"{value:.1f}"


def _span(values: list[float], fmt) -> str:
    lo, hi = min(values), max(values)
    return fmt(lo) if fmt(lo) == fmt(hi) else f"{fmt(lo)}-{fmt(hi)}"


def _join(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _compare(table, pairs: list[tuple[Any, str, str, str]]) -> dict[int, list[str]]:
    """pairs: (row, column a, column b, language name) -> {+1: a above b, -1: below, 0: overlap}: names."""
    out: dict[int, list[str]] = {1: [], -1: [], 0: []}
    for row, a, b, name in pairs:
        ia, ib = table.intervals.get((row, a)), table.intervals.get((row, b))
        if ia is None or ib is None:
            continue
        out[separated(ia, ib)].append(name)
    return out


def _relation(groups: dict[int, list[str]], total: int, a: str, b: str) -> str:
    parts = []
    for sign, word in ((1, "above"), (-1, "below")):
        if groups[sign]:
            where = "every target language" if len(groups[sign]) == total else _join(groups[sign])
            parts.append(f"{a} is {word} {b} with non-overlapping intervals in {where}")
    if groups[0]:
        where = "every target language" if len(groups[0]) == total else _join(groups[0])
        parts.append(f"the intervals overlap (no difference shown) in {where}")
    return "; ".join(parts)


def _skill_sentence(t5, bench: Benchmark, languages: list[str], name: dict[str, str]) -> list[str]:
    """A sentence on the language experts and the base on `bench` in their own languages (every key: FLORES's two
    directions): their intervals compared, or, for a corpus metric (no interval), the numbers alone."""
    rows = [
        ((bench.name, key), lang, "base", name[lang])
        for lang in languages
        for key in bench.keys(lang)
        if isinstance(t5.cells.get(((bench.name, key), lang)), float)
        and (not bench.corpus or isinstance(t5.cells.get(((bench.name, key), "base")), float))
    ]
    if not rows:
        return []
    experts = [t5.cells[(r, c)] for r, c, _, _ in rows]
    bases = [t5.cells[(r, "base")] for r, _, _, _ in rows]
    m = bench.metric_name
    if bench.corpus:
        both = ", both directions" if bench.directions else ""
        return [
            f"{bench.title} (corpus {m}{both}; {m} cells have no interval, so no difference is claimed): "
            f"language experts {_span(experts, _num)}, base {_span(bases, _num)}."
        ]
    return [
        f"On {bench.title} in its own language each language expert scores {_span(experts, _pct)}% {m}, the "
        f"base {_span(bases, _pct)}%: " + _relation(_compare(t5, rows), len(rows), "the expert", "the base") + "."
    ]


def summary(tables: dict, languages: list[str], names: dict[str, str]) -> str:
    """The paragraph, from Table 5 and Table 1 (Table objects of layerswap.report.tables)."""
    name = {lang: names.get(lang, lang) for lang in languages}
    t5, t1 = tables["table5"], tables["table1"]
    mb = BENCHMARKS[MATH]
    sentences = []

    row = (MATH, "en")
    math, base = t5.cells.get((row, "math")), t5.cells.get((row, "base"))
    if isinstance(math, float) and isinstance(base, float) and (row, "math") in t5.intervals:
        (mlo, mhi), (blo, bhi) = t5.intervals[(row, "math")], t5.intervals[(row, "base")]
        verdict = {
            1: "higher, with non-overlapping 95% intervals",
            -1: "lower, with non-overlapping 95% intervals",
            0: "the intervals overlap, so this run shows no difference",
        }[separated((mlo, mhi), (blo, bhi))]
        sentences.append(
            f"On English {mb.title} the math experts score {_pct(math)}% [{_pct(mlo)}, {_pct(mhi)}] "
            f"{mb.metric_name} and the base {_pct(base)}% [{_pct(blo)}, {_pct(bhi)}]: {verdict}."
        )

    for bench in LANGUAGE_SKILLS:  # the language experts' own skill (Belebele, FLORES), each in its language
        sentences += _skill_sentence(t5, BENCHMARKS[bench], languages, name)

    rows = [(lang, "avg") for lang in languages]
    comparisons, clauses = [], []
    for other, label in (
        ("base", "the base"),
        ("math_expert", "the math experts"),
        ("soup_best", "the best model soup"),
    ):
        groups = _compare(t1, [(r, "swap_best", other, name[r[0]]) for r in rows])
        if not sum(len(v) for v in groups.values()):
            continue
        comparisons.append((other, groups))
        parts = []
        for sign, word in ((1, "above"), (-1, "below"), (0, "not separable from")):
            if groups[sign]:
                where = "every target language" if len(groups[sign]) == len(rows) else _join(groups[sign])
                parts.append(f"{word} {label} in {where}")
        clauses.append(" and ".join(parts))
    if clauses:
        sentences.append(
            f"In Table 1 ({mb.title} avg in the target language; above or below only where the 95% intervals "
            "do not overlap) layer swapping (best config) is " + "; ".join(clauses) + "."
        )
    if {"math_expert", "soup_best"} <= {other for other, _ in comparisons}:
        above_all = [
            name[lang]
            for lang in languages
            if all(name[lang] in groups[1] for other, groups in comparisons if other != "base")
        ]
        if above_all:
            sentences.append(
                "The paper's effect (the layer swap above both the math experts and the best model "
                f"soup, intervals separate) shows in {_join(above_all)}."
            )
        else:
            sentences.append(
                "The paper's effect (the layer swap above both the math experts and the best model "
                "soup, intervals separate) shows in no target language of this run."
            )
    return " ".join(sentences)


def markdown(text: str, world: str) -> str:
    """summary.md: a title line, a blank line, the paragraph (what the README holds between its markers)."""
    label = " (toy world: synthetic languages)" if world == "toy" else ""
    return f"# What these tables show{label}\n\n{text}\n"


def paragraph(markdown_text: str) -> str:
    """The paragraph of a summary.md."""
    return markdown_text.split("\n\n", 1)[1].strip() if "\n\n" in markdown_text else markdown_text.strip()
