"""The fault drills' command line: `python -m scripts.tools.fault_drill WORKDIR [--only DRILL ...] [--reference DIR]`
(the drills: this package's docstring)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from scripts.tools import fault_drill
from scripts.tools.fault_drill.hostile import bad_config, edit_and_launder, forged_record, hostile_manifest
from scripts.tools.fault_drill.repairs import (
    corrupt_and_repair,
    delete_and_rebuild,
    flip_and_rerecord,
    kill_and_resume,
    relocate_then_edit,
    second_config,
)
from scripts.tools.fault_drill.runs import copy_run, new_dir, say, snakemake

DRILLS = (
    "kill-and-resume",
    "delete-and-rebuild",
    "corrupt-and-repair",
    "re-bless",
    "relocate-then-edit",
    "second-config",
    "edit-and-launder",
    "forged-record",
    "hostile-manifest",
    "bad-config",
)


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m scripts.tools.fault_drill", description=fault_drill.__doc__.split("\n\n")[0]
    )
    parser.add_argument("workdir", type=Path, help="a new or empty directory for the runs")
    parser.add_argument("--only", nargs="+", choices=DRILLS, default=list(DRILLS), help="the drills to run")
    parser.add_argument(
        "--reference",
        type=Path,
        default=None,
        help="a finished micro run's work directory to use as the uninterrupted run (default: run one in WORKDIR)",
    )
    args = parser.parse_args()
    root = args.workdir.resolve()
    if root.exists() and any(root.iterdir()):
        print(f"fault_drill: {root} is not empty: name a new or empty directory", file=sys.stderr)
        return 1
    reference = args.reference.resolve() if args.reference else root / "uninterrupted"
    root.mkdir(parents=True, exist_ok=True)
    code = 0
    if args.reference is None:
        reference.mkdir(parents=True)
        say("the uninterrupted micro run (the reference)")
        code, _ = snakemake(reference)
    if code:
        print(f"fault_drill: the uninterrupted run failed (status {code}): {reference / 'snakemake.log'}")
        return 1
    drills = {
        "kill-and-resume": lambda: kill_and_resume(reference, new_dir(root / "killed")),
        "delete-and-rebuild": lambda: delete_and_rebuild(reference, copy_run(reference, root / "deleted")),
        "corrupt-and-repair": lambda: corrupt_and_repair(reference, copy_run(reference, root / "corrupted")),
        "re-bless": lambda: flip_and_rerecord(reference, copy_run(reference, root / "rebless")),
        "relocate-then-edit": lambda: relocate_then_edit(reference, root / "relocated"),
        "second-config": lambda: second_config(reference, copy_run(reference, root / "second")),
        "edit-and-launder": lambda: edit_and_launder(reference, copy_run(reference, root / "edited")),
        "forged-record": lambda: forged_record(reference, new_dir(root / "forged")),
        "hostile-manifest": lambda: hostile_manifest(reference, copy_run(reference, root / "hostile" / "work")),
        "bad-config": lambda: bad_config(reference, root / "config"),
    }
    results = {name: drills[name]() for name in args.only}
    for name, (ok, what) in results.items():
        print(f"{name}: {'passed' if ok else 'FAILED'}: {what}")
    return 0 if all(ok for ok, _ in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
