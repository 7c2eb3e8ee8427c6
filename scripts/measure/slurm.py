"""The micro config through a real SLURM vs locally: jobs, wall time, and whether the results are the same bytes.

    python -m scripts.measure.slurm --workdir DIR [--config config/micro.yaml] [--jobs 3] \
        [--init-seconds 5]

Starts the one-node loopback SLURM of the tests (scripts/slurm_cluster.py: root, Debian's slurm-wlm, slurmdbd, munge,
mariadb-server; `make slurm-deps`), runs the config locally (`--cores 2`) and through `--profile cluster` (the
shipped profile with a test site file: its `jobs` and the plugin's first status check after 40 s, unless --jobs and
--init-seconds say otherwise), then prints per run the jobs Snakemake ran, how many of them were SLURM
jobs (sacct), the wall time, and the files of results/ whose bytes differ (run records aside: logs, manifest, training
logs with wall-clock times). One JSON record goes to <workdir>/measure_slurm.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import yaml

from layerswap.layout import R
from scripts.measure.common import snakemake_command
from scripts.slurm_cluster import ACCOUNT, Cluster, differing

REPO = Path(__file__).resolve().parents[2]


def snakemake(workdir: Path, config: Path, env: dict, *args: str) -> tuple[float, int, str]:
    """Wall seconds, jobs run (Snakemake's own count) and the log of one run."""
    cmd = [*snakemake_command(workdir, config), *args]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.monotonic() - t0
    log = proc.stdout + proc.stderr
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{log[-3000:]}")
    done = re.findall(r"(\d+) of (\d+) steps \(100%\) done", log)
    return wall, int(done[-1][0]) if done else 0, log


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--config", type=Path, default=REPO / "config" / "micro.yaml")
    ap.add_argument("--jobs", type=int, default=None, help="SLURM jobs at once (--jobs; default: the profile's)")
    ap.add_argument(
        "--init-seconds",
        type=int,
        default=None,
        help="the plugin's first status check delay (default: the plugin's 40 s; 5 suits a short run)",
    )
    args = ap.parse_args()
    reason = Cluster.unavailable()
    if reason:
        sys.exit(reason)
    work = args.workdir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("LAYERSWAP_SITE", None)
    local_wall, local_jobs, _ = snakemake(work / "local", args.config, env, "--cores", "2")
    print(f"local: {local_jobs} jobs in {local_wall:.0f} s", flush=True)
    site = work / "site.yaml"
    site.write_text(
        yaml.safe_dump(
            {"account": ACCOUNT, "partitions": {"cpu": "cpu", "gpu": "gpu"}, "gpu_model": None, "gpus_per_node": 8}
        )
    )
    with Cluster(work / "slurm") as cluster:
        slurm_env = {**env, **cluster.env, "LAYERSWAP_SITE": str(site)}
        overrides = ([] if args.jobs is None else ["--jobs", str(args.jobs)]) + (
            [] if args.init_seconds is None else ["--slurm-init-seconds-before-status-checks", str(args.init_seconds)]
        )
        wall, jobs, _ = snakemake(
            work / "cluster", args.config, slurm_env, "--profile", str(REPO / "cluster"), *overrides
        )
        sacct = subprocess.run(
            ["sacct", "-X", "-n", "-P", "-a", "-o", "JobID,State", "-S", "now-1days"],
            env=slurm_env,
            capture_output=True,
            text=True,
        ).stdout.split()
    diff = differing(work / "local" / R, work / "cluster" / R)
    record = {
        "config": str(args.config.relative_to(REPO) if args.config.is_relative_to(REPO) else args.config),
        "local": {"jobs": local_jobs, "wall_s": round(local_wall, 1)},
        "slurm": {
            "jobs": jobs,
            "slurm_jobs": len(sacct),
            "local_jobs": jobs - len(sacct),
            "wall_s": round(wall, 1),
            "jobs_at_once": args.jobs or "profile",
            "init_seconds": args.init_seconds or "plugin default",
        },
        "differing_files": diff,
    }
    print(f"SLURM: {jobs} jobs ({len(sacct)} through the queue, {jobs - len(sacct)} local rules) in {wall:.0f} s")
    print(f"results/ differing (run records aside): {diff or 'none'}")
    (work / "measure_slurm.json").write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
