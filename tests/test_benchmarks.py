"""The benchmark registry (layerswap/benchmarks.py): one entry per benchmark that the schema, the toy world, the tables,
the ablations and the evaluation read; facts of a task YAML come from the YAML."""

from __future__ import annotations

import dataclasses

import pytest
import yaml
from conftest import MICRO, REPO

from layerswap import benchmarks
from layerswap.benchmarks import BENCHMARKS
from layerswap.config import validate_config
from layerswap.data import toy_writers, toyworld
from layerswap.errors import UserError
from layerswap.evaluation import tasks as et
from layerswap.evaluation.paper_tasks import lm_eval_task_root
from layerswap.report import ablation_table

SCHEMA = REPO / "config" / "schema.yaml"


def test_the_schema_lists_the_registered_benchmarks():
    defs = yaml.safe_load(SCHEMA.read_text())["$defs"]
    for name, generated in benchmarks.schema_defs().items():
        assert defs[name] == generated, "config/schema.yaml is stale: run `python -m layerswap.schema_blocks`"


def test_a_toy_size_left_out_of_a_config_takes_the_registry_default():
    config = yaml.safe_load(MICRO.read_text())
    del config["toy_world"]["sizes"]["mgsm"], config["toy_world"]["sizes"]["mmlu"]
    sizes = validate_config(config)["toy_world"]["sizes"]
    assert sizes["mgsm"] == BENCHMARKS["mgsm"].toy_size == 60 and sizes["mmlu"] == BENCHMARKS["mmlu"].toy_size
    assert sizes["belebele"] == 12  # given: kept
    assert toyworld.dataset_inputs("mgsm_en", {}, {"pretrain_docs": 1})["size"] == 60  # a sizes dict without it


def test_every_benchmark_has_its_toy_writer_templates_and_yaml_facts():
    assert set(toy_writers.WRITERS) == set(BENCHMARKS)
    raw = {name.split("_", 1)[0] for name in ("pretrain", "orca_math", *toyworld.SOURCES)}
    assert not raw & set(BENCHMARKS), "a benchmark named as a toy source's files would make them evaluation sets"
    assert {d.split("_", 1)[0] for d in toyworld.datasets(["toy_xx"]) if toyworld.is_evaluation_set(d)} == set(
        BENCHMARKS
    )
    for name, bench in BENCHMARKS.items():
        for _, template in bench.toy_templates:
            task = et.read_task_yaml(et.TASK_DIR / template)
            assert task["metric_list"][0]["metric"] == et.TOY_SCORING[name].metric, (name, template)
            assert bool(task.get("unsafe_code")) == bench.unsafe, name
    assert et.TOY_SCORING["mgsm"].filter_doc == f"last-integer: regex {et.LAST_INTEGER} group_select -1, take_first"
    assert (
        ablation_table.COLUMNS.count("flores_n") == 1 and "flores_avg_lo" not in ablation_table.COLUMNS
    )  # corpus metric


def test_our_paper_tasks_take_dataset_split_and_metric_from_their_yaml():
    flores, mbpp = et.PAPER_TASKS["flores"], et.PAPER_TASKS["mbpp"]
    assert (flores.hub.hub_id, flores.hub.subset, flores.hub.splits) == (
        "openlanguagedata/flores_plus",
        "{code}",
        ("devtest",),
    )
    assert (flores.metric, flores.filter) == ("bleu", "none")
    assert (mbpp.hub.hub_id, mbpp.hub.subset, mbpp.hub.splits) == ("google-research-datasets/mbpp", "full", ("test",))
    assert (mbpp.metric, mbpp.filter) == ("pass_at_1", "execute")


def test_lm_eval_tasks_read_the_datasets_the_registry_names():
    """For the paper tasks lm-eval ships, the registry names the hub dataset and splits prestage fetches: they are
    what lm-eval's own YAMLs read."""
    root = lm_eval_task_root()
    for name, key, code in (("mgsm", "swh", "sw"), ("belebele", "swh", "swh_Latn"), ("mmlu", "swh", "sw")):
        paper = et.PAPER_TASKS[name]
        task = paper.task.format(code=code)
        folder = root / paper.folder.format(code=code)
        if paper.group:  # a group: its first subtask's template
            path = next(p for p in sorted(folder.glob(f"{task}_*.yaml")) if not p.name.startswith("_"))
        else:
            path = folder / f"{task}.yaml"
        found = et.read_task_yaml(path)
        assert found["dataset_path"] == paper.hub.hub_id, name
        assert found["test_split"] in paper.hub.splits, name
        if name == "mgsm":
            flexible = next(f for f in found["filter_list"] if f["name"] == paper.filter)
            assert f"regex {flexible['filter'][0]['regex_pattern']} group_select -1" in paper.filter_doc


def test_a_translation_must_score_as_the_benchmark_it_stands_in_for():
    """A translation's scores are kept under its benchmark's key (AfriMGSM under MGSM's), so a translation task that
    scores by another metric or filter is refused when the entry is declared, with the entry named."""
    mgsm = BENCHMARKS["mgsm"]
    assert mgsm.paper.translation is benchmarks.AFRIMGSM
    other = dataclasses.replace(benchmarks.AFRIMGSM, filter="strict-match")
    with pytest.raises(UserError, match=r"benchmark 'mgsm': its translation's task \(afrimgsm_cot_\{code\}_prompt_1\)"):
        dataclasses.replace(mgsm, paper=dataclasses.replace(mgsm.paper, translation=other))
