"""Issue 21's three questions of a finished toy run, read from its tables and its parameter-change profile.

(a) the experts learned their skills: the math experts' English MGSM interval lies above the base's; in every target
    language, on each benchmark the language experts are selected on (LANGUAGE_SKILLS), their interval lies above the
    base's: Belebele; for a corpus metric without an interval their number is higher: FLORES BLEU, both directions;
(b) layer swapping transfers: in a target language, the default layer swap's Table 1 avg interval lies above those of
    the base, the language experts, the math experts and the best model soup; (b) holds when that is so in at least
    `min_languages` of the target languages;
(c) the per-layer change profile: for each expert kind the share of its mean |W_ft - W_pre| (summed over matrices)
    that sits in the middle layers, the ones the default swap takes from the math expert; the paper's Fig. 2 pattern
    is the math experts' share above that of a flat profile (middle layers / all layers) and the language experts'
    below it.

Only interval separation counts as a difference (layerswap.report.intervals.separated); the thresholds are the
issue's, nothing is tuned here.
"""

from __future__ import annotations

import csv
from pathlib import Path

from layerswap.benchmarks import BENCHMARKS, LANGUAGE_SKILLS, MATH, Benchmark
from layerswap.report.intervals import separated

#: Table 1 columns the default swap must lie above, for (b).
RIVALS = ("base", "language_expert", "math_expert", "soup_best")


def skills(table5, languages: list[str]) -> dict:
    """(a) from Table 5 (rows (bench, key), columns base / math / <lang>): per target language, each benchmark of the
    language experts' skill (LANGUAGE_SKILLS: Belebele, FLORES) above the base in every key of it."""
    ivs, cells = table5.intervals, table5.cells
    math_en = separated(ivs[((MATH, "en"), "math")], ivs[((MATH, "en"), "base")]) == 1
    per_lang = {lang: {b: _above(table5, BENCHMARKS[b], lang) for b in LANGUAGE_SKILLS} for lang in languages}
    ok = math_en and all(all(v.values()) for v in per_lang.values())
    scores = {col: round(100 * cells[((MATH, "en"), col)], 1) for col in ("math", "base")}
    return {"holds": ok, "math_en_above_base": math_en, "mgsm_en": scores, "languages": per_lang}


def _above(table5, bench: Benchmark, lang: str) -> bool:
    """The language experts above the base on `bench` in `lang`, every key of it (FLORES: both directions): interval
    separation, or for a corpus metric (BLEU: no interval) the higher number."""
    rows = [(bench.name, key) for key in bench.keys(lang)]
    if bench.corpus:
        return all(table5.cells[(r, lang)] > table5.cells[(r, "base")] for r in rows)
    return all(separated(table5.intervals[(r, lang)], table5.intervals[(r, "base")]) == 1 for r in rows)


def transfer(table1, languages: list[str], min_languages: int) -> dict:
    """(b) from Table 1 (rows (lang, 'avg'), columns as RIVALS + swap_default)."""
    per_lang = {}
    for lang in languages:
        swap = table1.intervals[((lang, "avg"), "swap_default")]
        per_lang[lang] = {rival: separated(swap, table1.intervals[((lang, "avg"), rival)]) for rival in RIVALS}
    wins = [lang for lang, rel in per_lang.items() if all(v == 1 for v in rel.values())]
    return {"holds": len(wins) >= min_languages, "languages_won": wins, "relations": per_lang}


def layer_profile(mean_csv: Path, middle: range) -> dict:
    """(c) from the run's figures/param_change_mean.csv (expert, layer, matrix, mean_abs_change, n_rows): per expert
    kind (math / language = every other expert), the change per layer summed over matrices and averaged over the
    experts of that kind, normalised to sum 1, and its share in `middle`."""
    sums: dict[str, dict[int, float]] = {}
    for row in csv.DictReader(Path(mean_csv).open()):
        sums.setdefault(row["expert"], {}).setdefault(int(row["layer"]), 0.0)
        sums[row["expert"]][int(row["layer"])] += float(row["mean_abs_change"])
    kinds: dict[str, list[dict[int, float]]] = {}
    for expert, per_layer in sums.items():
        kinds.setdefault("math" if expert == "math" else "language", []).append(per_layer)
    out = {}
    for kind, profiles in kinds.items():
        layers = sorted(profiles[0])
        mean = [sum(p[layer] for p in profiles) / len(profiles) for layer in layers]
        total = sum(mean) or 1.0
        shape = [v / total for v in mean]
        out[kind] = {
            "profile": [round(v, 4) for v in shape],
            "middle_share": round(sum(v for layer, v in zip(layers, shape) if layer in middle), 4),
            "peak_layer": layers[max(range(len(shape)), key=shape.__getitem__)],
        }
    layers = sorted({layer for per_layer in sums.values() for layer in per_layer})
    out["flat_share"] = round(sum(1 for layer in layers if layer in middle) / len(layers), 4)
    if {"math", "language"} <= set(out):  # on opposite sides of a flat profile, as in the paper's Fig. 2
        out["paper_pattern"] = out["math"]["middle_share"] > out["flat_share"] > out["language"]["middle_share"]
    return out
