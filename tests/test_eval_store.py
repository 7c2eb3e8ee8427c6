"""A merge evaluation job evaluates only the models whose result is missing or whose inputs changed (issue 34, item
2): results kept by content (`layerswap evaluate-merges --store`), reused byte for byte; any change of what a result
depends on evaluates again."""

from __future__ import annotations

import argparse
import json
import logging
import re
import shutil
from pathlib import Path

import pytest
import yaml

pytest.importorskip("lm_eval")
pytest.importorskip("torch")

from layerswap.evaluation import evaluate_merges as em  # noqa: E402
from layerswap.layout import Layout  # noqa: E402
from layerswap.merge.recipes import recipe_hash  # noqa: E402
from tests.test_switch import BENCHMARKS, grid  # noqa: E402,F401 (fixture)

COUNT = re.compile(r"evaluate: store: reused (\d+), evaluated (\d+)")


def evaluate(grid, out: Path, store: Path, caplog, models=None) -> tuple[int, int]:
    parser = argparse.ArgumentParser()
    em.add_arguments(parser)
    argv = [
        "--data-dir",
        str(grid["data"]),
        "--out-dir",
        str(out),
        "--benchmarks-json",
        json.dumps(BENCHMARKS),
        "--batch-size",
        "16",
        "--seed",
        "0",
        "--threads",
        "1",
        "--store",
        str(store),
    ]
    for model_id, src in models or grid["recipes"].items():
        argv += ["--model", f"{model_id}={src}"]
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="layerswap.evaluate"):
        em.run(parser.parse_args(argv))
    found = COUNT.findall(caplog.text)
    assert len(found) == 1, caplog.text
    return int(found[0][0]), int(found[0][1])


def files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def test_same_evaluation_is_reused_with_the_same_bytes(grid, tmp_path, caplog):
    store = tmp_path / "store"
    assert evaluate(grid, tmp_path / "a", store, caplog) == (0, 4)
    fresh = files(tmp_path / "a")
    assert len(fresh) == 4 * 2 * 2
    doc = json.loads((tmp_path / "a" / "t0xl0" / "mgsm.json").read_text())
    assert doc["recipe_hash"] == recipe_hash(json.loads(grid["recipes"]["t0xl0"].read_text()))
    assert evaluate(grid, tmp_path / "b", store, caplog) == (4, 0)
    assert files(tmp_path / "b") == fresh
    entries = [p for p in store.rglob("key.json")]
    assert len(entries) == 4


def test_a_changed_recipe_or_data_file_is_evaluated_again(grid, tmp_path, caplog):
    store = tmp_path / "store"
    work = tmp_path / "work"
    shutil.copytree(grid["root"], work, ignore=shutil.ignore_patterns("t0", "t1", "l0", "l1"))
    recipes = {}
    for name, path in grid["recipes"].items():
        recipes[name] = work / path.name
    g = {**grid, "data": work / "data", "recipes": recipes}
    assert evaluate(g, tmp_path / "a", store, caplog) == (0, 4)
    # a recipe with other params (same id): that model only
    changed = json.loads(recipes["t1xl1"].read_text())
    changed["params"]["bottom"] = 2
    recipes["t1xl1"].write_text(json.dumps(changed))
    assert evaluate(g, tmp_path / "b", store, caplog) == (3, 1)
    assert json.loads((tmp_path / "b" / "t1xl1" / "mgsm.json").read_text())["recipe_hash"] == recipe_hash(changed)
    # the same recipe bytes rewritten: nothing
    recipes["t1xl1"].write_text(json.dumps(changed))
    assert evaluate(g, tmp_path / "c", store, caplog) == (4, 0)
    # one data file of the evaluation changed: every model
    data = work / "data" / "mgsm_en.jsonl"
    data.write_text("".join(data.read_text().splitlines(keepends=True)[:-1]))
    assert evaluate(g, tmp_path / "d", store, caplog) == (0, 4)
    # an expert's weights changed in place (same path, same recipe bytes): the merges that read it
    expert = grid["experts"]["l1"]
    moved = tmp_path / "l1"
    shutil.copytree(expert, moved)
    try:
        weights = expert / "model.safetensors"
        blob = bytearray(weights.read_bytes())
        blob[-1] ^= 1
        weights.write_bytes(bytes(blob))
        assert evaluate(g, tmp_path / "e", store, caplog) == (2, 2)
    finally:
        shutil.rmtree(expert)
        shutil.copytree(moved, expert)


# ---- the workflow: Snakemake reruns the merge evaluation jobs, the store spares their evaluations -------------------
CONFIGS = ["swap_default", "soup_uniform", "ties_d05"]


def _edited_run(micro_run, tmp_path, edit):
    from conftest import MICRO, snakemake

    work = tmp_path / "work"
    shutil.copytree(micro_run.parent, work, symlinks=True, ignore=shutil.ignore_patterns("locks"))
    before = files(work / Layout().evals() / "merge")
    config = yaml.safe_load(MICRO.read_text())
    edit(config)
    configfile = tmp_path / "edited.yaml"
    configfile.write_text(yaml.safe_dump(config, sort_keys=False))
    proc = snakemake(work, configfile=configfile)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ran = re.findall(r"Finished jobid: \d+ \(Rule: (\w+)\)", proc.stderr)
    logs = {
        cfg: (work / Layout().log("evaluate", f"merge_{cfg}_toy_swh")).read_text() for cfg in [*CONFIGS, "soupswap"]
    }
    return work, before, files(work / Layout().evals() / "merge"), ran, logs


@pytest.mark.workflow
def test_an_edit_that_rewrites_recipes_with_the_same_bytes_evaluates_no_merge(micro_run, tmp_path):
    """selection.top_k 2 -> 1: the selection, recipe and merge evaluation jobs all rerun (the recipe files are
    rewritten), but l1m1's recipe has the same bytes, so each job copies its result from the store."""

    def top1(config):
        config["selection"]["top_k"] = 1

    work, before, after, ran, logs = _edited_run(micro_run, tmp_path, top1)
    assert ran.count("evaluate_merges") == len(CONFIGS)
    for cfg in CONFIGS:
        assert COUNT.findall(logs[cfg]) == [("1", "0")], logs[cfg]
        kept = [rel for rel in after if rel.startswith(f"{cfg}/toy_swh/l1m1/")]
        assert len(kept) == 2  # mgsm.json and its samples
        assert all(after[rel] == before[rel] for rel in kept)
    # soup-then-swap soups the top-k experts: its recipes changed, so it is evaluated
    assert COUNT.findall(logs["soupswap"]) == [("0", "2")], logs["soupswap"]


@pytest.mark.workflow
def test_a_changed_merge_config_evaluates_its_merges(micro_run, tmp_path):
    def bottom2(config):
        config["merges"]["configs"]["swap_default"]["bottom"] = 2

    work, before, after, ran, logs = _edited_run(micro_run, tmp_path, bottom2)
    assert ran.count("evaluate_merges") == 1
    assert COUNT.findall(logs["swap_default"]) == [("0", "4")], logs["swap_default"]
    recipe = json.loads((work / Layout().recipe("swap_default", "toy_swh", "l1m1")).read_text())
    doc = json.loads(after["swap_default/toy_swh/l1m1/mgsm.json"])
    assert (
        doc["recipe_hash"]
        == recipe_hash(recipe)
        != json.loads(before["swap_default/toy_swh/l1m1/mgsm.json"]).get("recipe_hash")
    )
    for cfg in ("soup_uniform", "ties_d05"):  # not rerun: their files untouched
        assert all(after[rel] == before[rel] for rel in before if rel.startswith(cfg))


def test_a_damaged_store_entry_is_evaluated_again(grid, tmp_path, caplog):
    store = tmp_path / "store"
    models = list(grid["recipes"].items())[:1]
    assert evaluate(grid, tmp_path / "a", store, caplog, models) == (0, 1)
    fresh = files(tmp_path / "a")
    (stored,) = list(store.rglob("mgsm.json"))
    stored.write_text(stored.read_text().replace('"scores"', '"scores" ', 1))
    assert evaluate(grid, tmp_path / "b", store, caplog, models) == (0, 1)
    assert "differs from the sha256 its key.json records" in caplog.text
    assert files(tmp_path / "b") == fresh
    assert evaluate(grid, tmp_path / "c", store, caplog, models) == (1, 0)
    (stored,) = list(store.rglob("mgsm.samples.jsonl"))
    stored.unlink()  # an incomplete entry
    assert evaluate(grid, tmp_path / "d", store, caplog, models) == (0, 1)
    assert files(tmp_path / "d") == fresh


# ---- a store on a shared file system serves every node that computes the same numbers -----------------------------
def _node(cpu_model: str, flags: list[str], gpus: list[str]) -> dict:
    """What `layerswap.machine.hardware` reports on a node of a cluster."""
    return {
        "machine": "x86_64",
        "cpu_model": cpu_model,
        "cpu_flags": flags,
        "torch_cpu_capability": "AVX2",
        "gpus": gpus,
        "cuda": "12.8",
        "platform": f"Linux-{cpu_model}",
        "cpu_count": 64,
    }


def test_a_gpu_result_kept_on_one_node_type_is_reused_on_another_with_the_same_gpu(grid, tmp_path, monkeypatch):
    """The job key holds the hardware the numbers depend on: a GPU job's results kept on an Intel node are reused on an
    AMD node with the same GPU (the CPU's model and flags do not reach them), not under another GPU; a CPU job's
    results are not reused on another CPU model."""
    from layerswap import machine
    from layerswap.evaluation import store as store_mod
    from layerswap.evaluation.job import EvaluationJob
    from layerswap.evaluation.results import result_file, samples_file
    from layerswap.evaluation.tasks import parse_benchmarks, plan_benchmarks
    from layerswap.merge.recipes import Recipe

    intel = _node("Intel(R) Xeon(R) Platinum 8480+", ["avx2", "avx512f", "amx_tile"], ["NVIDIA H100 80GB HBM3"])
    amd = _node("AMD EPYC 9654 96-Core Processor", ["avx2", "avx512f", "sse4a"], ["NVIDIA H100 80GB HBM3"])
    a100 = {**amd, "gpus": ["NVIDIA A100-SXM4-80GB"]}
    plans = plan_benchmarks(grid["data"], parse_benchmarks(json.dumps(BENCHMARKS)))
    models = [(f"merge/swap/toy_swh/{n}", Recipe.load(p)) for n, p in sorted(grid["recipes"].items())]
    store = tmp_path / "store"

    def job(node: dict, device: str, out: Path):
        monkeypatch.setattr(machine, "hardware", lambda: node)
        job = EvaluationJob(
            command="evaluate-merges", device=device, batch_size=16, data_dir=str(grid["data"]),
            benchmarks_json=json.dumps(BENCHMARKS),
        )  # fmt: skip
        return store_mod.reuse(job, store, out, models, plans)

    for device in ("cuda", "cpu"):  # the first node evaluates every model and keeps its files
        todo, keeper, keys = job(intel, device, tmp_path / device)
        assert len(todo) == len(models)
        for model_id, _ in todo:
            for p in plans:
                result = result_file(tmp_path / device, model_id, p.name)
                result.parent.mkdir(parents=True, exist_ok=True)
                result.write_text(json.dumps({"model_id": model_id, "device": device}) + "\n")
                samples_file(result).write_text("{}\n")
            key, doc, source = keys[model_id]
            keeper.put(key, doc, tmp_path / device, model_id, plans, source)
    todo, keeper, _ = job(amd, "cuda", tmp_path / "amd")  # the job cut on Intel goes on on AMD, same GPU
    assert todo == [] and keeper.reused == len(models)
    assert files(tmp_path / "amd") == files(tmp_path / "cuda")
    assert len(job(a100, "cuda", tmp_path / "a100")[0]) == len(models)  # another GPU: evaluated again
    assert len(job(amd, "cpu", tmp_path / "amd-cpu")[0]) == len(models)  # on the CPU, the CPU model counts
    assert job(intel, "cpu", tmp_path / "intel-cpu")[0] == []
