"""How the rules spell what they pass to jobs: a config value as one params word (`as_json`), a hub base's revision
argument, languages in canonical order, and the shell command of the evaluation rules. The paths the rules name are
the results layout's (layerswap/layout.py), put into shell commands at parse time (a shell command reads
only its rule's own values, snakemake --lint).
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from layerswap.layout import Layout


def as_json(value: Any) -> str:
    """A config value as one shell-quoted JSON word (params compare it for reruns)."""
    return shlex.quote(json.dumps(value, sort_keys=True))


def revision_arg(base: dict) -> str:
    """`--revision <rev>` of a hub base (`base` or an ablation's second base), or nothing."""
    return f"--revision {shlex.quote(base['revision'])}" if base.get("revision") else ""


def canonical_languages(langs) -> list[str]:
    """Evaluation languages in a canonical order (English, then by code): the order of a mapping or list in the
    config means nothing to an evaluation, so it must not reach params (only stale outputs rerun)."""
    return sorted(set(langs), key=lambda l: (l != "en", l))


def evaluate_shell(command: str, models: str, out_dir: str = Layout().evals(), tail: str = "") -> str:
    """The shell command of an evaluation rule: `layerswap <command>` (evaluate, evaluate-merges) on `models` (its
    --model words), writing under `out_dir`, with the evaluation params every such rule has
    (EvaluationJobs.evaluation_params) and `tail` (more arguments) last."""
    return (
        f"layerswap {command} --data-dir {Layout().eval_data_dir()} --benchmarks-json {{params.benchmarks}} "
        f"{models} --out-dir {out_dir} --batch-size {{params.batch_size}} --seed {{params.seed}} "
        f"--task-set {{params.task_set}} --backend {{params.backend}} --threads {{threads}} {{params.hf_home}}"
        f"{tail} > {{log}} 2>&1"
    )
