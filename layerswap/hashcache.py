"""Verify once: a cache of verified sha256s keyed by the state of a file, shared by every job of a run.

A checkpoint's weights are checked against the sha256 their job recorded before anything reads them
(`layerswap.checkpoints.verify_weights`). At paper scale an fp32 expert is 32 GB (~50 s at the ~630 MiB/s that
docs/SAFE_IO.md measures), and hundreds of evaluation jobs read the same experts: hashing in every job would cost GPU
hours. So, as git's index does, a file's sha256 is kept with the state of the file it was computed from.

What the key holds, and why (a verdict "these bytes have sha256 X" is valid while the file holds the bytes it was
hashed from):
- which file: its inode number on its file system, the file system named by the path it is mounted at (the mount
  point above the file, resolved). Not the device number: on a network file system that is the mount's number on
  each client (NFS gives each node its own `st_dev` for the same mount), so keyed on it every node hashed every file
  again. The inode number (NFS: the server's file id) and the mount point (a shared file system is mounted at one
  path on every node) are the same on every node; a node that mounts it elsewhere hashes its files once more
  (correct, slower). Not the file's path: an export is hashed under its temporary name and renamed into place, and a
  rename keeps the file (its inode), so the verdict goes with it. A replaced file (an atomic write, a rename over it)
  has another inode;
- whether it changed: its size and mtime_ns. Any write to the file moves its mtime (on NFS the server's clock: the
  same on every node); so a changed file never keeps its old verdict: it is hashed again. Not ctime: the export's
  own `chmod` (modes follow the umask) and a rename would change it after the export hashed its files, and the first
  job to read each expert would hash it again.
Not the host, the CPU or anything else of the reader: a sha256 of the same bytes is the same everywhere. The limit:
an edit whose mtime is set back to the nanosecond (`touch -d`, `os.utime`) is a deliberate act the jobs' check does
not see; the audit does (below).

- Where: the folder named by the environment variable `LAYERSWAP_HASH_CACHE` (the workflow sets it to
  `results/store/hashes`, beside the evaluation store, for every job: rules/common.smk). Unset (a command run by hand,
  `layerswap audit`), nothing is cached across processes: every file is hashed (once per process).
- An entry is one small JSON file named by the sha256 of the state, written to a temporary name and renamed, so
  concurrent jobs never see half an entry; an entry whose recorded state differs from the file's is ignored.
- Racy states (git's "racily clean" problem): a file modified within `RACY_SECONDS` of the end of its hashing could
  be modified again within the same timestamp tick without changing its state on a file system with coarse
  timestamps; such a state is not cached (a big file takes longer than that to hash: at paper scale every state is
  cached). Nor is a file whose state changed while it was hashed.
- A cluster: the cache folder is on the shared results file system, and a state is the same on every node that
  mounts the file's file system at the same path: a file hashed by a job on one node is answered on every other.
  `hashing:` in every evaluation log says how many files a job hashed and how many the cache answered.
- Trust: the cache speeds up the jobs' own checks; it is not evidence. `layerswap audit` never reads it (it re-hashes
  every file it compares), so a hand-made cache entry cannot hide a changed file from the audit (docs/AUDITS.md).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
import time
from pathlib import Path

from layerswap import fingerprint

ENV = "LAYERSWAP_HASH_CACHE"
#: A state whose mtime or ctime is this close to the end of its hashing is not cached (timestamp granularity).
RACY_SECONDS = 2.0
FORMAT = 2  # 1: keyed on (st_dev, inode, size, mtime_ns), not read any more

#: What this process hashed and found: files hashed, bytes hashed, seconds hashing, files answered from the cache.
STATS = {"hashed": 0, "bytes": 0, "seconds": 0.0, "cached": 0}
_MEMORY: dict[tuple[str, int, int, int], str] = {}  # this process's answers, by state


def state(path: str | Path, st: os.stat_result) -> tuple[str, int, int, int]:
    """The state a cached sha256 is valid for: (mount point, inode, size, mtime_ns) of the file at `path` whose
    `os.stat` is `st` (the module docstring says why these and not the device number or the path)."""
    return (mount_point(os.path.dirname(os.path.realpath(path))), st.st_ino, st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=256)
def mount_point(folder: str) -> str:
    """The mount point of the file system holding `folder` (a resolved path): the nearest folder at or above it
    whose parent is on another device (or `/`)."""
    dev = os.stat(folder).st_dev
    while True:
        parent = os.path.dirname(folder)
        if parent == folder or os.stat(parent).st_dev != dev:
            return folder
        folder = parent


def folder(layout) -> str:
    """The workflow's cache folder: `<results>/store/hashes`, beside the evaluation store (no job's output; the
    manifest leaves `store/` out)."""
    from layerswap.layout import STORE

    return f"{layout.root}/{STORE}/hashes"


def location() -> Path | None:
    value = os.environ.get(ENV, "")
    return Path(value) if value else None


def _entry(root: Path, key: tuple) -> Path:
    name = hashlib.sha256(json.dumps(list(key)).encode()).hexdigest()
    return root / name[:2] / f"{name}.json"


def _lookup(root: Path, key: tuple) -> str | None:
    try:
        doc = json.loads(_entry(root, key).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("state") != list(key):
        return None
    digest = doc.get("sha256")
    return digest if isinstance(digest, str) and len(digest) == 64 else None


def _remember(root: Path, key: tuple, digest: str, path: Path) -> None:
    entry = _entry(root, key)
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=entry.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"format": FORMAT, "state": list(key), "sha256": digest, "path": str(path)}, f)
        os.replace(tmp, entry)
    except OSError:  # a read-only or full cache folder only costs a later re-hash
        try:
            os.unlink(tmp)
        except (OSError, UnboundLocalError):
            pass


def sha256(path: str | Path) -> str:
    """The sha256 of a file's bytes: from this process's memory or the cache folder when the file is in the state
    it was hashed in, else hashed (and remembered, unless the state is racy or changed while hashing)."""
    path = Path(path)
    key = state(path, os.stat(path))
    if key in _MEMORY:
        return _MEMORY[key]
    root = location()
    digest = _lookup(root, key) if root is not None else None
    if digest is not None:
        STATS["cached"] += 1
        _MEMORY[key] = digest
        return digest
    t0 = time.time()
    digest = fingerprint.file_sha256(path)
    end = time.time()
    STATS["hashed"] += 1
    STATS["bytes"] += key[2]
    STATS["seconds"] += end - t0
    after = state(path, os.stat(path))
    if after != key:  # written while hashed: the digest belongs to no state
        return digest
    _MEMORY[key] = digest
    if root is not None and end - key[3] / 1e9 > RACY_SECONDS:
        _remember(root, key, digest, path)
    return digest


def summary() -> str:
    """One log line: what this process hashed and what the cache answered."""
    return (
        f"hashing: {STATS['hashed']} files hashed ({STATS['bytes'] / 2**30:.2f} GiB, {STATS['seconds']:.1f} s), "
        f"{STATS['cached']} answered by the cache of verified hashes"
        + ("" if location() is not None else f" (no cache: {ENV} unset)")
    )
