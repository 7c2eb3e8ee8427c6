"""Measure the foundation numbers: the default DAG from an empty results/, a no-op rerun, and the test command.

    python -m scripts.measure.default [--workdir DIR] [--cores 2] [--tests]

Runs Snakemake on the embedded default config in DIR (a fresh temp dir by default), then again with nothing
changed, and prints wall times, jobs per rule and the evaluation cost split (process start-up vs per-model work)
read from the evaluation logs. With --tests it also times `python -m pytest -q`.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from layerswap.layout import Layout, R
from scripts.measure.common import snakemake_command

REPO = Path(__file__).resolve().parents[2]


def timed(cmd: list[str], cwd: Path) -> tuple[float, subprocess.CompletedProcess]:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    return time.perf_counter() - start, proc


def evaluation_costs(results: Path) -> dict[str, float]:
    """Sum, over all evaluation logs, of imports, task loading, model loading and per-model evaluation time."""
    sums = Counter()
    layout = Layout.at(results)
    for log in results.glob(layout.relative(layout.log("evaluate", "*"))):
        text = log.read_text(errors="replace")
        for tasks, imports in re.findall(r"tasks loaded in ([\d.]+) s \(imports ([\d.]+) s\)", text):
            sums["imports"] += float(imports)
            sums["task loading"] += float(tasks)
            sums["jobs"] += 1
        for load, evaluate in re.findall(r": load ([\d.]+) s, evaluate ([\d.]+) s", text):
            sums["model loading / merging"] += float(load)
            sums["evaluation"] += float(evaluate)
            sums["models"] += 1
    return dict(sums)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, help="where results/ goes (default: a new temp dir)")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--tests", action="store_true", help="also time the test command")
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="layerswap-measure-"))
    work.mkdir(parents=True, exist_ok=True)
    snakemake = [*snakemake_command(work, REPO / "config" / "config.yaml"), "--cores", str(args.cores)]

    first, proc = timed(snakemake, REPO)
    if proc.returncode:
        print(proc.stderr[-4000:], file=sys.stderr)
        return 1
    jobs = Counter(re.findall(r"^(?:local)?rule (\w+):", proc.stderr + proc.stdout, flags=re.M))
    second, proc2 = timed(snakemake, REPO)
    nothing = "Nothing to be done" in proc2.stdout + proc2.stderr

    print(f"workdir: {work}")
    print(f"main job on the default config, empty results/: {first:7.1f} s  ({sum(jobs.values())} jobs)")
    print(f"second invocation, nothing changed:            {second:7.1f} s  (nothing reran: {nothing})")
    print("jobs per rule: " + ", ".join(f"{rule}={n}" for rule, n in sorted(jobs.items())))
    costs = evaluation_costs(work / R)
    if costs:
        print(f"evaluation ({costs.get('jobs', 0):.0f} jobs, {costs.get('models', 0):.0f} models):")
        for key in ("imports", "task loading", "model loading / merging", "evaluation"):
            print(f"  {key:<26} {costs.get(key, 0):7.1f} s (summed over jobs)")
    if args.tests:
        took, proc3 = timed([sys.executable, "-m", "pytest", "-q"], REPO)
        print(
            f"test command (pytest -q): {took:7.1f} s, exit {proc3.returncode}: "
            f"{proc3.stdout.strip().splitlines()[-1] if proc3.stdout.strip() else ''}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
