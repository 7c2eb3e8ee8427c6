"""The jobs of the ablations: the planned ablations' files and params, and for expert-set ablations
(layerswap/workflow/expert_sets.py) their extra runs, bases, selections and merge configs. A part of `Spec`
(layerswap/workflow/spec.py; it reads the attributes `Spec.__init__` sets), for rules/ablations.smk.
"""

from __future__ import annotations

from layerswap.config import expert_type
from layerswap.workflow.expert_sets import EXPERT_MERGE_PREFIX
from layerswap.workflow.words import as_json

ABLATION_FILES = ["table.csv", "table.md", "figure.svg", "figure.png"]


class AblationJobs:
    def init_ablations(self, ablations: dict[str, dict]) -> None:
        """Expert-set ablations: their extra runs (never in `runs`, so runs_of and the main selection ignore them;
        run_spec finds a run's params in either), bases, selections and merge configs."""
        self.ablations = ablations
        self.expert_ablations = {n: a for n, a in ablations.items() if "runs" in a}
        self.ablation_runs: dict[str, dict] = {}
        self.ablation_run_base: dict[str, str | None] = {}  # run -> its base directory (None: results/base)
        self.ablation_bases: dict[str, dict] = {}  # "<ablation>/<base>" -> base spec
        self.ablation_merges: dict[str, dict] = {}  # ax_* merge config -> {merge, set, lang_from, task_from, ablation}
        for name, abl in self.expert_ablations.items():
            self.ablation_runs.update(abl["runs"])
            for run, base in abl["run_base"].items():
                self.ablation_run_base[run] = None if base == "main" else self.layout.ablation_base(name, base)
            for base, bspec in abl["bases"].items():
                self.ablation_bases[f"{name}/{base}"] = bspec
            for cfg, m in abl["merges"].items():
                self.ablation_merges[cfg] = {**m, "ablation": name}
        self.ablation_extra = sorted({b for n in ablations for b in self.ablation_extra_benchmarks(n)})
        self.other_base_runs = sorted(r for r, b in self.ablation_run_base.items() if b)  # their own SFT rule

    def ablation_runs_of(self, name: str, set_name: str, expert: str) -> list[str]:
        prefix = f"{EXPERT_MERGE_PREFIX}{name}_{set_name}_"
        return sorted(r for r, p in self.expert_ablations[name]["runs"].items()
                      if r.startswith(prefix) and p["expert"] == expert)

    def ablation_selection_indexes(self, name: str, set_name: str, expert: str) -> list[str]:
        return [self.layout.checkpoint_index(r) for r in self.ablation_runs_of(name, set_name, expert)]

    def ablation_base_evals(self, name: str, set_name: str, expert: str) -> list[str]:
        """The base evaluations an ablation selection's constraints compare with: of the base its runs trained
        from."""
        benchmarks = self.constraint_benchmarks(expert_type(expert))
        run_base = self.expert_ablations[name]["run_base"]
        (base,) = {run_base[r] for r in self.ablation_runs_of(name, set_name, expert)} or {"main"}
        if base == "main":
            return self.eval_files("base", benchmarks)
        return [self.layout.ablation_base_eval(name, base, b) for b in benchmarks]

    def ablation_merge_selection(self, cfg: str, lang: str, which: str) -> str:
        m = self.ablation_merges[cfg]
        expert = lang if which == "lang" else "math"
        if m[f"{which}_from"] == "main":
            return self.layout.selection(expert)
        return self.layout.ablation_selection(m["ablation"], m["set"], expert)

    def ablation_configs(self, name: str) -> list[str]:
        return list(dict.fromkeys(v["config"] for v in self.ablations[name]["variants"] if v["config"]))

    def ablation_extra_benchmarks(self, name: str) -> list[str]:
        """Benchmarks an ablation reports beyond the merge tasks every merge gets (evaluate_ablation_merges)."""
        return [b for b in self.ablations[name]["metrics"] if b not in self.merge_benchmarks]

    def ablation_inputs(self, name: str) -> list[str]:
        files = []
        if name in self.expert_ablations:  # every selection of the ablation's own experts (also those no merge reads)
            files += [self.layout.ablation_selection(name, s, e)
                      for s, es in self.expert_ablations[name]["selections"].items() for e in es]
        for cfg in self.ablation_configs(name):
            for lang in self.langs:
                files += self.merge_eval_outputs(cfg, lang, self.pairs, self.ablations[name]["metrics"])
        return files

    def ablation_results(self, name: str) -> list[str]:
        """Every file the jobs of an ablation write, with the main DAG's files up to the selections: targets of
        `ablation_<name>`, so a deleted one is rebuilt by the next run of that target (as `all` does for the main
        DAG: Spec.results) and what reads it reruns after it."""
        files = self.selection_results()
        if name in self.expert_ablations:  # its own bases, runs, their checkpoint indexes and the bases' evaluations
            abl = self.expert_ablations[name]
            files += [self.layout.base_config(self.layout.ablation_base(name, b)) for b in abl["bases"]]
            files += [f for run in sorted(abl["runs"]) for f in self.run_selection_files(run)]
            for set_name, experts in abl["selections"].items():
                files += [f for e in experts for f in self.ablation_base_evals(name, set_name, e)]
        files += self.recipes(self.ablation_configs(name)) + self.ablation_inputs(name) + self.ablation_outputs(name)
        return list(dict.fromkeys(files))

    def ablation_params(self, name: str) -> str:
        spec, config = self.ablations[name], self.config
        return as_json({
            "name": name, "title": spec["title"], "plan": spec["plan"], "metrics": spec["metrics"],
            "variants": spec["variants"], "languages": self.langs, "top_k": config["selection"]["top_k"],
            "world": config["world"], "language_names": config.get("language_names", {}),
            "seed": config["seed"], "bootstrap_draws": config["analysis"]["bootstrap_draws"],
        })

    def ablation_outputs(self, name: str) -> list[str]:
        return [self.layout.ablation_file(name, f) for f in ABLATION_FILES]

    def ablation_base_spec(self, ablation: str, base: str) -> dict:
        return self.ablation_bases[f"{ablation}/{base}"]
