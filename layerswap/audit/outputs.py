"""What the results layout names as a job's output: the only files an audit command deletes (issue 49).

A manifest is a file anyone can hand over with a results folder, so it never decides what may be deleted. A path is
removable by `layerswap audit --remove-foreign` or `--repair --run` only when it is strictly below the results root
the command runs on (`layerswap.audit.confine`) and the layout (`layerswap.layout.Layout`) spells it as the
output of some job: a data file, a checkpoint's record or log, a selection, a recipe, an evaluation file or index, a
table, a figure, `config_used.*`, a file of an ablation, or a file inside an export folder. An export folder (a
directory an export writes whole, which a repair removes before its job reruns) is one the layout names: the base, a
checkpoint `experts/<run>/<name>`, an ablation's base, a merged model; never the results root, never any folder that
merely holds a `layerswap_meta.json`. The root itself, the manifest, the scratch marker, `logs/` and `store/` are no
job's output.

The patterns are spelled by calling the layout's own methods with placeholders, so they cannot drift from the paths
the rules write. Kept here, not in the layout module, whose code every job's fingerprint includes.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache

from layerswap.layout import Layout

ONE, DEEP = "<one>", "<deep>"  # placeholders: one path segment; one or more segments
RUN_LOG = "log.jsonl"  # a run's training log beside its checkpoints (layerswap.audit.files.RUN_LOGS)


def _export_patterns(layout: Layout) -> list[str]:
    return [
        layout.base(),
        layout.checkpoint(ONE, ONE),
        layout.ablation_base(ONE, ONE),
        layout.merged_model(ONE, ONE, ONE),
    ]


def _file_patterns(layout: Layout) -> list[str]:
    evaluation = layout.eval_file(DEEP, ONE)  # <evals>/<model id>/<benchmark>.json, indexes, Table 2's lists
    return [
        layout.raw(ONE),
        layout.eval_set(ONE),
        layout.sft_mix(ONE, ONE),
        f"{layout.base()}.work/{DEEP}",  # the base's pretraining folder: its log and Trainer state
        layout.checkpoints_record(ONE),
        f"{layout.run_dir(ONE)}/{RUN_LOG}",
        layout.selection(ONE),
        layout.recipe(ONE, ONE, ONE),
        evaluation,
        evaluation.removesuffix(".json") + ".samples.jsonl",
        layout.table(ONE, ONE),
        layout.figure(ONE, ONE),
        layout.config_used(ONE),
        layout.ablation_file(ONE, DEEP),
        *(f"{e}/{DEEP}" for e in _export_patterns(layout)),
    ]


def _regex(pattern: str) -> re.Pattern:
    return re.compile(re.escape(pattern).replace(re.escape(DEEP), ".+").replace(re.escape(ONE), "[^/]+"))


@lru_cache(maxsize=8)
def _compiled(layout: Layout) -> tuple[tuple[re.Pattern, ...], tuple[re.Pattern, ...]]:
    return tuple(map(_regex, _file_patterns(layout))), tuple(map(_regex, _export_patterns(layout)))


def _norm(path) -> str:
    return os.path.normpath(str(path))


def is_output(path, layout: Layout) -> bool:
    """`path` (as the manifest spells it: relative to the working directory, or under the storage namespace) is a
    file the layout names as some job's output."""
    p = _norm(path)
    return any(r.fullmatch(p) for r in _compiled(layout)[0])


def export_of(path, layout: Layout) -> str | None:
    """The export folder the layout names that holds `path` (the nearest), or None."""
    exports = _compiled(layout)[1]
    d = os.path.dirname(_norm(path))
    while d and d != os.path.dirname(d):
        if any(r.fullmatch(d) for r in exports):
            return d
        d = os.path.dirname(d)
    return None
