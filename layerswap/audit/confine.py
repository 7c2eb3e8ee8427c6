"""Manifest paths are confined: a manifest travels with a results folder (an auditor receives both), so nothing
it names is deleted, read or hashed unless it lies under the results root the command runs on or this folder's
namespace on the configured storage.

The results root is the command's (`layerswap audit --root`, default `results`), never the manifest's word for it
(issue 49): it must be a folder that is neither the working directory nor above it, and a manifest whose `root`
names another folder (`.`, `results/evil`) is refused whole. `confine(manifest, manifest_path, root)` then checks
every path the audit commands act on (`files`, `run_logs`, `foreign`; each job's `outputs`) before any of them is
touched, and refuses the whole manifest with one line naming the first path that escapes. Every path must lie under
the root, or under the folder's namespace on the site file's `scratch` (`<scratch>/<id>`,
`layerswap.scratch`), lexically (no `..` past it) and once symbolic links are resolved (a link inside
results/ to elsewhere is outside). `Roots.inside` checks one path again where it is used; `Roots.removable` is what
a command may delete: a file or export folder strictly below the root that the layout names as a job's output
(`layerswap.audit.outputs`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from layerswap.audit.outputs import export_of, is_output
from layerswap.errors import UserError
from layerswap.layout import Layout

#: The manifest fields whose keys are paths, and the job field whose items are.
PATH_FIELDS = ("files", "run_logs", "foreign")


def storage_roots(root: Path) -> list[Path]:
    """The namespace of the results folder `root` on the storage the site file names (`scratch`, `$LAYERSWAP_SITE`;
    `<scratch>/<id>` with the id of `root/scratch.json`): its big artefacts may live there. None without one."""
    from layerswap.scratch import big_root
    from layerswap.workflow.site import Site

    try:
        site = Site.from_env()
        scratch = getattr(site, "scratch", None) if site is not None else None
        if not scratch:
            return []
        return [Path(big_root(os.path.expandvars(os.path.expanduser(scratch)), Path(root), str(root)))]
    except UserError:
        return []


@dataclass(frozen=True)
class Roots:
    root: Path  # the command's results root, as given (relative to the working directory)
    lexical: tuple[Path, ...]  # absolute, normalised: the root, then the storage roots
    real: tuple[Path, ...]  # the same with symbolic links resolved
    big: Path | None = None  # where the layout keeps experts and merged models (a storage namespace), else the root

    @property
    def layout(self) -> Layout:
        root = os.path.normpath(self.root)
        return Layout(root, os.path.normpath(self.big) if self.big is not None else root)

    def inside(self, path: str | Path) -> bool:
        """`path` lies under an allowed root, lexically (no `..` past it) and with symbolic links resolved."""
        p = Path(path)
        lexical = _lexical(p)
        real = p.resolve()
        return any(lexical.is_relative_to(r) for r in self.lexical) and any(real.is_relative_to(r) for r in self.real)

    def removable(self, path: str | Path, folder: bool = False) -> str | None:
        """Why a command may not delete `path` (a file, or with `folder` an export folder), or None where it may: it
        lies strictly below an allowed root, is no symbolic link, and the layout names it as a job's output (an export
        folder the layout names)."""
        p = Path(path)
        if not self.inside(p) or p.is_symlink() or _lexical(p) in self.lexical or p.resolve() in self.real:
            return f"outside the results root {self.root}/ or a symbolic link"
        if folder and export_of(os.path.join(p, "-"), self.layout) != os.path.normpath(p):
            return "not an export folder the results layout names (the base, a checkpoint, a merged model)"
        if not folder and not is_output(p, self.layout):
            return "not a file the results layout names as a job's output"
        return None


def _lexical(p: Path) -> Path:
    return Path(os.path.normpath(p if p.is_absolute() else Path.cwd() / p))


def results_root(root: str | Path) -> Path:
    """The results root a command runs on, checked: an existing folder that is neither the working directory nor
    a folder above it, whether named so or reached through a symbolic link (one line otherwise)."""
    root = Path(root)
    if not root.is_dir():
        raise UserError(f"--root {root}: not a directory (the results folder this command works on)")
    here = Path.cwd().resolve()
    if here.is_relative_to(root.resolve()) or here.is_relative_to(_lexical(root)):
        raise UserError(
            f"--root {root}: the working directory or a folder above it, not a results folder: refused (nothing was "
            "read, hashed or deleted); a results root is a folder below it (`results`)"
        )
    return root


def _check_root(manifest: dict, manifest_path: Path, root: Path) -> None:
    value = manifest.get("root")
    if not isinstance(value, str) or not value:
        raise UserError(f"{manifest_path}: 'root' is not a path: refused (nothing was read, hashed or deleted)")
    if os.path.normpath(value) != os.path.normpath(root):
        raise UserError(
            f"{manifest_path}: its results root {value!r} is not the results folder this command works on "
            f"({root}): refused (nothing was read, hashed or deleted); a manifest names its folder as the run "
            "wrote it (`results`); audit another folder with --root"
        )


def confine(manifest: dict, manifest_path: Path, root: Path | str = Layout().root, extra=None) -> Roots:
    """The roots of the command's results folder `root`, once the manifest agrees it is its folder and every path
    it names is confined to them (else one-line UserError). `extra`: the storage roots (default: the site file's
    namespace of this folder)."""
    root = results_root(root)
    _check_root(manifest, manifest_path, root)
    storage = storage_roots(root) if extra is None else list(extra)
    every = [root, *storage]
    roots = Roots(root, tuple(_lexical(r) for r in every), tuple(r.resolve() for r in every), (storage or [None])[0])
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
