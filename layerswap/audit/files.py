"""The files a manifest covers and their hashes.

Every regular file under the results root is covered, except `logs/`, `.snakemake/` and `store/` (the evaluation
store, `layerswap.evaluation.store`: a cache keyed by content whose files are copied into results that are covered)
at its top, the manifest itself and the scratch marker (`scratch.json`, layerswap/scratch.py). Two kinds:
reproducible results (the same bytes from the same config, code and machine type: compared by every audit) and run
logs (`RUN_LOGS`: training progress with wall-clock timings and throughput: listed with their hashes, compared only
when asked). Every file's sha256 is what is on disk (`hash_files`, issue 49): neither the sha256 a job recorded
(`checkpoints.json`, an evaluation index) nor the verify-once cache (`layerswap.hashcache`) is reused, because both
are keyed by (device, inode, size, mtime): an edit in place that keeps the size and sets the modification time back
keeps that key. The manifest job keeps its own states instead (`.snakemake/layerswap/manifest.hashes.json`): a file
is not read again only while its state, its ctime included, is the one it was hashed in. The ctime cannot be set
back (every write, `touch -d`, `os.utime`, `chmod` or rename sets it to the present), so such an edit is hashed
again; a state that could repeat within a timestamp tick (ctime less than 2 s before the hash ended) is not kept.
`recorded_hashes` reads the jobs' records only to tell which files a record lists
(`layerswap.audit.provenance.ownership`).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import NamedTuple

from layerswap.fingerprint import file_sha256
from layerswap.hashcache import RACY_SECONDS
from layerswap.layout import LOGS, STORE, Layout
from layerswap.scratch import MARKER

EXCLUDED_DIRS = (LOGS, ".snakemake", STORE)
#: File names of run logs: the Trainer's progress log of the base (`base.work/log.jsonl`) and of each SFT run
#: (`experts/<run>/log.jsonl`): loss, learning rate and tokens/s with their wall-clock rates.
RUN_LOGS = ("log.jsonl",)
#: Records whose writer hashed the files it names (sha256 reused by the manifest; the job that owns those files).
#: Glob patterns, relative to the results root.
RECORDS = tuple(
    Layout().relative(p)
    for p in (
        Layout().checkpoints_record("*"),
        Layout().checkpoint_index("*"),
        Layout().checkpoint_index("*", "*"),
        Layout().leaders_index("*"),
        Layout().ablation_leaders_index("*", "*", "*"),
        Layout().table2_index("*", "*"),
    )
)


def is_run_log(path: str | Path) -> bool:
    return Path(path).name in RUN_LOGS


def walk(root: Path, exclude: set[Path] = frozenset()) -> list[Path]:
    """Every regular file under root, sorted, minus EXCLUDED_DIRS at the top level, the root's manifest, its
    scratch marker (`scratch.json`: the folder's id, not a result; layerswap/scratch.py) and `exclude`."""
    exclude = set(exclude) | {Path(Layout.at(root).manifest()), Path(root) / MARKER}
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        d = Path(dirpath)
        if d == root:
            dirnames[:] = [n for n in dirnames if n not in EXCLUDED_DIRS]
        dirnames.sort()
        for name in filenames:
            p = d / name
            if p.is_file() and not p.is_symlink() and p not in exclude:
                out.append(p)
    return sorted(out)


class Recorded(NamedTuple):
    sha256: str
    mtime: float  # of the record
    record: str  # the file that records it (checkpoints.json, index*.json)


def recorded_hashes(root: Path) -> dict[str, Recorded]:
    """sha256s the jobs already recorded: {path: Recorded}."""
    known: dict[str, Recorded] = {}
    for rec in sorted(p for pattern in RECORDS for p in root.glob(pattern)):
        try:
            data = json.loads(rec.read_text())
        except (OSError, ValueError):
            continue
        t = rec.stat().st_mtime
        for entry in data.get("checkpoints", []) if isinstance(data.get("checkpoints"), list) else []:
            if isinstance(entry, dict) and "sha256" in entry and "path" in entry and "samples" in entry:
                files = entry.get("files") or {"model.safetensors": entry["sha256"]}  # sharded: one per file
                for name, digest in files.items():
                    known[os.path.normpath(str(Path(entry["path"]) / name))] = Recorded(digest, t, str(rec))
        for path, digest in (data.get("sha256") or {}).items():
            known[os.path.normpath(path)] = Recorded(digest, t, str(rec))
    return known


def state(st: os.stat_result) -> list[int]:
    """The state a sha256 of the manifest job stays valid for: (device, inode, size, mtime_ns, ctime_ns)."""
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def hash_files(files: list[Path], states: dict | None = None) -> dict[str, dict]:
    """{path: {size, sha256}} of each file, from its bytes (see the module's docstring). `states`: {path: [*state,
    sha256]} of the files this command hashed before; a file still in that state is not read again; updated with
    what is hashed here."""
    out = {}
    for p in files:
        st = os.stat(p)
        key = state(st)
        known = (states or {}).get(str(p))
        if isinstance(known, list) and len(known) == 6 and known[:5] == key and isinstance(known[5], str):
            digest = known[5]
        else:
            digest = file_sha256(p)
            if states is not None:
                states.pop(str(p), None)
                if state(os.stat(p)) == key and time.time() - st.st_ctime > RACY_SECONDS:
                    states[str(p)] = [*key, digest]
        out[str(p)] = {"size": st.st_size, "sha256": digest}
    return out
