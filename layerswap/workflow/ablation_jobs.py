"""The jobs of the ablations: the planned ablations' files and params, and for expert-set ablations
(layerswap/workflow/expert_sets.py) their bases, selections and merge configs (their extra runs: layerswap/workflow/
runs.py). A part of `Spec` (layerswap/workflow/spec.py), for rules/ablations.smk.
"""

from __future__ import annotations

from layerswap.config import expert_type
from layerswap.layout import Layout
from layerswap.workflow.evaluation_jobs import EvaluationJobs
from layerswap.workflow.expert_sets import EXPERT_MERGE_PREFIX
from layerswap.workflow.merge_groups import MergeGroups
from layerswap.workflow.merge_jobs import MergeJobs
from layerswap.workflow.selection_jobs import SelectionJobs
from layerswap.workflow.words import as_json

ABLATION_FILES = ["table.csv", "table.md", "figure.svg", "figure.png"]


class AblationJobs:
    def __init__(
        self,
        config: dict,
        planned: dict[str, dict],
        selected: list[str] | None,
        layout: Layout,
        merges: MergeJobs,
        evals: EvaluationJobs,
        selection: SelectionJobs,
        merge_groups: MergeGroups,
    ):
        """`planned`: the planned ablations (layerswap/workflow/ablations.py: plan), by name; `selected`: those the
        `ablations` target builds (None: all)."""
        self._config, self._layout, self._merges, self._evals = config, layout, merges, evals
        self._selection = selection
        self._merge_groups = merge_groups
        self.planned = planned
        self.selected = list(planned) if selected is None else list(selected)
        self.expert_sets = {n: a for n, a in planned.items() if "runs" in a}
        self.bases: dict[str, dict] = {}  # "<ablation>/<base>" -> base spec
        self.expert_merges: dict[str, dict] = {}  # ax_* merge config -> {merge, set, lang_from, task_from, ablation}
        for name, abl in self.expert_sets.items():
            for base, bspec in abl["bases"].items():
                self.bases[f"{name}/{base}"] = bspec
            for cfg, m in abl["merges"].items():
                self.expert_merges[cfg] = {**m, "ablation": name}
        self.extra_benchmarks = sorted({b for n in planned for b in self.extra_benchmarks_of(n)})

    def runs_of(self, name: str, set_name: str, expert: str) -> list[str]:
        prefix = f"{EXPERT_MERGE_PREFIX}{name}_{set_name}_"
        return sorted(
            r for r, p in self.expert_sets[name]["runs"].items() if r.startswith(prefix) and p["expert"] == expert
        )

    def selection_indexes(self, name: str, set_name: str, expert: str) -> list[str]:
        return [self._layout.checkpoint_index(r) for r in self.runs_of(name, set_name, expert)]

    def leaders(self, name: str, set_name: str, expert: str) -> list[str]:
        """The index of the constraint evaluations of an ablation selection's leaders (SelectionJobs.leaders)."""
        if not self._selection.leaders(expert):
            return []
        return [self._layout.ablation_leaders_index(name, set_name, expert)]

    def base_evals(self, name: str, set_name: str, expert: str) -> list[str]:
        """The base evaluations an ablation selection's constraints compare with: of the base its runs trained
        from."""
        benchmarks = self._evals.constraint_benchmarks(expert_type(expert))
        run_base = self.expert_sets[name]["run_base"]
        (base,) = {run_base[r] for r in self.runs_of(name, set_name, expert)} or {"main"}
        if base == "main":
            return self._evals.eval_files("base", benchmarks)
        return [self._layout.ablation_base_eval(name, base, b) for b in benchmarks]

    def merge_selection(self, cfg: str, lang: str, which: str) -> str:
        m = self.expert_merges[cfg]
        expert = lang if which == "lang" else "math"
        if m[f"{which}_from"] == "main":
            return self._layout.selection(expert)
        return self._layout.ablation_selection(m["ablation"], m["set"], expert)

    def configs(self, name: str) -> list[str]:
        return list(dict.fromkeys(v["config"] for v in self.planned[name]["variants"] if v["config"]))

    def extra_benchmarks_of(self, name: str) -> list[str]:
        """Benchmarks an ablation reports beyond the merge tasks every merge gets (evaluate_ablation_merges)."""
        return [b for b in self.planned[name]["metrics"] if b not in self._evals.merge_benchmarks]

    def inputs(self, name: str) -> list[str]:
        files = []
        if name in self.expert_sets:  # every selection of the ablation's own experts (also those no merge reads)
            files += [
                self._layout.ablation_selection(name, s, e)
                for s, es in self.expert_sets[name]["selections"].items()
                for e in es
            ]
        for cfg in self.configs(name):
            for lang in self._merges.langs:
                files += self._evals.merge_eval_outputs(cfg, lang, self._merges.pairs, self.planned[name]["metrics"])
        return files

    def results(self, name: str) -> list[str]:
        """Every file the jobs of an ablation write, with the main DAG's files up to the selections: targets of
        `ablation_<name>`, so a deleted one is rebuilt by the next run of that target (as `all` does for the main
        DAG: Spec.results) and what reads it reruns after it."""
        layout = self._layout
        files = self._selection.results()
        if name in self.expert_sets:  # its own bases, runs, their checkpoint indexes and the bases' evaluations
            abl = self.expert_sets[name]
            files += [layout.base_config(layout.ablation_base(name, b)) for b in abl["bases"]]
            files += [f for run in sorted(abl["runs"]) for f in self._selection.run_files(run)]
            for set_name, experts in abl["selections"].items():
                files += [f for e in experts for f in self.base_evals(name, set_name, e)]
                files += [f for e in experts for f in self.leaders(name, set_name, e)]
        files += self._merges.recipes(self.configs(name)) + self.inputs(name) + self.outputs(name)
        files += self._merge_groups.jobs_writing(files)  # a main merge group job writes all its configs' files
        return list(dict.fromkeys(files))

    def params(self, name: str) -> str:
        spec, config = self.planned[name], self._config
        return as_json(
            {
                "name": name,
                "title": spec["title"],
                "plan": spec["plan"],
                "metrics": spec["metrics"],
                "variants": spec["variants"],
                "languages": self._merges.langs,
                "top_k": self._merges.top_k,
                "world": config["world"],
                "language_names": config.get("language_names", {}),
                "seed": config["seed"],
                "bootstrap_draws": config["analysis"]["bootstrap_draws"],
            }
        )

    def outputs(self, name: str) -> list[str]:
        return [self._layout.ablation_file(name, f) for f in ABLATION_FILES]

    def base_spec(self, ablation: str, base: str) -> dict:
        return self.bases[f"{ablation}/{base}"]
