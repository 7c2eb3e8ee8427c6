"""Manifest paths are confined: a manifest travels with a results folder (an auditor receives both), so nothing
it names is deleted, read or hashed unless it lies under its results root or a configured storage root.

`confine(manifest, manifest_path)` checks every path the audit commands act on (the root; `files`, `run_logs`,
`foreign`; each job's `outputs`) before any of them is touched, and refuses the whole manifest with one line naming
the first path that escapes. The results root must be a relative path without `..` (resolved from the working
directory, as the workflow writes it), or the manifest's own folder; every other path must lie under that root or a
storage root (`storage_roots`: the site file's `scratch`, `layerswap.workflow.site`), lexically (no `..` past it)
and once symbolic links are resolved. `Roots.inside` checks one path again where it is used (deleted, hashed).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from layerswap.errors import UserError

#: The manifest fields whose keys are paths, and the job field whose items are.
PATH_FIELDS = ("files", "run_logs", "foreign")


def storage_roots() -> list[Path]:
    """The storage roots the site file names (`scratch`; `$LAYERSWAP_SITE`): the big artefacts may live there."""
    from layerswap.workflow.site import Site

    try:
        site = Site.from_env()
    except UserError:
        return []
    scratch = getattr(site, "scratch", None) if site is not None else None
    return [Path(os.path.expandvars(os.path.expanduser(scratch)))] if scratch else []


@dataclass(frozen=True)
class Roots:
    root: Path  # as the manifest names it
    lexical: tuple[Path, ...]  # absolute, normalised: the root, then the storage roots
    real: tuple[Path, ...]  # the same with symbolic links resolved

    def inside(self, path: str | Path) -> bool:
        """`path` lies under an allowed root, lexically (no `..` past it) and with symbolic links resolved."""
        p = Path(path)
        lexical = _lexical(p)
        real = p.resolve()
        return any(lexical.is_relative_to(r) for r in self.lexical) and any(real.is_relative_to(r) for r in self.real)


def _lexical(p: Path) -> Path:
    return Path(os.path.normpath(p if p.is_absolute() else Path.cwd() / p))


def _root(manifest: dict, manifest_path: Path) -> Path:
    value = manifest.get("root")
    if not isinstance(value, str) or not value:
        raise UserError(f"{manifest_path}: 'root' is not a path: refused (nothing was read, hashed or deleted)")
    root = Path(value)
    home = Path(manifest_path).resolve().parent
    if root.is_absolute():
        if root.resolve() != home:
            raise UserError(
                f"{manifest_path}: its results root {value} is an absolute path other than the manifest's own "
                f"folder: refused (nothing was read, hashed or deleted); a manifest names a relative root "
                "(`results`)"
            )
        return root
    if ".." in root.parts:
        raise UserError(
            f"{manifest_path}: its results root {value} climbs out of the working directory: refused (nothing "
            "was read, hashed or deleted); a manifest names a relative root (`results`)"
        )
    return root


def confine(manifest: dict, manifest_path: Path, extra: list[Path] | None = None) -> Roots:
    """The manifest's roots, once every path it names is confined to them (else one-line UserError)."""
    root = _root(manifest, manifest_path)
    storage = storage_roots() if extra is None else extra
    every = [root, *storage]
    roots = Roots(root, tuple(_lexical(r) for r in every), tuple(r.resolve() for r in every))
    named: list[tuple[str, object]] = []
    for field in PATH_FIELDS:
        entries = manifest.get(field) or {}
        if not isinstance(entries, dict):
            raise UserError(f"{manifest_path}: '{field}' is not a mapping of paths: refused")
        named += [(field, p) for p in entries]
    jobs = manifest.get("jobs") or {}
    if not isinstance(jobs, dict):
        raise UserError(f"{manifest_path}: 'jobs' is not a mapping: refused")
    for jid, job in jobs.items():
        outputs = job.get("outputs") if isinstance(job, dict) else None
        named += [(f"jobs.{jid}.outputs", p) for p in outputs or []]
    bad = [(f, p) for f, p in named if not isinstance(p, str) or not p or not roots.inside(p)]
    if bad:
        field, path = bad[0]
        where = ", ".join(str(r) for r in [root, *storage])
        more = f" ({len(bad)} such paths)" if len(bad) > 1 else ""
        raise UserError(
            f"{manifest_path}: {field} names {path!r}, outside its results root and storage roots ({where}){more}: "
            "refused (nothing was read, hashed or deleted); the manifest is damaged or not this folder's"
        )
    return roots
