"""Deleted results are rebuilt (issue 30): every file a job of the default DAG declares is a target of `all`, so the
next plain `snakemake` rebuilds a deleted intermediate (Snakemake >= 7.7 does not revisit the intermediates of targets
that are present) and reruns exactly what reads it, with the same bytes as before.

Expected plans are written from the DAG's meaning (what each job reads), as in test_staleness.py.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from conftest import REPO, snakemake

from layerswap.audit.files import is_run_log
from layerswap.contracts import merge_model_id
from layerswap.layout import Layout, R
from layerswap.workflow.plan import parse_dry_run
from scripts.slurm_cluster import run_record_folders

pytestmark = pytest.mark.workflow
L = Layout()

CONFIGS = ["swap_default", "soup_uniform", "ties_d05"]
REPORT = {"tables", "table_pages"}  # every evaluation reaches the tables and their pages
TABLE2 = {"table2_models", "evaluate_table2[lang=en]"}  # the list of Table 2's models (winners) and their evaluation
# Deleted file (or folder) -> the jobs the next run must run: the job that writes it and every job that reads what
# reruns (the manifest and `all` aside). micro.yaml: runs math_1, toy_swh_1, joint_toy_swh_1; one language toy_swh.
DELETIONS = {
    L.selection("toy_swh"): {
        "select[expert=toy_swh]",
        "soup_then_swap_recipes[lang=toy_swh]",
        "evaluate_soup_then_swap[lang=toy_swh]",
        *(f"merge_recipes[cfg={c},lang=toy_swh]" for c in CONFIGS),
        *(f"evaluate_merges[cfg={c},lang=toy_swh]" for c in CONFIGS),
        "evaluate_checkpoints_other[part=other,run=toy_swh_1]",  # Table 5's, on the selected checkpoints
        "evaluate_checkpoints_other[part=other_en,run=toy_swh_1]",
        *TABLE2,
        "heatmap",
        "swap_grid",
        "table1_bars",
        *REPORT,
    },
    # a recipe of a Table 2 config (read by evaluate_table2), not of Table 1's bars or the swap grid
    L.recipe("ties_d05", "toy_swh", "l2m1"): {
        "merge_recipes[cfg=ties_d05,lang=toy_swh]",
        "evaluate_merges[cfg=ties_d05,lang=toy_swh]",
        *TABLE2,
        *REPORT,
    },
    L.eval_file(merge_model_id("swap_default", "toy_swh", "l1m2"), "mgsm"): {
        "evaluate_merges[cfg=swap_default,lang=toy_swh]",
        "swap_grid",
        "table1_bars",
        *TABLE2,  # swap_default is Table 2's layer-swap best-of config
        *REPORT,
    },
    # a whole folder: every pair's evaluation and sample log
    str(Path(L.eval_file(merge_model_id("soup_uniform", "toy_swh", "l1m1"), "mgsm")).parents[1]): {
        "evaluate_merges[cfg=soup_uniform,lang=toy_swh]",
        "table1_bars",
        *TABLE2,
        *REPORT,
    },
    L.checkpoint_index("math_1", "other"): {"evaluate_checkpoints_other[part=other,run=math_1]", *REPORT},
    # an evaluation set: the base's and the math and language runs' evaluations of MMLU read it (not selection: MMLU
    # is Table 5's, which shows no joint run)
    L.eval_data("mmlu", "en"): {
        "toy_eval[dataset=mmlu_en]",
        "evaluate_base",
        *(f"evaluate_checkpoints_other[part=other,run={r}]" for r in ("math_1", "toy_swh_1")),
        *REPORT,
    },
}


def plan(work: Path) -> set[str]:
    proc = snakemake(work, "--dry-run")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {job.name for job in parse_dry_run(proc.stdout + proc.stderr) if job.rule not in ("all", "manifest")}


def result_files(results: Path) -> dict[str, bytes]:
    """Every result's bytes: what the manifest compares (not the logs, the run logs, the manifest, nor the hash cache
    and the store's fed records: run records, scripts/slurm_cluster.py run_record_folders)."""
    out = {}
    for p in sorted(results.rglob("*")):
        rel = str(p.relative_to(results))
        if rel.startswith(run_record_folders()):
            continue
        if p.is_file() and rel != L.relative(L.manifest()) and not is_run_log(p):
            out[rel] = p.read_bytes()
    return out


def test_deleted_results_are_rebuilt_with_the_same_bytes(micro_run, tmp_path):
    work = tmp_path / "work"
    shutil.copytree(micro_run.parent, work, symlinks=True, ignore=shutil.ignore_patterns("locks"))
    before = result_files(work / R)
    assert plan(work) == set()
    aside = tmp_path / "aside"
    for path, expected in DELETIONS.items():  # one at a time: the plan of each
        os.renames(work / path, aside / path)  # a rename keeps the mtime: putting it back undoes the deletion
        assert plan(work) == expected, path
        os.renames(aside / path, work / path)
    assert plan(work) == set()
    for path in DELETIONS:  # all at once, for real
        shutil.rmtree(work / path) if (work / path).is_dir() else (work / path).unlink()
    proc = snakemake(work)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ran = {m.group(1) for m in re.finditer(r"Finished jobid: \d+ \(Rule: (\w+)\)", proc.stderr)}
    assert ran == {name.split("[")[0] for jobs in DELETIONS.values() for name in jobs} | {"manifest", "all"}
    after = result_files(work / R)
    assert after.keys() == before.keys()
    assert [p for p in before if after[p] != before[p]] == []  # tables, selections, evaluations: the same bytes
    assert plan(work) == set()


def _dry_run_jobs(text: str) -> dict[str, dict[str, list[str]]]:
    """{job name: {"input": [...], "output": [...]}} of a dry run's log."""
    jobs = {}
    for block in re.split(r"\n(?=(?:local)?rule \S+:\n)", text):
        head = re.match(r"(?:local)?rule (\S+):\n", block)
        if head:
            fields = dict(re.findall(r"^\s+(input|output|wildcards): (.*)$", block, re.M))
            name = head.group(1) + (f"[{fields['wildcards']}]" if "wildcards" in fields else "")
            jobs[name] = {k: fields[k].split(", ") for k in ("input", "output") if k in fields}
    return jobs


@pytest.mark.parametrize(
    "configfile",
    [REPO / "config" / "micro.yaml", None, REPO / "config" / "paper.yaml", REPO / "config" / "smollm2.yaml"],
    ids=["micro", "default", "paper", "smollm2"],
)
def test_every_output_of_the_default_dag_is_a_target_of_all(tmp_path, configfile):
    proc = snakemake(tmp_path, "--dry-run", configfile=configfile)
    assert proc.returncode == 0, proc.stderr[-3000:]
    jobs = _dry_run_jobs(proc.stdout)
    targets = set(jobs.pop("all")["input"])
    outputs = {f for job in jobs.values() for f in job.get("output", [])}
    assert len(jobs) > 40 and outputs <= targets


@pytest.mark.parametrize("configfile", [None, REPO / "config" / "paper.yaml"], ids=["default", "paper"])
def test_every_output_of_the_ablations_dag_is_a_target_of_its_rule(tmp_path, configfile):
    """`snakemake ablations` (and `ablation_<name>`) lists every file its jobs write, the main DAG's up to the
    selections included: a deleted ablation selection, recipe, evaluation or checkpoint index is rebuilt too. (The
    data files are targets of `all`, whose run makes them; the ablations' DAG would grow with all of them.)"""
    proc = snakemake(tmp_path, "--dry-run", "ablations", "--config", "ablations=all", configfile=configfile)
    assert proc.returncode == 0, proc.stderr[-3000:]
    jobs = _dry_run_jobs(proc.stdout)
    targets = set(jobs.pop("ablations")["input"])
    for name in [n for n in jobs if n.startswith("ablation_") and not n.startswith("ablation_table_") and "[" not in n]:
        assert set(jobs.pop(name)["input"]) <= targets, name
    data = (L.raw(""), L.eval_data_dir() + "/", str(Path(L.sft_mix("x")).parent) + "/")  # raw, eval, SFT mixes
    outputs = {f for job in jobs.values() for f in job.get("output", []) if not f.startswith(data)}
    assert len(jobs) > 100 and outputs <= targets, sorted(outputs - targets)[:10]
