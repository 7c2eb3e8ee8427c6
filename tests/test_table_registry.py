"""The table registry (layerswap/report/registry.py): what the rules declare for each table is what `layerswap tables`
writes, in both worlds; every entry's caption exists and its inputs are kinds the workflow lists files of; a table is
built from a world that holds only what its entry declares it reads, and the workflow evaluates what the entries
declare, no more."""

from __future__ import annotations

import dataclasses
import json
import shutil

import pytest
import yaml
from conftest import REPO
from test_tables import PAIRS, PARAMS, make_world, write_tables

from layerswap.config import validate_config
from layerswap.errors import UserError
from layerswap.report import builders
from layerswap.report.evals import Evals
from layerswap.report.paper_tables import Builder
from layerswap.report.registry import FIGURES, INPUTS, TABLES, MergeReads, TableEntry
from layerswap.report.table_params import Params
from layerswap.report.workspace import Workspace
from layerswap.workflow import report_jobs
from layerswap.workflow.spec import Spec


def _report(config_name: str):
    config = yaml.safe_load((REPO / "config" / config_name).read_text())
    validate_config(config)
    return Spec(config).report


def test_entries_are_unique_and_name_known_inputs_and_existing_captions():
    assert len({t.name for t in TABLES}) == len(TABLES)
    for t in TABLES:
        assert t.kinds and set(t.kinds) <= set(INPUTS) and "merge_evals" not in t.inputs, t.name
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
    assert {kind for t in TABLES for kind in t.kinds} == set(INPUTS)  # today each kind is read by some table
    assert any("/soupswap/" in f for f in every) and any(f.endswith("/selection/math.json") for f in every)
    table5 = [t for t in TABLES if t.name == "table5"]
    monkeypatch.setattr(report_jobs, "TABLES", table5)  # a registry of Table 5 alone: experts, no merges
    alone = report.table_inputs()
    assert alone and set(alone) < set(every)
    assert not [f for f in alone if "/merge/" in f or "/by_language/" in f]
    assert [f for f in every if f not in alone and "/merge/" not in f and "/by_language/" not in f] == []


# -- conformance: a table reads what its entry declares ------------------------------------------------------------

#: test_tables' world as a config's merges block (the methods of its configs, for the "swaps" role)
MERGES_BLOCK = {
    "best_of": PARAMS["best_of"],
    "default_swap": PARAMS["default_swap"],
    "configs": {
        "soup_u": {"method": "soup"},
        "soup_m": {"method": "soup"},
        "swap_def": {"method": "layer_swap"},
        "swap_alt": {"method": "layer_swap"},
        "ties_d": {"method": "ties"},
    },
}


def _declared_world(full, out, entry: TableEntry):
    """A copy of test_tables' world (`full`: its selection and evals folders) holding only what `entry` declares."""
    sel, ev = full
    kinds = set(entry.kinds)
    keep = {
        "selections": [],
        "checkpoint_evals": ["ckpt"],
        "base_evals": ["base"],
        "soup_swap_evals": ["merge/soupswap"],
    }
    if "selections" in kinds:
        shutil.copytree(sel, out / "selection")
    else:
        (out / "selection").mkdir(parents=True)
    folders = [f for kind in kinds for f in keep.get(kind, [])]
    if entry.merges:
        wants = entry.merges.wants(MERGES_BLOCK, PARAMS["languages"], PARAMS["table2_language"])
        folders += [f"merge/{c}/{lang}/{p}" for c, langs in wants.items() for lang in langs for p in PAIRS]
    for f in folders:
        shutil.copytree(ev / f, out / "evals" / f)
    (out / "evals").mkdir(exist_ok=True)
    return out / "selection", out / "evals"


def _build(entry: TableEntry, sel, ev):
    return builders.build(entry, Builder(Workspace(sel, Evals(ev), Params.from_json(json.dumps(PARAMS))), None))


@pytest.mark.parametrize("entry", TABLES, ids=[t.name for t in TABLES])
def test_each_table_is_built_from_what_its_entry_declares(tmp_path, entry):
    full = make_world(tmp_path, langs=tuple(PARAMS["languages"]))
    table = _build(entry, *_declared_world(full, tmp_path / "declared", entry))
    whole = _build(entry, *full)  # nothing undeclared was needed, and nothing came out different:
    assert (table.cells, table.intervals, table.counts, table.notes) == (
        whole.cells,
        whole.intervals,
        whole.counts,
        whole.notes,
    )


def test_a_table_that_reads_outside_its_declaration_fails_naming_the_file(tmp_path):
    (table6,) = [t for t in TABLES if t.name == "table6"]
    short = dataclasses.replace(table6, merges=MergeReads(("default_swap",)))  # the pairwise soup left out
    full = make_world(tmp_path, langs=tuple(PARAMS["languages"]))
    with pytest.raises(UserError, match=r"merge/soup_m/toy_swh/l1m1/mgsm\.json|merge/soup_u/"):
        _build(short, *_declared_world(full, tmp_path / "declared", short))


def test_the_workflow_evaluates_what_the_entries_declare(monkeypatch):
    """A new table's declared merges reach the tables rule and the merge evaluation jobs; merges nothing declares are
    evaluated nowhere. (The default config: ties_d05 is Table 2's alone, so it is evaluated in Table 2's language; the
    figures read the swaps and Table 1's configs.)"""
    report = _report("config.yaml")
    every = ["toy_swh", "toy_tel", "toy_ben", "toy_jpn"]
    assert report.merge_eval_languages()["ties_d05"] == ["toy_swh"]
    ties_tel = "results/evals/merge/ties_d05/toy_tel/l1m1/mgsm.json"
    assert ties_tel not in report.table_inputs()
    new = TableEntry("ties_everywhere", 2, "../report/table2.rst", "table2", (), MergeReads(("best_of:ties",)))
    monkeypatch.setattr(report_jobs, "TABLES", (*TABLES, new))
    assert report.merge_eval_languages()["ties_d05"] == every
    assert ties_tel in report.table_inputs()
    monkeypatch.setattr(report_jobs, "TABLES", tuple(t for t in TABLES if t.merges is None))
    assert set(report.merge_eval_languages()) == {"swap_default", "swap_b3u1t1", "soup_uniform", "soup_magnitude"}
    assert not [f for f in report.table_inputs() if "/merge/" in f and "/soupswap/" not in f]
    monkeypatch.setattr(report_jobs, "FIGURES", tuple(f for f in FIGURES if f.merges is None))
    assert report.merge_eval_languages() == {}
