"""The top-k selection jobs of a config (rules/select.smk: select): per expert type, the checkpoint evaluations
`layerswap select` reads, the base's evaluations its constraints compare with, its params; and the files the
selections are built from. A part of `Spec` (layerswap/workflow/spec.py); which benchmarks and languages selection
reads, and so which checkpoint evaluations it waits for, is the evaluation jobs' (EvaluationJobs.selection_benchmarks:
every checkpoint on primary_benchmarks, the leaders alone on leader_benchmarks).
"""

from __future__ import annotations

from layerswap.config import expert_type
from layerswap.layout import Layout
from layerswap.workflow.evaluation_jobs import EvaluationJobs
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

    def leaders(self, expert: str) -> list[str]:
        """The index of the constraint evaluations of an expert type's leaders that `select` also reads (none where
        every checkpoint is evaluated on the constraints: selection.constraint_evaluation `all`, or no constraint
        benchmark apart from the weights')."""
        return self._evals.leaders_index(expert)

    def leader_experts(self) -> list[str]:
        """The expert types with an evaluate_checkpoint_leaders job."""
        return [e for e in self._runs.expert_types() if self.leaders(e)]

    def base_evals(self, expert: str) -> list[str]:
        """The base's evaluations that the selection constraints of an expert type compare the candidates with."""
        return self._evals.eval_files("base", self._evals.constraint_benchmarks(expert_type(expert)))

    def params(self, expert: str) -> str:
        """--params-json of `layerswap select` (layerswap/select.py: Params); `on_no_pass` only where there are
        constraints (without, it means nothing: the params stay those of a config without the key)."""
        return as_json(self._params(expert, on_no_pass=True))

    def _params(self, expert: str, on_no_pass: bool) -> dict:
        kind = expert_type(expert)
        sel = self._config["selection"]
        constraints = sel["constraints"].get(kind, {})
        params = {
            "kind": kind,
            "lang": None if kind == "math" else expert.removeprefix("joint_"),
            "weights": sel["weights"][kind],
            "constraints": constraints,
            "top_k": self._merges.top_k,
            "max_per_run": sel["max_per_run"],
            "mgsm_languages": self._config["mgsm_languages"],
        }
        return params | ({"on_no_pass": sel["on_no_pass"]} if constraints and on_no_pass else {})

    # evaluate_checkpoint_leaders (and its ablation copy): what the runs of an expert type give it
    def leaders_params(self, expert: str) -> str:
        """--params-json of `layerswap evaluate-leaders`: the selection's, less on_no_pass (the walk evaluates the
        same candidates either way: a changed choice reruns the selection, not these evaluations)."""
        return as_json(self._params(expert, on_no_pass=False))

    def leaders_models(self, runs: list[str]) -> str:
        """The --model words of a leaders job: every checkpoint of the runs (the candidates)."""
        return " ".join(self._evals.checkpoint_model_args(run) for run in runs)

    def leaders_benchmarks(self, runs: list[str]) -> str:
        """--benchmarks-json of a leaders job: the leader benchmarks in the languages selection reads (the same for
        every run of an expert type)."""
        run = runs[0]
        benchmarks = self._evals.leader_benchmarks(expert_type(self._runs.spec(run)["expert"]))
        return self._evals.checkpoint_eval_rule_params(run, benchmarks)

    def leaders_data(self, runs: list[str]) -> list[str]:
        """The data files a leaders job reads, and the checkpoint records of its candidates."""
        run = runs[0]
        benchmarks = self._evals.leader_benchmarks(expert_type(self._runs.spec(run)["expert"]))
        return self._evals.checkpoint_eval_data(run, benchmarks) + [self._layout.checkpoints_record(r) for r in runs]

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
            files += self.base_evals(e) + self.leaders(e) + [layout.selection(e)]
        return files

    def run_files(self, run: str) -> list[str]:
        """A run's checkpoint record and the indexes of the checkpoint evaluations `select` reads (single layout:
        one per benchmark, and the index.json made of them)."""
        before = [self._layout.checkpoint_index(run, b) for b in self._evals.primary_benchmarks(run)]  # not Table 5's
        return [
            self._layout.checkpoints_record(run),
            self._layout.checkpoint_index(run),
            *(before if self._evals.single_task_jobs else []),
        ]
