"""The cluster path on a real scheduler: `snakemake --profile cluster` against a one-node SLURM on loopback
(scripts/slurm_cluster.py: munged, mariadbd, slurmdbd, slurmctld, slurmd from Debian's packages, fake GPUs as GRES, a
`cpu` and a `gpu` partition), with a test site file (cluster/site.yaml's keys) and the shipped profile unchanged.

- the micro config through the queue, to the tables: the same bytes as the local run of tests/test_workflow.py, while a
  running SFT job is requeued (preempted) and a running evaluation job is cancelled: both are run again and the run
  ends by itself; trivial CPU rules are not submitted;
- a preempted SFT job resumes from its last checkpoint and ends with the checkpoints of an uninterrupted run;
- a job killed at its time limit is retried with a longer one, and a failing branch leaves the others running;
- bad site settings (and site paths the jobs cannot use) stop the run with one line before anything is submitted;
- `layerswap cost --resources` plans the micro and the paper config against this cluster: toy jobs ask for toy
  resources on the CPU partition, the paper's for an 8B model, capped by the gpu partition's time limit.

`make slurm-deps` (called by `make test`) installs the packages where it can (root, Debian); elsewhere these tests
are skipped, unless LAYERSWAP_REQUIRE_SLURM=1 (set by .ci/run) makes a missing cluster a failure.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from conftest import HANG_GUARD, MICRO, REPO
from test_paper_config import paper_minutes

from layerswap.layout import Layout, R
from scripts.slurm_cluster import ACCOUNT, Cluster, differing

pytestmark = [pytest.mark.workflow, pytest.mark.slurm]

SITE = {"account": ACCOUNT, "partitions": {"cpu": "cpu", "gpu": "gpu"}, "gpu_model": None, "gpus_per_node": 8}
# Rules the workflow runs inside Snakemake's own process (`localrule: True`): never in the queue.
LOCAL_RULES = {
    "select",
    "merge_recipes",
    "soup_then_swap_recipes",
    "tables",
    "table_pages",
    "swap_grid",
    "table1_bars",
    "config_used",
    "toy_source",
    "toy_eval",
    "checkpoint_index",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    reason = Cluster.unavailable()
    if reason:
        if os.environ.get("LAYERSWAP_REQUIRE_SLURM") == "1":
            pytest.fail(f"LAYERSWAP_REQUIRE_SLURM=1 but {reason}")
        pytest.skip(reason)
    with Cluster(tmp_path_factory.mktemp("slurm")) as c:
        yield c


@pytest.fixture(scope="module")
def env(cluster, tmp_path_factory) -> dict[str, str]:
    site = tmp_path_factory.mktemp("site") / "site.yaml"
    site.write_text(yaml.safe_dump(SITE))
    return {
        **cluster.env,
        "LAYERSWAP_SITE": str(site),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }


def profile_cmd(workdir: Path, *args: str, snakefile: Path = REPO / "Snakefile") -> list[str]:
    """Snakemake with the shipped profile. Status checks start after 5 s instead of 40 (a short test run; the
    plugin then uses squeue as long as MinJobAge >= 15 s: the test cluster keeps 300 s)."""
    return [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(snakefile),
        "--directory",
        str(workdir),
        "--profile",
        str(REPO / "cluster"),
        "--jobs",
        "3",
        "--slurm-init-seconds-before-status-checks",
        "5",
        *args,
    ]


def squeue(env) -> list[tuple[str, str, str]]:
    """(job id, state, rule) of every job SLURM still knows (finished ones too, for MinJobAge)."""
    out = subprocess.run(
        ["squeue", "-h", "--states=all", "-o", "%i|%T|%k"], env=env, capture_output=True, text=True
    ).stdout
    jobs = []
    for line in out.splitlines():
        jobid, state, comment = line.split("|", 2)
        jobs.append((jobid, state, comment.removeprefix("rule_").split("_wildcards_")[0]))
    return jobs


class Faults(threading.Thread):
    """Watches the queue while a run goes on: records which rules were submitted and, once each, requeues (preempts)
    the first running job of `requeue` when `ready(jobid)` holds and cancels the first running job of `cancel`."""

    def __init__(self, env, requeue: str | None = None, cancel: str | None = None, ready=lambda: True):
        super().__init__(daemon=True)
        self.env, self.requeue, self.cancel, self.ready = env, requeue, cancel, ready
        self.done: dict[str, str] = {}  # action -> job id
        self.rules: dict[str, set[str]] = {}  # rule -> job ids
        self.stop = threading.Event()

    def slurm(self, *cmd: str) -> bool:
        return subprocess.run(cmd, env=self.env, capture_output=True).returncode == 0

    def run(self) -> None:
        while not self.stop.is_set():
            for jobid, state, rule in squeue(self.env):
                self.rules.setdefault(rule, set()).add(jobid)
                if state != "RUNNING":
                    continue
                if rule == self.requeue and "requeue" not in self.done and self.ready():
                    if self.slurm("scontrol", "requeue", jobid):
                        self.done["requeue"] = jobid
                        # SLURM holds a requeued job for 2 minutes (BeginTime); let it start at once
                        deadline = time.monotonic() + 60
                        while (
                            not self.slurm("scontrol", "update", f"jobid={jobid}", "StartTime=now")
                            and time.monotonic() < deadline
                        ):
                            time.sleep(0.5)
                elif rule == self.cancel and "cancel" not in self.done and self.slurm("scancel", jobid):
                    self.done["cancel"] = jobid
            time.sleep(0.2)


def run_with_faults(cmd: list[str], env, faults: Faults) -> subprocess.CompletedProcess:
    faults.start()
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=HANG_GUARD)
    finally:
        faults.stop.set()
        faults.join()
    return proc


def test_micro_through_slurm_matches_the_local_run(env, micro_run, tmp_path):
    """The micro DAG through the queue (every job an sbatch, status from squeue), a running SFT job requeued and a
    running checkpoint evaluation cancelled on the way: the run ends by itself (rc 0) with the local run's bytes."""
    work = tmp_path / "micro"
    faults = Faults(env, requeue="sft", cancel="evaluate_checkpoints")
    t0 = time.monotonic()
    proc = run_with_faults(profile_cmd(work, "--configfile", str(MICRO)), env, faults)
    wall = time.monotonic() - t0
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    assert set(faults.done) == {"requeue", "cancel"}, f"faults not injected: {faults.done} (rules seen {faults.rules})"
    # the cancelled job failed (squeue says CANCELLED) and was submitted again; the requeued one ran twice
    assert "Trying to restart job" in log, log[-3000:]
    assert not differing(micro_run, work / R), differing(micro_run, work / R)
    submitted = set(faults.rules)
    assert {"toy_corpus", "toy_base", "sft", "evaluate_checkpoints", "evaluate_merges", "heatmap"} <= submitted
    assert not submitted & LOCAL_RULES, f"trivial CPU rules went through the queue: {submitted & LOCAL_RULES}"
    print(f"micro through SLURM: {sum(map(len, faults.rules.values()))} SLURM jobs, {wall:.0f} s")


def test_preempted_sft_resumes_from_its_last_checkpoint(env, tmp_path):
    """An SFT job requeued after its first Trainer checkpoint resumes from it (its log says so) and ends with the
    checkpoints, byte for byte, of the same run uninterrupted (run locally)."""
    config = yaml.safe_load(MICRO.read_text())
    # one run long enough to be caught between its checkpoints: 248 steps, a checkpoint every 62
    config["sft"]["runs"]["math_1"].update(num_samples=1984, checkpoint_every=496)
    cfg = tmp_path / "long_sft.yaml"
    cfg.write_text(yaml.safe_dump(config))
    target = Layout().checkpoints_record("math_1")
    local = tmp_path / "local"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "-s",
            str(REPO / "Snakefile"),
            "--directory",
            str(local),
            "--configfile",
            str(cfg),
            "--cores",
            "2",
            target,
        ],
        env={**os.environ, "PATH": env["PATH"]},
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]

    work = tmp_path / "slurm"
    trainer = work / Layout().run_dir("math_1")
    first = lambda: any(trainer.glob("trainer-*/checkpoint-*/trainer_state.json"))  # noqa: E731
    faults = Faults(env, requeue="sft", ready=first)
    proc = run_with_faults(profile_cmd(work, target, "--configfile", str(cfg)), env, faults)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert "requeue" in faults.done, "the SFT job finished before its first checkpoint could be preempted"
    sft_log = (work / Layout().log("sft", "math_1")).read_text()
    assert "resuming" in sft_log and "checkpoint-" in sft_log, sft_log[-2000:]
    assert not differing(local / Layout().experts(), work / Layout().experts())


def test_time_limit_retry_and_keep_going(env, tmp_path):
    """tests/slurm_faults/Snakefile with the shipped profile: `slow` is killed at its 1-minute limit (TIMEOUT) and
    retried with 2 minutes; `broken` fails every attempt (retries: 2); `quick` and `slow` finish meanwhile
    (keep-going); Snakemake then exits non-zero by itself."""
    work = tmp_path / "faults"
    proc = subprocess.run(
        profile_cmd(work, snakefile=REPO / "tests" / "slurm_faults" / "Snakefile"),
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
    )
    log = proc.stdout + proc.stderr
    assert proc.returncode != 0, log[-3000:]
    assert (work / "quick.txt").read_text() == "ok\n"
    assert (work / "slow.txt").read_text() == "attempt 2\n", log[-3000:]  # the first attempt timed out
    assert "TIMEOUT" in log, log[-3000:]
    assert not (work / "broken.txt").exists()
    broken = [job for job in squeue(env) if job[2] == "broken"]
    assert len(broken) == 3 and {state for _, state, _ in broken} == {"FAILED"}, broken  # the first try + 2 retries


BAD_SITES = {
    "missing": (None, "no site file; copy cluster/site.example.yaml"),
    "placeholder account": ({**SITE, "account": "CHANGE_ME"}, "'account' is not set (got 'CHANGE_ME')"),
    "no gpu partition": ({**SITE, "partitions": {"cpu": "cpu"}}, "'partitions.gpu' is not set"),
    "unknown partition": (
        {**SITE, "partitions": {"cpu": "cpu", "gpu": "a100"}},
        "'partitions.gpu' 'a100' is not a partition of this cluster (sinfo lists: cpu, gpu)",
    ),
    "more GPUs than a node": (
        {**SITE, "gpus_per_node": 16},
        "'gpus_per_node' is 16, but the nodes of partition 'gpu' have at most 8 GPUs",
    ),
    "GPU model the nodes lack": ({**SITE, "gpu_model": "h100"}, "have at most 0 GPUs of model 'h100'"),
    "not your account": (
        {**SITE, "account": "someone_else"},
        f"'account' 'someone_else' is not one of yours (sacctmgr lists: {ACCOUNT}",
    ),
    "no such cache": (
        {**SITE, "hf_home": "/nonexistent/hf_cache"},
        "'hf_home' '/nonexistent/hf_cache' is not a directory; create it and pre-stage",
    ),
    "path variable": (
        {**SITE, "scratch": "/scratch/<user>/layerswap"},
        "'<user>' is a Snakemake path variable; write the path itself, e.g. $USER",
    ),
}


@pytest.mark.parametrize("case", list(BAD_SITES))
def test_bad_site_settings_stop_before_submission(env, tmp_path, case):
    site, message = BAD_SITES[case]
    path = tmp_path / "site.yaml"
    if site is not None:
        path.write_text(yaml.safe_dump(site))
    before = {j for j, _, _ in squeue(env)}
    proc = subprocess.run(
        profile_cmd(tmp_path / "work", "--configfile", str(MICRO)),
        env={**env, "LAYERSWAP_SITE": str(path)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = [line for line in proc.stderr.splitlines() if line.strip() and not line.startswith("Using profile")]
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert len(lines) == 1 and lines[0].startswith(f"site settings: {path}: ") and message in lines[0], lines
    assert not {j for j, _, _ in squeue(env)} - before  # nothing submitted (earlier tests' jobs may age out)
    assert not (tmp_path / "work" / R).exists()


def preview_rows(env, config: Path) -> list[dict]:
    """The per-job-kind rows of `layerswap cost --resources` (what each SLURM job asks for)."""
    proc = subprocess.run(
        [sys.executable, "-m", "layerswap.cli", "cost", "--configfile", str(config), "--resources"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("what each SLURM job asks for")) + 2
    rows = []
    for line in lines[start:]:
        if line.startswith("total:"):
            break
        rule, jobs, part, gpus, cpus, mem, time_, *_ = line.split()
        hours, minutes = time_.rstrip("*").split(":")
        rows.append(
            {
                "rule": rule,
                "jobs": int(jobs),
                "partition": part,
                "gpus": 0 if gpus == "-" else int(gpus),
                "cpus": int(cpus),
                "mem_gb": int(mem.rstrip("*").removesuffix("GB").replace(",", "")),
                "minutes": int(hours) * 60 + int(minutes),
                "capped": "*" in time_,
            }
        )
    print(proc.stdout)
    return rows


def test_preview_of_micro_and_paper_against_the_cluster(env):
    """The preview with the cluster profile against this SLURM (its sinfo and sacctmgr check the site): the micro
    config's 24 SLURM jobs on the CPU partition, no GPU, at most 8 GB and 2 hours each; the paper config's GPU jobs on
    the GPU partition with the requests docs/CLUSTER.md gives, those over the gpu partition's 4 hours capped at it."""
    micro = preview_rows(env, MICRO)
    assert sum(r["jobs"] for r in micro) == 24
    assert {"sft", "evaluate_merges", "evaluate_checkpoints", "heatmap"} <= {r["rule"] for r in micro}
    for row in micro:
        assert row["partition"] == "cpu" and row["gpus"] == 0 and row["mem_gb"] <= 8 and row["minutes"] <= 120, row
    rows = preview_rows(env, REPO / "config" / "paper.yaml")
    paper = {(r["rule"], r["gpus"]): r for r in rows}
    assert (paper["sft", 8]["mem_gb"], paper["sft", 8]["cpus"], paper["sft", 4]["mem_gb"]) == (105, 64, 89)
    # merge evaluations in groups of a language's configs (evaluation.merge_configs_per_job), one rule each, shown
    # together; each asks for its own group's work
    from collections import Counter

    from layerswap.config import load_config
    from layerswap.workflow.cost import eval_plan

    paper_yaml = REPO / "config" / "paper.yaml"
    groups = eval_plan(load_config(paper_yaml)).spec.merge_groups.groups
    shown = [r for r in rows if r["rule"] == "evaluate_merge_group"]
    assert {r["mem_gb"] for r in shown} == {149} and sum(r["jobs"] for r in shown) == len(groups) == 29
    minutes = Counter()
    for r in shown:
        minutes[r["minutes"]] += r["jobs"]
    assert minutes == Counter(min(paper_minutes(g.rule, 1), 240) for g in groups)
    # Table 2's evaluations, one job per language: each asks for its language's work (Telugu's prompts are longest)
    table2 = Counter()
    for r in rows:
        if r["rule"] == "evaluate_table2":
            table2[r["minutes"]] += r["jobs"]
    jobs = {dict(j.wildcards)["lang"] for j in eval_plan(load_config(paper_yaml)).jobs if j.rule == "evaluate_table2"}
    wanted = Counter(min(paper_minutes("evaluate_table2", 1, wildcards={"lang": lang}), 240) for lang in jobs)
    assert table2 == wanted and len(wanted) > 1
    for (rule, gpus), run in {
        ("sft", 8): "jpn_1",
        ("sft", 4): "math_1",
    }.items():
        wanted = paper_minutes(rule, gpus, run)  # the uncapped request (tests/test_paper_config.py)
        assert paper[rule, gpus]["minutes"] == min(wanted, 240), (rule, gpus, wanted)  # MaxTime 4 h
        assert paper[rule, gpus]["capped"] == (wanted >= 240), (rule, gpus, wanted)
    assert paper["sft", 4]["capped"]  # 8 GPU-hours on 4 GPUs, x2: over the 4 hours
    assert all(r["partition"] == "gpu" for (rule, gpus), r in paper.items() if gpus)
    assert paper["hub_data", 0]["partition"] == "cpu"
