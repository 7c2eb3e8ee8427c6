"""`layerswap cost --configfile <config> --resources`: what a run through `--profile cluster` will ask of SLURM.

Runs Snakemake's dry run of the whole DAG with the cluster profile (in an empty directory, so every job counts; the
site file is read and checked as for a real run, nothing is submitted), and prints per rule the jobs that go to SLURM
and those that run inside Snakemake's own process (`localrule: True` in rules/*.smk), and per job kind (a rule and
one set of requests) the partition, GPUs, CPUs, memory and time limit each job asks for; then the totals: jobs, and
GPU- and CPU-hours if every job used its whole time limit (an upper bound), beside the config's `estimates` (what
`layerswap cost` counts, measured where their `source` says so).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from layerswap.errors import UserError
from layerswap.workflow.merge_groups import family

REPO = Path(__file__).resolve().parents[2]
_BLOCK = re.compile(r"^\s*(?:rule (\w+)|use rule \w+ as (\w+) with|rule):\s*$")


def local_rules(rules_dir: Path = REPO / "rules") -> tuple[set[str], set[str]]:
    """(rules that run in Snakemake's process: `localrule: True`, or no command at all, like `all`; name patterns of
    anonymous rules, as regexes) from the rule files."""
    names: set[str] = set()
    patterns: set[str] = set()
    for path in sorted(rules_dir.glob("*.smk")) + [rules_dir.parent / "Snakefile"]:
        lines = path.read_text(encoding="utf-8").splitlines()
        heads = [i for i, line in enumerate(lines) if _BLOCK.match(line)] + [len(lines)]
        for start, end in zip(heads, heads[1:]):
            m = _BLOCK.match(lines[start])
            indent = len(lines[start]) - len(lines[start].lstrip())
            body = []
            for line in lines[start + 1 : end]:
                if line.strip() and len(line) - len(line.lstrip()) <= indent:
                    break
                body.append(line)
            text = "\n".join(body)
            name = m.group(1) or m.group(2)
            if name is None:  # `rule:` with `name: f"prefix_{var}"`
                found = re.search(r"name:\s*\n\s*f?\"([^\"]+)\"", text)
                if not found:
                    continue
                pattern = re.sub(r"\\\{[^}]*\\\}", r"\\w+", re.escape(found.group(1)))
            local = "localrule: True" in text or (m.group(1) and not re.search(r"^\s*(shell|run|script):", text, re.M))
            if local:
                if name is None:
                    patterns.add(pattern)
                else:
                    names.add(name)
    return names, patterns


def parse_jobs(text: str) -> list[dict]:
    """[{rule, resources}] from the job blocks of a dry run."""
    jobs, job = [], None
    for line in text.splitlines():
        head = re.fullmatch(r"(?:local)?(?:rule|checkpoint) (\w+):", line.strip())
        if head:
            # merge groups counted together (`rule`), each planned as the job of its own rule (`name`)
            job = {"rule": family(head.group(1)), "name": head.group(1), "resources": {}, "threads": 1}
            jobs.append(job)
        elif job is not None and line.startswith("    wildcards: "):
            job["wildcards"] = dict(item.partition("=")[::2] for item in line.split(": ", 1)[1].split(", "))
        elif job is not None and line.startswith("    threads: "):
            job["threads"] = int(line.split(": ", 1)[1])
        elif job is not None and line.startswith("    resources: "):
            for item in line.split(": ", 1)[1].split(", "):
                key, _, value = item.partition("=")
                job["resources"][key] = value
        elif not line.strip():
            job = None
    return jobs


def dry_run(configfile: Path, extra: list[str] | None = None) -> list[dict]:
    """The jobs of `snakemake -n --profile cluster` of the config's whole DAG (an empty working directory)."""
    exe = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{exe}{os.pathsep}{os.environ.get('PATH', '')}"}
    with tempfile.TemporaryDirectory(prefix="layerswap-preview-") as work:
        cmd = [
            sys.executable,
            "-m",
            "snakemake",
            "-n",
            "--profile",
            str(REPO / "cluster"),
            "-s",
            str(REPO / "Snakefile"),
            "--directory",
            work,
            "--configfile",
            str(Path(configfile).resolve()),
            *(extra or []),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=Path.cwd())
    lines = [line for line in proc.stderr.splitlines() if line.strip() and not line.startswith("Using profile")]
    if proc.returncode != 0:
        site = [line for line in lines if line.startswith(("site settings:", "config error:"))]
        raise UserError(site[0] if site else "dry run with --profile cluster failed:\n" + "\n".join(lines[-5:]))
    return parse_jobs(proc.stdout + "\n" + proc.stderr)


KEYS = ("slurm_partition", "gpu", "cpus", "mem_mb", "runtime")


def kinds(jobs: list[dict], local: tuple[set[str], set[str]]) -> list[dict]:
    """Per (rule, requests): jobs, and whether they go to SLURM; in the dry run's order of first appearance."""
    names, patterns = local
    rows: dict[tuple, dict] = {}
    for job in jobs:
        rule, res = job["rule"], job["resources"]
        is_local = rule in names or any(re.fullmatch(p, rule) for p in patterns)
        gpus = int(res.get("gpu", 0) or 0)
        # a GPU job: cpus_per_gpu x GPUs; a CPU job: its threads (the plugin's --cpus-per-task)
        cpus = int(res.get("cpus_per_gpu", 1)) * gpus if gpus else int(res.get("cpus_per_task", job["threads"]))
        key = (
            rule,
            is_local,
            res.get("slurm_partition", ""),
            gpus,
            cpus,
            int(res.get("mem_mb", 0) or 0),
            int(res.get("runtime", 0) or 0),
        )
        row = rows.setdefault(key, dict(zip(("rule", "local", *KEYS), key), jobs=0))
        row["jobs"] += 1
    return list(rows.values())


def format_preview(rows: list[dict], limits: dict[str, dict[str, int]] | None = None) -> str:
    """The preview's text; `limits`: the site's partition limits (Site.limits), to mark requests they capped."""
    lines = [
        "jobs per rule: through SLURM (sbatch) or local (inside the Snakemake process on the login node)",
        f"{'rule':<28}{'SLURM':>7}{'local':>7}",
    ]
    per_rule: dict[str, Counter] = {}
    for r in rows:
        per_rule.setdefault(r["rule"], Counter())["local" if r["local"] else "slurm"] += r["jobs"]
    for rule, c in per_rule.items():
        lines.append(f"{rule:<28}{c['slurm'] or '-':>7}{c['local'] or '-':>7}")
    lines += [
        "",
        "what each SLURM job asks for (per job; GPU-h and CPU-h: all jobs of the kind at their time limit)",
        f"{'rule':<28}{'jobs':>5}  {'partition':<12}{'GPUs':>5}{'CPUs':>6}{'memory':>10}{'time':>9}"
        f"{'GPU-h':>9}{'CPU-h':>9}",
    ]
    gpu_h = cpu_h = 0.0
    capped = False
    for r in rows:
        if r["local"]:
            continue
        hours = r["jobs"] * r["runtime"] / 60
        gpu_h += hours * r["gpu"]
        cpu_h += hours * r["cpus"]
        cap = (limits or {}).get(r["slurm_partition"], {})
        mark = {k: "*" if cap.get(k) == v else " " for k, v in (("mem_mb", r["mem_mb"]), ("runtime", r["runtime"]))}
        capped = capped or "*" in mark.values()
        limit = f"{r['runtime'] // 60}:{r['runtime'] % 60:02d}{mark['runtime']}"
        lines.append(
            f"{r['rule']:<28}{r['jobs']:>5}  {r['slurm_partition']:<12}{r['gpu'] or '-':>5}{r['cpus']:>6}"
            f"{r['mem_mb'] / 1000:>8,.0f}GB{mark['mem_mb']}{limit:>9}{hours * r['gpu'] or 0:>9,.1f}"
            f"{hours * r['cpus']:>9,.1f}"
        )
    slurm = sum(r["jobs"] for r in rows if not r["local"])
    local = sum(r["jobs"] for r in rows if r["local"])
    lines.append(
        f"total: {slurm} SLURM jobs, {local} local; at their time limits {gpu_h:,.1f} GPU-hours and "
        f"{cpu_h:,.1f} CPU-hours (an upper bound)"
    )
    if capped:
        lines.append(
            "* = the partition's limit (sinfo: a node's memory, the partition's time limit): the need is "
            "larger; the job may run out of it (SFT resumes from its last checkpoint when retried)"
        )
    return "\n".join(lines)


def planned_limits(jobs: list[dict], plan) -> list[tuple[str, dict, int, float]]:
    """(rule, wildcards, time limit in minutes, planned minutes) of each GPU evaluation job the plan counts."""
    out = []
    for job in jobs:
        if not job["rule"].startswith("evaluate") or not int(job["resources"].get("gpu", 0) or 0):
            continue
        hours = plan.job_hours(job.get("name", job["rule"]), job.get("wildcards", {}))
        if hours:
            name = job.get("name", job["rule"])
            out.append((name, job.get("wildcards", {}), int(job["resources"]["runtime"]), hours * 60))
    return out


def format_limits(rows: list[tuple[str, dict, int, float]], floor: int) -> str:
    """One line: each GPU evaluation job's time limit over its own planned work, the jobs at the floor aside."""
    if not rows:
        return "time limits over planned work: no GPU evaluation job with a plan"
    above = [(r, w, t, p) for r, w, t, p in rows if t > floor]
    ratios = [t / p for _, _, t, p in above]
    big = max(rows, key=lambda x: x[2])
    span = f"{min(ratios):.2f}x-{max(ratios):.2f}x" if ratios else "-"
    where = ", ".join(f"{k}={v}" for k, v in big[1].items())
    short = [f"{r} {', '.join(f'{k}={v}' for k, v in w.items())}" for r, w, t, p in above if t < 1.5 * p]
    warn = f"; under 1.5x (resumed from the store when cut): {'; '.join(short)}" if short else ""
    return (
        f"time limits over planned work: {span} for {len(above)} GPU evaluation jobs ({len(rows) - len(above)} at the "
        f"{floor}-minute floor); the largest limit {big[2] // 60}:{big[2] % 60:02d} ({big[0]} {where}, planned "
        f"{big[3] / 60:.2f} h){warn}"
    )


def preview(configfile: Path, extra: list[str] | None = None, plan=None) -> tuple[str, dict[str, int]]:
    """(The preview's text, the jobs per rule of the dry run: `layerswap cost` adds what the config's `estimates`
    expect of them); with the evaluation `plan`, a line of each GPU evaluation job's time limit over its planned
    work."""
    jobs = [j for j in dry_run(configfile, extra) if j["rule"] != "all"]
    rows = kinds(jobs, local_rules())
    counts = dict(Counter(j["rule"] for j in jobs))
    from layerswap.workflow.resources import MIN_RUNTIME

    limits_line = format_limits(planned_limits(jobs, plan), MIN_RUNTIME) if plan is not None else ""
    from layerswap.workflow.site import Site, parse

    try:
        limits = parse(Site.locate()).limits()
    except UserError:
        limits = {}
    return "\n".join([format_preview(rows, limits), *([limits_line] if limits_line else [])]), counts
