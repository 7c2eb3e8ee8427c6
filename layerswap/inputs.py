"""Recipe inputs are confined to the run's own folders.

A merge recipe names the checkpoint directories it reads. Within the workflow every one of them is a file some job of
the run made: an expert checkpoint, the base, under the results folder or the configured storage (`storage.scratch`,
where experts and merged models live on a cluster), and each is checked against its job's record before it is read
(`layerswap.checkpoints.verify_weights`). A recipe edited to read `../outside_ckpt` would be evaluated on weights no
job recorded; so, where the workflow names its roots (`LAYERSWAP_INPUT_ROOTS`, os.pathsep-separated absolute paths,
set by rules/common.smk for every job), a recipe input outside them is refused in one line naming the recipe, the
input and the switch.

The switch: `LAYERSWAP_ALLOW_OUTSIDE_INPUTS=1` in the environment of the run accepts such an input; the job's log
names it. `layerswap manifest` records every such input (`outside_inputs`, layerswap.audit.store_check: its path,
the recipes that read it, the sha256 of each of its files), so an audit of the results names the weights they were
computed from. Paths are compared after `..` and `.` are resolved (os.path.abspath), not through symlinks: a link the
user placed inside the results folder (e.g. `results/base` linking a pre-staged hub snapshot) is inside it.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from layerswap.errors import UserError

ROOTS_ENV = "LAYERSWAP_INPUT_ROOTS"
ALLOW_ENV = "LAYERSWAP_ALLOW_OUTSIDE_INPUTS"

log = logging.getLogger("layerswap.inputs")


def roots_value(*roots: str) -> str:
    """The value of LAYERSWAP_INPUT_ROOTS for these folders (absolute, deduplicated)."""
    return os.pathsep.join(dict.fromkeys(os.path.abspath(r) for r in roots if r))


def roots() -> list[str] | None:
    value = os.environ.get(ROOTS_ENV, "")
    return [r for r in value.split(os.pathsep) if r] or None


def allowed() -> bool:
    return os.environ.get(ALLOW_ENV, "") not in ("", "0")


def outside(path: str | Path, where: list[str]) -> bool:
    p = os.path.abspath(path)
    return not any(p == r or p.startswith(r.rstrip(os.sep) + os.sep) for r in where)


def check_recipe_inputs(recipe_file: str | Path, paths: list[str]) -> list[str]:
    """The inputs of a recipe that lie outside the run's roots (empty where no roots are set). Refused with one
    UserError unless the switch is on; then each is logged."""
    where = roots()
    if where is None:
        return []
    found = [p for p in paths if outside(p, where)]
    if found and not allowed():
        raise UserError(
            f"{recipe_file}: input {found[0]} lies outside the results folder and the configured storage "
            f"({', '.join(where)}): a recipe reads only checkpoints this run's jobs made and recorded; point it at "
            f"one of them, or set {ALLOW_ENV}=1 to use it anyway (the manifest then records it with its sha256)"
        )
    for p in found:
        log.warning(
            "inputs: %s reads %s, outside the run's folders (%s=1); the manifest records it", recipe_file, p, ALLOW_ENV
        )
    return found
