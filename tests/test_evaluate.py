"""Tests of `layerswap evaluate` on a tiny random Llama with a word-level tokenizer and fixture data files."""

from __future__ import annotations

import argparse
import json

import pytest

pytest.importorskip("lm_eval")
torch = pytest.importorskip("torch")

from layerswap.errors import UserError  # noqa: E402
from layerswap.evaluation import evaluate as ev  # noqa: E402
from layerswap.evaluation import evaluate_merges  # noqa: E402
from layerswap.evaluation import tasks as et  # noqa: E402
from layerswap.merge import engine as merge  # noqa: E402
from scripts.fixture_world import LANGS, N_ITEMS, WORDS, _write_jsonl, make_data, make_model  # noqa: E402,F401


def make_args(data_dir, out_dir, models, benchmarks, **kw) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    ev.add_arguments(parser)
    argv = [
        "--data-dir",
        str(data_dir),
        "--out-dir",
        str(out_dir),
        "--benchmarks-json",
        json.dumps(benchmarks),
        "--batch-size",
        str(kw.get("batch_size", 16)),
        "--seed",
        "0",
        "--threads",
        "1",
    ]
    for model_id, src in models:
        argv += ["--model", f"{model_id}={src}"]
    return parser.parse_args(argv)


ALL = {
    "mgsm": {"shots": 2, "languages": LANGS},
    "belebele": {"shots": 1},
    "flores": {"shots": 0},
    "mmlu": {"shots": 0, "limit": 5},
    "mbpp": {"shots": 0},
}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("world")
    vocab = make_data(root / "data")
    ckpt = make_model(root / "ckpt_a", vocab, seed=0)
    other = make_model(root / "ckpt_b", vocab, seed=1)
    # a real layer swap: layer 0 from b (language expert), layer 1 from a (task expert), non-layer tensors averaged;
    # written to disk with write_merged and also evaluated in memory from the same recipe
    recipe_dict = {
        "method": "layer_swap",
        "inputs": {"task": str(ckpt), "lang": str(other)},
        "params": {"bottom": 1, "top": 0},
    }
    disk = root / "merged_on_disk"
    merge.write_merged(recipe_dict, str(disk))
    recipe = root / "recipe.json"
    recipe.write_text(json.dumps(recipe_dict))
    return {"root": root, "data": root / "data", "ckpt": ckpt, "other": other, "recipe": recipe, "disk": disk}


@pytest.fixture(scope="module")
def main_run(world, tmp_path_factory):
    out1 = tmp_path_factory.mktemp("out1")
    out2 = tmp_path_factory.mktemp("out2")
    models = [
        ("ckpt/a", world["ckpt"]),
        ("other", world["other"]),
        ("merge/disk", world["disk"]),
        ("merge/mem", world["recipe"]),
    ]
    evaluate_merges.run(make_args(world["data"], out1, models, ALL))
    evaluate_merges.run(make_args(world["data"], out2, models, ALL))
    return out1, out2


def _load(out, model_id, bench):
    return json.loads((out / model_id / f"{bench}.json").read_text())


def test_output_fields_and_ranges(main_run):
    out, _ = main_run
    for bench in ["mgsm", "belebele", "flores", "mmlu", "mbpp"]:
        doc = _load(out, "ckpt/a", bench)
        assert set(doc) == {
            "model_id",
            "benchmark",
            "metric",
            "scores",
            "n",
            "lm_eval_tasks",
            "shots",
            "filter",
            "seed",
            "limit",
            "lm_eval_version",
            "task_config_hash",
            "skipped",
        } | ({"dtype", "backend"} if not doc["skipped"] else set())
        assert doc.get("dtype", "float32") == "float32"  # --dtype auto on a CPU
        assert doc.get("backend", "hf") == "hf"  # the engine that scored it
        assert doc["model_id"] == "ckpt/a" and doc["benchmark"] == bench and doc["seed"] == 0
        assert doc["lm_eval_version"] == "0.4.13" and len(doc["task_config_hash"]) == 64
        if bench == "mbpp":
            continue
        assert doc["skipped"] is None
        hi = 100.0 if bench == "flores" else 1.0
        assert all(0.0 <= v <= hi for v in doc["scores"].values()), doc
        assert set(doc["scores"]) == set(doc["n"]) == set(doc["lm_eval_tasks"])
    mgsm = _load(out, "ckpt/a", "mgsm")
    assert mgsm["metric"] == "exact_match" and mgsm["shots"] == 2 and "last-integer" in mgsm["filter"]
    assert mgsm["n"] == {"en": N_ITEMS - et.FEWSHOT_POOL, "toy_swh": N_ITEMS - et.FEWSHOT_POOL}
    assert mgsm["lm_eval_tasks"] == {"en": "toy_mgsm_en", "toy_swh": "toy_mgsm_toy_swh"}
    assert set(_load(out, "ckpt/a", "flores")["scores"]) == {"en-toy_swh", "toy_swh-en"}
    assert _load(out, "ckpt/a", "flores")["n"]["en-toy_swh"] == N_ITEMS
    mmlu = _load(out, "ckpt/a", "mmlu")
    assert mmlu["limit"] == 5 and mmlu["n"] == {"en": 5, "toy_swh": 5}
    assert _load(out, "ckpt/a", "belebele")["metric"] == "acc"


def test_samples_log(main_run):
    out, _ = main_run
    rows = [json.loads(x) for x in (out / "ckpt/a" / "mgsm.samples.jsonl").read_text().splitlines()]
    assert len(rows) == 2 * (N_ITEMS - et.FEWSHOT_POOL)
    r = rows[0]
    assert r["prompt"].endswith("\nA:") and r["prompt"].count("Q: ") == 3  # 2 shots + the question
    assert {"generation", "extracted", "target", "correct"} <= set(r)
    mc = [json.loads(x) for x in (out / "ckpt/a" / "belebele.samples.jsonl").read_text().splitlines()]
    assert len(mc[0]["choice_loglikelihoods"]) == 4 and mc[0]["extracted"] in range(4)
    acc = _load(out, "ckpt/a", "belebele")["scores"]["en"]
    en = [m for m in mc if m["key"] == "en"]
    assert acc == pytest.approx(sum(m["correct"] for m in en) / len(en))


def test_mbpp_skipped_without_opt_in(main_run):
    out, _ = main_run
    doc = _load(out, "ckpt/a", "mbpp")
    assert doc["skipped"] and "execute_code" in doc["skipped"] and doc["scores"] == {} and doc["n"] == {}
    assert (out / "ckpt/a" / "mbpp.samples.jsonl").read_text() == ""


def test_checkpoint_and_in_memory_recipe_identical(main_run):
    """The merge written to disk (write_merged) and the same recipe built in memory give identical numbers."""
    out, _ = main_run
    for bench in ["mgsm", "belebele", "flores", "mmlu"]:
        d, m = _load(out, "merge/disk", bench), _load(out, "merge/mem", bench)
        assert d["scores"] == m["scores"] and d["n"] == m["n"]
        assert (out / "merge/disk" / f"{bench}.samples.jsonl").read_bytes() == (
            out / "merge/mem" / f"{bench}.samples.jsonl"
        ).read_bytes()
    mem = (out / "merge/mem" / "belebele.samples.jsonl").read_text()  # the layer swap is neither of its inputs
    assert mem != (out / "ckpt/a" / "belebele.samples.jsonl").read_text()
    assert mem != (out / "other" / "belebele.samples.jsonl").read_text()
    # the other model really is evaluated with its own weights (the swap happened)
    la = (out / "ckpt/a" / "belebele.samples.jsonl").read_text()
    lb = (out / "other" / "belebele.samples.jsonl").read_text()
    assert la != lb


def test_deterministic_bytes(main_run):
    out1, out2 = main_run
    files = sorted(p.relative_to(out1) for p in out1.rglob("*") if p.is_file())
    assert len(files) == 4 * 5 * 2
    for rel in files:
        assert (out1 / rel).read_bytes() == (out2 / rel).read_bytes(), rel


def test_last_integer_filter():
    from lm_eval.filters.extraction import RegexFilter

    f = RegexFilter(regex_pattern=et.LAST_INTEGER, group_select=-1)
    gens = [["3 + 4 = 7 , 7 - 2 = 5 . the answer is 5 \n"], ["no number here"], ["12 apples , answer -3"]]
    assert [x[0] for x in f.apply(gens, [{}, {}, {}])] == ["5", "[invalid]", "-3"]
    # and the template really uses that regex
    assert et.LAST_INTEGER in (et.TASK_DIR / "mgsm.yaml").read_text()


def test_bad_input(world, tmp_path):
    with pytest.raises(UserError, match="unknown benchmark"):
        ev.parse_benchmarks('{"gsm8k": {}}')
    with pytest.raises(UserError, match="shots"):
        ev.parse_benchmarks('{"mgsm": {"shots": -1}}')
    with pytest.raises(UserError, match="ID=SOURCE"):
        ev.parse_models(["nomodel"])
    with pytest.raises(UserError, match="config.json"):
        ev.parse_models([f"x={tmp_path}"])
    with pytest.raises(UserError, match="mgsm_xx.jsonl"):
        ev.plan_benchmarks(world["data"], ev.parse_benchmarks('{"mgsm": {"languages": ["xx"]}}'))


def test_a_benchmark_batch_size_is_the_jobs(world, tmp_path, monkeypatch):
    """`evaluation.tasks.<benchmark>.batch_size` (in the benchmarks JSON) replaces --batch-size for the job's model
    (the smallest where a job evaluates several benchmarks); without it, --batch-size."""
    seen = []

    class Recording(ev.ModelHost):
        def load(self, source):
            lm = super().load(source)
            seen.append(lm.batch_size)
            return lm

    monkeypatch.setattr(ev, "ModelHost", Recording)
    small = {
        "belebele": {"shots": 0, "languages": ["en"], "limit": 2, "batch_size": 3},
        "mgsm": {"shots": 0, "languages": ["en"], "limit": 2},
    }
    ev.run(make_args(world["data"], tmp_path / "a", [("ckpt/a", world["ckpt"])], small, batch_size=16))
    del small["belebele"]["batch_size"]
    ev.run(make_args(world["data"], tmp_path / "b", [("ckpt/a", world["ckpt"])], small, batch_size=16))
    assert seen == [3, 16]


def test_mbpp_opt_in(world, tmp_path, monkeypatch):
    # a model that answers every prompt with the first item's correct code is overkill; use the random model and
    # check the plumbing (scores in range, samples carry the generation), the sandbox itself is tested below.
    out = tmp_path / "out"
    ev.run(
        make_args(
            world["data"],
            out,
            [("ckpt/a", world["ckpt"])],
            {"mbpp": {"shots": 1, "execute_code": True, "languages": ["en"], "limit": 2}},
        )
    )
    doc = _load(out, "ckpt/a", "mbpp")
    assert doc["skipped"] is None and doc["metric"] == "pass_at_1" and doc["n"] == {"en": 2}
    assert 0.0 <= doc["scores"]["en"] <= 1.0
    rows = [json.loads(x) for x in (out / "ckpt/a" / "mbpp.samples.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(isinstance(r["generation"], str) for r in rows)


def test_scoring_with_oracle_generations(world, tmp_path, monkeypatch):
    """Generation replaced by each doc's reference: the filter/metric plumbing must give perfect scores."""
    from lm_eval.models.huggingface import HFLM

    def oracle(self, requests, disable_tqdm=False):
        out = []
        for req in requests:
            d = req.doc
            from_en = req.arguments[0].endswith(f"{d.get('sentence_eng')}\nA:")
            out.append(d.get("answer") or d.get("code") or (d["sentence"] if from_en else d["sentence_eng"]))
        return out

    monkeypatch.setattr(HFLM, "generate_until", oracle)
    out = tmp_path / "out"
    ev.run(
        make_args(
            world["data"],
            out,
            [("ckpt/a", world["ckpt"])],
            {
                "mgsm": {"shots": 1},
                "flores": {"shots": 0, "limit": 4},
                "mbpp": {"shots": 0, "execute_code": True, "languages": ["toy_swh"], "limit": 3},
            },
        )
    )
    assert _load(out, "ckpt/a", "mgsm")["scores"] == {"en": 1.0, "toy_swh": 1.0}
    assert _load(out, "ckpt/a", "flores")["scores"] == {
        "en-toy_swh": pytest.approx(100.0),
        "toy_swh-en": pytest.approx(100.0),
    }
    assert _load(out, "ckpt/a", "mbpp")["scores"] == {"toy_swh": 1.0}
    rows = [json.loads(x) for x in (out / "ckpt/a" / "mgsm.samples.jsonl").read_text().splitlines()]
    assert all(r["correct"] and r["extracted"] == r["target"] for r in rows)


def test_architecture_change_and_a_context_too_short_refused(world, tmp_path):
    """A job may mix architectures (a new instance is built); a model whose context cannot hold a request (prompt +
    generation budget) is refused in one line before any model of the job is evaluated: lm-eval would cut the prompt
    from the left (layerswap/evaluation/context.py)."""
    from transformers import AutoConfig

    vocab = set(json.loads((world["ckpt"] / "tokenizer.json").read_text())["model"]["vocab"])
    for name, positions in (("short", 40), ("other_arch", 200)):
        make_model(tmp_path / name, vocab, seed=2)
        cfg = AutoConfig.from_pretrained(tmp_path / name)
        cfg.max_position_embeddings = positions
        cfg.save_pretrained(tmp_path / name)
    bench = {"mgsm": {"shots": 2, "languages": ["en"], "limit": 2}}
    out = tmp_path / "out"
    with pytest.raises(UserError) as err:
        ev.run(make_args(world["data"], out, [("a", world["ckpt"]), ("short", tmp_path / "short")], bench))
    line = str(err.value)
    assert "\n" not in line and line.startswith("mgsm en item ") and "+ generation budget 32 = " in line
    assert "over the context of 40 tokens (the model's context (lm-eval's max_length))" in line
    assert not out.exists(), "nothing evaluated, nothing written"
    ev.run(make_args(world["data"], out, [("a", world["ckpt"]), ("other", tmp_path / "other_arch")], bench))
    assert _load(out, "a", "mgsm")["n"] == _load(out, "other", "mgsm")["n"] == {"en": 2}


def test_too_few_items_for_the_fewshot_pool(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    _write_jsonl(
        data / "mgsm_en.jsonl",
        [{"question": "q", "answer": "a 1", "answer_number": 1, "equation_solution": ""}] * et.FEWSHOT_POOL,
    )
    with pytest.raises(UserError, match="mgsm_en.jsonl: 8 items"):
        ev.plan_benchmarks(data, ev.parse_benchmarks('{"mgsm": {"shots": 3}}'))
    assert ev.plan_benchmarks(data, ev.parse_benchmarks('{"mgsm": {"shots": 0}}'))[0].tasks[0].pool == 0
    with pytest.raises(UserError, match="twice"):
        ev.plan_benchmarks(data, ev.parse_benchmarks('{"mgsm": {"languages": ["en", "en"]}}'))
