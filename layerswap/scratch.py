"""One results folder's own namespace on shared scratch: `<storage.scratch>/<id>/`.

`storage.scratch` (the config's, else the site file's: docs/CLUSTER.md) is usually one folder per user, shared by
every config and results folder that user runs. Its big artefacts (expert checkpoints, merged models) used to be
named by run name only (`<scratch>/experts/math_1`), so two results folders with one scratch wrote, deleted (a
job's outputs are removed before it runs; an SFT run clears the checkpoints of other configurations from its folder)
and adopted each other's experts. Now every results folder owns one namespace there:

- `results/scratch.json` (`MARKER`) holds the results folder's id, a random hex string made the first time a run of
  that folder has a scratch (in the main Snakemake process, dry runs included). It travels with the folder: a moved
  folder keeps its namespace; the jobs (also on cluster nodes, in their own Snakemake) read the id from it, so every
  process names the same paths whatever the mount point.
- `<scratch>/<id>/owner.json` (`OWNER`) names the id and the results folder (its resolved path) that owns the
  namespace. A run whose results folder is not that one is refused in one line where the owner still holds the
  id (a copy of a results folder, `cp -r`, carries its id: the copy must take its own, by the command the line
  prints); where the owner no longer does (the folder was moved), the namespace follows the folder.

Why a namespace per results folder and not paths addressed by each run's recipe: two results folders running the
same recipe at once would then write one folder at once (Snakemake removes a job's outputs before it runs, and
each SFT job clears its folder), and a results folder's files could change under it when another one reran; a
namespace has exactly one writer, the results folder that owns it, so no locking or reference counting is needed.
The price: two results folders of one recipe train it twice.

Without `storage.scratch` nothing here applies: the big artefacts live under the results root, as before.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
from pathlib import Path

from layerswap.errors import UserError

MARKER = "scratch.json"  # in the results root: {"id": ...}
OWNER = "owner.json"  # in the namespace: {"id": ..., "results": <the owning results folder, resolved>}
ID = re.compile(r"^[0-9a-f]{16}$")


def marker(results: Path) -> Path:
    return Path(results) / MARKER


def _read(path: Path, what: str) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise UserError(f"{path}: not a readable {what} ({' '.join(str(err).split())})") from None
    if not isinstance(data, dict) or not isinstance(data.get("id"), str) or not ID.match(data["id"]):
        raise UserError(f"{path}: not a {what} (no 16-hex-digit 'id'); was it edited by hand?")
    return data


def _write_new(path: Path, data: dict) -> bool:
    """Write `path` only if it does not exist, whole or not at all (a hard link of a finished temporary file: of two
    processes, one writes, and the other never reads it half-written). True when this one did."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    tmp.write_text(json.dumps(data, sort_keys=True) + "\n", encoding="utf-8")
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    except OSError:  # a file system without hard links: exclusive create (a reader may race the write)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(tmp.read_text(encoding="utf-8"))
    finally:
        tmp.unlink()
    return True


def _replace(path: Path, data: dict) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def read_id(results: Path) -> str:
    """The id of the results folder `results` (its `scratch.json`); one UserError where it has none yet."""
    path = marker(results)
    if not path.exists():
        raise UserError(
            f"{path}: missing; it names this results folder's namespace on storage.scratch and is written by "
            "the main Snakemake process of a run (dry runs too): run snakemake for this folder first"
        )
    return _read(path, "scratch marker")["id"]


def big_root(scratch: str | None, results: Path, default: str) -> str:
    """Where the results folder `results` keeps its big artefacts: `<scratch>/<id>` with a scratch, else
    `default` (the results root)."""
    if not scratch:
        return default
    return f"{scratch.rstrip('/')}/{read_id(results)}"


def claim(scratch: str, results: Path) -> tuple[str, list[str]]:
    """In the main Snakemake process, before the DAG is built: make the results folder's id where it has none, and
    its namespace on `scratch` with the owner record where there is none; refuse (UserError, one line) a namespace
    that another results folder still owns. Returns (the namespace, lines to print)."""
    try:
        return _claim(scratch, Path(results))
    except OSError as err:  # a scratch or results folder that cannot be written: check_storage names most
        raise UserError(f"storage.scratch {scratch!r}: {err.strerror or err}: {err.filename}") from None


def _claim(scratch: str, results: Path) -> tuple[str, list[str]]:
    mine = results.resolve()
    path = marker(results)
    if not path.exists():
        _write_new(path, {"id": secrets.token_hex(8)})
    ident = _read(path, "scratch marker")["id"]
    ns = Path(scratch) / ident
    owner_path = ns / OWNER
    lines = []
    record = {"id": ident, "results": str(mine)}
    if not _write_new(owner_path, record):
        owner = _read(owner_path, "namespace owner record")
        other = Path(str(owner.get("results")))
        if owner["id"] != ident:
            raise UserError(
                f"{owner_path}: names id {owner['id']}, not {ident} (the folder's name); this namespace is not "
                f"one layerswap made for {path}: move it away (`mv {shlex.quote(str(ns))} "
                f"{shlex.quote(str(ns))}.moved`) and run again"
            )
        if other != mine:
            if _holds(other, ident):
                raise UserError(_shared_id_line(ns, owner_path, mine, other, ident))
            _replace(owner_path, record)
            lines.append(
                f"scratch: {ns} now belongs to {mine} ({other}, its owner before, no longer holds id {ident}: "
                "the results folder was moved)"
            )
    old = [d for d in ("experts", "merged") if (Path(scratch) / d).is_dir()]
    if old:
        lines.append(
            f"scratch: {Path(scratch) / old[0]} is from a run before namespaces (docs/CLUSTER.md) and is never read; "
            f"this results folder's big files live under {ns}"
        )
    return str(ns), lines


def _shared_id_line(ns: Path, owner_path: Path, mine: Path, other: Path, ident: str) -> str:
    """Two results folders carry one id: the later one is a copy (`cp -r` carries the marker; the copy's marker
    file is made anew, so its inode change time, which no tool sets back, is the later). The copy is told to take its
    own id, whatever the owner record says: a record edited to name the copy never tells the folder that made the
    namespace to give it away. Where the two times cannot tell, the line gives both choices."""
    made = {}
    for folder in (mine, other):
        try:
            made[folder] = marker(folder).stat().st_ctime_ns
        except OSError:
            made[folder] = None
    if None in made.values() or made[mine] == made[other]:
        return (
            f"{ns}: the results folders {mine} and {other} (named by {owner_path}) both carry its id {ident}; two "
            f"never share one namespace: give the copy its own id (`rm <the copy>/{MARKER}`; its experts and merged "
            "models are then made anew) and run again"
        )
    if made[mine] > made[other]:  # this folder is the copy: the usual case
        return (
            f"{ns}: this scratch namespace belongs to the results folder {other} ({owner_path}), and "
            f"{marker(mine)} carries its id (a copy of that folder?); two results folders never share one: give "
            f"this one its own with `rm {shlex.quote(str(marker(mine)))}` and run again (its experts "
            "and merged models are then made anew)"
        )
    return (
        f"{ns}: its owner record {owner_path} names {other}, a later copy of this results folder ({mine}: its "
        f"{MARKER} is the older); this folder keeps its namespace: give the copy its own id with "
        f"`rm {shlex.quote(str(marker(other)))}` and run again"
    )


def _holds(results: Path, ident: str) -> bool:
    """Whether the results folder `results` exists and carries the id `ident`."""
    try:
        return read_id(results) == ident
    except UserError:
        return False


def check_owner(out_dir: Path, results: Path) -> None:
    """For a job writing into `out_dir` (an SFT run's export folder): where `out_dir` lies in a namespace (a parent
    holds `owner.json`), that namespace must be the one of the results folder `results`; else one UserError. A
    job is only ever given its own namespace's paths; this guards against a folder given by hand."""
    out_dir = Path(out_dir).resolve()
    for d in (out_dir, *out_dir.parents):
        owner_path = d / OWNER
        if owner_path.is_file():
            owner = _read(owner_path, "namespace owner record")
            ident = read_id(results) if marker(results).exists() else None
            if owner["id"] != ident:
                raise UserError(
                    f"{out_dir}: lies in the scratch namespace of the results folder {owner.get('results')} "
                    f"({owner_path}), not of {Path(results).resolve()}; a job writes only into its own "
                    "results folder's namespace"
                )
            return
