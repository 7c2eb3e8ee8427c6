"""Merge evaluations grouped per language (issue 48, item 6; `evaluation.merge_configs_per_job`,
layerswap/workflow/merge_groups.py): one job per group of a language's merge configs pays start-up and expert reads
once; it writes the bytes per-config jobs write, a changed config evaluates only its own merges (the store feeds the
group's others), and a group job killed mid-way resumes from the store with the same bytes."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import MICRO

from layerswap.layout import Layout
from layerswap.workflow.merge_groups import chunks

COUNT = re.compile(r"evaluate: store: reused (\d+), evaluated (\d+)")
RAN = re.compile(r"Finished jobid: \d+ \(Rule: (\w+)\)")


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_groups_are_the_fewest_of_at_most_n_and_as_equal_as_can_be():
    assert chunks(list(range(86)), 12) == [list(range(i, i + n)) for i, n in zip([0, 11, 22, 33, 44, 55, 66, 76],
                                                                                 [11] * 6 + [10, 10])]  # fmt: skip
    assert [len(c) for c in chunks(list(range(84)), 12)] == [12] * 7
    assert [len(c) for c in chunks(list(range(4)), 3)] == [2, 2]
    assert chunks([1], 5) == [[1]] and chunks([], 5) == []


def test_the_default_is_one_job_per_config_and_language():
    """merge_configs_per_job: 1 (the schema's default): no groups, the rules of before."""
    from layerswap.config import load_config
    from layerswap.workflow.spec import Spec

    spec = Spec(load_config(MICRO))
    assert spec.merge_groups.per_job == 1 and spec.merge_groups.groups == []


def test_the_micro_config_in_groups_of_three(tmp_path):
    """4 members in toy_swh (3 configs the tables read + soup-then-swap): 2 groups of 2, in sorted order."""
    from layerswap.config import load_config
    from layerswap.workflow.spec import Spec

    config = yaml.safe_load(MICRO.read_text())
    config["evaluation"]["merge_configs_per_job"] = 3
    path = tmp_path / "grouped.yaml"
    path.write_text(yaml.safe_dump(config))
    groups = Spec(load_config(path)).merge_groups.groups
    assert [(g.rule, g.configs, g.models) for g in groups] == [
        ("evaluate_merge_group_toy_swh_1", ["soup_uniform", "swap_default"], 8),
        ("evaluate_merge_group_toy_swh_2", ["ties_d05", "soupswap"], 6),
    ]


# ---- the workflow ------------------------------------------------------------------------------------------------
def _grouped_config(tmp_path: Path, edit=None) -> Path:
    config = yaml.safe_load(MICRO.read_text())
    config["evaluation"]["merge_configs_per_job"] = 3
    if edit:
        edit(config)
    path = tmp_path / f"grouped{'-edited' if edit else ''}.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def grouped(micro_run, tmp_path_factory):
    """The finished micro run, its merge evaluations and store removed, run again in groups of 3 configs: the group
    jobs evaluate every merge afresh."""
    from conftest import snakemake

    tmp = tmp_path_factory.mktemp("grouped")
    work = tmp / "work"
    shutil.copytree(micro_run.parent, work, symlinks=True, ignore=shutil.ignore_patterns("locks"))
    layout = Layout.at(work / "results")
    shutil.rmtree(layout.evals() + "/merge")
    shutil.rmtree(layout.store())
    proc = snakemake(work, configfile=_grouped_config(tmp))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return work, RAN.findall(proc.stderr), tmp


@pytest.mark.workflow
def test_grouped_jobs_write_the_bytes_of_one_job_per_config(micro_run, grouped):
    work, ran, _ = grouped
    assert sorted(r for r in ran if r.startswith("evaluate_merge")) == [
        "evaluate_merge_group_toy_swh_1",
        "evaluate_merge_group_toy_swh_2",
    ]
    layout = Layout.at(work / "results")
    for name, models in (("toy_swh_1", 8), ("toy_swh_2", 6)):
        log = Path(layout.log("evaluate", f"merge_group_{name}")).read_text()
        assert COUNT.findall(log) == [("0", str(models))], log[-2000:]
        assert f"merges built ahead of their evaluation: {models - 1} of {models}" in log
    ours = Layout.at(micro_run)
    figures = str(Path(ours.figure_prefix("x")).parent)
    for folder in (ours.evals() + "/merge", ours.table_dir(), figures, ours.selection_dir()):
        theirs = work / "results" / Path(folder).relative_to(micro_run)
        assert files(theirs) == files(Path(folder)), folder


@pytest.mark.workflow
def test_a_changed_config_evaluates_its_own_merges_and_the_store_feeds_its_group(grouped):
    from conftest import snakemake

    work, _, tmp = grouped
    layout = Layout.at(work / "results")
    before = files(Path(layout.evals()) / "merge")

    def density(config):  # TIES alone: nothing else is made from it (soup-then-swap is made from the default swap)
        config["merges"]["configs"]["ties_d05"]["density"] = 0.4

    proc = snakemake(work, configfile=_grouped_config(tmp, density))
    assert proc.returncode == 0, proc.stderr[-3000:]
    ran = RAN.findall(proc.stderr)
    assert [r for r in ran if r.startswith("evaluate_merge")] == ["evaluate_merge_group_toy_swh_2"]
    log = Path(layout.log("evaluate", "merge_group_toy_swh_2")).read_text()
    assert COUNT.findall(log) == [("2", "4")], log[-2000:]  # soup-then-swap's 2 from the store, ties_d05's 4 anew
    after = files(Path(layout.evals()) / "merge")
    assert after.keys() == before.keys()
    changed = {rel for rel in after if after[rel] != before[rel]}
    assert changed and all(rel.startswith("ties_d05/") for rel in changed)


# ---- a group job killed mid-way -----------------------------------------------------------------------------------
def test_a_group_job_killed_mid_way_resumes_from_the_store_with_the_same_bytes(tmp_path):
    """A group of two configs' merges (a 2x2 layer-swap grid and a 2x2 soup grid of the same experts): the job is
    killed (SIGKILL, as a time limit or a preemption) as it starts writing its fifth model, while the sixth is built
    ahead on its thread; the rerun copies the four finished ones from the store, evaluates the others, and every file
    equals an uninterrupted job's."""
    from scripts.fixture_world import make_data, make_model
    from tests.test_eval_resume import JOB
    from tests.test_switch import BENCHMARKS

    vocab = make_data(tmp_path / "data")
    experts = {n: make_model(tmp_path / n, vocab, seed=s, layers=4) for s, n in enumerate(["t0", "t1", "l0", "l1"])}
    models = []
    for cfg, recipe in (("swap", {"method": "layer_swap", "params": {"bottom": 1, "top": 1}}), ("soup", None)):
        for t in ("t0", "t1"):
            for lang in ("l0", "l1"):
                inputs = {"task": str(experts[t]), "lang": str(experts[lang])}
                doc = recipe and {**recipe, "inputs": inputs}
                doc = doc or {"method": "soup", "inputs": {"models": list(inputs.values())}}
                path = tmp_path / "recipes" / cfg / f"{t}x{lang}.json"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(doc))
                models.append((f"merge/{cfg}/toy_swh/{t}x{lang}", path))

    def job(out: Path, store: Path | None, victim: str = "") -> subprocess.CompletedProcess:
        argv = [sys.executable, "-c", JOB, victim, "evaluate-merges", "--data-dir", str(tmp_path / "data")]
        argv += ["--out-dir", str(out), "--benchmarks-json", json.dumps(BENCHMARKS), "--batch-size", "16"]
        argv += ["--threads", "1"] + [f"--model={m}={p}" for m, p in models]
        argv += ["--store", str(store)] if store is not None else []
        return subprocess.run(argv, capture_output=True, text=True, timeout=900)

    clean = job(tmp_path / "clean", None)
    assert clean.returncode == 0, clean.stderr[-3000:]
    order = re.findall(r"evaluate: (merge/\S+): load", clean.stderr)  # the job's order (merges sharing the most)
    assert sorted(order) == sorted(m for m, _ in models)
    store = tmp_path / "results" / "store" / "evals"
    killed = job(tmp_path / "a", store, victim=order[4])
    assert killed.returncode == -9, killed.stderr[-3000:]
    assert len(list(store.rglob("key.json"))) == 4  # the four finished models are kept
    resumed = job(tmp_path / "a", store)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert COUNT.findall(resumed.stderr) == [("4", "4")], resumed.stderr[-3000:]
    assert not any(f"evaluate: {m}: load" in resumed.stderr for m in order[:4])  # not evaluated again
    assert files(tmp_path / "a") == files(tmp_path / "clean") and len(files(tmp_path / "clean")) == 8 * 2 * 2
