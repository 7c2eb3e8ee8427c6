"""The top-k selection jobs of a config (rules/select.smk: select): per expert type, the checkpoint evaluations
`layerswap select` reads, the base's evaluations its constraints compare with, its params; and the files the
selections are built from. A part of `Spec` (layerswap/workflow/spec.py); which benchmarks and languages selection
reads, and so which checkpoint evaluations it waits for, is the evaluation jobs' (EvaluationJobs.selection_benchmarks).
"""

from __future__ import annotations

from layerswap.config import expert_type
from layerswap.workflow.evaluation_jobs import EvaluationJobs
from layerswap.workflow.layout import Layout
from layerswap.workflow.merge_jobs import MergeJobs
from layerswap.workflow.runs import Runs
from layerswap.workflow.words import as_json


class SelectionJobs:
    def __init__(self, config: dict, layout: Layout, runs: Runs, merges: MergeJobs, evals: EvaluationJobs):
        self._config, self._layout, self._runs, self._merges, self._evals = config, layout, runs, merges, evals

    def of_run(self, run: str) -> str:
        """The selection file that names which of a run's checkpoints are selected (Table 5 evaluates those)."""
        return self._layout.selection(self._runs.spec(run)["expert"])

    def indexes(self, expert: str) -> list[str]:
        """The index files `select` reads: per run, the checkpoint evaluations of the selection benchmarks only."""
        return [self._layout.checkpoint_index(run) for run in self._runs.of(expert)]

    def base_evals(self, expert: str) -> list[str]:
        """The base's evaluations that the selection constraints of an expert type compare the candidates with."""
        return self._evals.eval_files("base", self._evals.constraint_benchmarks(expert_type(expert)))

    def params(self, expert: str) -> str:
        """--params-json of `layerswap select` (layerswap/select.py: Params)."""
        kind = expert_type(expert)
        lang = None if kind == "math" else expert.removeprefix("joint_")
        sel = self._config["selection"]
        return as_json(
            {
                "kind": kind,
                "lang": lang,
                "weights": sel["weights"][kind],
                "constraints": sel["constraints"].get(kind, {}),
                "top_k": sel["top_k"],
                "max_per_run": sel["max_per_run"],
                "mgsm_languages": self._config["mgsm_languages"],
            }
        )

    def results(self) -> list[str]:
        """The selections and the files they are built from, the data aside: base, SFT mixes, the experts' records,
        the checkpoint evaluations `select` reads and the base's evaluations its constraints compare with (what the
        ablations' merges read of the main DAG: AblationJobs.results), of the experts merges read."""
        layout = self._layout
        experts = [e for e in self._runs.expert_types() if e == "math" or e in self._merges.langs]  # no joint experts
        files = [layout.base_config()]
        files += [layout.sft_mix(e, x) for e in experts for x in ("jsonl", "manifest.json")]
        for e in experts:
            files += [f for run in self._runs.of(e) for f in self.run_files(run)]
            files += self.base_evals(e) + [layout.selection(e)]
        return files

    def run_files(self, run: str) -> list[str]:
        """A run's checkpoint record and the indexes of the checkpoint evaluations `select` reads (single layout:
        one per benchmark, and the index.json made of them)."""
        before = [self._layout.checkpoint_index(run, b) for b in self._evals.selection_benchmarks(run)]  # not Table 5's
        return [
            self._layout.checkpoints_record(run),
            self._layout.checkpoint_index(run),
            *(before if self._evals.single_task_jobs else []),
        ]
