"""Measure the paper path against the Hub replica (scripts/hub_replica), on this machine:

1. the pre-flight check (`layerswap prestage --verify`) of config/paper.yaml itself: its time, and how many
   artefacts pass (against the replica's few synthetic rows the SFT sources cannot hold the paper's 3k-40k rows
   per mix, so those lines fail by design: the check reads until the mix's count or the end of the split);
2. the same check of the paper-shaped config (paper.yaml with only its sizes changed; scripts/hub_replica/shaped.py);
3. the paper-shaped run: `layerswap prestage`, then the whole DAG to the tables (`snakemake --cores 2`).

    python -m scripts.measure.paper_shaped [--workdir DIR] [--no-run]

Prints one line per figure; exits 1 if the shaped check or run fails.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scripts.hub_replica import Replica
from scripts.hub_replica.shaped import write_shaped
from scripts.measure.common import snakemake_command

REPO = Path(__file__).resolve().parents[2]


def timed(cmd: list[str], env: dict, log: Path) -> tuple[float, int, str]:
    start = time.monotonic()
    proc = subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True)
    log.write_text(proc.stdout + proc.stderr)
    return time.monotonic() - start, proc.returncode, proc.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, default=None, help="default: a new temporary folder")
    parser.add_argument("--no-run", action="store_true", help="only the pre-flight checks")
    args = parser.parse_args()
    root = (args.workdir or Path(tempfile.mkdtemp(prefix="paper_shaped_"))).resolve()
    root.mkdir(parents=True, exist_ok=True)
    bin_dir = Path(sys.executable).parent
    layerswap = str(bin_dir / "layerswap")
    with Replica(root / "hub", lifetime=1800) as hub:
        env = {
            **os.environ,
            **hub.env(),
            "HF_HOME": str(root / "hf"),
            "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        }
        shaped = write_shaped(root / "shaped.yaml", hub.url)
        secs, rc, out = timed(
            [layerswap, "prestage", "--configfile", str(REPO / "config" / "paper.yaml"), "--verify"],
            env,
            root / "verify_paper.log",
        )
        lines = [line for line in out.splitlines() if line.startswith(("ok  ", "FAIL"))]
        fails = [line for line in lines if line.startswith("FAIL")]
        print(
            f"pre-flight check, config/paper.yaml vs replica: {secs:.1f} s, {len(lines)} artefacts, "
            f"{len(lines) - len(fails)} ok, {len(fails)} fail (exit {rc}; log {root / 'verify_paper.log'})"
        )
        secs, rc, out = timed(
            [layerswap, "prestage", "--configfile", str(shaped), "--verify"], env, root / "verify_shaped.log"
        )
        print(f"pre-flight check, paper-shaped config vs replica: {secs:.1f} s (exit {rc})")
        if rc or args.no_run:
            return rc
        start = time.monotonic()
        secs, rc, _ = timed([layerswap, "prestage", "--configfile", str(shaped)], env, root / "prestage.log")
        print(f"prestage (check + download), paper-shaped: {secs:.1f} s (exit {rc})")
        if rc:
            return rc
        secs, rc, _ = timed(
            [*snakemake_command(root / "work", shaped), "--cores", "2", "--set-resources", "sft:gpu=2"],
            env,
            root / "snakemake.log",
        )
        jobs = (root / "snakemake.log").read_text().count("Finished jobid")
        print(f"paper-shaped DAG to the tables: {secs:.1f} s, {jobs} jobs (exit {rc})")
        print(f"prestage to tables: {time.monotonic() - start:.1f} s")
        return rc


if __name__ == "__main__":
    sys.exit(main())
