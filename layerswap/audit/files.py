"""The files a manifest covers and their hashes.

Every regular file under the results root is covered, except `logs/`, `.snakemake/` and `store/` (the evaluation
store, `layerswap.evaluation.store`: a cache keyed by content whose files are copied into results that are covered)
at its top, the manifest itself and the scratch marker (`scratch.json`, layerswap/workflow/scratch.py). Two kinds:
reproducible results (the same bytes from the same config, code and machine type: compared by every audit) and run
logs (`RUN_LOGS`: training progress with wall-clock timings and throughput: listed with their hashes, compared only
when asked). Large weights are hashed once: a sha256 already recorded by the job that wrote the file (expert
`checkpoints.json`, evaluation `index*.json`) is reused when the file is not newer than that record.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import NamedTuple

from layerswap.hashcache import sha256 as cached_sha256
from layerswap.workflow.layout import LOGS, STORE, Layout
from layerswap.workflow.scratch import MARKER

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
    scratch marker (`scratch.json`: the folder's id, not a result; layerswap/workflow/scratch.py) and `exclude`."""
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


def hash_files(files: list[Path], known: dict[str, Recorded] | None = None) -> dict[str, dict]:
    known = known or {}
    out = {}
    for p in files:
        st = p.stat()
        rec = known.get(os.path.normpath(str(p)))
        if rec is not None and st.st_mtime <= rec.mtime:
            digest, reused = rec.sha256, True
        else:
            digest, reused = cached_sha256(p), False  # the cache of verified hashes (layerswap.hashcache)
        out[str(p)] = {"size": st.st_size, "sha256": digest, **({"hash_from_record": True} if reused else {})}
    return out
