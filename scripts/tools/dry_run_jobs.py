"""Every job each config's dry run plans, with its files and shell command, as one sorted text file per config and
target: two commits (or two checkouts) compared with `diff -r` show whether a refactor changed what the workflow runs.

    python -m scripts.tools.dry_run_jobs --out BEFORE
    (edit, or check out another commit)
    python -m scripts.tools.dry_run_jobs --out AFTER && diff -r BEFORE AFTER

Each config (config/*.yaml, and config/toy_transfer.yaml with each overlay of config/worlds/) is dry-run with
`--forceall` (so every job of the DAG is listed, whatever exists) in an empty folder, for the default target and for
`ablations`. A job is its rule, wildcards, inputs, outputs, log and shell command (`--printshellcmds`); the rule's
`code` param (a hash of the package files its command can run) is left out, since moving code changes it by design.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
KEEP = ("input:", "output:", "log:", "wildcards:")


def configs() -> dict[str, list[Path]]:
    found = {p.stem: [p] for p in sorted((REPO / "config").glob("*.yaml")) if p.name != "schema.yaml"}
    for overlay in sorted((REPO / "config/worlds").glob("*.yaml")):
        found[f"toy_transfer+{overlay.stem}"] = [REPO / "config/toy_transfer.yaml", overlay]
    return found


def jobs(text: str) -> list[str]:
    """The dry run's job blocks, each normalised to its rule, kept fields and shell command, sorted."""
    blocks, current = [], None
    for line in text.splitlines():
        if re.match(r"^(local)?(rule|checkpoint) \S+:\s*$", line):
            current = [line.strip()]
            blocks.append(current)
        elif current is not None and line.strip().startswith(KEEP):
            current.append(line.strip())
        elif current is not None and (line.strip() == "" or line.startswith("Job stats")):
            current = None
        elif current is not None and not line.startswith(" ") and line.strip():
            current.append(line.strip())  # --printshellcmds: "Shell command: ...", unindented
    return sorted("\n".join(b) for b in blocks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", nargs="*", help="config names (default: all)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for name, files in configs().items():
        if args.only and name not in args.only:
            continue
        for target in ("all", "ablations"):
            with tempfile.TemporaryDirectory() as work:
                cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", work]
                cmd += ["--configfile", *map(str, files), "--cores", "1", "--dry-run", "--forceall", "--printshellcmds"]
                cmd.append(target)
                run = subprocess.run(cmd, capture_output=True, text=True, cwd=work)
            text = run.stdout + run.stderr
            out = args.out / f"{name}.{target}.txt"
            if run.returncode:
                out.write_text(f"dry run failed ({run.returncode}):\n{text[-2000:]}")
            else:
                planned = jobs(text.replace(str(REPO), "<repo>"))
                out.write_text("\n\n".join(planned) + "\n")
            print(f"{name} {target}: {'failed' if run.returncode else len(planned)}", flush=True)


if __name__ == "__main__":
    main()
