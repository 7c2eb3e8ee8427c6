"""An evaluation job's settings are one typed object (layerswap.evaluation.job.EvaluationJob): the command line the rule
writes gives it, the store's entry records it, and the audit's re-evaluation reads it back into the same command line
and the same store key (issue 50, item 3)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging

import pytest

from layerswap.errors import UserError
from layerswap.evaluation.job import COMMANDS, EvaluationJob

# every setting away from its default, so a field the command line, the record or the re-evaluation drops shows
SETTINGS = dict(
    benchmarks_json=json.dumps({"mgsm": {"shots": 8, "batch_sizes": {"tel": 2}}, "belebele": {"shots": 5}}),
    batch_size=16,
    data_dir="results/data/eval",
    seed=3,
    threads=2,
    device="cpu",
    dtype="float32",
    task_set="paper",
    backend="vllm",
    hf_home="results/hf",
    context_tokens=1200,
)


def parser_of(command: str) -> argparse.ArgumentParser:
    from layerswap.evaluation import evaluate, evaluate_merges

    parser = argparse.ArgumentParser()
    (evaluate_merges if command == "evaluate-merges" else evaluate).add_arguments(parser)
    return parser


@pytest.mark.parametrize("command", COMMANDS)
def test_settings_go_through_the_command_line_and_the_record_unchanged(command):
    job = EvaluationJob(command=command, **SETTINGS)
    assert {f.name for f in dataclasses.fields(job)} == {"command", *SETTINGS}
    args = parser_of(command).parse_args(["--model", "m=x", "--out-dir", "out", *job.argv()])
    assert EvaluationJob.from_args(args, command) == job
    record = json.loads(json.dumps({**job.record(), "source": "x"}))  # as key.json holds it
    assert EvaluationJob.from_record(record) == job
    assert "context_tokens" not in dataclasses.replace(job, context_tokens=None).record()  # keys without it stay


def test_the_rules_command_line_gives_job_settings_or_what_one_invocation_evaluates():
    """Every flag of the evaluation rules' shell command (layerswap.workflow.words.evaluate_shell) is a field of the
    job's settings, or one of what an invocation evaluates and where it writes: nothing a result is computed from
    passes beside the typed object (and so beside the store's key)."""
    import re

    from layerswap.workflow.words import evaluate_shell

    per_invocation = {"model", "out_dir", "index", "run", "store", "only_models", "only_selected", "top_k"}
    fields = {f.name for f in dataclasses.fields(EvaluationJob)}
    shell = evaluate_shell("evaluate", "--model {params.models}", tail=" --store x")
    shell = shell.replace("{params.hf_home}", "--hf-home x")  # the rules' hf_home param: the flag, or nothing
    flags = {m.replace("-", "_") for m in re.findall(r"--([a-z][a-z-]*)", shell)}
    assert flags - per_invocation <= fields and {"benchmarks_json", "batch_size", "seed", "hf_home"} <= flags


def test_a_damaged_record_or_bad_settings_are_one_line():
    record = EvaluationJob(command="evaluate", **SETTINGS).record()
    with pytest.raises(UserError, match="store entry args: 'batch_size' must be"):
        EvaluationJob.from_record({**record, "batch_size": "16"})
    with pytest.raises(UserError, match="unknown key 'device_map'"):
        EvaluationJob.from_record({**record, "device_map": "auto"})
    with pytest.raises(UserError, match="--data-dir is required with --task-set toy"):
        EvaluationJob(command="evaluate", benchmarks_json="{}", batch_size=1)
    with pytest.raises(UserError, match="--context-tokens 0: must be >= 1"):
        EvaluationJob(command="evaluate", **{**SETTINGS, "context_tokens": 0})


def test_the_store_key_holds_the_per_key_batches_of_the_benchmarks():
    """`batch_sizes` comes from the benchmarks' settings, not from a value the evaluation sets on the way (the audit's
    re-evaluation computed the key without it, and could not check an entry whose job shrank a key's batch)."""
    job = EvaluationJob(command="evaluate", **SETTINGS)
    assert job.batch_sizes() == {"mgsm": {"tel": 2}}
    assert job.backend_key() == "vllm"


pytest.importorskip("lm_eval")
from tests.test_switch import BENCHMARKS, grid  # noqa: E402,F401 (fixture)


def test_an_entry_of_a_job_with_per_key_batches_is_evaluated_again_by_the_audit(grid, tmp_path, caplog):
    from layerswap.audit.reevaluate import reevaluate_entry
    from layerswap.evaluation import evaluate_merges

    benchmarks = {**BENCHMARKS, "mgsm": {**BENCHMARKS["mgsm"], "batch_sizes": {"toy_swh": 1}}}
    store, out = tmp_path / "store", tmp_path / "evals"
    argv = ["--data-dir", str(grid["data"]), "--out-dir", str(out), "--benchmarks-json", json.dumps(benchmarks)]
    argv += ["--batch-size", "16", "--threads", "1", "--store", str(store)]
    argv += ["--model", f"merge/t0xl0={grid['recipes']['t0xl0']}"]
    with caplog.at_level(logging.INFO, logger="layerswap.evaluate"):
        evaluate_merges.run(parser_of("evaluate-merges").parse_args(argv))
    (key_file,) = store.rglob("key.json")
    doc = json.loads(key_file.read_text())  # as check_store passes it: the job's hash, the model, the settings
    assert EvaluationJob.from_record(doc["args"]).batch_sizes() == {"mgsm": {"toy_swh": 1}}
    paths = [str(out / "merge/t0xl0" / name) for name in ("mgsm.json", "belebele.json")]
    assert reevaluate_entry(key_file.parent, doc, paths) == []
    (out / "merge/t0xl0/mgsm.json").write_text("{}\n")  # and a result that is not the entry's fresh one is named
    assert [line.split(": ")[1] for line in reevaluate_entry(key_file.parent, doc, paths)] == [paths[0]]
