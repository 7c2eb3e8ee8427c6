"""The report jobs of a config: the paper's tables, the figures, their report pages and captions, the files each
reads and their params. A part of `Spec` (layerswap/workflow/spec.py), for rules/analysis.smk.
"""

from __future__ import annotations

from layerswap.benchmarks import MATH
from layerswap.config import expert_type
from layerswap.layout import Layout
from layerswap.merge.registry import SWAP
from layerswap.report.registry import (
    FIGURES,
    INPUTS,
    PAPER_VS_OURS_CAPTION,
    PAPER_VS_OURS_FORMATS,
    TABLES,
    MergeReads,
    paper_vs_ours,
)
from layerswap.workflow.evaluation_jobs import EvaluationJobs
from layerswap.workflow.merge_jobs import MergeJobs
from layerswap.workflow.runs import Runs
from layerswap.workflow.words import as_json


class ReportJobs:
    def __init__(self, config: dict, layout: Layout, runs: Runs, merges: MergeJobs, evals: EvaluationJobs):
        self._config, self._layout, self._runs, self._merges, self._evals = config, layout, runs, merges, evals
        # the tables (layerswap/report/registry.py): the paper's, then ours (the best-config tables)
        self.tables = [layout.table(t.name, ext) for t in TABLES if t.paper for ext in t.formats]
        self.best_configs = [layout.table(t.name, ext) for t in TABLES if not t.paper for ext in t.formats]
        self.paper_world = config["world"] != "toy"
        # report entries: file stem -> (subcategory, caption)
        pages = {t.name: (f"Table {t.number}", t.caption) for t in TABLES}
        if self.paper_world:
            pages |= {paper_vs_ours(t.name): (f"Table {t.number}", PAPER_VS_OURS_CAPTION) for t in TABLES if t.paper}
        self.table_pages = pages
        self.figures = {f.name: (f.subcategory, f.caption) for f in FIGURES}  # report entries: stem -> (sub, caption)
        self.report_files = self.tables + [layout.table(t, "html") for t in pages]
        self.report_files += [layout.figure(f.name, e) for f in FIGURES for e in ("svg", "png", "csv")]
        self.report_files += [layout.config_used("yaml"), layout.config_used("html")]
        # the layer_swap configs of the swap-grid figure (lang_layers ones are listed in its CSV, not plotted)
        self.swap_configs = {n: c for n, c in config["merges"]["configs"].items() if c["method"] == SWAP}

    def outputs(self) -> list[str]:
        """Every file the report jobs write: tables, best-config tables, the summary, the paper-vs-ours tables (paper
        world), report pages, figures, config_used."""
        files = self.tables + self.best_configs + [self._layout.table("summary", "md")]
        if self.paper_world:
            files += [self._layout.table(s, e) for s in self._paper_vs_ours() for e in PAPER_VS_OURS_FORMATS]
        return files + self.report_files

    def _paper_vs_ours(self) -> list[str]:
        return [paper_vs_ours(t.name) for t in TABLES if t.paper]

    def table_outputs(self) -> list[tuple[str, str]]:
        """(stem, format) of each file `layerswap tables` writes but the summary, in the rule's order: the tables that
        share formats together (the paper's, ours, the paper-vs-ours ones in the paper world), each group's CSVs (the
        report's entries) first."""
        by_formats: dict[tuple[str, ...], list[str]] = {}
        for t in TABLES:
            by_formats.setdefault(t.formats, []).append(t.name)
        groups = list(by_formats.items())
        if self.paper_world:
            groups.append((PAPER_VS_OURS_FORMATS, self._paper_vs_ours()))
        files = []
        for formats, stems in groups:
            files += [(s, "csv") for s in stems if "csv" in formats]
            files += [(s, e) for s in stems for e in formats if e != "csv"]
        return files

    def table_inputs(self) -> list[str]:
        """The files the tables read: those of each kind of input (layerswap/report/registry.py) a table reads."""
        read = {kind for t in TABLES for kind in t.kinds}
        return [f for kind in INPUTS if kind in read for f in self._input_files(kind)]

    def _input_files(self, kind: str) -> list[str]:
        layout, evals, merges = self._layout, self._evals, self._merges
        experts = self._runs.expert_types()
        if kind == "selections":
            return [layout.selection(e) for e in experts]
        if kind == "checkpoint_evals":
            return [i for e in experts for i in evals.checkpoint_indexes(e)]
        if kind == "base_evals":
            return evals.eval_files("base", evals.benchmarks)
        if kind == "merge_evals":
            return self.merge_eval_files(self._merges_read([t.merges for t in TABLES if t.merges]))
        if kind == "soup_swap_evals":
            return [f for lang in merges.langs for f in evals.merge_eval_outputs(merges.soup_swap, lang, merges.soups)]
        if kind == "table2_evals":
            return [evals.table2_index(lang) for lang in evals.t2_langs]
        raise ValueError(f"unknown kind of table input {kind!r}; known: {', '.join(INPUTS)}")

    def merge_eval_languages(self) -> dict[str, list[str]]:
        """{merge config: the languages whose evaluations of it a table or figure reads} (the union of their
        `MergeReads`, layerswap/report/registry.py), configs nothing reads left out: what the merge evaluation jobs
        evaluate."""
        return self._merges_read([e.merges for e in (*TABLES, *FIGURES) if e.merges])

    def _merges_read(self, reads: list[MergeReads]) -> dict[str, list[str]]:
        """The union of these declarations: {merge config: its languages}, in the config's order."""
        merges = self._merges
        wanted: dict[str, set[str]] = {}
        for r in reads:
            for cfg, langs in r.wants(self._config["merges"], merges.langs, self._evals.t2).items():
                wanted.setdefault(cfg, set()).update(langs)
        return {c: [l for l in merges.langs if l in wanted[c]] for c in merges.pair_configs if wanted.get(c)}

    def merge_eval_files(self, configs: dict[str, list[str]], benchmarks: list[str] | None = None) -> list[str]:
        """The evaluation files of every pair of these merge configs in their languages: of each merge benchmark, or
        of `benchmarks`."""
        evals, pairs = self._evals, self._merges.pairs
        return [
            f for c, langs in configs.items() for l in langs for f in evals.merge_eval_outputs(c, l, pairs, benchmarks)
        ]

    def table_params(self, table2: bool = True) -> str:
        """The tables' params; table2=False: without the Table 2 language and Table 5's benchmarks (the Table 1
        figure shows neither)."""
        config = self._config
        m = config["merges"]
        params = {
            "languages": self._merges.langs,
            "mgsm_languages": config["mgsm_languages"],
            "top_k": self._merges.top_k,
            "best_of": m["best_of"],
            "default_swap": m["default_swap"],
            "world": config["world"],
            "language_names": config.get("language_names", {}),
            "seed": config["seed"],
            "bootstrap_draws": config["analysis"]["bootstrap_draws"],
        }
        if table2:  # Table 5 shows what the checkpoints were evaluated on
            params |= {
                "table2_language": config["analysis"]["table2_language"],
                "benchmarks": sorted(self._evals.benchmarks),
            }
        return as_json(params)

    def heatmap_experts(self) -> list[str]:
        return ["math"] + self._merges.langs

    def heatmap_expert_args(self) -> str:
        return " ".join(f"--expert-from-selection {e}={self._layout.selection(e)}" for e in self.heatmap_experts())

    def heatmap_thresholds(self) -> str:
        thresholds = self._config["analysis"]["heatmap_thresholds"]
        return as_json({e: thresholds[expert_type(e)] for e in self.heatmap_experts()})

    def swap_grid_params(self) -> str:
        config = self._config
        return as_json(
            {
                "configs": self.swap_configs,
                "languages": self._merges.langs,
                "top_k": self._merges.top_k,
                "default_swap": config["merges"]["default_swap"],
                "world": config["world"],
                "language_names": config.get("language_names", {}),
            }
        )

    def figure_merge_files(self, name: str) -> list[str]:
        """The MGSM evaluation files of the merges figure `name` declares it reads."""
        (reads,) = [f.merges for f in FIGURES if f.name == name]
        return self.merge_eval_files(self._merges_read([reads]), [MATH])

    def swap_grid_inputs(self) -> list[str]:
        return self.figure_merge_files("swap_grid")

    def table1_bars_inputs(self) -> list[str]:
        """Exactly what Table 1 reads: selections and checkpoint indexes of math + each language, base MGSM, and the
        MGSM of the merges it declares (every pair of the default swap and the best-of configs of the methods Table
        1 shows)."""
        evals = self._evals
        experts = ["math"] + self._merges.langs
        files = [self._layout.selection(e) for e in experts]
        files += [i for e in experts for i in evals.checkpoint_indexes(e, [MATH])]
        files += evals.eval_files("base", [MATH])
        return files + self.figure_merge_files("table1_bars")
