"""The paper's Tables 1, 2, 5 and 6 (and the best-config tables) as `Table`s, from selection and evaluation files.

`Builder(Workspace(selection_dir, evals, params), paper)` defines each table (`Workspace`: the models of each column
and their scores, layerswap/report/workspace.py; `params`: `Params`, layerswap/report/table_params.py): its rows,
columns and cells, each number with its 95% interval and item count (layerswap/report/intervals.py); `layerswap
tables` (layerswap/report/tables.py) builds those the registry lists (layerswap/report/registry.py) and writes them
(layerswap/report/render.py). The figures that restate a table (the Table 1 bars, layerswap/report/charts.py) build
it here too.

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

from layerswap.benchmarks import BENCHMARKS
from layerswap.contracts import BASE_MODEL_ID, SOUP_SWAP, SOUPS, merge_model_id
from layerswap.merge.params import Method
from layerswap.merge.registry import METHODS, SWAP, best_of_methods
from layerswap.report import intervals
from layerswap.report.evals import MISSING, SKIPPED, mean, pct
from layerswap.report.render import PAPER_TASK_NOTES, TOY_LABEL, Table, fmt_pct
from layerswap.report.workspace import BestChoice, Stats, Workspace, below_base, selection_rule


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

    def title(self, text: str) -> str:
        return f"{text} — {TOY_LABEL}" if self.p.world == "toy" else text

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
        self, models: list[str], langs: list[str], stat: str, bench: str = "mgsm", scale: float = 100.0
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

    def count(self, models: list[str], langs: list[str], bench: str = "mgsm") -> int | None:
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
        bench: str = "mgsm",
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

    def mgsm_stats(self, models: list[str], lang: str) -> Stats:
        return Stats.of([pct(self.ws.mgsm(m, lang)) for m in models])

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

    def table1(self) -> Table:
        cols = self.columns(self.table_columns(1))
        rows, cells, paper, bounds, counts = [], {}, {}, {}, {}
        for lang in self.p.languages:
            models = {col: self.column_models(col, lang) for col, _ in cols}
            stats = {col: self.mgsm_stats(models[col], lang) for col, _ in cols}
            for stat in ("avg", "max"):
                key = (lang, stat)
                rows.append((key, (f"{self.name(lang)} {stat}",)))
                for col, _ in cols:
                    self.fill(cells, bounds, counts, (key, col), getattr(stats[col], stat), models[col], [lang], stat)
                    ref = self._paper_get("table1", self.paper_code(lang), stat, col)
                    if ref is not None:
                        paper[(key, col)] = ref
        k = self.p.top_k
        notes = [
            f"MGSM exact match (%) in the target language. Experts: the top {k} selected checkpoints; merges: the "
            f"{k}x{k} pairs (language expert rank x math expert rank).",
            f"Default layer-swap config: {self.p.default_swap}."
            + (
                f" {best}; winners in table1_best_configs.csv."
                if (best := self.best_note(1, "target-language"))
                else ""
            ),
        ]
        return Table(
            "table1",
            self.title("Table 1: MGSM results of layer swapping"),
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

    # Table 2 --------------------------------------------------------------------------------------------------
    def table2(self) -> Table:
        lang = self.p.table2_language
        cols = self.columns(self.table_columns(2), lang=self.name(lang))
        name = self.name(lang)
        row_spec = [
            ("min", f"{name} min"),
            ("avg", f"{name} avg"),
            ("max", f"{name} max"),
            ("en_avg", "English avg"),
            ("all_avg", "All langs avg"),
        ]
        paper_lang = (self.paper.get("table2") or {}).get("language")
        use_paper = paper_lang is not None and self.paper_code(lang) == paper_lang
        cells, paper, bounds, counts = {}, {}, {}, {}
        for col, _ in cols:
            models = self.column_models(col, lang)
            target = self.mgsm_stats(models, lang)
            values = {
                "min": target.min,
                "avg": target.avg,
                "max": target.max,
                "en_avg": mean([pct(self.ws.mgsm(m, "en")) for m in models]),
                "all_avg": mean([pct(self.ws.mgsm_all(m)) for m in models]),
            }
            langs = {"en_avg": ["en"], "all_avg": list(self.p.mgsm_languages)}
            for row, _ in row_spec:
                self.fill(
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
                    ref = self._paper_get("table2", "rows", row, col)
                    if ref is not None:
                        paper[(row, col)] = ref
        rows = [(key, (label,)) for key, label in row_spec]
        notes = [f"MGSM exact match (%). 'All langs avg' = mean over {', '.join(self.p.mgsm_languages)}."]
        if best := self.best_note(2, name):
            notes.append(
                f"{best}; the English and all-languages rows use the same winning models; winners in "
                "table2_best_configs.csv."
            )
        notes.append(f"Joint SFT: the top {self.p.top_k} checkpoints of selection joint_{lang}.")
        if self.p.world == "paper" and paper:
            notes.append(
                "The paper's 'All langs avg' (beside ours) is over the languages of its MGSM evaluation "
                "('all 9 languages', Table 2 caption)."
            )
        return Table(
            "table2",
            self.title(f"Table 2: MGSM results of layer swapping for {name}"),
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

    # Table 5 --------------------------------------------------------------------------------------------------
    def table5_rows(self) -> list[tuple[str, str]]:
        """(benchmark, key) per row, benchmarks in registry order, each in its row shape (layerswap/benchmarks.py):
        en, the target languages, the avg over mgsm_languages, or both directions per target language."""
        targets = [l for l in self.p.languages if l != "en"]
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

    def table5(self) -> Table:
        ws = self.ws
        cols = [("base", "base model"), ("math", "math experts")]
        cols += [(lang, f"{self.name(lang)} experts") for lang in self.p.languages]
        models = {"base": [BASE_MODEL_ID], "math": ws.experts("math")}
        models.update({lang: ws.experts(lang) for lang in self.p.languages})
        cells, paper, rows, bounds, counts = {}, {}, [], {}, {}
        for bench, key in self.table5_rows():
            if bench not in self.p.benchmarks:
                continue
            row = (bench, key)
            for col, _ in cols:
                if key == "avg":
                    per_model = []
                    for m in models[col]:
                        vals = [ws.evals.maybe_score(m, bench, l) for l in self.p.mgsm_languages]
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
                    langs = list(self.p.mgsm_languages) if key == "avg" else [key]
                    self.fill(
                        cells, bounds, counts, (row, col), mean(per_model), models[col], langs, "avg", bench, scale=1.0
                    )
                ref = self._paper_table5(bench, key, col)
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
                label = f"{len(self.p.mgsm_languages)}-lang avg"
            elif "-" in key:
                src, tgt = key.split("-", 1)
                label = f"{self.name(src)} → {self.name(tgt)}"
            else:
                label = self.name(key)
            rows.append((row, (BENCHMARKS[bench].label, label)))
        notes = [
            f"Each expert column is the average over the top {self.p.top_k} selected checkpoints of that expert type.",
            "Accuracy / exact match / pass@1 as fractions, FLORES as BLEU (0-100); 'skipped' = benchmark not run "
            "(see the evaluation file's 'skipped' reason); 'n/a' = no score for that language in the file.",
            f"'{len(self.p.mgsm_languages)}-lang avg' = mean over {', '.join(self.p.mgsm_languages)}.",
            f"Selection (section 3.1): math experts {selection_rule(ws.selection_dir, 'math')}; language experts "
            f"(each in its language) {selection_rule(ws.selection_dir, self.p.languages[0])}.",
        ]
        for expert in ["math", *self.p.languages]:
            below = below_base(ws.selection_dir, expert, self.p.top_k)
            if below:
                notes.append(
                    f"Below the base model on a selection constraint ({self.name(expert)} experts: too few "
                    f"checkpoints pass, so the best of the others by score are taken; selection.on_no_pass: best): "
                    + "; ".join(below)
                    + "."
                )

        if self.p.world == "paper":
            notes.append(
                "The paper's MGSM avg (beside ours) is its 10-language average (English, German, French, "
                "Chinese, Russian, Spanish, Japanese, Bengali, Swahili, Telugu)."
            )
            notes += PAPER_TASK_NOTES

        def fmt(row: Any, value: float) -> str:
            return f"{value:.1f}" if BENCHMARKS[row[0]].unit == "bleu" else f"{value:.3f}"

        return Table(
            "table5",
            self.title("Table 5: results of each set of experts"),
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

    def _paper_table5(self, bench: str, key: str, col: str) -> float | None:
        if key == "avg":
            pkey = "avg"
        elif "-" in key:
            src, tgt = key.split("-", 1)
            a, b = self.paper_code(src), self.paper_code(tgt)
            pkey = f"{a}-{b}" if a and b else None
        else:
            pkey = self.paper_code(key)
        pcol = col if col in ("base", "math") else self.paper_code(col)
        if pkey is None or pcol is None:
            return None
        return self._paper_get("table5", bench, pkey, pcol)

    # Table 6 --------------------------------------------------------------------------------------------------
    def table6(self) -> Table:
        k = self.p.top_k
        cols = [
            ("soup_pairwise", f"model soup, pairwise (best config, avg of {k * k} pairs)"),
            ("swap_pairwise", f"layer swap, pairwise (default config, avg of {k * k} pairs)"),
            ("swap_langsoup", "layer swap, language soup w/ math soup (1 version)"),
            ("swap_multisoup", "layer swap, multilingual soup w/ math soup (1 version)"),
        ]
        soup = METHODS["soup"]
        if not self.p.best_of.get(soup.name):  # no soup configs to pick the best from: no pairwise soup column
            cols = cols[1:]
        cells, paper, rows, bounds, counts = {}, {}, [], {}, {}
        for lang in self.p.languages:
            models = {
                "soup_pairwise": self.column_models(soup.best_column, lang) if self.p.best_of.get(soup.name) else [],
                "swap_pairwise": self.column_models("swap_default", lang),
                **{f"swap_{m}": [merge_model_id(SOUP_SWAP, lang, m)] for m in SOUPS},
            }
            rows.append((lang, (self.name(lang),)))
            for col, _ in cols:
                self.fill(
                    cells,
                    bounds,
                    counts,
                    (lang, col),
                    self.mgsm_stats(models[col], lang).avg,
                    models[col],
                    [lang],
                    "avg",
                )
                ref = self._paper_get("table6", self.paper_code(lang), col)
                if ref is not None:
                    paper[(lang, col)] = ref
        notes = [
            "MGSM exact match (%) in the target language. Language soup: uniform soup of the language's top "
            f"{k} experts; multilingual soup: uniform soup of all language experts; each swapped with the math soup.",
        ]
        return Table(
            "table6",
            self.title("Table 6: layer swapping combined with model souping"),
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

    # helpers --------------------------------------------------------------------------------------------------
    def _paper_get(self, *keys: Any) -> float | None:
        node: Any = self.paper
        for key in keys:
            if key is None or not isinstance(node, dict) or key not in node:
                return None
            node = node[key]
        return float(node) if isinstance(node, (int, float)) and not isinstance(node, bool) else None

    def best_configs(self, table: int, langs: list[str], name: str) -> Table:
        """Each pair's winning config of every method with a best-config column in Table `table`."""
        rows, cells = [], {}
        cols = [("config", "winning config"), ("score", "MGSM target (%)"), ("candidates", "candidates (%)")]
        for lang in langs:
            for method in self.best_of_methods(table):
                for choice in self.best(method.name, lang):
                    key = (lang, method.name, choice.pair)
                    rows.append((key, (lang, method.label, choice.pair)))
                    cells[(key, "config")] = choice.config
                    cells[(key, "score")] = pct(choice.score)
                    cells[(key, "candidates")] = "; ".join(f"{c}={pct(v):.1f}" for c, v in choice.candidates.items())
        return Table(
            name,
            self.title(f"Table {table}: best config per pair"),
            ["language", "method", "pair"],
            rows,
            cols,
            cells,
            fmt_pct,
            ["pair l<i>m<j>: language expert rank i, math expert rank j."],
        )
