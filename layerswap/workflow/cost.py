"""`layerswap cost --configfile config/paper.yaml`: what a plan costs before it runs.

Jobs per rule come from Snakemake's own dry run of the whole DAG (run in an empty directory, so every job counts,
whatever results/ already holds), or from ``--counts-json`` (a {rule: jobs} mapping, e.g. saved from an earlier
run). Each rule's per-job estimate comes from the config's ``estimates`` ({rule: {gpu_hours, cpu_hours,
disk_gb, scratch_gb}}); totals are given per stage. `disk_gb` is what a job leaves; `scratch_gb` what it holds only
while it runs (SFT: the Trainer's resumable state, deleted once the run is complete), so the peak disk is the kept
total plus the scratch of the jobs that run at once (`--concurrent`; default: every job of a rule at once, the
upper bound). Each rule's entry may carry `source`: "estimate" (the default: the config author's guess) or
"measured: <script>, <device>, <date>" (e.g. from scripts/measure/benchmark_costs.py); the output marks every rule
with its source, lists the measured ones with where they were measured, and lists the rules that have no entry.

The sft rule's `disk_gb` is for checkpoints stored in the base's dtype (`base.dtype`); runs exported in another
dtype (`sft.defaults.export_dtype` or a run's own) keep proportionally more or less, and the figure is scaled so.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from layerswap.errors import UserError
from layerswap.workflow.merge_groups import family

REPO = Path(__file__).resolve().parents[2]

#: Stage of each rule (data flows top to bottom); rules not listed fall in "other".
STAGES: dict[str, tuple[str, ...]] = {
    "data": ("config_used", "toy_corpus", "toy_source", "toy_eval", "hub_data", "sft_mix"),
    "base": ("toy_base", "prepare_base"),
    "sft": ("sft",),
    "selection": ("evaluate_checkpoints", "checkpoint_index", "select", "evaluate_base_select"),
    "merge": ("merge_recipes", "soup_then_swap_recipes", "merge_checkpoint"),
    "evaluation": (
        "evaluate_base",
        "evaluate_base_skipped",
        "evaluate_merges",
        "evaluate_soup_then_swap",
        "table2_models",
        "evaluate_table2",
    ),
    "tables": ("tables", "heatmap", "swap_grid", "table1_bars", "table_pages", "report"),
}
METRICS = ("gpu_hours", "cpu_hours", "disk_gb")
#: bytes per weight of each base.dtype and sft export_dtype
BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "fp32": 4, "bf16": 2}


def stage_of(rule: str) -> str:
    """The stage of a rule; checkpoint evaluations (before selection, and Table 5's on the selected checkpoints
    after it) count in the selection stage."""
    if rule.startswith("evaluate_checkpoint") or rule == "checkpoint_skipped":
        return "selection"
    for stage, rules in STAGES.items():
        if rule in rules:
            return stage
    if rule.startswith("evaluate_"):
        return "evaluation"
    return "other"


def parse_job_stats(text: str) -> dict[str, int]:
    """{rule: jobs} from the first 'Job stats' table of a Snakemake dry run (without the 'total' and 'all' rows)."""
    lines = text.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == "Job stats:")
    except StopIteration:
        raise UserError("the dry run printed no 'Job stats' table (nothing to do?)") from None
    counts: dict[str, int] = {}
    for line in lines[start + 3 :]:
        match = re.fullmatch(r"\s*(\S+)\s+(\d+)\s*", line)
        if not match:
            break
        rule, n = match.group(1), int(match.group(2))
        if rule not in ("total", "all"):
            counts[family(rule)] = counts.get(family(rule), 0) + n  # merge groups: one rule each, counted together
    return counts


def dry_run_counts(
    configfile: Path, snakefile: Path = REPO / "Snakefile", extra: list[str] | None = None
) -> dict[str, int]:
    """Jobs per rule of the full DAG: `snakemake -n` in an empty working directory."""
    exe = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{exe}{os.pathsep}{os.environ.get('PATH', '')}"}
    with tempfile.TemporaryDirectory(prefix="layerswap-cost-") as work:
        cmd = [
            sys.executable,
            "-m",
            "snakemake",
            "-n",
            "--quiet",
            "rules",
            "-s",
            str(snakefile),
            "--directory",
            work,
            "--configfile",
            str(Path(configfile).resolve()),
            "--cores",
            "1",
            *(extra or []),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=snakefile.parent)
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-5:])
        raise UserError(f"dry run failed:\n{tail}")
    return parse_job_stats(proc.stdout + "\n" + proc.stderr)


def source_of(est: dict) -> str:
    """Where a per-job figure comes from: "estimate" (also for a rule with none), or "measured: ..." as written."""
    return str(est.get("source") or "estimate") if est else "estimate"


def is_measured(source: str) -> bool:
    return source.startswith("measured")


def export_scaled(estimates: dict[str, dict], config: dict) -> tuple[dict[str, dict], str | None]:
    """(`estimates` with the sft rule's disk_gb per job: where the base's parameter count is known, every checkpoint
    each run keeps (num_samples / checkpoint_every: the joint runs of config/paper.yaml keep 16, the others 8) x the
    parameters x the bytes of the run's export dtype, averaged over the runs; else the config's figure scaled from
    the base's dtype to the runs' export dtypes; a line saying which, or None where nothing changes)."""
    from layerswap.config import checkpoint_count, effective_runs
    from layerswap.workflow.batch_fit import parameters

    est = estimates.get("sft") or {}
    base = config["base"].get("dtype", "float32")
    runs = effective_runs(config)
    exports = {name: run.get("export_dtype", "base") for name, run in runs.items()}
    params = parameters(config)
    if params and runs:
        kept = {n: checkpoint_count(r) for n, r in runs.items()}
        total = sum(kept[n] * params * BYTES[base if e == "base" else e] for n, e in exports.items()) / 1e9
        counts = ", ".join(
            f"{k} checkpoints: {sum(v == k for v in kept.values())} runs" for k in sorted(set(kept.values()))
        )
        scaled = {**estimates, "sft": {**est, "disk_gb": total / len(runs)}}
        return scaled, (
            f"sft disk: every kept checkpoint ({counts}) x {params:.3g} parameters x its export dtype's bytes: "
            f"{total:,.1f} GB in all (in place of the estimate's {est.get('disk_gb', 0):g} GB a job)"
        )
    factor = sum(BYTES[base if e == "base" else e] for e in exports.values()) / (BYTES[base] * len(exports))
    if "disk_gb" not in est or factor == 1:
        return estimates, None
    scaled = {**estimates, "sft": {**est, "disk_gb": est["disk_gb"] * factor}}
    kinds = ", ".join(sorted({base if e == "base" else e for e in exports.values()}))
    return scaled, (
        f"sft disk: checkpoints exported in {kinds} (export_dtype), the estimate is per job in the "
        f"base's {base} (base.dtype): x{factor:g}"
    )


PLAN_SOURCE = "plan: models x language keys x items at the rates of layerswap/workflow/eval_plan.py"


def eval_plan(config: dict):
    """The evaluation plan of a config (layerswap.workflow.eval_plan.EvalPlan), from the rules' own view of it."""
    from layerswap.workflow.resources import Requests
    from layerswap.workflow.spec import Spec

    return Requests(config, Spec(config, {}, {}, [], None)).plan


def with_plan(estimates: dict[str, dict], counts: dict[str, int], plan) -> dict[str, dict]:
    """`estimates` with each evaluation rule's GPU-hours per job taken from the plan (its total over the rule's jobs
    in the dry run), marked with PLAN_SOURCE; the toy world's plan has no GPU-hours and changes nothing."""
    out = dict(estimates)
    for rule, hours in plan.gpu_hours().items():
        if counts.get(rule):
            out[rule] = {**(estimates.get(rule) or {}), "gpu_hours": hours / counts[rule], "source": PLAN_SOURCE}
    return out


def plan_cost(counts: dict[str, int], estimates: dict[str, dict], concurrent: int | None = None) -> dict:
    """Per rule and per stage: jobs and totals of each metric (jobs x per-job estimate); the peak disk: everything
    kept plus the scratch of min(jobs, concurrent) jobs of every rule at once."""
    rules, stages = {}, {}
    for rule, jobs in counts.items():
        est = estimates.get(rule) or {}
        at_once = jobs if concurrent is None else min(jobs, concurrent)
        row = {
            "stage": stage_of(rule),
            "jobs": jobs,
            "estimated": bool(est),
            "source": source_of(est),
            **{m: round(jobs * float(est.get(m, 0.0)), 6) for m in METRICS},
            "scratch_gb": round(at_once * float(est.get("scratch_gb", 0.0)), 6),
        }
        rules[rule] = row
        agg = stages.setdefault(row["stage"], {"jobs": 0, **{m: 0.0 for m in METRICS}})
        agg["jobs"] += jobs
        for m in METRICS:
            agg[m] = round(agg[m] + row[m], 6)
    order = list(STAGES) + ["other"]
    stages = {s: stages[s] for s in order if s in stages}
    total = {
        "jobs": sum(r["jobs"] for r in rules.values()),
        **{m: round(sum(r[m] for r in rules.values()), 6) for m in METRICS},
    }
    total["peak_disk_gb"] = round(total["disk_gb"] + sum(r["scratch_gb"] for r in rules.values()), 6)
    return {
        "rules": rules,
        "stages": stages,
        "total": total,
        "concurrent": concurrent,
        "no_estimate": sorted(r for r, row in rules.items() if not row["estimated"]),
        "unused_estimates": sorted(r for r in estimates if r not in counts),
    }


def format_cost(cost: dict) -> str:
    def fmt(x: float) -> str:
        return f"{x:,.1f}" if x else "-"

    head = f"{'rule':<28}{'stage':<12}{'jobs':>7}{'GPU-h':>11}{'CPU-h':>10}{'disk GB':>11}  source"
    measured = {r: row["source"] for r, row in cost["rules"].items() if is_measured(row["source"])}
    kind = f"{len(measured)} rule(s) measured, the others guesses" if measured else "all guesses, none measured"
    planned = sorted(r for r, row in cost["rules"].items() if row["source"] == PLAN_SOURCE)
    lines = [f"jobs per rule (per-job figures from the config's `estimates`: {kind})", head]
    if planned:
        lines[0] = (
            f"jobs per rule (GPU-hours of {', '.join(planned)}: the evaluation plan above; the others' per-job "
            f"figures from the config's `estimates`: {kind})"
        )
    for rule, r in sorted(
        cost["rules"].items(),
        key=lambda kv: (list(STAGES).index(kv[1]["stage"]) if kv[1]["stage"] in STAGES else 99, kv[0]),
    ):
        mark = "" if r["estimated"] else "  (no estimate)"
        kind = "plan" if r["source"] == PLAN_SOURCE else "measured" if is_measured(r["source"]) else "estimate"
        lines.append(
            f"{rule:<28}{r['stage']:<12}{r['jobs']:>7}{fmt(r['gpu_hours']):>11}{fmt(r['cpu_hours']):>10}"
            f"{fmt(r['disk_gb']):>11}  "
            f"{kind if r['estimated'] else '-'}{mark}"
        )
    lines += ["", "by stage", f"{'stage':<40}{'jobs':>7}{'GPU-h':>11}{'CPU-h':>10}{'disk GB':>11}"]
    for stage, s in cost["stages"].items():
        lines.append(
            f"{stage:<40}{s['jobs']:>7}{fmt(s['gpu_hours']):>11}{fmt(s['cpu_hours']):>10}{fmt(s['disk_gb']):>11}"
        )
    t = cost["total"]
    lines.append(
        f"{'total':<40}{t['jobs']:>7}{fmt(t['gpu_hours']):>11}{fmt(t['cpu_hours']):>10}{fmt(t['disk_gb']):>11}"
    )
    scratch = {r: row["scratch_gb"] for r, row in cost["rules"].items() if row["scratch_gb"]}
    at_once = (
        "every job of a rule at once"
        if cost["concurrent"] is None
        else f"at most {cost['concurrent']} jobs of a rule at once"
    )
    lines.append(
        f"peak disk: {fmt(t['peak_disk_gb'])} GB = {fmt(t['disk_gb'])} GB kept + scratch while jobs run ("
        + (", ".join(f"{r} {fmt(g)} GB" for r, g in scratch.items()) or "none")
        + f"; {at_once})"
    )
    for rule, source in sorted(measured.items()):
        lines.append(f"{rule}: {source}")
    if cost["no_estimate"]:
        lines.append(f"no estimate (counted as 0): {', '.join(cost['no_estimate'])}")
    if cost["unused_estimates"]:
        lines.append(f"estimates for rules not in this plan: {', '.join(cost['unused_estimates'])}")
    lines += cost.get("notes", [])
    return "\n".join(lines)


def format_expected(cost: dict) -> str:
    """The line `cost --resources` ends with: the GPU- and CPU-hours the config's `estimates` expect of the plan."""
    rows = {r: row for r, row in cost["rules"].items() if row["estimated"]}
    planned = sorted(r for r, row in rows.items() if row["source"] == PLAN_SOURCE)
    measured = sorted(r for r, row in rows.items() if is_measured(row["source"]))
    guessed = sorted(r for r, row in rows.items() if r not in planned and r not in measured)
    return (
        f"expected (the evaluation plan and the config's `estimates`, per job x jobs): "
        f"{cost['total']['gpu_hours']:,.1f} GPU-hours, {cost['total']['cpu_hours']:,.1f} CPU-hours; "
        f"from the evaluation plan: {', '.join(planned) or 'none'}; measured: {', '.join(measured) or 'none'}; "
        f"estimated: {', '.join(guessed) or 'none'}"
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--configfile", required=True, type=Path, help="workflow config, e.g. config/paper.yaml")
    parser.add_argument("--counts-json", default=None, help="{rule: jobs} instead of a dry run")
    parser.add_argument("--json", action="store_true", help="print the cost as JSON")
    parser.add_argument(
        "--concurrent",
        type=int,
        default=None,
        help="jobs of one rule running at once, for the peak disk (default: all of them)",
    )
    parser.add_argument(
        "--resources",
        action="store_true",
        help="instead: what each job will ask of SLURM under --profile cluster (partition, GPUs, "
        "CPUs, memory, time limit; layerswap/workflow/slurm_preview.py), with totals",
    )


def run(args: argparse.Namespace) -> None:
    from layerswap.config import load_config

    config = load_config(args.configfile)
    if args.resources:
        from layerswap.workflow.slurm_preview import preview

        text, counts = preview(args.configfile, plan=eval_plan(config))
        estimates, note = export_scaled(config.get("estimates") or {}, config)
        estimates = with_plan(estimates, counts, eval_plan(config))
        print("\n".join([text, format_expected(plan_cost(counts, estimates)), *([note] if note else [])]))
        return
    counts = json.loads(args.counts_json) if args.counts_json else dry_run_counts(args.configfile)
    if args.concurrent is not None and args.concurrent < 1:
        raise UserError("--concurrent must be >= 1")
    plan = eval_plan(config)
    estimates, note = export_scaled(config.get("estimates") or {}, config)
    cost = plan_cost(counts, with_plan(estimates, counts, plan), args.concurrent)
    cost["notes"] = [note] if note else []
    if args.json:
        cost["evaluation_plan"] = [vars(r) for r in plan.rows]
        print(json.dumps(cost, indent=1))
    else:
        print(plan.format() + "\n\n" + format_cost(cost))
