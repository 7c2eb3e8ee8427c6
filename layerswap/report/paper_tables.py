"""What the tables share: `Builder(Workspace(selection_dir, evals, params), paper)`, the columns of Tables 1 and 2, the
models of each column, each method's best config, and a cell with its 95% interval and item count.

Each table is a module of layerswap/report/builders/ (`build(Builder) -> Table`: its rows, columns and cells);
`Workspace` gives the models of each column and their scores (layerswap/report/workspace.py), `params` is `Params`
(layerswap/report/table_params.py), intervals come from layerswap/report/intervals.py. `layerswap tables`
(layerswap/report/tables.py) builds those the registry lists (layerswap/report/registry.py) and writes them
(layerswap/report/render.py). The figures that restate a table (the Table 1 bars, layerswap/report/charts.py) read
their columns here too.

"Best config" of a merge method (a key of params.best_of: layer_swap, soup, ties, ...; layerswap/merge/registry.py):
per pair (i, j), the config of params.best_of[method] whose merged model scores highest on MGSM in the target
language (ties go to the earlier config in the list); the English and all-languages rows of Table 2 use the same
winning model. Avg/min/max are then over the pairs. Each method listed gets a best-config column in the tables its
declaration names (`Method.tables`): the rivals in registry order, then the layer swap's.
Tables 1, 2, 6 show MGSM in percent with one decimal, as the paper does; Table 5 keeps the paper's units
(fractions with three decimals, FLORES BLEU with one).
"""

from __future__ import annotations

from typing import Any

from layerswap.benchmarks import MATH
from layerswap.contracts import BASE_MODEL_ID
from layerswap.languages import math_notes
from layerswap.merge.params import Method
from layerswap.merge.registry import METHODS, SWAP, best_of_methods
from layerswap.report import intervals
from layerswap.report.evals import pct
from layerswap.report.render import world_title
from layerswap.report.workspace import BestChoice, Stats, Workspace


class Builder:
    def __init__(self, ws: Workspace, paper: dict | None):
        self.ws = ws
        self.p = ws.p
        self.paper = paper or {}
        self.best_cache: dict[tuple[str, str], list[BestChoice]] = {}
        self._aliases = {}
        for code, info in (self.paper.get("languages") or {}).items():
            self._aliases[code] = code
            for alias in (info or {}).get("aliases") or []:
                self._aliases[alias] = code

    # names ---------------------------------------------------------------------------------------------------
    def paper_code(self, lang: str) -> str | None:
        return self._aliases.get(lang)

    def name(self, lang: str) -> str:
        if lang in self.p.language_names:
            return self.p.language_names[lang]
        if lang == "en":
            return "English"
        code = self.paper_code(lang)
        if self.p.world == "paper" and code:
            return self.paper["languages"][code].get("name", lang)
        return lang

    def math_notes(self, langs) -> list[str]:
        """Where a translation of the math benchmark stands in for it in one of `langs` (paper world; a language MGSM
        lacks: AfriMGSM), a note naming it: the tables show its scores in MGSM's place."""
        return math_notes(langs) if self.p.world == "paper" else []

    def title(self, text: str) -> str:
        return world_title(text, self.p.world)

    def best(self, method: str, lang: str) -> list[BestChoice]:
        if (method, lang) not in self.best_cache:
            self.best_cache[(method, lang)] = self.ws.best(method, lang)
        return self.best_cache[(method, lang)]

    # columns of Tables 1 and 2 --------------------------------------------------------------------------------
    T1_EXPERTS = [
        ("base", "base model"),
        ("language_expert", "language expert (top {k} training runs)"),
        ("math_expert", "math expert (top {k} training runs)"),
    ]
    T2_EXPERTS = [
        ("base", "base model"),
        ("language_expert", "{lang} expert (top {k} training runs)"),
        ("math_expert", "math expert (top {k} training runs)"),
        ("joint_sft", "{lang} & math joint SFT (top {k} training runs)"),
    ]

    def best_of_methods(self, table: int) -> list[Method]:
        """The merge methods with a best-config column in Table `table` (layerswap.merge.registry)."""
        return best_of_methods(self.p.best_of, table)

    def merge_columns(self, table: int) -> list[tuple[str, str]]:
        """The rivals' best configs, the default layer swap, the layer swap's best config (if best_of lists it)."""
        cols = [
            (m.best_column, f"{m.label} (best config, {{n}} pairs)")
            for m in self.best_of_methods(table)
            if m.name != SWAP
        ]
        cols.append(("swap_default", f"{METHODS[SWAP].label} (default config, {{n}} pairs)"))
        if self.p.best_of.get(SWAP):
            cols.append((METHODS[SWAP].best_column, f"{METHODS[SWAP].label} (best config, {{n}} pairs)"))
        return cols

    def table_columns(self, table: int) -> list[tuple[str, str]]:
        return (self.T1_EXPERTS if table == 1 else self.T2_EXPERTS) + self.merge_columns(table)

    def best_note(self, table: int, target: str) -> str:
        """'Best config = per pair, the best on <target> MGSM among soup [...] / swap [...]' for the table's methods."""
        among = " / ".join(f"{m.note} {self.p.best_of[m.name]}" for m in self.best_of_methods(table))
        return f"Best config = per pair, the best on {target} MGSM among {among}" if among else ""

    def columns(self, spec: list[tuple[str, str]], **extra: str) -> list[tuple[str, str]]:
        k = self.p.top_k
        return [(key, label.format(k=k, n=k * k, **extra)) for key, label in spec]

    def interval(
        self, models: list[str], langs: list[str], stat: str, bench: str = MATH, scale: float = 100.0
    ) -> tuple[float, float] | None:
        """95% bootstrap interval of a cell (layerswap.report.intervals); None for a corpus metric (no per-item
        scores)."""
        return intervals.cell_interval(
            self.ws.evals.items,
            models,
            langs,
            stat,
            bench=bench,
            seed=self.p.seed,
            draws=self.p.bootstrap_draws,
            scale=scale,
        )

    def count(self, models: list[str], langs: list[str], bench: str = MATH) -> int | None:
        """Items per model and language behind a cell (the smallest, should they differ); None if not recorded."""
        return self.ws.evals.smallest_count(models, bench, langs)

    def fill(
        self,
        cells: dict,
        bounds: dict,
        counts: dict,
        key: tuple,
        value: float,
        models: list[str],
        langs: list[str],
        stat: str,
        bench: str = MATH,
        scale: float = 100.0,
    ) -> None:
        """One numeric cell with its interval and item count."""
        cells[key] = value
        interval = self.interval(models, langs, stat, bench, scale)
        if interval is not None:
            bounds[key] = interval
        n = self.count(models, langs, bench)
        if n is not None:
            counts[key] = n

    def math_stats(self, models: list[str], lang: str) -> Stats:
        return Stats.of([pct(self.ws.math_score(m, lang)) for m in models])

    def column_models(self, col: str, lang: str) -> list[str]:
        ws, p = self.ws, self.p
        if col == "base":
            return [BASE_MODEL_ID]
        if col == "language_expert":
            return ws.experts(lang)
        if col == "math_expert":
            return ws.experts("math")
        if col == "joint_sft":
            return ws.experts(f"joint_{lang}")
        if col == "swap_default":
            return ws.merge_models(p.default_swap, lang)
        return [c.model_id for c in self.best(self.method_of(col), lang)]

    @staticmethod
    def method_of(col: str) -> str:
        """The merge method of a best-config column (`<column>_best`)."""
        return next(name for name, m in METHODS.items() if m.best_column == col)

    # helpers --------------------------------------------------------------------------------------------------
    def paper_value(self, *keys: Any) -> float | None:
        """The paper's number at these keys of paper_results.yaml, or None."""
        node: Any = self.paper
        for key in keys:
            if key is None or not isinstance(node, dict) or key not in node:
                return None
            node = node[key]
        return float(node) if isinstance(node, (int, float)) and not isinstance(node, bool) else None
