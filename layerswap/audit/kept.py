"""The manifest's kept copy: no result outlives its record (issue 49).

`results/manifest.json` is what vouches for the results' bytes before every run (`layerswap.audit.provenance`). A
copy of it is kept beside Snakemake's records, `.snakemake/layerswap/manifest.previous.json` (`previous_manifest`):
written by the check before every run (the manifest as the run started, which the manifest job compares with) and
by the manifest job after it writes a new one. So a folder with results never passes for a clean slate when its
manifest is deleted, truncated or damaged:

- the check before a run puts the kept copy back (`recover`) and checks the results against it, so a result edited
  by hand still stops the run naming it;
- with no copy kept, where a run finished here before (Snakemake records the manifest job), the run stops with one
  line naming the manifest and the two ways on (a copy put back, or every result rebuilt with `--forceall`);
- where no run ever finished (the first run was interrupted), Snakemake's own records are all there is: the run
  goes on as before.

A run that fails after Snakemake removed the manifest to rerun its job (the manifest job refused to record a changed
result, or failed) has the manifest it started with put back (`put_back`, Snakemake's `onerror`), so the folder is
left as auditable as the run found it: `layerswap audit` still compares every result with what was vouched for.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from layerswap.errors import UserError

#: Where the copy is kept, relative to Snakemake's metadata folder: `.snakemake/layerswap/manifest.previous.json`.
PREVIOUS = Path("..") / "layerswap" / "manifest.previous.json"
SHOWN = 3  # files named in a one-line message


def previous_manifest(meta_dir: Path) -> Path:
    return Path(os.path.normpath(Path(meta_dir) / PREVIOUS))


def read_json_manifest(path: Path) -> dict:
    """The manifest at `path`, or {} where it is missing, unreadable or not a manifest (no `files` mapping)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) and isinstance(data.get("files"), dict) else {}


def keep_copy(source: Path, dest: Path) -> None:
    """Copy `source` to `dest` whole or not at all, with its modification time (a temporary name of this process in
    `dest`'s folder, renamed: two Snakemake processes, a dry run beside a run, never share one)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}-", suffix=".tmp")
    os.close(fd)
    try:
        shutil.copy2(source, tmp)
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _state(manifest: Path) -> str:
    return "missing" if not manifest.exists() else "unreadable (damaged, or not a manifest)"


def recover(
    manifest: Path, meta_dir: Path, outputs: list[str], incomplete: bool, finished: bool, rebuild_all: str | None
) -> tuple[dict, list[str]]:
    """(the manifest the results are checked against, lines to print) before a run (see the module's docstring):
    `manifest` itself when readable; else, where the config's `outputs` exist, the kept copy, put back (unless
    Snakemake marked the manifest `incomplete`: it reruns its job), or one-line UserError where a run `finished` here
    (Snakemake records the manifest job) and no copy is kept, naming `rebuild_all` (the command that rebuilds every
    result; None: this run does, nothing to stop)."""
    vouching = read_json_manifest(manifest)
    if vouching:
        return vouching, []
    results = [o for o in outputs if o != str(manifest) and Path(o).exists()]
    if not results:
        return {}, []  # nothing to vouch for: a clean slate
    kept, state = previous_manifest(meta_dir), _state(manifest)
    copy = read_json_manifest(kept)
    if copy:
        if incomplete:
            return copy, [f"provenance: {manifest} is {state}; the results are checked against its kept copy {kept}"]
        keep_copy(kept, manifest)
        return copy, [
            f"provenance: {manifest} was {state}; put back from its copy {kept} (the manifest of the last run), "
            "which the results are checked against"
        ]
    if rebuild_all is None or not finished:
        return {}, []  # this run rebuilds everything, or no run finished here (the first was interrupted)
    shown = ", ".join(results[:SHOWN]) + (f" and {len(results) - SHOWN} more" if len(results) > SHOWN else "")
    raise UserError(
        f"{manifest} is {state}, though a run finished here (.snakemake/metadata records its job), and no copy of it "
        f"is kept ({kept}): nothing vouches for the bytes of the {len(results)} result(s) here ({shown}); put "
        f"a copy of it back (`layerswap audit --manifest COPY` checks the results against one first), or rebuild "
        f"every result: `{rebuild_all}`"
    )


def put_back(manifest: str | Path, meta_dir: str | Path) -> None:
    """After a failed run (Snakemake's `onerror`): where `manifest` is missing or unreadable, put back the kept copy
    (the manifest the run started with), with one line saying so."""
    manifest, kept = Path(manifest), previous_manifest(Path(meta_dir))
    if read_json_manifest(manifest) or not read_json_manifest(kept):
        return
    state = _state(manifest)
    keep_copy(kept, manifest)
    print(
        f"provenance: {manifest} was {state} after the failed run; the manifest it started with is put back "
        f"(from {kept}): `layerswap audit` compares the results with it",
        file=sys.stderr,
    )


def kept_copy_hint(manifest: str | Path, meta_dir: Path = Path(".snakemake/metadata")) -> str:
    """For a line about an unreadable `manifest`: where a readable kept copy is, and how to audit against it."""
    kept = previous_manifest(meta_dir)
    if Path(manifest) == kept or not read_json_manifest(kept):
        return ""
    return f"; the copy kept of the last run's manifest: `layerswap audit --manifest {kept}`"
