"""Issue 48's plan: token counts per (benchmark, language key) (counted from the data and the base's tokenizer, else
length factors with their sources), batches that fit the GPU (refused in one line where one item cannot), the
evaluate command applying a key's own batch, each job's time limit from its own planned work, the cost figure's
pieces (layerswap/workflow/token_counts.py, batch_fit.py, eval_plan.py, resources.py)."""

from __future__ import annotations

import copy
import json
import logging
from pathlib import Path

import pytest
from conftest import MICRO, REPO

from layerswap.config import load_config
from layerswap.errors import UserError
from layerswap.workflow import token_counts as tc
from layerswap.workflow.batch_fit import Sizing, shapes_of
from layerswap.workflow.eval_plan import LEADER_TRIES, EvalPlan, Features, rate
from layerswap.workflow.resources import MAX_RUNTIME, MIN_RUNTIME, Requests
from layerswap.workflow.spec import Spec

PAPER = REPO / "config" / "paper.yaml"


def paper(**evaluation) -> dict:
    config = load_config(PAPER)
    config["evaluation"] |= evaluation
    return config


def test_factor_lengths_scale_english_by_the_prompt_language_and_name_their_source():
    config = paper()
    counts = tc.TokenCounts(config)
    en, tel = counts.lengths("mgsm", "en"), counts.lengths("mgsm", "tel")
    assert tel.prompt == en.prompt * tc.LENGTH_FACTORS["tel"][0] and tel.new_tokens == en.new_tokens == 512
    assert "issue 48" in tel.source and "tel" in tel.source
    # FLORES: a direction's prompt is in its source language; MBPP's prompts are English under every key
    assert counts.lengths("flores", "en-tel").prompt == counts.lengths("flores", "en-swh").prompt
    assert counts.lengths("flores", "tel-en").prompt == pytest.approx(10 * counts.lengths("flores", "en-tel").prompt)
    assert counts.lengths("mbpp", "tel").prompt == counts.lengths("mbpp", "en").prompt
    # a first_n few-shot block is shared by every item (what a prefix cache could serve once); MGSM's is not
    assert counts.lengths("belebele", "tel").shared > 0 and tel.shared == 0
    assert all(src for _, src in tc.LENGTH_FACTORS.values())


@pytest.fixture(scope="module")
def counted(toy_world, tiny_base, tmp_path_factory):
    """The micro config's token counts from the tiny toy world and the tiny base's tokenizer, in an HF cache."""
    from layerswap.workflow.count_tokens import count

    config = load_config(MICRO)
    config["evaluation"]["tasks"]["mgsm"] = {"shots": 0, "languages": ["en", "toy_swh"]}
    home = tmp_path_factory.mktemp("hf")
    path = tc.counts_path(str(home))
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(count(config, toy_world / "eval", tiny_base)))
    return config, str(home), toy_world / "eval"


def test_counted_lengths_come_from_the_data_and_the_tokenizer(counted, tiny_base):
    from transformers import AutoTokenizer

    config, home, _ = counted
    counts = tc.TokenCounts(config, home)
    assert set(counts.counted) == {"mgsm", "belebele", "flores", "mmlu"}  # MBPP scores nothing without execute_code
    mmlu = counts.lengths("mmlu", "toy_swh")
    assert mmlu.source.startswith("counted") and mmlu.items == 8 and mmlu.requests == 4
    assert 0 < mmlu.prompt <= mmlu.prompt_max
    mgsm = counts.lengths("mgsm", "en")
    assert mgsm.new_tokens > 0 and mgsm.continuation == 0
    # 0-shot MGSM: each prompt holds its item's question, so the longest prompt is at least the longest question
    tok = AutoTokenizer.from_pretrained(str(tiny_base))
    rows = [json.loads(line) for line in (counted[2] / "mgsm_en.jsonl").read_text().splitlines() if line.strip()]
    longest = max(len(tok(r["question"], add_special_tokens=False).input_ids) for r in rows)
    assert longest <= mgsm.prompt_max < longest + 40
    # counts for other settings are not taken: the toy world has no factors, so that is one line naming the key
    other = copy.deepcopy(config)
    other["evaluation"]["tasks"]["mmlu"]["shots"] = 3
    with pytest.raises(UserError, match=r"^evaluation.tasks.mmlu: no token counts for toy_swh"):
        tc.TokenCounts(other, home).lengths("mmlu", "toy_swh")


def test_batches_shrink_for_long_prompts_and_fit_the_gpu():
    sizing = Sizing.of(paper(backend="hf"), None)  # on HF a batch holds its KV cache (vLLM's pool: below)
    assert sizing.batch("mgsm", "en") == 64 and sizing.batch("mgsm", "tel") < 64
    on_vllm = Sizing.of(paper(backend={"mgsm": "vllm"}), None)  # vLLM's pool: never shrunk, fewer at once
    assert on_vllm.batch("mgsm", "tel") == 64
    assert sizing.batch("belebele", "en") == 16 and sizing.batch("belebele", "tel") < sizing.batch("belebele", "jpn")
    from layerswap.workflow.batch_fit import batch_bytes

    for bench, key in tc.evaluated_keys(sizing.config):
        used = sum(batch_bytes(sizing.fit.shapes, sizing.lengths(bench, key), sizing.batch(bench, key)).values())
        assert used <= sizing.fit.usable, (bench, key)
    # the jobs' params: a key's batch only where it differs from the job's, and the job's context
    params = sizing.params("mgsm", ["en", "tel"])
    assert params["batch_sizes"] == {"tel": sizing.batch("mgsm", "tel")} and params["context_tokens"] > 13500
    assert "batch_sizes" not in sizing.params("mgsm", ["en"])


def test_one_item_that_cannot_fit_is_refused_in_one_line(tmp_path):
    """The DAG build (Spec: what every dry run, run and `layerswap cost` builds first) refuses it."""
    text = PAPER.read_text().replace("  batch_size: 64\n", "  batch_size: 64\n  gpu_memory_gb: 20\n", 1)
    (tmp_path / "small.yaml").write_text(text)
    config = load_config(tmp_path / "small.yaml")
    with pytest.raises(UserError) as err:  # on vLLM (config/paper.yaml's MGSM): one sequence must fit its KV pool
        Spec(config)
    line = str(err.value)
    assert "\n" not in line and line.startswith("config key 'evaluation.tasks.mgsm (deu)': one sequence (")
    assert "more than vLLM's pool" in line and "(evaluation.gpu_memory_gb)" in line
    config["evaluation"]["backend"] = "hf"  # on HF: one item's weights, cache and logits must fit
    with pytest.raises(UserError) as err:
        Spec(config)
    line = str(err.value)
    assert "\n" not in line and line.startswith("config key 'evaluation.tasks.mgsm (ben)': even one item does not")
    assert "evaluation.gpu_memory_gb 20" in line


def test_the_toy_world_passes_no_new_params():
    """No sizing without evaluation.gpu_memory_gb in the toy world: its jobs' params are main's."""
    evals = Spec(load_config(MICRO)).evals
    assert evals.sizing is None
    assert "batch_sizes" not in evals.benchmark_params(["mgsm"]) and "context" not in evals.benchmark_params(["mgsm"])


def test_a_long_prompt_toy_key_gets_a_smaller_batch_and_the_command_applies_it(
    counted, toy_world, tiny_base, tmp_path, caplog
):
    """The micro config on a GPU too small for batch 64 of its long-prompt keys (evaluation.gpu_memory_gb): those
    keys' jobs carry a smaller batch, and `layerswap evaluate` runs them at it, scoring as at that batch overall."""
    from layerswap.evaluation import evaluate as ev

    config, home, _ = counted
    sized = copy.deepcopy(config)
    lengths = tc.TokenCounts(sized, home)
    shapes = shapes_of(sized, None)
    longest = max(lengths.lengths("mmlu", "en").prompt_max, lengths.lengths("mmlu", "toy_swh").prompt_max)
    # room for ~8 sequences of the longest MMLU prompt beside the weights
    per_seq = (longest + 1) * (shapes.kv_bytes + 3 * shapes.intermediate * 2 + 2 * shapes.vocab * 2)
    sized["evaluation"] |= {"gpu_memory_gb": (shapes.weight_bytes + 8 * per_seq) / 0.9 / 1e9, "batch_size": 64}
    sizing = Sizing(sized, home, sized["evaluation"]["gpu_memory_gb"])
    small = sizing.batch("mmlu", "toy_swh")
    assert 1 <= small < 64 and sizing.batch("mmlu", "en") <= small  # English's prompts are the longer ones here
    assert sizing.params("mmlu", ["toy_swh"])["batch_sizes"] == {"toy_swh": small}

    def run(batch_size: int, bench: dict, out: Path) -> dict:
        args = argparse_args(toy_world / "eval", out, tiny_base, {"mmlu": bench}, batch_size)
        ev.run(args)
        return json.loads((out / "m" / "mmlu.json").read_text())["scores"]

    caplog.set_level(logging.INFO, logger="layerswap.evaluate")
    spec = {"shots": 0, "languages": ["en", "toy_swh"], "batch_sizes": {"toy_swh": small}}
    per_key = run(64, spec, tmp_path / "a")
    assert f"at batch {small}" in caplog.text and "at batch 64" in caplog.text
    assert per_key == run(small, {"shots": 0, "languages": ["en", "toy_swh"]}, tmp_path / "b")


def argparse_args(data_dir, out_dir, model, benchmarks, batch_size):
    import argparse

    from layerswap.evaluation import evaluate as ev

    parser = argparse.ArgumentParser()
    ev.add_arguments(parser)
    return parser.parse_args(
        ["--data-dir", str(data_dir), "--out-dir", str(out_dir), "--benchmarks-json", json.dumps(benchmarks)]
        + ["--batch-size", str(batch_size), "--seed", "0", "--threads", "1", "--model", f"m={model}"]
    )


def test_each_job_asks_for_its_own_planned_work():
    """Issue 48: no paper evaluation job's time limit is under 1.5x or over 4x its own planned work, the 15-minute
    floor aside, none a day or more."""
    config = load_config(PAPER)
    spec = Spec(config)
    req = Requests(config, spec)
    assert req.plan.jobs
    for job in req.plan.jobs:
        planned = req.plan.job_hours(job.rule, dict(job.wildcards)) * 60
        limit = req.job_runtime(job.rule, dict(job.wildcards))
        assert limit < 24 * 60
        if MIN_RUNTIME < limit < MAX_RUNTIME:
            assert 1.5 <= limit / planned <= 4, (job.rule, job.wildcards, limit, planned)
    wild = req.of("evaluate_checkpoints")["runtime"]  # per job: a function of its wildcards
    assert callable(wild)


def test_the_cost_figure_sums_its_pieces():
    """The plan's GPU-hours are its jobs' seconds; a Telugu key costs more than an English one; leaders-only
    constraints evaluate LEADER_TRIES candidates a run; an overlapped merge build leaves only the load; a benchmark on
    vLLM is planned on vLLM's terms."""
    config = load_config(PAPER)
    spec = Spec(config)
    gb = 8.03e9 * 4 / 1e9
    base = EvalPlan(config, spec, gb)
    assert sum(base.gpu_hours().values()) == pytest.approx(sum(j.seconds for j in base.jobs) / 3600)
    for bench in ("mgsm", "belebele", "mmlu"):
        assert base.key_seconds(bench, "tel") > base.key_seconds(bench, "jpn")
    every = copy.deepcopy(config)
    every["selection"]["constraint_evaluation"] = "all"
    alls = EvalPlan(every, Spec(every), gb)
    mmlu = [j for j in base.jobs if j.rule == "evaluate_checkpoint_leaders" and j.bench == "mmlu"]
    assert mmlu and all(j.models == LEADER_TRIES[0] * 3 for j in mmlu)  # 3 runs a language
    assert not [j for j in base.jobs if j.rule == "evaluate_checkpoints" and j.bench == "mmlu"]
    selection = ("evaluate_checkpoints", "evaluate_checkpoint_leaders")
    assert sum(base.gpu_hours().get(r, 0) for r in selection) < sum(alls.gpu_hours().get(r, 0) for r in selection)
    overlap = EvalPlan(config, spec, gb, Features(overlapped_build=True))
    serial = EvalPlan(config, spec, gb, Features(overlapped_build=False))
    assert overlap.load_seconds(True) == rate("merge_load_s") < serial.load_seconds(True)
    vllm = copy.deepcopy(config)
    vllm["evaluation"]["backend"] = {"mgsm": "vllm"}
    other = EvalPlan(vllm, Spec(vllm), gb)
    assert other.sizing.backend["mgsm"] == "vllm" and other.sizing.backend["mmlu"] == "hf"
    assert other.key_seconds("mmlu", "tel") == base.key_seconds("mmlu", "tel")
    text = base.format()
    assert "tokens per item per (benchmark, language key)" in text and "length factors" in text
    used = {"en", *config["mgsm_languages"], *config["languages"]}  # the factors of the languages the plan evaluates
    assert all(f"{lang} {f:g} ({src})" in text for lang, (f, src) in tc.LENGTH_FACTORS.items() if lang in used)


def test_the_plan_counts_the_merge_build_ahead_that_the_jobs_do():
    """Features.of says the merge build overlaps evaluation exactly when the merge evaluation jobs build ahead."""
    from layerswap.merge.merger import AHEAD
    from layerswap.workflow.eval_plan import Features

    assert Features.of(load_config(str(REPO / "config" / "paper.yaml"))).overlapped_build == (AHEAD > 0)
