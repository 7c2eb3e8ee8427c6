"""`layerswap plan [snakemake args...]`: what a run would cost, before it runs.

Runs `snakemake --dry-run` with the given arguments (--configfile, --directory, targets, ...) and Snakemake's
default rerun triggers (code, input, mtime, params, software-env), then prints per rule how many jobs would run
and why: missing output, params changed, code changed (the rule body or, through the `code` param, the package
modules it runs), input updated by an upstream job that runs too, input newer than output, set of inputs changed,
software environment changed. The source is the per-job `reason:` lines of the dry run (one per job; Snakemake
prints them for every job unless --quiet is given, so --quiet is dropped here). The workflow's `provenance:` lines
come first (records put back from results/manifest.json, files under results/ not from this config), and its
one-line stop, when results have no provenance, is the error (layerswap/audit/provenance.py).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field

from layerswap.errors import UserError

# Snakemake's reason texts (snakemake/jobs.py, Reason.__str__) -> short labels, in the order they are printed.
REASONS: list[tuple[str, str]] = [
    ("Forced execution", "forced"),
    ("Missing output files", "missing output"),
    ("Incomplete output files", "incomplete output"),
    ("Input files updated by another job", "input updated by another job"),
    ("Updated input files", "input newer than output"),
    ("Set of input files has changed", "set of inputs changed"),
    ("Params have changed", "params changed"),
    ("Code has changed", "code changed"),
    ("Software environment definition has changed", "software env changed"),
    ("Rules with neither input nor output files are always executed", "always runs"),
    ("Rules with a run or shell declaration but no output are always executed", "always runs"),
    ("Job has no output files", "always runs"),
    ("Triggered by", "triggered"),
]

_RULE = re.compile(r"^(?:local)?(?:rule|checkpoint) (\S+):\s*$")
_FIELD = re.compile(r"^\s+(reason|wildcards|jobid): (.*)$")


@dataclass
class PlannedJob:
    rule: str
    wildcards: dict[str, str] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)  # short labels
    reason_text: str = ""

    @property
    def name(self) -> str:
        """`rule` or `rule[key=value,...]` (wildcards sorted): a stable id for one job."""
        if not self.wildcards:
            return self.rule
        return self.rule + "[" + ",".join(f"{k}={v}" for k, v in sorted(self.wildcards.items())) + "]"


def reason_labels(text: str) -> list[str]:
    labels = []
    for part in re.split(r";\s+(?=[A-Z])", text.strip()):
        label = next((short for prefix, short in REASONS if part.startswith(prefix)), None)
        if label is None:
            label = part.split(":", 1)[0].strip().lower() or "unknown"
        if label not in labels:
            labels.append(label)
    return labels


def parse_dry_run(text: str) -> list[PlannedJob]:
    """The jobs of a `snakemake --dry-run` log (without --quiet), in printed order."""
    jobs: list[PlannedJob] = []
    current: PlannedJob | None = None
    for line in text.splitlines():
        m = _RULE.match(line)
        if m:
            current = PlannedJob(m.group(1))
            jobs.append(current)
            continue
        if current is None:
            continue
        f = _FIELD.match(line)
        if f is None:
            if line and not line.startswith((" ", "\t")):
                current = None  # the job block ended
            continue
        key, value = f.groups()
        if key == "reason":
            current.reason_text = value
            current.reasons = reason_labels(value)
        elif key == "wildcards":
            for item in value.split(", "):
                k, _, v = item.partition("=")
                current.wildcards[k.strip()] = v.strip()
    return jobs


def dry_run(snakemake_args: list[str], snakemake: list[str] | None = None) -> tuple[list[PlannedJob], str]:
    """Run the dry run; returns the planned jobs and the full log."""
    args = [a for a in snakemake_args if a not in {"-q", "--quiet"}]
    cmd = list(snakemake or [sys.executable, "-m", "snakemake"]) + ["--dry-run", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    log = proc.stdout + "\n" + proc.stderr
    stop = [line for line in log.splitlines() if line.startswith("provenance: ")]
    if proc.returncode != 0 and stop:  # the workflow's own one-line stop (layerswap.audit.provenance)
        raise UserError(stop[-1])
    if proc.returncode != 0:
        tail = "\n".join(log.strip().splitlines()[-15:])
        raise UserError(f"snakemake --dry-run failed (exit {proc.returncode}):\n{tail}")
    return parse_dry_run(log), log


def summarise(jobs: list[PlannedJob], skip: frozenset[str] = frozenset({"all"})) -> list[tuple[str, int, Counter]]:
    rows: dict[str, tuple[int, Counter]] = {}
    for job in jobs:
        if job.rule in skip:
            continue
        n, reasons = rows.get(job.rule, (0, Counter()))
        reasons.update(job.reasons)
        rows[job.rule] = (n + 1, reasons)
    return [(rule, n, reasons) for rule, (n, reasons) in rows.items()]


def format_table(rows: list[tuple[str, int, Counter]]) -> str:
    if not rows:
        return "Nothing to do: every output is up to date."
    width = max(len("rule"), *(len(r) for r, _, _ in rows))
    lines = [
        f"{'rule':<{width}}  {'jobs':>5}  reasons (jobs per reason; a job can have several)",
        f"{'-' * width}  {'-' * 5}  {'-' * 50}",
    ]
    for rule, n, reasons in rows:
        text = ", ".join(f"{label} ({count})" for label, count in reasons.most_common())
        lines.append(f"{rule:<{width}}  {n:>5}  {text}")
    lines.append(f"{'total':<{width}}  {sum(n for _, n, _ in rows):>5}")
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.usage = "layerswap plan [--list-jobs] [snakemake arguments ...]"
    parser.add_argument(
        "--list-jobs", action="store_true", help="also list every job (rule[wildcards]) with Snakemake's reason text"
    )
    parser.epilog = (
        "Every other argument goes to `snakemake --dry-run` unchanged, in order "
        "(--configfile, --directory, -s, targets, --rerun-triggers ...)."
    )
    parser.allow_abbrev = False  # so snakemake's --list... options are never taken for ours

    def parse_args(args=None, namespace=None):
        ns, rest = parser.parse_known_args(args, namespace)
        ns.snakemake_args = rest
        return ns

    parser.parse_args = parse_args  # all unknown arguments, in order, are snakemake's


def configfiles_in(snakemake_args: list[str]) -> list[str]:
    """The config files a Snakemake command line names (`--configfile A [B ...]`, `--configfiles`, `--configfile=A`)."""
    files: list[str] = []
    taking = False
    for arg in snakemake_args:
        name, eq, value = arg.partition("=")
        if name in ("--configfile", "--configfiles"):
            taking = not eq
            files += [value] if eq else []
        elif arg.startswith("-"):
            taking = False
        elif taking:
            files.append(arg)
    return files


def run(args: argparse.Namespace) -> None:
    from layerswap.config import read_config_file

    for file in configfiles_in(list(args.snakemake_args)):  # Snakemake's own loader names neither file nor line
        read_config_file(file)
    jobs, log = dry_run(list(args.snakemake_args))
    for line in log.splitlines():  # records put back, files not from this config (layerswap.audit.provenance)
        if line.startswith("provenance: "):
            print(line)
    print(format_table(summarise(jobs)))
    if args.list_jobs:
        for job in jobs:
            if job.rule != "all":
                print(f"  {job.name}: {job.reason_text}")
