"""The table registry (layerswap/report/registry.py): what the rules declare for each table is what `layerswap tables`
writes, in both worlds; every entry's caption exists and its inputs are kinds the workflow lists files of."""

from __future__ import annotations

import pytest
import yaml
from conftest import REPO
from test_tables import PARAMS, make_world, write_tables

from layerswap.config import validate_config
from layerswap.report.registry import INPUTS, TABLES
from layerswap.workflow import report_jobs
from layerswap.workflow.spec import Spec


def _report(config_name: str):
    config = yaml.safe_load((REPO / "config" / config_name).read_text())
    validate_config(config)
    return Spec(config).report


def test_entries_are_unique_and_name_known_inputs_and_existing_captions():
    assert len({t.name for t in TABLES}) == len(TABLES)
    for t in TABLES:
        assert t.inputs and set(t.inputs) <= set(INPUTS), t.name
        assert (REPO / "rules" / t.caption).resolve().is_file(), t.caption
        assert t.formats[0] == "csv", t.name  # the numbers, the report's entry of the table


@pytest.mark.parametrize(
    "config_name, world, langs",
    [("micro.yaml", "toy", ("toy_swh", "toy_tel")), ("paper.yaml", "hf", ("swh", "tel"))],
)
def test_the_rule_declares_what_the_command_writes(tmp_path, config_name, world, langs):
    report = _report(config_name)
    declared = {f"{stem}.{ext}" for stem, ext in report.table_outputs()} | {"summary.md"}
    pages = {f"{stem}.md" for stem in report.table_pages}  # every report page is made from a written Markdown
    sel, ev = make_world(tmp_path, langs=langs)
    params = {**PARAMS, "world": world, "languages": list(langs), "table2_language": langs[0]}
    params |= {"mgsm_languages": ["en", *langs], "language_names": {}}
    out = tmp_path / "out"
    write_tables(sel, ev, params, out)
    written = {p.name for p in out.iterdir()}
    assert written == declared
    assert pages <= written
    assert {f.rsplit("/", 1)[1] for f in report.tables + report.best_configs} <= written


def test_the_rule_reads_the_kinds_of_file_the_registered_tables_read(monkeypatch):
    report = _report("micro.yaml")
    every = report.table_inputs()
    assert {kind for t in TABLES for kind in t.inputs} == set(INPUTS)  # today each kind is read by some table
    assert any("/soupswap/" in f for f in every) and any(f.endswith("/selection/math.json") for f in every)
    table5 = [t for t in TABLES if t.name == "table5"]
    monkeypatch.setattr(report_jobs, "TABLES", table5)  # a registry of Table 5 alone: experts, no merges
    alone = report.table_inputs()
    assert alone and set(alone) < set(every)
    assert not [f for f in alone if "/merge/" in f or "/by_language/" in f]
    assert [f for f in every if f not in alone and "/merge/" not in f and "/by_language/" not in f] == []
