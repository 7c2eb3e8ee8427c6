"""Command params (layerswap/command_params.py): one typed object per command from its JSON argument, one line
naming a bad key; and every params word the rules pass (layerswap/workflow/spec.py) parses into its command's type."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal

import pytest
import yaml

from layerswap import select
from layerswap.command_params import AtLeast, parse
from layerswap.config import check, expert_type, validate_config
from layerswap.errors import UserError
from layerswap.evaluation.tasks import TaskSettings, parse_benchmarks
from layerswap.report import ablation_table, charts, tables
from layerswap.workflow.ablations import plan
from layerswap.workflow.spec import Spec

REPO = Path(__file__).resolve().parents[1]


@dataclass
class Inner:
    a: int


@dataclass
class Example:
    top_k: Annotated[int, AtLeast(1)]
    languages: Annotated[list[str], AtLeast(1)]
    best_of: dict[str, Annotated[list[str], AtLeast(1)]] = field(default_factory=dict)
    world: Literal["toy", "hf"] = "toy"
    weight: float = 1.0
    limit: Annotated[int, AtLeast(1)] | None = None
    inner: list[Inner] = field(default_factory=list)


def test_a_valid_object_gets_its_defaults_and_nested_types():
    got = parse(Example, '{"top_k": 2, "languages": ["en"], "weight": 2, "inner": [{"a": 1}]}')
    assert got == Example(top_k=2, languages=["en"], weight=2, inner=[Inner(a=1)])
    assert isinstance(got.weight, int)  # a number is passed on as given (params are not re-spelled)


@pytest.mark.parametrize(
    "text, message",
    [
        ('{"languages": ["en"]}', "--params-json: missing key 'top_k'"),
        ('{"top_k": true, "languages": ["en"]}', "'top_k' must be an integer >= 1, got True"),
        ('{"top_k": 0, "languages": ["en"]}', "'top_k' must be an integer >= 1, got 0"),
        ('{"top_k": 1, "languages": []}', "'languages' must be a non-empty list of strings, got []"),
        ('{"top_k": 1, "languages": [1]}', "'languages[0]' must be a string, got 1"),
        ('{"top_k": 1, "languages": ["en"], "best_of": {"soup": []}}', "'best_of.soup' must be a non-empty list"),
        ('{"top_k": 1, "languages": ["en"], "world": "moon"}', "'world' must be one of 'toy', 'hf', got 'moon'"),
        ('{"top_k": 1, "languages": ["en"], "weight": NaN}', "'weight' must be a number, got nan"),
        ('{"top_k": 1, "languages": ["en"], "limit": 0}', "'limit' must be null or an integer >= 1, got 0"),
        ('{"top_k": 1, "languages": ["en"], "inner": [{"b": 1}]}', "unknown key 'inner[0].b'; known: a"),
        ('{"top_k": 1, "languages": ["en"], "topk": 1}', "unknown key 'topk'; known: top_k, languages"),
        ("[1, 2]", "--params-json: expected a JSON object"),
    ],
)
def test_a_bad_object_is_one_line_naming_the_key(text, message):
    with pytest.raises(UserError) as err:
        parse(Example, text)
    assert message in str(err.value) and "\n" not in str(err.value)


def _spec(name: str) -> Spec:
    config = yaml.safe_load((REPO / "config" / name).read_text())
    validate_config(config)
    check(config)
    ablations, added = plan(config, REPO / "config" / "ablations")
    return Spec(config, ablations, added)


def _word(value: str) -> str:
    (word,) = shlex.split(value)
    return word


@pytest.mark.parametrize("name", ["config.yaml", "paper.yaml", "micro.yaml"])
def test_every_params_word_of_the_rules_parses_into_its_command_s_type(name):
    spec = _spec(name)
    assert tables.Params.from_json(_word(spec.report.table_params())).table2_language == spec.evals.t2
    assert tables.Params.from_json(_word(spec.report.table_params(table2=False)), table2=False).table2_language is None
    grid = parse(charts.SwapGridParams, _word(spec.report.swap_grid_params()))
    assert grid.top_k == spec.config["selection"]["top_k"]
    for ablation in spec.ablations.planned:
        params = parse(ablation_table.Params, _word(spec.ablations.params(ablation)))
        assert params.name == ablation and params.variants
    for expert in spec.runs.expert_types():
        assert parse(select.Params, _word(spec.selection.params(expert))).kind == expert_type(expert)
    for run in [*spec.runs.main, *spec.runs.extra]:
        settings = parse_benchmarks(
            _word(
                spec.evals.benchmark_params(spec.evals.selection_benchmarks(run), spec.evals.checkpoint_languages(run))
            )
        )
        assert all(isinstance(s, TaskSettings) for s in settings.values())


def test_unknown_benchmark_settings_are_named_with_their_benchmark():
    with pytest.raises(UserError, match="--benchmarks-json: unknown key 'mgsm.shot'; known: shots, limit"):
        parse_benchmarks(json.dumps({"mgsm": {"shot": 3}}))
    assert parse_benchmarks('{"mgsm": null}')["mgsm"] == TaskSettings()
