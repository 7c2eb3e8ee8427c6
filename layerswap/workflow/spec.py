"""What the rules need from a validated config: its parts, each a plain class built here with explicit arguments.

``Spec(config, ablations, ablation_merge_configs, selected_ablations, site)`` is built once at parse time
(rules/common.smk), after the config is validated and the ablations planned, and never changes the config. The
rules reach the part they need:

- `spec.layout`: every results path (layerswap/layout.py);
- `spec.runs`: the expert SFT runs, their params and launch (layerswap/workflow/runs.py);
- `spec.merges`: languages, expert pairs, merge configs, recipes, merged models (layerswap/workflow/merge_jobs.py);
- `spec.evals`: the evaluation jobs (layerswap/workflow/evaluation_jobs.py);
- `spec.merge_groups`: the merge evaluations grouped per language (layerswap/workflow/merge_groups.py);
- `spec.selection`: the top-k selections (layerswap/workflow/selection_jobs.py);
- `spec.data`: the data jobs (layerswap/workflow/data_jobs.py);
- `spec.report`: tables, figures and report pages (layerswap/workflow/report_jobs.py);
- `spec.ablations`: the ablations' jobs (layerswap/workflow/ablation_jobs.py).

rules/common.smk keeps only what needs Snakemake's own objects (`wildcards`, `resources`, `report()`, `workflow`).
Nothing here reads files written by jobs, so the whole DAG is known at dry-run time; no Snakemake import, so the
package's tests build a Spec from a config alone. Params are compared by Snakemake for reruns: every method returning
one keeps it canonical (sorted JSON keys, languages in canonical order), so only a change of meaning reruns a job;
params words and the evaluation shell command are layerswap/workflow/words.py's.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from layerswap.contracts import SOUP_SWAP, SOUPS
from layerswap.layout import Layout, R
from layerswap.scratch import big_root
from layerswap.workflow.ablation_jobs import AblationJobs
from layerswap.workflow.data_jobs import DataJobs
from layerswap.workflow.evaluation_jobs import EvaluationJobs
from layerswap.workflow.merge_groups import MergeGroups
from layerswap.workflow.merge_jobs import MergeJobs
from layerswap.workflow.report_jobs import ReportJobs
from layerswap.workflow.runs import Runs
from layerswap.workflow.selection_jobs import SelectionJobs
from layerswap.workflow.site import Site


def storage_of(config: dict, site: Site | None) -> dict:
    """The storage paths the jobs use: the config's, else the site file's (cluster/site.yaml: hf_home, scratch),
    else none."""
    return {
        **config["storage"],
        **{
            k: getattr(site, k)
            for k in ("hf_home", "scratch")
            if site and not config["storage"].get(k) and getattr(site, k)
        },
    }


class Spec:
    """The rules' view of one validated config (plus the planned ablations). Read-only: nothing here writes to
    `config`, `ablations` or `ablation_merge_configs`."""

    def __init__(
        self,
        config: dict,
        ablations: dict[str, dict] | None = None,
        ablation_merge_configs: dict[str, dict] | None = None,
        selected_ablations: list[str] | None = None,
        site: Site | None = None,
    ):
        self.config = config
        self.site = site
        self.storage = storage_of(config, site)
        # Expert checkpoints and merged models are the big artefacts: under storage.scratch when it is set, in the
        # namespace of this results folder (layerswap/scratch.py: results/scratch.json names it).
        self.layout = Layout(root=R, big=big_root(self.storage.get("scratch"), Path(R), R).rstrip("/"))
        hf_home = self.storage.get("hf_home")  # else the job's environment (HF_HOME)
        self.hf_home_arg = f"--hf-home {shlex.quote(hf_home)}" if hf_home else ""
        ablations = ablations or {}
        self.runs = Runs(config, ablations, self.layout, site)
        self.merges = MergeJobs(config, ablation_merge_configs or {}, self.storage["keep_merged"], self.layout)
        self.evals = EvaluationJobs(config, self.layout, self.runs, self.merges, self.hf_home_arg, hf_home)
        self.selection = SelectionJobs(config, self.layout, self.runs, self.merges, self.evals)
        self.data = DataJobs(config, self.layout, self.runs, self.evals)
        self.report = ReportJobs(config, self.layout, self.runs, self.merges, self.evals)
        read = set(self.report.table_inputs())
        soups = [f for l in self.merges.langs for f in self.evals.merge_eval_outputs(SOUP_SWAP, l, SOUPS)]
        self.merge_groups = MergeGroups(
            config,
            self.layout,
            self.merges,
            self.evals.merge_benchmarks,
            self.evals.single_task_jobs,
            self.report.merge_eval_languages(),
            bool(soups) and all(f in read for f in soups),
        )
        self.ablations = AblationJobs(
            config,
            ablations,
            selected_ablations,
            self.layout,
            self.merges,
            self.evals,
            self.selection,
            self.merge_groups,
        )

    def config_json(self) -> str:
        """The config (defaults filled, keys sorted) as one shell word: config_used and the manifest record it."""
        return shlex.quote(json.dumps(self.config, default=str, sort_keys=True))

    def results(self) -> list[str]:
        """Every file a job of the default DAG declares as output (the manifest's excepted), once each: targets of
        `all`, so a deleted one is rebuilt by the next run (Snakemake >= 7.7 does not revisit the intermediates of
        targets that are present) and what reads it reruns after it; and the manifest's inputs, so it runs last."""
        layout, runs, evals, merges = self.layout, self.runs, self.evals, self.merges
        files = self.data.data_files() + [layout.base_config()]
        files += [layout.checkpoints_record(run) for run in runs.main]
        files += [f for run in runs.main for f in evals.checkpoint_eval_indexes(run)]
        files += [f for e in runs.expert_types() for f in self.selection.indexes(e)]  # single layout: checkpoint_index
        files += merges.recipes(merges.pair_configs) + merges.soup_recipes()
        files += [evals.table2_models_file(lang) for lang in evals.t2_langs]  # what evaluate_table2 evaluates
        files += self.report.table_inputs() + self.report.merge_eval_files(self.report.merge_eval_languages())
        files += self.report.outputs() + merges.merged_models
        return list(dict.fromkeys(files))
