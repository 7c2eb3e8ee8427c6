"""`layerswap audit`: a results folder against a manifest (its own run's, or another run's).

First one `hardware:` line per difference between the manifest's machine and this one (informational, never drift);
then the disk is re-hashed and every drift is one line: `changed:`, `missing:` or `extra:` (a file the manifest does
not list); exit status 1 on drift. Files the manifest names as not from its config (`foreign`: left by
another config, `layerswap.audit.provenance`) are named by `foreign:` lines, not drift; `--remove-foreign` deletes
them. Run logs (training `log.jsonl`: wall-clock timings) are listed by the manifest but
compared only with `--logs`, so an identical run audited against another run's manifest passes. `--trace` traces a
table cell (`layerswap.audit.trace`); `--repair` prints, and with `--run` runs, the command that rebuilds what
drifted (`layerswap.audit.repair`). Before any of this, every path the manifest names is confined to the results
root the command runs on (`--root`, default `results`; never the manifest's word for it: `layerswap.audit.confine`):
a manifest naming anything outside, or another root, is refused in one line, nothing read, hashed or deleted; and
nothing is deleted that the results layout does not name as a job's output (`layerswap.audit.outputs`).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

from layerswap.audit.confine import Roots, confine
from layerswap.audit.files import is_run_log, walk
from layerswap.errors import UserError
from layerswap.fingerprint import file_sha256
from layerswap.layout import Layout
from layerswap.machine import hardware, hardware_diff


def load_manifest(path: Path) -> dict:
    from layerswap.audit.kept import kept_copy_hint

    try:
        data = json.loads(Path(path).read_text())
    except OSError as err:
        raise UserError(f"{path}: cannot read manifest ({err.strerror}){kept_copy_hint(path)}") from None
    except ValueError as err:
        raise UserError(f"{path}: not a JSON manifest ({err}){kept_copy_hint(path)}") from None
    if not isinstance(data, dict) or not isinstance(data.get("files"), dict) or "root" not in data:
        raise UserError(f"{path}: not a layerswap manifest (no 'files'/'root'){kept_copy_hint(path)}")
    return data


def recorded(manifest: dict, logs: bool) -> dict[str, dict]:
    """The files an audit compares: the reproducible results, and the run logs with `logs` (a manifest of format 1
    lists its logs among the files: they are told apart by name)."""
    files = {**manifest["files"], **(manifest.get("run_logs") or {})}
    return {p: e for p, e in files.items() if logs or not is_run_log(p)}


@dataclass(frozen=True)
class Drift:
    kind: str  # changed | missing | extra
    path: str
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.kind}: {self.path}" + (f" ({self.detail})" if self.detail else "")


def drift(manifest: dict, manifest_path: Path, root: Path, logs: bool = False) -> list[Drift]:
    """Every drift between the manifest and the disk under the results root `root`, sorted by path (extra files
    last)."""
    root = Path(root)
    out = []
    files = recorded(manifest, logs)
    for p, entry in sorted(files.items()):
        path = Path(p)
        if not path.is_file():
            out.append(Drift("missing", p))
            continue
        size = path.stat().st_size
        digest = file_sha256(path)
        if digest != entry.get("sha256") or size != entry.get("size"):
            out.append(
                Drift(
                    "changed",
                    p,
                    f"sha256 {str(entry.get('sha256'))[:12]}… -> {digest[:12]}…, size {entry.get('size')} -> {size}",
                )
            )
    foreign = manifest.get("foreign") or {}
    if root.is_dir():
        for path in walk(root, {Path(manifest_path)}):
            if str(path) not in files and str(path) not in foreign and (logs or not is_run_log(path)):
                out.append(Drift("extra", str(path)))
    else:
        out.append(Drift("missing", f"{root}/", "results root"))
    return out


def foreign_files(manifest: dict) -> list[str]:
    """The files under the results root that the manifest names as not from its config (`foreign`: no job of its
    config makes them, e.g. a renamed merge config's recipes and evaluations) and that are still there."""
    return sorted(p for p in manifest.get("foreign") or {} if Path(p).is_file())


def remove_foreign(manifest: dict, roots: Roots) -> tuple[list[str], list[tuple[str, str]]]:
    """Delete the foreign files that still have the bytes the manifest recorded and that the results layout names as
    a job's output, then the directories that held only them; never a path outside `roots` or the root itself
    (`layerswap.audit.confine`: checked again here, where it is deleted). Returns (the paths removed, (path, why)
    of those left)."""
    removed, left = [], []
    for p in foreign_files(manifest):
        if not roots.inside(p) or Path(p).is_symlink():
            raise UserError(f"foreign: {p}: outside the results root {roots.root}/: refused (nothing deleted)")
        entry = manifest["foreign"][p]
        same = Path(p).stat().st_size == entry.get("size") and file_sha256(Path(p)) == entry.get("sha256")
        why = roots.removable(p) if same else "changed since the manifest named it"
        (left.append((p, why)) if why else removed.append(p))
    tops = list(roots.real)
    for p in removed:
        Path(p).unlink()
        d = Path(p).parent
        while d.resolve() not in tops and any(d.resolve().is_relative_to(t) for t in tops) and not any(d.iterdir()):
            d.rmdir()
            d = d.parent
    return removed, left


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--manifest", default=Layout().manifest())
    parser.add_argument(
        "--root",
        default=Layout().root,
        help="the results folder to audit (the manifest must name it as its root; nothing outside it, or its "
        "namespace on the site's scratch, is read or deleted)",
    )
    parser.add_argument(
        "--logs",
        action="store_true",
        help="compare the run logs too (training log.jsonl: wall-clock timings differ between runs)",
    )
    parser.add_argument(
        "--trace",
        nargs=3,
        metavar=("TABLE", "ROW", "COLUMN"),
        help="trace one table cell back to its evaluation files, recipes and checkpoints",
    )
    parser.add_argument("--json", action="store_true", help="print the trace as JSON")
    parser.add_argument(
        "--repair",
        action="store_true",
        help="print the command that rebuilds what changed or is missing (docs/REPAIR.md)",
    )
    parser.add_argument("--run", action="store_true", help="with --repair: run that command")
    parser.add_argument(
        "--remove-foreign",
        action="store_true",
        help="delete the files the manifest names as not from its config (`foreign:` lines)",
    )
    parser.add_argument(
        "--reevaluate-store",
        action="store_true",
        help="evaluate again, without the store, every model whose results a job copied from the evaluation store, "
        "and name each result that differs (layerswap.audit.store_check)",
    )
    parser.add_argument(
        "snakemake_args",
        nargs="*",
        metavar="-- SNAKEMAKE_ARGS",
        help="with --repair: the run's own Snakemake options (e.g. -- --configfile my.yaml --cores 4)",
    )


def run(args: argparse.Namespace) -> None:
    if args.run and not args.repair:
        raise UserError("--run goes with --repair")
    if args.snakemake_args and not args.repair:
        raise UserError(f"unexpected arguments {' '.join(args.snakemake_args)} (Snakemake options go with --repair)")
    manifest = load_manifest(Path(args.manifest))
    roots = confine(manifest, Path(args.manifest), args.root)  # before any path it names is read or deleted
    if args.trace:
        from layerswap.audit.trace import print_trace, trace

        t = trace(manifest, roots.root, *args.trace)
        print(json.dumps(t, indent=1)) if args.json else print_trace(t)
        return
    machine = manifest.get("hardware")
    for line in hardware_diff(machine, hardware()) if isinstance(machine, dict) else []:
        print(line)
    found = drift(manifest, Path(args.manifest), roots.root, args.logs)
    for d in found:
        print(d)
    foreign, left = foreign_files(manifest), []
    if args.remove_foreign:
        foreign, left = remove_foreign(manifest, roots)
    for p in foreign:
        print(
            f"foreign: {p} (not from this config: no job of it makes this file"
            + ("; removed)" if args.remove_foreign else ")")
        )
    for p, why in left:
        print(f"foreign: {p} (not from this config; {why}: left, remove it by hand)")
    from layerswap.audit.store_check import check_store

    store_problems, store_notes, again = check_store(manifest, roots.root, args.reevaluate_store)
    if again:
        from layerswap.audit.reevaluate import reevaluate_entry

        for entry, doc, paths in again:
            store_problems += reevaluate_entry(entry, doc, paths)
    for line in store_notes + store_problems:
        print(line)
    if args.repair:
        from layerswap.audit.repair import repair

        if repair(manifest, found, args.snakemake_args, args.run, roots):
            return
    if found:
        raise UserError(f"{len(found)} drift(s) against {args.manifest}")
    if store_problems:
        raise UserError(
            f"{len(store_problems)} result(s) the evaluation store fed cannot be vouched for (store: above)"
        )
    logs = len({**manifest["files"], **(manifest.get("run_logs") or {})}) - len(recorded(manifest, args.logs))
    print(
        f"audit: {len(recorded(manifest, args.logs))} files match {args.manifest}"
        + (f" ({logs} run logs not compared: --logs compares them)" if logs else "")
        + (
            f"; {len(foreign)} files not from this config removed"
            if foreign and args.remove_foreign
            else f"; {len(foreign)} files not from this config (foreign: above; never read by its jobs; "
            "`layerswap audit --remove-foreign` removes them)"
            if foreign
            else ""
        )
    )
