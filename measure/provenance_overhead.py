"""The time the check before every run spends (layerswap/audit/provenance.py `check`), and the part of it issue 43
added (results edited after their job: `edited`; the manifest copy the manifest job compares with), in a finished
run's work directory: what a no-op rerun pays on top of Snakemake's own parse and DAG.

    python -m measure.provenance_overhead WORKDIR [--configfile config/config.yaml] [--repeat 5]

Prints the median of `--repeat` timings of each part, in seconds, and the number of files the manifest lists.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


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
    from layerswap.audit import provenance
    from layerswap.config import load_config
    from layerswap.workflow.layout import Layout, R

    config = load_config(args.configfile.resolve())
    spec = provenance.spec_of(config, REPO)
    os.chdir(args.workdir)
    meta, root = Path(".snakemake/metadata"), Path(R)
    path = Path(Layout.at(root).manifest())
    manifest = provenance._manifest(path)
    if not manifest:
        raise SystemExit(f"{args.workdir}: no {path}: run the workflow there first")
    parts = {"check (all of it, as before a run)": lambda: provenance.check(spec)}
    if hasattr(provenance, "edited"):  # else a checkout from before issue 43: its check alone, to compare
        keep = provenance.previous_manifest(meta)
        parts["  of which: results edited after their job (edited)"] = lambda: provenance.edited(
            manifest, path, meta, root
        )
        parts["  of which: the manifest copy for the manifest job"] = lambda: shutil.copyfile(path, keep)
    print(f"{args.workdir}: {len(manifest['files'])} files in the manifest, config {args.configfile.name}")
    for name, fn in parts.items():
        print(f"{name}: {timed(fn, args.repeat):.3f} s (median of {args.repeat})")


if __name__ == "__main__":
    main()
