"""Recipe inputs are confined to the run's own folders.

A merge recipe names the checkpoint directories it reads. Within the workflow every one of them is a file some job of
the run made: an expert checkpoint, the base, under the results folder or the configured storage (`storage.scratch`,
where experts and merged models live on a cluster), and each is checked against its job's record before it is read
(`layerswap.checkpoints.verify_weights`). A recipe edited to read `../outside_ckpt` would be evaluated on weights no
job recorded; so, where the workflow names its roots (`LAYERSWAP_INPUT_ROOTS`, os.pathsep-separated absolute paths,
set by rules/common.smk for every job), a recipe input outside them is refused in one line naming the recipe, the
input and the switch.

The switch: `LAYERSWAP_ALLOW_OUTSIDE_INPUTS=1` in the environment of the run accepts such an input; the job's log
names it, and `layerswap manifest` records it (`outside_inputs`: path, the recipes that read it, the sha256 of each of
its files), so an audit of the results names the weights they were computed from. Paths are compared after `..` and
`.` are resolved (os.path.abspath), not through symlinks: a link the user placed inside the results folder (e.g.
`results/base` linking a pre-staged hub snapshot) is inside it.
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


def outside_inputs(root: Path) -> dict[str, dict]:
    """{input path: {"recipes": [...], "files": {name: sha256}}} of every recipe (a JSON file in a `merges` folder)
    under the results folder `root` whose inputs lie outside the run's roots (the manifest's `outside_inputs`; empty
    where no roots are set)."""
    import json

    from layerswap.hashcache import sha256
    from layerswap.merge.recipes import input_paths, validate_recipe

    where = roots()
    found: dict[str, dict] = {}
    if where is None or not Path(root).is_dir():
        return found
    for recipe_file in sorted(f for f in Path(root).rglob("*.json") if "merges" in f.relative_to(root).parts):
        try:
            paths = input_paths(validate_recipe(json.loads(recipe_file.read_text(encoding="utf-8")), str(recipe_file)))
        except (UserError, OSError, ValueError):
            continue  # not a recipe the run reads (its own check names it)
        for p in paths:
            if outside(p, where):
                entry = found.setdefault(p, {"recipes": [], "files": {}})
                entry["recipes"].append(str(recipe_file))
    for p, entry in found.items():
        d = Path(p)
        files = sorted(f for f in d.iterdir() if f.is_file()) if d.is_dir() else []
        entry["files"] = {f.name: sha256(f) for f in files}
    return found
