"""The time the check before every run spends (layerswap/audit/provenance.py `check`), and the part of it issue 43
added (results edited after their job: `edited`; the manifest copy the manifest job compares with), in a finished
run's work directory: what a no-op rerun pays on top of Snakemake's own parse and DAG. Also what the manifest job's
hashing costs since issue 49 (every file from its bytes, `layerswap.audit.files.hash_files`): with no states (the
first manifest after new results), and with its states where nothing changed.

    python -m scripts.measure.provenance_overhead WORKDIR [--configfile config/config.yaml] [--repeat 5]

Prints the median of `--repeat` timings of each part, in seconds, and the number of files the manifest lists.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def timed(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workdir", type=Path, help="a finished run's work directory (results/, .snakemake/)")
    parser.add_argument("--configfile", type=Path, default=REPO / "config" / "config.yaml")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    from layerswap.audit import kept, provenance
    from layerswap.config import load_config
    from layerswap.layout import Layout, R

    config = load_config(args.configfile.resolve())
    spec = provenance.spec_of(config, REPO)
    os.chdir(args.workdir)
    meta, root = Path(".snakemake/metadata"), Path(R)
    path = Path(Layout.at(root).manifest())
    manifest = kept.read_json_manifest(path)
    if not manifest:
        raise SystemExit(f"{args.workdir}: no {path}: run the workflow there first")
    parts = {"check (all of it, as before a run)": lambda: provenance.check(spec)}
    if hasattr(provenance, "edited"):  # else a checkout from before issue 43: its check alone, to compare
        keep = kept.previous_manifest(meta)
        parts["  of which: results edited after their job (edited)"] = lambda: provenance.edited(
            manifest, path, meta, root
        )
        parts["  of which: the manifest copy for the manifest job"] = lambda: shutil.copyfile(path, keep)
    if hasattr(provenance, "edited"):
        from layerswap.audit.files import hash_files

        listed = [Path(p) for p in {**manifest["files"], **(manifest.get("run_logs") or {})} if Path(p).is_file()]
        states: dict = {}
        hash_files(listed, states)
        size = sum(p.stat().st_size for p in listed) / 2**20
        parts[f"manifest job: hashing {len(listed)} files, {size:.1f} MiB, from their bytes"] = lambda: hash_files(
            listed
        )
        parts["manifest job: the same with its states, nothing changed"] = lambda: hash_files(listed, states)
        from layerswap.audit.records import mismatch

        outputs = [(job, o) for job in manifest["jobs"].values() for o in job.get("outputs") or []]
        parts[f"records put back: every output's record cross-checked ({len(outputs)} outputs)"] = lambda: [
            mismatch(job["rule"], job["params"], o, job.get("shellcmd")) for job, o in outputs
        ]
    print(f"{args.workdir}: {len(manifest['files'])} files in the manifest, config {args.configfile.name}")
    for name, fn in parts.items():
        print(f"{name}: {timed(fn, args.repeat):.3f} s (median of {args.repeat})")


if __name__ == "__main__":
    main()
