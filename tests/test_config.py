"""Config layer: schema (with defaults) + cross-key checks give one line naming the key, before any job runs."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from layerswap import config as cfg
from layerswap import config_schema
from layerswap.errors import UserError

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "config" / "schema.yaml"


_LOADED: dict[str, dict] = {}


def load(name: str) -> dict:
    if name not in _LOADED:
        _LOADED[name] = yaml.load(
            (ROOT / "config" / name).read_text(), Loader=getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader
        )
    return copy.deepcopy(_LOADED[name])


@pytest.fixture(scope="module")
def default_raw() -> dict:
    config = load("config.yaml")
    return config


@pytest.fixture
def default(default_raw) -> dict:
    return copy.deepcopy(default_raw)


def error_of(config: dict) -> str:
    with pytest.raises(UserError) as info:
        cfg.validate_config(config, SCHEMA)
        cfg.check(config)
    text = str(info.value)
    assert "\n" not in text, text
    return text


# ---------------------------------------------------------------------------------------------------------------
# good configs


@pytest.mark.parametrize("name", ["config.yaml", "paper.yaml", "micro.yaml", "smollm2.yaml", "toy_transfer.yaml"])
def test_shipped_configs_pass(name):
    config = load(name)
    cfg.validate_config(config, SCHEMA)
    cfg.check(config)


def test_defaults_filled(default):
    cfg.validate_config(default, SCHEMA)
    swap = default["merges"]["configs"]["swap_default"]
    assert swap["w_task"] == swap["w_lang"] == 1.0
    assert swap["non_layer"] == "average" and swap["lang_layers"] is None and swap["allow_different_base"] is False
    assert default["evaluation"]["tasks_per_job"] == "grouped"
    assert default["storage"] == {"scratch": None, "hf_home": None, "keep_merged": False}
    assert default["sft"]["defaults"]["precision"] == "fp32"
    # runs get no schema defaults: they inherit sft.defaults
    assert default["sft"]["runs"]["toy_swh_1"] == {"expert": "toy_swh"}


def test_defaults_filled_when_section_missing(default):
    del default["sft"]["defaults"]
    for run in default["sft"]["runs"].values():
        run.update(num_samples=2400, checkpoint_every=800)
    cfg.validate_config(default, SCHEMA)
    assert default["sft"]["defaults"]["scheduler"] == "linear"


def test_snakemake_validate_accepts_schema(default):
    from snakemake.utils import validate

    validate(default, str(SCHEMA), set_default=True)
    assert default["merges"]["configs"]["soup_uniform"]["allow_different_base"] is False


def test_heatmap_thresholds(default):
    """The toy default sets thresholds by quantile; the paper config keeps Fig. 2's fixed values; a type left out
    gets the schema's quantile default."""
    cfg.validate_config(default, SCHEMA)
    toy = default["analysis"]["heatmap_thresholds"]
    assert set(toy["language"]) == set(toy["math"]) == {"quantile"}
    assert set(toy["joint"]) == {"quantile"} and 0 <= toy["joint"]["quantile"] <= 1
    paper = load("paper.yaml")
    cfg.validate_config(paper, SCHEMA)
    assert paper["analysis"]["heatmap_thresholds"] == {"language": 1.9e-5, "math": 1.0e-5, "joint": 1.0e-5}


def test_effective_runs_and_checkpoints(default):
    cfg.validate_config(default, SCHEMA)
    runs = cfg.effective_runs(default)
    assert runs["toy_swh_2"]["lr"] == 2.0e-3 and runs["toy_swh_2"]["batch_size"] == 16
    assert cfg.checkpoints_of(runs["toy_swh_1"]) == [800, 1600, 2400]
    assert cfg.checkpoints_of({"num_samples": 2500, "checkpoint_every": 800}) == [800, 1600, 2400]
    assert cfg.checkpoints_of({"num_samples": 4800, "checkpoint_every": 1600}) == [1600, 3200, 4800]


def test_mix_of(default):
    cfg.validate_config(default, SCHEMA)
    assert cfg.mix_of(default, "math") == {"toy_orca_math": 3000}
    assert cfg.mix_of(default, "toy_tel") == {"toy_aya": 1600, "toy_nllb": 1200}
    assert cfg.mix_of(default, "joint_toy_swh") == {"toy_orca_math": 3000, "toy_aya": 1600, "toy_nllb": 1200}
    paper = load("paper.yaml")
    cfg.validate_config(paper, SCHEMA)
    assert sum(cfg.mix_of(paper, "joint_swh").values()) == 80000
    assert all(30000 <= sum(cfg.mix_of(paper, e).values()) <= 40000 for e in ["math", "swh", "tel", "ben", "jpn"])


def test_paper_config_matches_paper():
    paper = load("paper.yaml")
    cfg.validate_config(paper, SCHEMA)
    runs = cfg.effective_runs(paper)
    table4 = {name: run for name, run in runs.items() if not name.startswith("joint_")}
    assert len(table4) == 15
    assert runs["math_2"]["lr"] == 1.0e-7 and runs["math_2"]["max_grad_norm"] == 0.5
    assert runs["tel_3"]["batch_size"] == 4 and runs["tel_3"]["seq_len"] == 2048
    assert runs["jpn_1"]["adam_beta2"] == 0.995 and runs["ben_2"]["warmup_steps"] == 300
    assert len({run["seed"] for run in runs.values()}) == len(runs)
    assert {run["checkpoint_every"] for run in runs.values()} == {5000}
    configs = paper["merges"]["configs"]
    assert configs[paper["merges"]["default_swap"]] == {
        "method": "layer_swap",
        "bottom": 5,
        "top": 2,
        "transition_bottom": 0,
        "transition_top": 0,
        "w_task": 1.0,
        "w_lang": 1.0,
        "non_layer": "average",
        "lang_layers": None,
        "allow_different_base": False,
    }
    assert len([c for c in configs.values() if c["method"] == "layer_swap"]) == 81
    assert paper["evaluation"]["tasks"]["mgsm"]["shots"] == 8 and paper["evaluation"]["tasks_per_job"] == "single"


def test_cli_ok_and_error(tmp_path, default):
    ok = subprocess.run(
        [sys.executable, "-m", "layerswap.cli", "check-config", str(ROOT / "config" / "paper.yaml")],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert ok.returncode == 0 and ok.stdout.strip() == "ok", ok.stderr
    default["languages"].append("toy_xyz")
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(default))
    out = subprocess.run(
        [sys.executable, "-m", "layerswap.cli", "check-config", str(bad)], capture_output=True, text=True, cwd=ROOT
    )
    assert out.returncode == 1 and out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "config key 'languages[4]'" in lines[0], out.stderr


def test_cli_unparsable_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("world: toy\n  languages: [a\n")
    out = subprocess.run(
        [sys.executable, "-m", "layerswap.cli", "check-config", str(bad)], capture_output=True, text=True, cwd=ROOT
    )
    assert out.returncode == 1 and len(out.stderr.strip().splitlines()) == 1
    assert f"config file {bad} line 2 column" in out.stderr and "not valid YAML" in out.stderr, out.stderr


# ---------------------------------------------------------------------------------------------------------------
# bad inputs: each gives exactly one line naming the key (and the allowed values where there is a closed set)


def _set(config: dict, dotted: str, value) -> None:
    *parents, last = dotted.split(".")
    node = config
    for part in parents:
        node = node[part]
    if value is DELETE:
        del node[last]
    else:
        node[last] = value


DELETE = object()

BAD = [
    # (description, dotted key to set, value, substrings the one line must contain)
    ("unknown top-level key", "colour", "red", ["config: unknown key 'colour' at top level", "allowed: world,"]),
    (
        "unknown nested key",
        "merges.foo",
        1,
        ["config key 'merges': unknown key 'foo'", "allowed: configs, default_swap"],
    ),
    (
        "unknown key in a run",
        "sft.runs.math_1.learning_rate",
        0.1,
        ["config key 'sft.runs.math_1': unknown key 'learning_rate'", "lr"],
    ),
    (
        "unknown key in a merge config",
        "merges.configs.swap_default.bottom_layers",
        2,
        ["config key 'merges.configs.swap_default': unknown key 'bottom_layers'", "transition_bottom"],
    ),
    ("wrong type", "sft.defaults.lr", "abc", ["config key 'sft.defaults.lr': 'abc' is not of type 'number'"]),
    ("number written 1e-3", "sft.defaults.lr", "1e-3", ["config key 'sft.defaults.lr'", "write 1.0e-5"]),
    ("wrong type nested", "selection.top_k", 2.5, ["config key 'selection.top_k'", "integer"]),
    ("unknown world", "world", "real", ["config key 'world': 'real' is not allowed; allowed: toy, hf"]),
    (
        "unknown scheduler",
        "sft.runs.toy_swh_2.scheduler",
        "cosine",
        ["config key 'sft.runs.toy_swh_2.scheduler': 'cosine' is not allowed; allowed: linear, wsd"],
    ),
    (
        "unknown merge method",
        "merges.configs.ties_d05.method",
        "slerp",
        ["config key 'merges.configs.ties_d05.method'", "allowed: layer_swap, soup, ties"],
    ),
    (
        "unknown soup weighting",
        "merges.configs.soup_uniform.weighting",
        "fisher",
        ["config key 'merges.configs.soup_uniform.weighting'", "allowed: uniform, magnitude"],
    ),
    (
        "unknown non_layer",
        "merges.configs.swap_default.non_layer",
        "base",
        ["config key 'merges.configs.swap_default.non_layer'", "allowed: average, lang, task"],
    ),
    (
        "evaluation batch size auto",
        "evaluation.batch_size",
        "auto",
        ["config key 'evaluation.batch_size': 'auto' is not of type 'integer'"],
    ),
    ("evaluation batch size zero", "evaluation.batch_size", 0, ["config key 'evaluation.batch_size'", "minimum of 1"]),
    (
        "unknown tasks_per_job",
        "evaluation.tasks_per_job",
        "all",
        ["config key 'evaluation.tasks_per_job'", "allowed: grouped, single"],
    ),
    ("missing required key", "selection.top_k", DELETE, ["config key 'selection.top_k': required key is missing"]),
    ("toy_world missing in toy world", "toy_world", DELETE, ["config key 'toy_world': required key is missing"]),
    ("empty runs", "sft.runs", {}, ["config key 'sft.runs': must not be empty"]),
    ("empty merge configs", "merges.configs", {}, ["config key 'merges.configs': must not be empty"]),
    ("empty best_of group", "merges.best_of.soup", [], ["config key 'merges.best_of.soup': must not be empty"]),
    ("empty languages", "languages", [], ["config key 'languages': must not be empty"]),
    ("empty task list", "evaluation.merge_tasks", [], ["config key 'evaluation.merge_tasks': must not be empty"]),
    ("bad run name", "sft.runs.bad name", {"expert": "math"}, ["config key 'sft.runs'", "'bad name'"]),
    ("bad mix count", "mixes.math.toy_orca_math", "many", ["config key 'mixes.math.toy_orca_math'", "integer"]),
    ("negative mix count", "mixes.language.toy_aya", 0, ["config key 'mixes.language.toy_aya'"]),
    ("prompt without {prompt}", "prompt_template", "Q: {question}", ["config key 'prompt_template'", "{prompt}"]),
    (
        "unknown selection metric",
        "selection.weights.math.mgsm_fr",
        1.0,
        ["config key 'selection.weights.math': unknown key 'mgsm_fr'", "allowed: mgsm_en, mgsm_avg"],
    ),
    (
        "unknown language",
        "languages",
        ["toy_swh", "toy_xyz"],
        ["config key 'languages[1]': unknown language 'toy_xyz'; allowed: toy_swh, toy_tel, toy_ben, toy_jpn"],
    ),
    ("real language in toy world", "languages", ["swh"], ["config key 'languages[0]'", "'swh'"]),
    (
        "unknown MGSM language",
        "mgsm_languages",
        ["en", "fr"],
        ["config key 'mgsm_languages[1]': unknown MGSM language 'fr'; allowed: en, toy_swh"],
    ),
    (
        "unknown eval language",
        "evaluation.tasks.mgsm.languages",
        ["en", "toy_deu"],
        ["config key 'evaluation.tasks.mgsm.languages[1]'", "toy_deu"],
    ),
    (
        "unknown expert",
        "sft.runs.toy_swh_1.expert",
        "toy_xyz",
        ["config key 'sft.runs.toy_swh_1.expert': unknown expert 'toy_xyz'; allowed: math, toy_swh,", "joint_toy_swh"],
    ),
    (
        "impossible layer range",
        "merges.configs.swap_b3u1t1",
        {"method": "layer_swap", "bottom": 4, "top": 2, "transition_bottom": 2, "transition_top": 1},
        ["config key 'merges.configs.swap_b3u1t1'", "4+2+1+2 = 9 exceeds base.num_layers = 8", "allowed: a sum <= 8"],
    ),
    (
        "lang_layers out of range",
        "merges.configs.swap_list",
        {"method": "layer_swap", "lang_layers": [0, 1, 8]},
        ["config key 'merges.configs.swap_list.lang_layers[2]'", "allowed: 0..7"],
    ),
    (
        "lang_layers negative",
        "merges.configs.swap_list",
        {"method": "layer_swap", "lang_layers": [-1]},
        ["config key 'merges.configs.swap_list.lang_layers[0]'", "allowed: 0..7"],
    ),
    (
        "layer_swap without bottom",
        "merges.configs.swap_x",
        {"method": "layer_swap", "top": 1},
        ["config key 'merges.configs.swap_x.bottom': required key is missing"],
    ),
    (
        "ties without density",
        "merges.configs.ties_d05",
        {"method": "ties"},
        ["config key 'merges.configs.ties_d05.density': required key is missing"],
    ),
    (
        "top_k above available checkpoints",
        "selection.top_k",
        5,
        ["config key 'selection.top_k': 5 needs 5 checkpoints of expert", "allowed: top_k <= 4"],
    ),
    (
        "checkpoint_every above num_samples",
        "sft.runs.math_1.checkpoint_every",
        4800,
        ["config key 'sft.runs.math_1.checkpoint_every': 4800 does not fit num_samples 2400", "allowed: 1..2400"],
    ),
    (
        "checkpoint_every zero",
        "sft.defaults.checkpoint_every",
        0,
        ["config key 'sft.defaults.checkpoint_every'", "allowed: 1..2400"],
    ),
    (
        "checkpoint_every not a multiple of batch",
        "sft.defaults.checkpoint_every",
        810,
        ["config key 'sft.defaults.checkpoint_every'", "batch_size 16"],
    ),
    (
        "num_samples not a multiple of checkpoint_every",
        "sft.defaults.num_samples",
        2000,
        [
            "config key 'sft.defaults.num_samples': 2000 is not a multiple of checkpoint_every 800 of run 'math_1'",
            "allowed: multiples of 800",
        ],
    ),
    (
        "num_samples not a multiple of batch_size",
        "sft.runs.math_1.num_samples",
        2404,
        [
            "config key 'sft.runs.math_1.num_samples': 2404 is not a multiple of checkpoint_every 800",
            "allowed: multiples of 800",
        ],
    ),
    (
        "default_swap unknown",
        "merges.default_swap",
        "swap_nope",
        ["config key 'merges.default_swap': unknown config 'swap_nope'", "allowed: swap_default, swap_b3u1t1"],
    ),
    (
        "default_swap wrong method",
        "merges.default_swap",
        "soup_uniform",
        [
            "config key 'merges.default_swap': config 'soup_uniform' has method soup",
            "allowed: swap_default, swap_b3u1t1",
        ],
    ),
    (
        "best_of wrong method",
        "merges.best_of.soup",
        ["soup_uniform", "ties_d05"],
        ["config key 'merges.best_of.soup[1]'", "allowed: soup_uniform, soup_magnitude"],
    ),
    ("soup_then_swap unknown", "merges.soup_then_swap", "swap_zzz", ["config key 'merges.soup_then_swap'"]),
    (
        "merge task not evaluated",
        "evaluation.merge_tasks",
        ["mgsm", "xnli"],
        ["config key 'evaluation.merge_tasks[1]'", "allowed: mgsm, belebele, flores, mbpp, mmlu"],
    ),
    (
        "table2 language not a target",
        "analysis.table2_language",
        "toy_abc",
        ["config key 'analysis.table2_language'", "allowed: toy_swh"],
    ),
    (
        "table2 language without a joint run",
        "analysis.table2_language",
        "toy_tel",
        [
            "config key 'analysis.table2_language': Table 2 compares the joint expert of 'toy_tel' with the merges, "
            "but no run of sft.runs has expert 'joint_toy_tel'; allowed: toy_swh"
        ],
    ),
    (
        "pretraining mix above one",
        "toy_world.pretrain_mix",
        {"toy_math": 0.5, "parallel": 0.6},
        ["toy_world.pretrain_mix: toy_math + parallel + code_switched is 1.1, more than 1"],
    ),
    (
        "pretraining mix unknown share",
        "toy_world.pretrain_mix",
        {"math": 0.5},
        ["config key 'toy_world.pretrain_mix'", "'math'"],
    ),
    (
        "unknown data source",
        "mixes.math",
        {"orca_math": 100},
        ["config key 'mixes.math.orca_math': unknown data source 'orca_math'; allowed: toy_orca_math, toy_aya"],
    ),
    (
        "per-language source in the math mix",
        "mixes.math",
        {"toy_aya": 100},
        ["config key 'mixes.math.toy_aya'", "allowed: toy_orca_math"],
    ),
    (
        "data source with file and hub_id",
        "data_sources.toy_aya.hub_id",
        "CohereForAI/aya_dataset",
        ["config key 'data_sources.toy_aya': needs exactly one of file, hub_id"],
    ),
    (
        "unknown normaliser",
        "data_sources.toy_aya.schema",
        "dolly",
        ["config key 'data_sources.toy_aya.schema': 'dolly' is not allowed; allowed: orca_math, aya, nllb"],
    ),
    (
        "bad file placeholder",
        "data_sources.toy_aya.file",
        "aya_{language}.jsonl",
        ["config key 'data_sources.toy_aya.file': unknown placeholder {language}; allowed: {lang}"],
    ),
    ("missing data_sources", "data_sources", DELETE, ["config key 'data_sources': required key is missing"]),
    ("unknown language name", "language_names", {"toy_xx": "X"}, ["config key 'language_names.toy_xx'"]),
    (
        "selection metric of a task not evaluated",
        "evaluation.checkpoint_tasks",
        ["mgsm", "flores"],
        ["config key 'selection.weights.language.belebele'", "evaluation.checkpoint_tasks"],
    ),
    (
        "mbpp metric without execution",
        "selection.weights.language.mbpp",
        1.0,
        ["config key 'selection.weights.language.mbpp'", "execute_code"],
    ),
    (
        "negative constraint margin",
        "selection.constraints",
        {"language": {"mmlu": -0.1}},
        ["config key 'selection.constraints.language.mmlu'", "0"],
    ),
    (
        "unknown constraint metric",
        "selection.constraints",
        {"language": {"mmlu_en": 0.0}},
        ["config key 'selection.constraints.language'", "mmlu_en"],
    ),
    (
        "math constraint on a target language",
        "selection.constraints",
        {"math": {"mgsm_target": 0.0}},
        ["config key 'selection.constraints.math.mgsm_target': math experts have no target language"],
    ),
    (
        "mbpp constraint without execution",
        "selection.constraints",
        {"language": {"mbpp": 0.0}},
        ["config key 'selection.constraints.language.mbpp'", "execute_code"],
    ),
    (
        "heatmap quantile above 1",
        "analysis.heatmap_thresholds.math",
        {"quantile": 1.5},
        ["config key 'analysis.heatmap_thresholds.math.quantile': 1.5 is greater than the maximum of 1"],
    ),
    (
        "heatmap quantile below 0",
        "analysis.heatmap_thresholds.language",
        {"quantile": -0.1},
        ["config key 'analysis.heatmap_thresholds.language.quantile': -0.1 is less than the minimum of 0"],
    ),
    (
        "heatmap threshold unknown key",
        "analysis.heatmap_thresholds.language",
        {"quantlie": 0.5},
        [
            "config key 'analysis.heatmap_thresholds.language': {'quantlie': 0.5} is not valid",
            "expected a fixed threshold (a number > 0) or {quantile: q} with 0 <= q <= 1",
        ],
    ),
    (
        "heatmap fixed threshold not positive",
        "analysis.heatmap_thresholds.math",
        0,
        ["config key 'analysis.heatmap_thresholds.math': 0 is not valid", "{quantile: q}"],
    ),
    (
        "heatmap threshold of an unknown expert type",
        "analysis.heatmap_thresholds.lang",
        {"quantile": 0.5},
        ["config key 'analysis.heatmap_thresholds': unknown key 'lang'; allowed: language, math, joint"],
    ),
    # counts and sizes that reach memory, a shape or a seed: each bounded, the limit in the line (a float such as
    # 1e20 passes `type: integer`; these once ended in an OverflowError traceback at parse time, in numpy inside the
    # SFT job, or in a data job whose memory grew without bound)
    ("layers", "base.num_layers", 1e20, ["config key 'base.num_layers': 1e+20 is greater than the maximum of 1024"]),
    ("sft seed", "sft.defaults.seed", 1e29, ["config key 'sft.defaults.seed'", "maximum of 4294967295"]),
    ("run seed", "sft.runs.math_1.seed", 2**32, ["config key 'sft.runs.math_1.seed'", "maximum of 4294967295"]),
    ("workflow seed", "seed", -1, ["config key 'seed': -1 is less than the minimum of 0"]),
    ("toy eval size", "toy_world.sizes.mgsm", 1e21, ["config key 'toy_world.sizes.mgsm'", "maximum of 10000000"]),
    ("toy corpus", "toy_world.sizes.pretrain_docs", 1e9, ["'toy_world.sizes.pretrain_docs'", "maximum of 10000000"]),
    ("mix count", "mixes.math.toy_orca_math", 1e21, ["config key 'mixes.math.toy_orca_math'", "maximum of 10000000"]),
    ("toy width", "base.toy_model.hidden_size", 1e9, ["'base.toy_model.hidden_size'", "maximum of 131072"]),
    ("toy heads", "base.toy_model.num_attention_heads", 4096, ["'base.toy_model.num_attention_heads'", "of 1024"]),
    ("context", "base.toy_model.max_position_embeddings", 1e12, ["max_position_embeddings'", "maximum of 1048576"]),
    ("sft batch", "sft.defaults.batch_size", 1e6, ["config key 'sft.defaults.batch_size'", "maximum of 65536"]),
    ("sft length", "sft.defaults.seq_len", 1e7, ["config key 'sft.defaults.seq_len'", "maximum of 1048576"]),
    ("eval batch", "evaluation.batch_size", 1e9, ["config key 'evaluation.batch_size'", "maximum of 65536"]),
    ("shots", "evaluation.tasks.mgsm.shots", 1000, ["config key 'evaluation.tasks.mgsm.shots'", "maximum of 64"]),
    ("new tokens", "evaluation.tasks.mgsm.max_new_tokens", 1e9, ["mgsm.max_new_tokens'", "maximum of 1048576"]),
    ("bootstrap", "analysis.bootstrap_draws", 1e12, ["config key 'analysis.bootstrap_draws'", "maximum of 1000000"]),
    # keys the chosen world or base never reads
    (
        "toy keys of a local base",
        "base.source",
        str(ROOT / "config"),  # a directory
        ["config key 'base.toy_model': is read only when base.source is toy (it is '", "'); remove it"],
    ),
    (
        "a missing local base",
        "base.source",
        "./models/my-llama",
        ["config key 'base.source': './models/my-llama' is not"],
    ),
    (
        "a hub id in the toy world",
        "base.source",
        "meta-llama/Llama-3.1-8B",
        ["config key 'base.source'", "reads like a hub id, which needs world: hf", "allowed: toy, a local HF model"],
    ),
]


@pytest.mark.parametrize("desc,key,value,expected", BAD, ids=[b[0] for b in BAD])
def test_bad_input_one_line(default, desc, key, value, expected):
    _set(default, key, value)
    text = error_of(default)
    for part in expected:
        assert part in text, f"{desc}: {part!r} not in {text!r}"


def test_checkpoint_table_drop_run_language_without_expert(default):
    for name in ["toy_ben_1", "toy_ben_2"]:
        del default["sft"]["runs"][name]
    text = error_of(default)
    assert "config key 'sft.runs': no run trains expert 'toy_ben'" in text


def test_lang_layers_with_bottom_is_rejected(default):
    default["merges"]["configs"]["swap_default"]["lang_layers"] = [0, 7]
    text = error_of(default)
    assert "config key 'merges.configs.swap_default.bottom': cannot be combined with lang_layers" in text


def test_lang_layers_valid(default):
    default["merges"]["configs"]["swap_list"] = {"method": "layer_swap", "lang_layers": [0, 1, 7]}
    cfg.validate_config(default, SCHEMA)
    cfg.check(default)


def test_joint_without_weights(default):
    del default["selection"]["weights"]["joint"]
    assert "config key 'selection.weights.joint': required key is missing" in error_of(default)


# paper (hf world) specific


@pytest.fixture
def paper() -> dict:
    return load("paper.yaml")


def test_paper_unknown_language(paper):
    paper["languages"].append("yor")
    text = error_of(paper)
    assert "config key 'languages[4]': unknown language 'yor'; allowed: swh, tel, ben, jpn" in text


def _add_target(paper: dict, lang: str, aya_name: str) -> None:
    paper["languages"].append(lang)
    paper["data_sources"]["aya"]["languages"][lang] = aya_name
    paper["mixes"]["language"][lang] = {"aya": 1000}
    paper["sft"]["runs"].update({f"{lang}_{i}": {"expert": lang, "seed": 30 + i} for i in range(3)})


def test_paper_new_language_with_data_source(paper):
    """A data source that names a language makes it a target; the paper task set knows Yoruba (its AfriMGSM, FLORES,
    Belebele and Global-MMLU codes in layerswap/languages.py, its FLORES task YAMLs), so the config is accepted though
    MGSM lacks Yoruba: its math benchmark is AfriMGSM."""
    _add_target(paper, "yor", "Yoruba")
    for task in ("mgsm", "belebele", "flores", "mmlu", "mbpp"):
        paper["evaluation"]["tasks"][task]["languages"].append("yor")
    cfg.validate_config(paper, SCHEMA)
    cfg.check(paper)


def test_paper_language_no_benchmark_can_evaluate_is_refused(paper):
    """Issue 50: Hausa named by a data source was accepted, and then the evaluation jobs and prestage refused it
    (`paper task set: unknown language`). check-config refuses it, one line naming the key and the file to edit."""
    _add_target(paper, "hau", "Hausa")
    text = error_of(paper)
    assert text.startswith("config key 'languages[4]': 'hau' has no entry in layerswap/languages.py:HF_LANGUAGES")
    assert "docs/EXTENDING.md" in text and "allowed: swh, tel, ben, jpn, deu" in text


@pytest.mark.parametrize(
    "code, names",
    [
        (
            "afrimgsm",
            "no MGSM code ('mgsm' or 'afrimgsm' in its layerswap/languages.py:HF_LANGUAGES entry), and Table 1",
        ),
        ("flores", "no Belebele code ('flores' in its layerswap/languages.py:HF_LANGUAGES entry), and selection"),
    ],
)
def test_paper_language_without_a_code_its_tables_or_selection_read_is_refused(paper, monkeypatch, code, names):
    """Issue 50: a language whose entry lacks a dataset's code was kept (its scores null), and then Table 1 or `select`
    stopped on the missing score. check-config refuses it when a table or its selection metrics read that dataset (the
    math benchmark: MGSM or its translation AfriMGSM)."""
    yor = dict(cfg.HF_LANGUAGES["yor"])
    del yor[code]
    monkeypatch.setitem(cfg.HF_LANGUAGES, "yor", yor)
    _add_target(paper, "yor", "Yoruba")
    for task in ("mgsm", "belebele", "flores", "mmlu", "mbpp"):
        paper["evaluation"]["tasks"][task]["languages"].append("yor")
    text = error_of(paper)
    assert text.startswith(f"config key 'languages[4]': 'yor' has {names}"), text
    assert "allowed: swh, tel, ben, jpn, deu" in text and "\n" not in text
    yor[code] = "yor" if code == "afrimgsm" else "yor_Latn"
    cfg.check(paper)  # with the code, accepted


def test_paper_language_without_our_flores_task_is_refused(paper):
    """Thai has MGSM and FLORES codes but no FLORES task YAML of ours (layerswap/tasks/paper/): its FLORES would be
    scored 'unavailable' though a language expert's selection reads it, so check-config names the missing file."""
    _add_target(paper, "tha", "Thai")
    for task in ("mgsm", "belebele", "flores", "mmlu", "mbpp"):
        paper["evaluation"]["tasks"][task]["languages"].append("tha")
    text = error_of(paper)
    assert text.startswith(
        "config key 'languages[4]': 'tha' has no FLORES task for it (layerswap/tasks/paper/flores_en-tha.yaml;"
    ), text
    assert text.endswith("selection.weights.language.flores_from_en reads it") and "\n" not in text


def test_paper_layer_range(paper):
    paper["base"]["num_layers"] = 8
    text = error_of(paper)
    assert "exceeds base.num_layers = 8" in text and text.startswith("config key 'merges.configs.swap_b5u2t")


def test_paper_unknown_source(paper):
    paper["mixes"]["language"]["tel"]["samanantar"] = 100
    text = error_of(paper)
    assert "config key 'mixes.language.tel.samanantar': unknown data source 'samanantar'; allowed: orca_math" in text


def test_paper_source_lacks_language(paper):
    paper["mixes"]["language"]["tel"]["xp3mt"] = 100
    text = error_of(paper)
    assert "config key 'data_sources.xp3mt.languages': no entry for language 'tel'" in text


def test_paper_missing_language_mix(paper):
    del paper["mixes"]["language"]["jpn"]
    assert "config key 'mixes.language': no mix for target language 'jpn'" in error_of(paper)


def test_paper_unknown_data_source_key(paper):
    paper["data_sources"]["aya"]["langs"] = {}
    assert "config key 'data_sources.aya': unknown key 'langs'" in error_of(paper)


def test_paper_toy_world_section_rejected(paper):
    paper["toy_world"] = yaml.safe_load((ROOT / "config" / "micro.yaml").read_text())["toy_world"]
    assert "config key 'toy_world': is read only by world: toy" in error_of(paper)


def test_paper_toy_base_rejected(paper):
    paper["base"]["source"] = "toy"
    assert "config key 'base.source'" in error_of(paper)


def test_paper_mgsm_code(paper):
    paper["mgsm_languages"][1] = "de"
    text = error_of(paper)
    assert "config key 'mgsm_languages[1]': unknown MGSM language 'de'; allowed: en, swh, tel" in text


def test_paper_top_k_with_run_cap(paper):
    del paper["sft"]["runs"]["ben_3"]
    text = error_of(paper)
    assert "config key 'selection.top_k': 3 needs 3 checkpoints of expert 'ben'" in text
    assert "at most 1 per run" in text


def test_schema_merge_config_is_the_methods_own_declaration():
    """Merge parameters have one owner (each method's declaration): the schema's copy is generated from it
    (layerswap/merge/schema.py), and a config and a recipe fill the same defaults."""
    from layerswap.merge import schema as merge_schema
    from layerswap.merge.recipes import validate_recipe

    schema = yaml.safe_load(SCHEMA.read_text())
    assert schema["$defs"]["merge_config"] == merge_schema.config_schema(), (
        "config/schema.yaml is stale: run `python -m layerswap.schema_blocks`"
    )
    validator = config_schema._validator_class()(
        {"properties": {"m": {"$ref": "#/$defs/merge_config"}}, "$defs": schema["$defs"]}
    )
    for method, given in [("layer_swap", {"bottom": 2, "top": 1}), ("soup", {}), ("ties", {"density": 0.2})]:
        doc = {"m": {"method": method, **given}}
        assert not list(validator.iter_errors(doc))
        assert doc["m"] == {"method": method, **given, **merge_schema.config_defaults(method)}
        inputs = {"task": "t", "lang": "l"} if method == "layer_swap" else {"models": ["a", "b"]}
        recipe = validate_recipe({"method": method, "base": "b", "inputs": inputs, "params": given})
        filled = {k: v for k, v in doc["m"].items() if k not in ("method", "allow_different_base")}
        assert {k: recipe["params"][k] for k in filled} == filled


def test_the_rules_parse_imports_no_torch():
    """The merge-method and benchmark registries are read at parse time (config checks, ablation planning, Spec) and by
    recipe validation; their computation imports torch only when it runs."""
    code = (
        "import sys\n"
        "from layerswap.config import load_config\n"
        "from layerswap.merge.recipes import validate_recipe\n"
        "from layerswap.workflow.ablations import plan\n"
        "from layerswap.workflow.spec import Spec\n"
        "config = load_config('config/config.yaml')\n"
        "Spec(config, *plan(config, 'config/ablations'))\n"
        "validate_recipe({'method': 'dare', 'base': 'b', 'inputs': {'models': ['x']}, 'params': {'density': 0.2}})\n"
        "assert 'torch' not in sys.modules, sorted(m for m in sys.modules if m.startswith('torch'))[:3]\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]


BAD_CONFIGS = {  # file content -> what the one line says (after the file's name)
    b"seed: 1\nfoo: [1, 2\n": "line 3 column 1: not valid YAML (did not find expected ',' or ']')",
    b"": "is empty; a config is a mapping of keys (see config/config.yaml)",
    b"seed: 1\n# caf\xe9\n": "line 2: not UTF-8 text (byte 0xe9); save it as UTF-8",
}


def _snakemake_errors(proc) -> list[str]:
    """Snakemake's stderr without its note on the workflow profile."""
    return [line for line in proc.stderr.splitlines() if line.strip() and "workflow specific profile" not in line]


@pytest.mark.parametrize("content", list(BAD_CONFIGS), ids=["yaml_syntax", "empty", "not_utf8"])
def test_snakemake_configfile_checked_before_snakemake_reads_it(tmp_path, content):
    """`snakemake --configfile bad.yaml`: one line naming the file and the line (as check-config), before Snakemake's
    own loader (no file named, or a traceback)."""
    from conftest import snakemake

    bad = tmp_path / "bad.yaml"
    bad.write_bytes(content)
    proc = snakemake(tmp_path / "work", "-n", configfile=bad)
    assert proc.returncode == 1 and _snakemake_errors(proc) == [
        f"config error: config file {bad} {BAD_CONFIGS[content]}"
    ], proc.stderr


@pytest.mark.parametrize("content", list(BAD_CONFIGS), ids=["yaml_syntax", "empty", "not_utf8"])
def test_embedded_default_config_checked_first(tmp_path, content):
    """The Snakefile's embedded default (config/config.yaml beside it), edited into a bad file: the same one line."""
    import os
    import shutil

    repo = tmp_path / "repo"
    shutil.copytree(
        ROOT,
        repo,
        ignore=shutil.ignore_patterns(".git", ".venv*", "results", ".snakemake", "tests", "__pycache__", "*.egg-info"),
    )
    (repo / "config" / "config.yaml").write_bytes(content)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", str(repo / "Snakefile"), "--directory", str(tmp_path / "work"), "-n"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    bad = repo / "config" / "config.yaml"
    assert proc.returncode == 1 and _snakemake_errors(proc) == [
        f"config error: config file {bad} {BAD_CONFIGS[content]}"
    ], proc.stderr


def test_a_benchmark_that_leaves_out_a_target_language_is_refused(paper):
    """Issue 50: Thai added as a target but left out of MGSM's languages planned merge evaluation jobs with an empty
    language list (and tables without Thai); Yoruba here. check-config names the benchmark's key and the language."""
    _add_target(paper, "yor", "Yoruba")
    text = error_of(paper)
    assert text.startswith("config key 'evaluation.tasks.mgsm.languages': leaves out target language 'yor'")
