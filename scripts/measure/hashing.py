"""What checking weights against their run's record costs a finished run (issue 30).

Every merge and evaluation job checks each checkpoint it reads against the sha256 that `layerswap sft` recorded in
`checkpoints.json` (`layerswap.checkpoints.verify_weights`), once per job per file. This script takes a finished
run, finds from Snakemake's own job records (`.snakemake/metadata/`) the checkpoints each job read (its `--model
ID=SOURCE` arguments: checkpoint dirs, or recipes and their inputs), times sha256 of every such file here, and sets
the sum per job against the wall time the job ran (the record's endtime - starttime). Run it from the working
directory of the run (the job commands name `results/...` relative to it):

    python -m scripts.measure.hashing            # one row per rule, and the total
    python -m scripts.measure.hashing --json

The files are hashed twice and the second time is reported (page cache warm, as when a job hashes a file the
previous job just read); `--cold` reports the first instead.
"""

from __future__ import annotations

import argparse
import json
import shlex
import time
from collections import defaultdict
from pathlib import Path

from layerswap.checkpoints import recorded_weights
from layerswap.fingerprint import file_sha256
from layerswap.merge.recipes import Recipe


def job_records(meta_dir: Path) -> list[dict]:
    """One record per job (Snakemake keeps one per output file; the shell command identifies the job)."""
    jobs: dict[str, dict] = {}
    for path in sorted(p for p in meta_dir.rglob("*") if p.is_file()):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and record.get("shellcmd") and record.get("starttime"):
            jobs.setdefault(record["shellcmd"], record)
    return list(jobs.values())


def sources(shellcmd: str) -> list[str]:
    """The SOURCE of every `--model ID=SOURCE` of a layerswap evaluate command."""
    words = shlex.split(shellcmd.split(">", 1)[0])
    return [words[i + 1].partition("=")[2] for i, w in enumerate(words[:-1]) if w == "--model"]


def checked_files(shellcmd: str) -> list[Path]:
    """The weight files a job checks: those of every checkpoint it reads that a run record lists."""
    dirs: list[str] = []
    for source in sources(shellcmd):
        dirs += [source] if Path(source).is_dir() else list(Recipe.load(source).inputs)
    files: list[Path] = []
    for d in dict.fromkeys(dirs):
        found = recorded_weights(Path(d))
        if found is not None:
            files += [Path(d) / name for name in sorted(found[1])]
    return files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--metadata", type=Path, default=Path(".snakemake/metadata"))
    parser.add_argument("--cold", action="store_true", help="report the first (cold page cache) hash of each file")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    per_rule: dict[str, dict] = defaultdict(lambda: {"jobs": 0, "files": 0, "bytes": 0, "hash_s": 0.0, "job_s": 0.0})
    seconds: dict[Path, float] = {}
    for record in job_records(args.metadata):
        files = checked_files(record["shellcmd"]) if "--model " in record["shellcmd"] else []
        if not files:
            continue
        row = per_rule[record["rule"]]
        row["jobs"] += 1
        row["job_s"] += record["endtime"] - record["starttime"]
        for f in files:
            if f not in seconds:
                times = []
                for _ in range(2):
                    t0 = time.perf_counter()
                    file_sha256(f)
                    times.append(time.perf_counter() - t0)
                seconds[f] = times[0] if args.cold else times[1]
            row["files"] += 1
            row["bytes"] += f.stat().st_size
            row["hash_s"] += seconds[f]
    total = {k: sum(r[k] for r in per_rule.values()) for k in ("jobs", "files", "bytes", "hash_s", "job_s")}
    if args.json:
        print(json.dumps({"rules": per_rule, "total": total}, indent=1, sort_keys=True))
        return
    print(f"{'rule':<28} {'jobs':>5} {'files':>6} {'MiB':>8} {'hash s':>8} {'job s':>9} {'share':>7}")
    for rule, r in sorted(per_rule.items()) + [("total", total)]:
        share = r["hash_s"] / r["job_s"] if r["job_s"] else 0.0
        print(
            f"{rule:<28} {r['jobs']:>5} {r['files']:>6} {r['bytes'] / 2**20:>8.1f} {r['hash_s']:>8.3f} "
            f"{r['job_s']:>9.1f} {share:>7.2%}"
        )


if __name__ == "__main__":
    main()
