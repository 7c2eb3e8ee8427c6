"""Merge output directories: the marker `layerswap merge` writes into each, and which `--out` it may replace.

A merge never deletes what it did not write. `--out DIR` is refused, with one line and nothing changed on disk, when
DIR is the file system root, the home directory, the working directory or a folder above it; when DIR is, holds or
lies inside an input of this merge (an expert, the base, a nested recipe's inputs) or the recipe file; when DIR is
not empty and is not a previous merge output (no marker, or files the marker does not list); and when DIR is a
previous merge output and `--force` is not given. The marker (`MARKER`, a hidden JSON file) lists the files the
merge wrote and the recipe hash; model loaders never read it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable

from layerswap.contracts import refuse_unsafe_target
from layerswap.errors import UserError

MARKER = ".layerswap-merge.json"
WRITER = "layerswap merge"


def marker(recipe_hash: str, files: Iterable[str]) -> dict:
    """The marker's content: who wrote the directory, from which recipe, and every file it wrote."""
    return {"written_by": WRITER, "recipe_hash": recipe_hash, "files": sorted(files)}


def _relation(out: Path, other: Path) -> str | None:
    if out == other:
        return "is"
    if other in out.parents:
        return "is inside"
    if out in other.parents:
        return "contains"
    return None


def check_target(out_dir: str | Path, inputs: Iterable[str], force: bool = False) -> None:
    """Refuse (UserError, one line) an `--out` the merge must not replace; see the module docstring."""
    out = Path(os.path.abspath(out_dir))
    refuse_unsafe_target(out, f"--out {out_dir}")
    if out.is_symlink():
        raise UserError(f"--out {out_dir} is a symbolic link; name a directory itself (nothing was changed)")
    real = Path(os.path.realpath(out))
    for ref in inputs:
        relation = _relation(real, Path(os.path.realpath(ref)))
        if relation is not None:
            what = (
                "is an input of this merge" + (f" ({ref})" if str(ref) != str(out_dir) else "")
                if relation == "is"
                else f"{relation} {ref}, an input of this merge"
            )
            raise UserError(
                f"--out {out_dir} {what}; a merge never writes over or into its inputs: name another "
                "directory (nothing was changed)"
            )
    if not out.exists():
        return
    if not out.is_dir():
        raise UserError(f"--out {out_dir} exists and is not a directory (nothing was changed)")
    entries = sorted(p.name for p in out.iterdir())
    if not entries:
        return
    recipe_hash, written = _previous_merge(out, out_dir)
    foreign = [name for name in entries if name != MARKER and (name not in written or not _plain_file(out / name))]
    if foreign:
        more = f" (and {len(foreign) - 1} more)" if len(foreign) > 1 else ""
        raise UserError(
            f"--out {out_dir} holds {foreign[0]}{more}, which `{WRITER}` did not write: move it away or "
            "name another directory (nothing was changed)"
        )
    if not force:
        raise UserError(
            f"--out {out_dir} already holds a merge (recipe {recipe_hash}); add --force to replace "
            "it (nothing was changed)"
        )


def _plain_file(path: Path) -> bool:
    return path.is_file() and not path.is_symlink()


def _previous_merge(out: Path, shown: str | Path) -> tuple[str, set[str]]:
    """(recipe hash, files written) from the marker of a previous merge output, or a UserError: not one of ours."""
    path = out / MARKER
    if not _plain_file(path):
        raise UserError(
            f"--out {shown} is not empty and is not a merge output of `{WRITER}` (no {MARKER}): name a "
            "new or empty directory (nothing was changed)"
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        ok = data.get("written_by") == WRITER and all(isinstance(f, str) for f in data["files"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        ok = False
    if not ok:
        raise UserError(f"{path}: not a marker of `{WRITER}`; name a new or empty directory (nothing was changed)")
    return str(data.get("recipe_hash")), set(data["files"])
