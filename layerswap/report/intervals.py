"""95% intervals of the tables' cells: a seeded nonparametric bootstrap over items and over experts / pairs.

A cell of Tables 1, 2, 5, 6, the Table 1 bars and the ablation tables is a statistic over *units* (the models of its
column: the top-k experts, the k x k expert pairs of a merge config, or the base alone); a unit's value is its
accuracy (mean per-item correctness from the evaluation's `<benchmark>.samples.jsonl`), averaged over the cell's
languages where there are several (Table 2 "All langs avg"). Each of `draws` replicates

1. resamples the items of every language with replacement, the same item draw for every unit (all models answer
   the same items, so this keeps their scores paired), and recomputes each unit's value;
2. for an average, also resamples the units with replacement (two-level bootstrap: the spread between experts or
   pairs counts as well as the finite item set); a min or max is taken over all units (the set of pairs is fixed;
   only their scores vary with the items).

The interval is the 2.5th and 97.5th percentile of the replicates. A unit's winning merge config ("best config"
columns) is the one the table chose; it is not chosen again per replicate. Each cell draws from its own stream,
`numpy.random.default_rng([seed, crc32(cell)])` where `cell` names the statistic, benchmark, languages and model ids,
so the same cell gets the same interval in every table and figure, and adding a column changes no other interval.

A cell whose items are all wrong (or all right) for every unit gets a zero-width interval: a bootstrap sees only
the observed items (0 correct of n is still compatible with a rate up to about 3/n, the "rule of three").

Corpus metrics (FLORES BLEU) have no per-item correctness: their cells carry an item count and no interval.
"""

from __future__ import annotations

import zlib

import numpy as np

from layerswap.errors import UserError

LEVEL = 0.95
DEFAULT_DRAWS = 2000
CHUNK = 4_000_000  # item counts held at once (draws x items)
STATS = ("avg", "min", "max")


def bootstrap(
    units: list[dict[str, np.ndarray]], stat: str, *, seed: int, draws: int, name: str, scale: float = 1.0
) -> tuple[float, float]:
    """(lo, hi) of the `stat` over units, each {language: 0/1 per item, in item order}; times `scale`."""
    if stat not in STATS:
        raise ValueError(f"stat must be one of {STATS}, not {stat!r}")
    if not units or any(not u for u in units):
        raise ValueError("bootstrap needs at least one unit with at least one language")
    rng = np.random.default_rng([int(seed), zlib.crc32(name.encode("utf-8"))])
    langs = sorted({lang for unit in units for lang in unit})
    per_unit = np.zeros((draws, len(units)))
    for lang in langs:
        sizes = {len(unit[lang]) for unit in units if lang in unit}
        if len(sizes) != 1 or 0 in sizes:
            raise UserError(
                f"interval of {name}: the models were scored on different or no items in {lang!r} "
                f"({sorted(sizes)} items); a paired bootstrap needs the same items for every model"
            )
        n = sizes.pop()
        cols = [i for i, unit in enumerate(units) if lang in unit]
        scores = np.stack([np.asarray(units[i][lang], dtype=float) for i in cols], axis=1)  # items x units
        chunk = max(1, CHUNK // n)  # bounded memory: a draw is n counts
        for start in range(0, draws, chunk):
            stop = min(draws, start + chunk)
            pick = rng.integers(0, n, size=(stop - start, n)) + n * np.arange(stop - start)[:, None]
            counts = np.bincount(pick.ravel(), minlength=(stop - start) * n).reshape(stop - start, n)  # per item
            per_unit[start:stop, cols] += counts @ scores / n
    per_unit /= np.array([len(unit) for unit in units], dtype=float)
    if stat == "avg":
        if len(units) > 1:
            rows = rng.integers(0, len(units), size=(draws, len(units)))
            replicates = np.take_along_axis(per_unit, rows, axis=1).mean(axis=1)
        else:
            replicates = per_unit[:, 0]
    else:
        replicates = per_unit.min(axis=1) if stat == "min" else per_unit.max(axis=1)
    tail = 100.0 * (1.0 - LEVEL) / 2.0
    lo, hi = np.percentile(replicates, [tail, 100.0 - tail])
    return float(lo) * scale, float(hi) * scale


def cell_interval(
    items, models: list[str], langs: list[str], stat: str, *, bench: str, seed: int, draws: int, scale: float = 100.0
) -> tuple[float, float] | None:
    """The interval of a table cell: `stat` over `models` of their score on `bench`, averaged over `langs`;
    `items(model, bench, lang)` gives the per-item correctness (layerswap.report.evals.Evals.items) or None for a corpus
    metric, which gives None here."""
    units = []
    for model in models:
        unit = {}
        for lang in langs:
            values = items(model, bench, lang)
            if values is None:
                return None
            unit[lang] = values
        units.append(unit)
    return bootstrap(units, stat, seed=seed, draws=draws, scale=scale, name=cell_name(stat, bench, langs, models))


def cell_name(stat: str, bench: str, langs: list[str], models: list[str]) -> str:
    """The name that seeds a cell's stream: the same statistic of the same scores gives the same interval."""
    return f"{stat}|{bench}|{','.join(langs)}|{','.join(models)}"


def separated(a: tuple[float, float], b: tuple[float, float]) -> int:
    """+1 if interval a lies wholly above b, -1 if wholly below, 0 if they overlap."""
    if a[0] > b[1]:
        return 1
    if a[1] < b[0]:
        return -1
    return 0
