"""`layerswap audit --repair [--run] [-- SNAKEMAKE_ARGS]`: the command that rebuilds what an audit found changed or
missing (docs/REPAIR.md).

Each drifted file (changed or missing; extra files and run logs are left alone) is rebuilt by the job that wrote it,
the manifest's `job`: one declared output of that job goes to `snakemake --forcerun`, which reruns the job and then
every job that reads what it wrote. A drifted file inside a checkpoint export (an export folder the results layout
names, `layerswap.audit.outputs`: an expert checkpoint, the base, a merged model; the manifest lists its
`layerswap_meta.json`) has that folder removed first, because `layerswap sft` keeps an export of its run that is
already there and would record the changed weights again; any other changed file is removed first too (its job
writes it again; the check before every run refuses a result edited since its job wrote it,
`layerswap.audit.provenance`). A file no job of the manifest wrote, or that the layout names as no job's output
(whatever the manifest says), is named and left, not guessed at. Nothing is removed outside the results root the
command runs on, nor the root itself (`layerswap.audit.confine`).
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from layerswap.audit.files import is_run_log
from layerswap.audit.outputs import export_of, is_output
from layerswap.errors import UserError
from layerswap.layout import Layout

EXPORT_MARK = "layerswap_meta.json"  # layerswap.train.training.export_model writes it into every export


@dataclass
class Plan:
    lines: list[str] = field(default_factory=list)  # one per drifted file: what rebuilds it
    remove: list[str] = field(default_factory=list)  # checkpoint exports to delete first
    targets: list[str] = field(default_factory=list)  # --forcerun targets, one output per job

    def command(self, snakemake_args: list[str]) -> list[str]:
        exe = ["snakemake"] if shutil.which("snakemake") else [sys.executable, "-m", "snakemake"]
        return [*exe, *snakemake_args, "--forcerun", *self.targets]

    def shell(self, snakemake_args: list[str]) -> str:
        removal = "".join(f"rm {'-r ' if Path(d).is_dir() else ''}{shlex.quote(d)} && " for d in self.remove)
        return removal + shlex.join(self.command(snakemake_args))


def plan(manifest: dict, found, layout: Layout | None = None) -> Plan:
    """What rebuilds each changed or missing file of `found` (check.Drift items); `layout`: the results layout of the
    folder (default: `results`), which alone says what is a job's output or an export folder."""
    layout = layout or Layout()
    files = manifest["files"]
    jobs = manifest.get("jobs") or {}
    out, seen = Plan(), set()
    for d in found:
        if d.kind == "extra" or is_run_log(d.path):
            continue
        job_id = (files.get(d.path) or {}).get("job")
        job = jobs.get(job_id or "")
        if not job or not job.get("outputs"):
            out.lines.append(f"repair: {d.kind} {d.path}: no job of the manifest wrote it; rebuild it by hand")
            continue
        if not is_output(d.path, layout):
            out.lines.append(
                f"repair: {d.kind} {d.path}: the results layout names no job's output there (the manifest says rule "
                f"{job['rule']}); left alone: rebuild or remove it by hand"
            )
            continue
        declared = d.path in job["outputs"]
        target = d.path if declared else job["outputs"][0]
        if job_id not in seen:
            seen.add(job_id)
            out.targets.append(target)
        export = export_of(d.path, layout)
        how = f"rule {job['rule']} writes it" if declared else f"rule {job['rule']} ({target}) wrote it"
        if not declared and export is not None and f"{export}/{EXPORT_MARK}" in files:
            how += f" in the export {export}, which is removed first"
            if Path(export).is_dir() and export not in out.remove:
                out.remove.append(export)
        elif d.kind == "changed" and Path(d.path).is_file():
            how += " (the changed file is removed first)"
            out.remove.append(d.path)
        out.lines.append(f"repair: {d.kind} {d.path}: {how}")
    return out


def repair(manifest: dict, found, snakemake_args: list[str], run: bool, roots=None) -> bool:
    """Print the plan and the command; with `run`, run it. True when a command ran (and succeeded). `roots`
    (`layerswap.audit.confine.Roots`): what may be removed; any other path stops the repair before it removes
    anything."""
    p = plan(manifest, found, roots.layout if roots is not None else None)
    for d in p.remove if roots is not None else []:
        why = roots.removable(d, folder=Path(d).is_dir())
        if why:
            raise UserError(f"repair: {d}: {why}: refused (nothing removed, nothing run)")
    for line in p.lines:
        print(line)
    if not p.targets:
        print("repair: nothing to rebuild" + (" (extra files are left alone)" if found else ""))
        return False
    print("repair: the command (add the run's own Snakemake options after --, e.g. --configfile, if not given):")
    print(p.shell(snakemake_args), flush=True)
    if not run:
        return False
    for d in p.remove:
        shutil.rmtree(d) if Path(d).is_dir() else Path(d).unlink()
    code = subprocess.run(p.command(snakemake_args)).returncode
    if code:
        raise UserError(
            f"the repair's snakemake exited with status {code} (its messages are above; after a hard "
            "kill it may need `snakemake --unlock` first: docs/REPAIR.md)"
        )
    print("repair: done; `layerswap audit` against a copy of the old manifest compares the rebuilt files with it")
    return True
