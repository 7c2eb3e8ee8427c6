"""The workflow itself: the micro config end to end, no-op rerun, and bad config stopping before any job."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml
from conftest import MICRO, snakemake

from layerswap.layout import Layout, R

pytestmark = pytest.mark.workflow


def test_tables_exist_and_hold_numbers_in_range(micro_run):
    for n in (1, 2, 5, 6):
        for ext in ("csv", "md", "tex"):
            assert (micro_run / "tables" / f"table{n}.{ext}").stat().st_size > 0
    t1 = pd.read_csv(micro_run / "tables" / "table1.csv")
    numbers = t1.select_dtypes("number").to_numpy().ravel()
    assert len(numbers) >= 12 and ((numbers >= 0) & (numbers <= 100)).all()
    assert "TOY WORLD" in (micro_run / "tables" / "table1.md").read_text()
    t2 = pd.read_csv(micro_run / "tables" / "table2.csv")
    assert ((t2.select_dtypes("number") >= 0) & (t2.select_dtypes("number") <= 100)).all().all()


def test_every_stage_left_its_files(micro_run):
    selection = json.loads((micro_run / "selection" / "math.json").read_text())
    assert [s["rank"] for s in selection["selected"]] == [1, 2]
    assert all(Path(s["path"]).name.startswith("s") for s in selection["selected"])
    # micro.yaml constrains language experts on MGSM in their language: the base's own score is the reference
    lang = json.loads((micro_run / "selection" / "toy_swh.json").read_text())
    base_mgsm = json.loads((micro_run / "evals" / "base" / "mgsm.json").read_text())["scores"]["toy_swh"]
    assert lang["constraints"] == {"mgsm_target": 1.0} and lang["base"] == {"mgsm_target": base_mgsm}
    assert all("mgsm_target" in c["metrics"] and c["failed"] == [] for c in lang["candidates"])
    # ... evaluated on the leaders (both of the run's checkpoints: top_k 2, max_per_run 2) by their own job
    leaders = json.loads((micro_run / "evals" / "leaders" / "toy_swh.json").read_text())
    assert leaders["rounds"] == [[c["model_id"] for c in lang["candidates"]]] and list(leaders["files"]) == sorted(
        c["model_id"] for c in lang["candidates"]
    )
    assert (
        "language experts (each in its language) ranked by 1·belebele + 0.005·flores_from_en + "
        "0.005·flores_to_en, rejected if below the base model by more than a margin on mgsm_target (margin 1)"
    ) in (micro_run / "tables" / "table5.md").read_text()
    recipe = json.loads((micro_run / "merges" / "swap_default" / "toy_swh" / "l1m2.json").read_text())
    assert recipe["method"] == "layer_swap"
    result = json.loads((micro_run / "evals" / "merge" / "swap_default" / "toy_swh" / "l1m2" / "mgsm.json").read_text())
    assert set(result["scores"]) == {"toy_swh"} and 0 <= result["scores"]["toy_swh"] <= 1
    # Table 2's English row of that merge: a file of its own, made by evaluate_table2 (evals/by_language/en/)
    english = json.loads(
        (
            micro_run / "evals" / "by_language" / "en" / "merge" / "swap_default" / "toy_swh" / "l1m2" / "mgsm.json"
        ).read_text()
    )
    assert set(english["scores"]) == {"en"} and 0 <= english["scores"]["en"] <= 1
    index = json.loads((micro_run / "evals" / "by_language" / "en" / "table2_toy_swh.json").read_text())
    assert sorted(index["files"]) == sorted(
        f"merge/{c}/toy_swh/l{i}m{j}"
        for c in ("soup_uniform", "swap_default", "ties_d05")
        for i in (1, 2)
        for j in (1, 2)
    )
    assert (micro_run / "evals" / "merge" / "soupswap" / "toy_swh" / "multisoup" / "mgsm.json").is_file()
    assert (micro_run / "figures" / "param_change.svg").read_text().lstrip().startswith("<svg")
    assert not list(micro_run.rglob("*.tmp")) and not list(micro_run.rglob(".tmp-*"))  # nothing half-written


def test_second_run_has_nothing_to_do(micro_run):
    proc = snakemake(micro_run.parent, "-n")
    assert proc.returncode == 0
    assert "Nothing to be done" in proc.stdout + proc.stderr


def test_embedded_default_is_found_from_any_working_directory(tmp_path):
    proc = snakemake(tmp_path, "-n", configfile=None)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "rule toy_base:" in proc.stdout and "rule all:" in proc.stdout
    assert not (tmp_path / R).exists()


@pytest.mark.parametrize(
    "edit, expected",
    [
        (lambda c: c.update(colour="red"), "unknown key 'colour'"),
        (lambda c: c["sft"]["defaults"].update(lr="fast"), "config key 'sft.defaults.lr'"),
        (lambda c: c.update(languages=["toy_xyz"]), "unknown language 'toy_xyz'"),
        (lambda c: c["merges"]["configs"]["swap_default"].update(bottom=4), "exceeds base.num_layers"),
    ],
)
def test_bad_config_stops_before_any_job(tmp_path, edit, expected):
    config = yaml.safe_load(MICRO.read_text())
    edit(config)
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(config))
    proc = snakemake(tmp_path, "-n", configfile=bad)
    assert proc.returncode != 0
    errors = [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("config error:")]
    assert len(errors) == 1 and expected in errors[0], proc.stderr[-2000:]
    assert not (tmp_path / R).exists()


EVALUATION_RULES = {
    "evaluate_base",
    "evaluate_base_select",
    "evaluate_checkpoints",
    "evaluate_checkpoint_leaders",
    "evaluate_checkpoints_other",
    "evaluate_merges",
    "evaluate_soup_then_swap",
    "evaluate_table2",
}


def _planned_evaluation_commands(workdir: Path, config: dict) -> tuple[object, dict[str, list[list[str]]]]:
    """A dry run of `config` from scratch: (the process, per evaluation rule the argv of each job's command)."""
    import shlex

    path = workdir / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    proc = snakemake(workdir, "-n", "-p", configfile=path)
    commands, rule = {}, None
    for line in proc.stdout.splitlines():
        if line.startswith("rule "):
            rule = line.split()[1].rstrip(":")
        elif line.startswith("Shell command: layerswap evaluate"):
            argv = shlex.split(line.removeprefix("Shell command: ").split(" > ")[0])
            commands.setdefault(rule, []).append(argv[1:])
    return proc, commands


def test_every_evaluation_command_takes_the_batch_size_the_config_check_lets_through(tmp_path):
    """What batch size the config check accepts (`evaluation.batch_size`, a benchmark's own `batch_size`) reaches
    every evaluation job (the base, checkpoints, merges, soup-then-swap, Table 2's extra languages) in a form its
    command takes, and the job evaluates at it (a job with Belebele at Belebele's, the smallest)."""
    import argparse
    import importlib

    from layerswap.commands import COMMANDS
    from layerswap.evaluation.tasks import job_batch_size, parse_benchmarks

    config = yaml.safe_load(MICRO.read_text())
    config["evaluation"]["batch_size"] = 7
    config["evaluation"]["tasks"]["belebele"]["batch_size"] = 3
    proc, commands = _planned_evaluation_commands(tmp_path, config)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert set(commands) == EVALUATION_RULES
    seen = set()
    for rule, argvs in commands.items():
        for argv in argvs:
            parser = argparse.ArgumentParser()
            importlib.import_module(COMMANDS[argv[0]][0]).add_arguments(parser)
            args = parser.parse_args(argv[1:])
            spec = parse_benchmarks(args.benchmarks_json)
            assert args.batch_size == 7
            assert job_batch_size(spec, args.batch_size) == (3 if "belebele" in spec else 7), rule
            seen.add("belebele" in spec)
    assert seen == {True, False}


def test_batch_size_auto_stops_before_any_job(tmp_path):
    """`auto` (lm-eval's detection) is refused by the config check, before any expert trains: on dd25adc the schema
    let it through and every evaluation command then exited 2 (`--batch-size: invalid int value: 'auto'`). Why it is
    refused rather than passed on: docs/MEASUREMENTS.md#evaluation-batch-size."""
    config = yaml.safe_load(MICRO.read_text())
    config["evaluation"]["batch_size"] = "auto"
    proc, commands = _planned_evaluation_commands(tmp_path, config)
    errors = [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("config error:")]
    assert proc.returncode != 0 and not commands
    assert len(errors) == 1 and "config key 'evaluation.batch_size': 'auto'" in errors[0], proc.stderr[-2000:]
    assert not (tmp_path / R).exists()


def test_storage_scratch_holds_the_expert_checkpoints(tmp_path):
    config = yaml.safe_load(MICRO.read_text())
    config["storage"] = {"scratch": str(tmp_path / "scratch")}
    path = tmp_path / "scratch.yaml"
    path.write_text(yaml.safe_dump(config))
    proc = snakemake(tmp_path / "work", "-n", "-p", configfile=path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    # the SFT job writes into the directory of its output, the run's manifest under storage.scratch, in the
    # namespace of this results folder (layerswap/scratch.py; tests/test_scratch_sharing.py)
    from layerswap.scratch import read_id

    record = Layout(big=f"{tmp_path / 'scratch'}/{read_id(tmp_path / 'work' / R)}").checkpoints_record("math_1")
    assert f'--out-dir "$(dirname {record})"' in proc.stdout
    assert Layout().run_dir("math_1") not in proc.stdout


def test_keep_merged_writes_the_named_configs_as_model_directories(micro_run, tmp_path):
    from safetensors.torch import load_file

    from layerswap.merge.engine import build_state_dict
    from layerswap.merge.recipes import Recipe

    work = tmp_path / "work"
    shutil.copytree(micro_run.parent, work, symlinks=True, ignore=shutil.ignore_patterns("locks"))
    config = yaml.safe_load(MICRO.read_text())
    config["storage"] = {"keep_merged": ["swap_default"]}
    path = tmp_path / "keep.yaml"
    path.write_text(yaml.safe_dump(config))
    proc = snakemake(work, "-n", configfile=path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    planned = re.findall(r"^\s+output: (results/merged/\S+)$", proc.stdout, re.M)
    assert sorted(planned) == [f"results/merged/swap_default/toy_swh/l{i}m{j}" for i in (1, 2) for j in (1, 2)]
    target = Layout().merged_model("swap_default", "toy_swh", "l1m2")
    proc = snakemake(work, target, configfile=path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = work / target
    assert {"config.json", "model.safetensors.index.json", "layerswap_recipe.json", ".layerswap-merge.json"} <= {
        p.name for p in out.iterdir()
    }
    # A rerun of the job (here forced; a changed recipe does the same) finds no old directory to refuse: Snakemake
    # removes a directory output before its job, so `layerswap merge` writes into a new --out without --force.
    proc = snakemake(work, target, "--forcerun", "merged_model", configfile=path)
    assert proc.returncode == 0 and "Finished jobid: 0 (Rule: merged_model)" in proc.stderr, proc.stderr[-2000:]
    written = {}
    for shard in sorted(out.glob("*.safetensors")):
        written.update(load_file(shard))
    recipe = Recipe.load(work / Layout().recipe("swap_default", "toy_swh", "l1m2"))
    with pytest.MonkeyPatch.context() as mp:  # the recipe names experts relative to the working directory
        mp.chdir(work)
        expected = build_state_dict(recipe)
    assert written.keys() == expected.keys()
    assert all(torch.equal(written[k], expected[k]) for k in expected)


def test_a_run_none_of_whose_checkpoints_passes_a_constraint_selects_and_says_why(
    micro_run, tmp_path, monkeypatch, capsys
):
    """Issue 48, item 3, on the finished micro run's own files: its language constraint made unmeetable (a base at
    1.0 on toy_swh MGSM, margin 0.5; both checkpoints score less). selection.on_no_pass: stop refuses in one line;
    the default, best, selects the run's best by Belebele + FLORES (the same two as the micro run), the selection
    file records what each fails, and Table 5 built from it says so under the table. (The results themselves are
    not edited: the check before every run refuses a result changed since its job wrote it.)"""
    import shlex

    from layerswap.cli import main
    from layerswap.config import check, validate_config
    from layerswap.workflow.spec import Spec

    monkeypatch.chdir(micro_run.parent)  # the indexes name their files relative to the working directory
    L = Layout()
    doc = json.loads(Path(L.eval_file("base", "mgsm")).read_text())
    base = tmp_path / "mgsm.json"
    base.write_text(json.dumps({**doc, "scores": {**doc["scores"], "toy_swh": 1.0}}))
    config = yaml.safe_load(MICRO.read_text())
    config["selection"]["constraints"]["language"]["mgsm_target"] = 0.5
    validate_config(config)
    check(config)
    spec = Spec(config)
    (params,) = shlex.split(spec.selection.params("toy_swh"))
    selections = tmp_path / "selection"
    shutil.copytree(L.selection_dir(), selections)
    out = selections / "toy_swh.json"
    argv = ["select", "--index", *spec.selection.indexes("toy_swh"), "--base-evals", str(base), "--leaders"]
    argv += [*spec.selection.leaders("toy_swh"), "--expert", "toy_swh", "--out", str(out), "--params-json"]
    before = out.read_bytes()
    assert main([*argv, json.dumps({**json.loads(params), "on_no_pass": "stop"})]) == 1
    assert out.read_bytes() == before  # refused: nothing written
    err = capsys.readouterr().err
    assert (
        err.count("\n") == 1
        and (
            "expert 'toy_swh': only 0 checkpoints selectable for top_k=2 (max_per_run=2, 2 candidates, 2 fail "
            "selection.constraints.language.mgsm_target); selection.on_no_pass: stop"
        )
        in err
    ), err
    assert main([*argv, params]) == 0
    selection = json.loads(out.read_text())
    assert selection["on_no_pass"] == "best" and selection["base"] == {"mgsm_target": 1.0}
    assert [s["checkpoint"] for s in selection["selected"]] == [s["checkpoint"] for s in json.loads(before)["selected"]]
    for s in selection["selected"]:
        assert s["failed"] == [{"metric": "mgsm_target", "value": 0.0, "base": 1.0, "margin": 0.5}]
        assert s["status"].startswith("selected although it failed constraint mgsm_target: 0 < base 1 - margin 0.5")
    (tables_params,) = shlex.split(spec.report.table_params())
    tables = ["tables", "--selection-dir", str(selections), "--evals-dir", L.evals(), "--out-dir", str(tmp_path)]
    assert main([*tables, "--params-json", tables_params]) == 0
    note = (
        "Below the base model on a selection constraint (toy-Swahili (synthetic) experts: too few checkpoints pass, "
        "so the best of the others by score are taken; selection.on_no_pass: best): #1 (toy_swh_1/s0000016): "
        "mgsm_target 0.000 vs base 1.000 (margin 0.5); #2 (toy_swh_1/s0000032): mgsm_target 0.000 vs base 1.000 "
        "(margin 0.5)."
    )
    assert note in (tmp_path / "table5.md").read_text()
    assert "Below the base" not in (micro_run / "tables" / "table5.md").read_text()


def test_keep_merged_names_must_be_merge_configs(tmp_path):
    config = yaml.safe_load(MICRO.read_text())
    config["storage"] = {"keep_merged": ["swap_nope"]}
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(config))
    proc = snakemake(tmp_path, "-n", configfile=path)
    assert proc.returncode != 0
    assert "config error: config key 'storage.keep_merged[0]': unknown merge config 'swap_nope'" in proc.stderr
