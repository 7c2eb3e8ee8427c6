"""Merge evaluation groups (`evaluation.merge_configs_per_job`): the merge evaluations the tables and figures read,
one job per group of a language's merge configs instead of one per (config, language). A part of `Spec`
(layerswap/workflow/spec.py), for rules/evaluate.smk and the evaluation plan (layerswap/workflow/eval_plan.py).

Why: every evaluation job pays its own start (imports, the model built on the GPU, the first generation's warm-up)
and reads its experts from disk; a language's merges share the same six experts. A group pays these once for all its
configs. The grain of what reruns stays exact where it counts: a group job reruns when any of its configs' recipes
changes, and the evaluation store (layerswap/evaluation/store.py) feeds every model whose result it keeps, so only
the changed config's merges are evaluated and the others' files are written again with the same bytes. A group job
cut by its time limit or preempted resumes from the store: it loses at most the model it was evaluating.

Groups: per language, the configs whose evaluations in that language an output reads (`ReportJobs.
merge_eval_languages`), in sorted order, then the soup-then-swap recipes (counted as one config) where Table 6 reads
them; cut into the fewest groups of at most `merge_configs_per_job` configs, of sizes as equal as can be (so no job
is much longer than the others); with `evaluation.tasks_per_job: single`, one group per merge benchmark as well.
Each group is a rule of its own without wildcards, `evaluate_merge_group_<lang>_<n>[_<benchmark>]` (Snakemake
prefers it to the per-(config, language) rules for the same files). `merge_configs_per_job: 1` (the default): no
groups, the rules `evaluate_merges` and `evaluate_soup_then_swap` evaluate one config and language per job.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from layerswap.contracts import SOUP_SWAP, SOUPS, merge_model_id
from layerswap.layout import Layout

if TYPE_CHECKING:  # cost and the preview import this module's names: nothing heavy at import
    from layerswap.workflow.merge_jobs import MergeJobs

#: the prefix of the group rules' names (resources and the evaluation plan count them as merge evaluations)
RULE_PREFIX = "evaluate_merge_group_"
#: the name the plan, `layerswap cost` and `cost --resources` count every group rule's jobs under
FAMILY = "evaluate_merge_group"


def family(rule: str) -> str:
    """`rule`, or `FAMILY` for a merge group's rule (each group is a rule of its own: counted together)."""
    return FAMILY if rule.startswith(RULE_PREFIX) else rule


@dataclass(frozen=True)
class MergeGroup:
    """One merge evaluation job: `members` (merge config, its model members: expert pairs or the soup-then-swap
    soups) in language `lang`, on `benchmarks`."""

    name: str
    lang: str
    members: tuple[tuple[str, tuple[str, ...]], ...]
    benchmarks: tuple[str, ...]

    @property
    def rule(self) -> str:
        return RULE_PREFIX + self.name

    @property
    def models(self) -> int:
        return sum(len(ms) for _, ms in self.members)

    @property
    def configs(self) -> list[str]:
        return [cfg for cfg, _ in self.members]


def chunks(items: list, most: int) -> list[list]:
    """`items` in order, cut into the fewest runs of at most `most`, their lengths differing by at most one."""
    if not items:
        return []
    n = math.ceil(len(items) / most)
    size, extra = divmod(len(items), n)
    out, at = [], 0
    for i in range(n):
        step = size + (1 if i < extra else 0)
        out.append(items[at : at + step])
        at += step
    return out


class MergeGroups:
    def __init__(
        self,
        config: dict,
        layout: Layout,
        merges: MergeJobs,
        merge_benchmarks: list[str],
        single_task_jobs: bool,
        read: dict[str, list[str]],
        soup_swap_read: bool,
    ):
        """`read`: {merge config: the languages whose evaluations of it an output reads}; `soup_swap_read`: an output
        reads the soup-then-swap evaluations (of every language)."""
        self._layout = layout
        self.per_job = int(config["evaluation"].get("merge_configs_per_job", 1))
        self.groups: list[MergeGroup] = []
        if self.per_job <= 1:
            return
        pairs = tuple(merges.pairs)
        for lang in merges.langs:
            members = [(cfg, pairs) for cfg in sorted(read) if lang in read[cfg]]
            if soup_swap_read:
                members.append((SOUP_SWAP, tuple(SOUPS)))
            for n, part in enumerate(chunks(members, self.per_job), start=1):
                if single_task_jobs:
                    self.groups += [MergeGroup(f"{lang}_{n}_{b}", lang, tuple(part), (b,)) for b in merge_benchmarks]
                else:
                    self.groups.append(MergeGroup(f"{lang}_{n}", lang, tuple(part), tuple(merge_benchmarks)))

    def recipes(self, group: MergeGroup) -> list[str]:
        return [self._layout.recipe(cfg, group.lang, m) for cfg, ms in group.members for m in ms]

    def outputs(self, group: MergeGroup) -> list[str]:
        return [
            self._layout.merge_eval(cfg, group.lang, m, b)
            for cfg, ms in group.members
            for m in ms
            for b in group.benchmarks
        ]

    def jobs_writing(self, files: list[str]) -> list[str]:
        """Every file the group jobs that write one of `files` write or read: their evaluations and recipes. A target
        list holding one of a group's evaluations (an ablation's, of a main merge config) holds them all, so what the
        job it runs writes is rebuilt by that target too."""
        wanted = set(files)
        out: list[str] = []
        for group in self.groups:
            written = self.outputs(group)
            if wanted.intersection(written):
                out += self.recipes(group) + written
        return out

    def model_args(self, group: MergeGroup) -> str:
        """The --model words of the group's job: `merge/<cfg>/<lang>/<member>=<recipe>`."""
        return " ".join(
            f"--model {merge_model_id(cfg, group.lang, m)}={self._layout.recipe(cfg, group.lang, m)}"
            for cfg, ms in group.members
            for m in ms
        )

    def log(self, group: MergeGroup) -> str:
        return self._layout.log("evaluate", f"merge_group_{group.name}")

    def of_rule(self, rule: str) -> MergeGroup | None:
        """The group whose rule is `rule` (None: not a group rule)."""
        return next((g for g in self.groups if g.rule == rule), None)
