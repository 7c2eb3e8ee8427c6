"""layerswap.workflow.spec: the rules' view of a config (runs, pairs, file lists, params), built without Snakemake.

The params below are the values the rules had when these helpers lived in rules/common.smk (a dry run of main
dumped every job's params); Snakemake reruns a job whose params change, so they are pinned here."""

from __future__ import annotations

import copy
import json
import shlex
from pathlib import Path

import pytest
import yaml

from layerswap.benchmarks import BENCHMARKS
from layerswap.config import check, validate_config
from layerswap.workflow.ablations import plan, with_merge_configs
from layerswap.workflow.spec import Spec
from layerswap.workflow.words import as_json, canonical_languages, revision_arg

REPO = Path(__file__).resolve().parents[1]
ABL_DIR = REPO / "config" / "ablations"


def _config(name: str, **changes) -> dict:
    config = yaml.safe_load((REPO / "config" / name).read_text())
    config.update(changes)
    validate_config(config)
    check(config)
    return config


def _spec(name: str, **changes) -> Spec:
    config = _config(name, **changes)
    ablations, added = plan(config, ABL_DIR)
    return Spec(config, ablations, added)


def _word(value: str):
    """A shell-quoted JSON param back as a value."""
    (word,) = shlex.split(value)
    return json.loads(word)


@pytest.fixture(scope="module")
def default() -> Spec:
    return _spec("config.yaml")


@pytest.fixture(scope="module")
def paper() -> Spec:
    return _spec("paper.yaml")


@pytest.mark.parametrize("name", ["config.yaml", "paper.yaml", "smollm2.yaml", "micro.yaml"])
def test_building_a_spec_and_calling_its_helpers_leaves_the_config_unchanged(name):
    config = _config(name)
    ablations, added = plan(config, ABL_DIR)
    before, abl_before, added_before = copy.deepcopy(config), copy.deepcopy(ablations), copy.deepcopy(added)
    spec = Spec(config, ablations, added)
    for run in [*spec.runs.main, *spec.runs.extra]:
        spec.evals.benchmark_params(spec.evals.selection_benchmarks(run), spec.evals.checkpoint_languages(run))
        spec.runs.sft_params(run)
        spec.evals.checkpoint_eval_indexes(run)
    for expert in spec.runs.expert_types():
        spec.selection.params(expert)
        spec.data.mix_sources(expert)
    for n in spec.ablations.planned:
        spec.ablations.params(n)
        spec.ablations.inputs(n)
    spec.results(), spec.report.table_params(), spec.report.swap_grid_params(), spec.report.heatmap_thresholds()
    assert config == before
    assert ablations == abl_before and added == added_before
    assert spec.merges.configs is not config["merges"]["configs"]


def test_default_config_runs_pairs_and_paths(default):
    assert list(default.runs.main) == [
        "math_1",
        "math_2",
        "toy_swh_1",
        "toy_swh_2",
        "toy_tel_1",
        "toy_tel_2",
        "toy_ben_1",
        "toy_ben_2",
        "toy_jpn_1",
        "toy_jpn_2",
        "joint_toy_swh_1",
        "joint_toy_swh_2",
    ]
    assert default.runs.main["math_2"]["lr"] == 0.002 and default.runs.main["math_2"]["batch_size"] == 16  # defaults
    assert default.merges.pairs == ["l1m1", "l1m2", "l1m3", "l2m1", "l2m2", "l2m3", "l3m1", "l3m2", "l3m3"]
    assert default.runs.expert_types() == ["joint_toy_swh", "math", "toy_ben", "toy_jpn", "toy_swh", "toy_tel"]
    assert default.runs.of("toy_swh") == ["toy_swh_1", "toy_swh_2"]
    assert default.layout.experts() == "results/experts" and default.merges.merged_models == []
    assert default.evals.all_langs == ["en", "toy_ben", "toy_jpn", "toy_swh", "toy_tel"]
    # grouped layout: the selection benchmarks in one job, in the languages selection reads (Belebele and FLORES in
    # the run's language); after selection, on the selected checkpoints, the others (Table 5 only) in a second, and
    # Belebele in English (Table 5 shows it; selection does not read it) in a third, under by_language/en
    assert default.evals.selection_benchmarks("toy_swh_1") == ["belebele", "flores"]
    assert default.evals.selection_languages("toy_swh_1", "belebele") == ["toy_swh"]
    L = default.layout
    assert default.evals.checkpoint_eval_indexes("toy_swh_1") == [
        L.checkpoint_index("toy_swh_1"),
        L.checkpoint_index("toy_swh_1", "other"),
        L.checkpoint_index("toy_swh_1", "other_en"),
    ]
    other, by_english = default.evals.table5_parts("toy_swh_1").values()
    assert other == ({b: ["en", "toy_swh"] for b in ("mgsm", "mmlu", "mbpp")}, L.evals())
    assert by_english == ({"belebele": ["en"]}, L.language_evals("en"))
    assert default.evals.table5_parts("joint_toy_swh_1") == {}  # Table 5 shows no joint expert
    assert default.evals.checkpoint_indexes("math", ["mgsm"]) == [L.checkpoint_index(r) for r in ("math_1", "math_2")]
    assert default.selection.indexes("toy_swh") == [L.checkpoint_index(r) for r in ("toy_swh_1", "toy_swh_2")]
    assert default.selection.base_evals("toy_swh") == []  # no selection constraint in the default config
    checkpoints = ("s0000800", "s0001600", "s0002400")
    assert default.evals.checkpoint_models("toy_swh_1") == {
        f"ckpt/toy_swh_1/{c}": L.checkpoint("toy_swh_1", c) for c in checkpoints
    }
    # a merge evaluation job's files: each pair's merge, each merge benchmark
    assert default.evals.merge_eval_outputs("ties_d05", "toy_swh", ["l1m1", "l2m1"], ["mgsm", "mmlu"]) == [
        L.merge_eval("ties_d05", "toy_swh", "l1m1", "mgsm"),
        L.merge_eval("ties_d05", "toy_swh", "l1m1", "mmlu"),
        L.merge_eval("ties_d05", "toy_swh", "l2m1", "mgsm"),
        L.merge_eval("ties_d05", "toy_swh", "l2m1", "mmlu"),
    ]
    # no selection constraint in the default config: the base is evaluated in one job
    assert default.evals.base_rest == default.evals.benchmarks and default.evals.base_constrained == []
    assert default.evals.t2 == "toy_swh" and default.evals.t2_langs == ["en", "toy_ben", "toy_jpn", "toy_tel"]
    assert default.evals.table2_index("en") == L.table2_index("en", "toy_swh")
    assert default.evals.table2_models_file("en") == L.table2_models("en", "toy_swh")


def test_default_config_params_are_the_rules_former_values(default):
    assert default.selection.params("toy_swh") == as_json(
        {
            "constraints": {},
            "kind": "language",
            "lang": "toy_swh",
            "max_per_run": 2,
            "mgsm_languages": ["en", "toy_swh", "toy_tel", "toy_ben", "toy_jpn"],
            "top_k": 3,
            "weights": {"belebele": 1.0, "flores_from_en": 0.005, "flores_to_en": 0.005},
        }
    )
    assert _word(default.evals.benchmark_params(["flores", "mgsm"])) == {
        "flores": {"languages": ["toy_ben", "toy_jpn", "toy_swh", "toy_tel"], "limit": None, "shots": 0},
        "mgsm": {"languages": ["en", "toy_ben", "toy_jpn", "toy_swh", "toy_tel"], "limit": None, "shots": 0},
    }
    L = default.layout
    assert default.evals.task_data_files(["flores"], ["en", "toy_swh"]) == [L.eval_data("flores", "toy_swh")]
    mix = default.data.mix_sources("joint_toy_swh")
    assert [(m["name"], m["lang"], m["path"]) for m in mix] == [
        ("toy_aya", "toy_swh", L.raw("aya_toy_swh.jsonl")),
        ("toy_nllb", "toy_swh", L.raw("nllb_toy_swh.jsonl")),
        ("toy_orca_math", "en", L.raw("orca_math.jsonl")),
    ]
    assert default.runs.sft_launch("toy_swh_1", 8, REPO) == "layerswap sft"


def test_paper_checkpoint_evaluation_params(paper):
    assert paper.evals.single_task_jobs and paper.evals.task_set == "paper" and paper.evals.gpus == 1

    def sized(bench: str, task: dict) -> str:
        """A benchmark's params: its settings + the plan's batches and context for its keys (issue 48)."""
        keys = [k for lang in task["languages"] for k in BENCHMARKS[bench].keys(lang)]
        return as_json({bench: {**task, **paper.evals.sizing.params(bench, keys)}})

    # a language run before selection: the languages selection reads (its own; English Belebele and MGSM come after
    # selection, on the selected checkpoints); FLORES pairs English with it (no English file of its own)
    assert paper.evals.checkpoint_eval_rule_params("swh_1", ["belebele"]) == sized(
        "belebele", {"batch_size": 16, "languages": ["swh"], "limit": None, "shots": 5}
    )
    assert paper.evals.table5_params("swh_1", "other_belebele_en") == sized(
        "belebele", {"batch_size": 16, "languages": ["en"], "limit": None, "shots": 5}
    )
    # MMLU lists no English: never evaluated there, before or after selection
    assert paper.evals.checkpoint_eval_rule_params("swh_1", ["mmlu"]) == sized(
        "mmlu", {"batch_size": 16, "languages": ["swh"], "limit": None, "shots": 5}
    )
    # generation on vLLM (evaluation.backend maps it; the jobs' --backend is hf), log-likelihood on HF (above)
    assert paper.evals.evaluation_params("evaluate")["backend"] == "hf"
    assert paper.evals.checkpoint_eval_rule_params("joint_swh_1", ["flores"]) == sized(
        "flores", {"backend": "vllm", "languages": ["swh"], "limit": None, "shots": 0}
    )
    # a math run: the task's own languages (Table 5), canonical order; MGSM on vLLM keeps its batch at every length
    # (its KV pool holds fewer at once), and the job's context is its longest prompt + budget; Belebele on HF: the
    # long-prompt keys at a smaller batch
    langs = ["en", "ben", "deu", "fra", "jpn", "rus", "spa", "swh", "tel", "zho"]
    mgsm = {"backend": "vllm", "languages": langs, "limit": None, "max_new_tokens": 512, "shots": 8}
    assert paper.evals.checkpoint_eval_rule_params("math_1", ["mgsm"]) == sized("mgsm", mgsm)
    assert set(paper.evals.sizing.params("mgsm", langs)) == {"context_tokens"}
    assert set(paper.evals.sizing.params("belebele", ["en", "ben", "jpn", "swh", "tel"])["batch_sizes"]) == {
        "ben",
        "tel",
    }
    # single layout: one index per benchmark (and per benchmark and language after selection); a language run's MGSM
    # in its language is a constraint no weight reads, evaluated on the leaders of the expert type (one index per
    # type); the hf world reads no data files of ours
    assert paper.evals.primary_benchmarks("swh_1") == ["belebele", "flores"]
    assert paper.evals.leader_benchmarks("language") == ["mgsm", "mmlu"] and paper.evals.leader_benchmarks("math") == []
    assert paper.evals.checkpoint_eval_indexes("swh_1", ["mgsm"]) == [
        paper.layout.checkpoint_index("swh_1", "other_mgsm_en")
    ]
    assert paper.evals.checkpoint_indexes("swh", ["mgsm"])[-1] == paper.layout.leaders_index("swh")
    leaders = _word(paper.selection.leaders_benchmarks(paper.runs.of("swh")))  # settings, backend and sizing
    assert leaders == {
        **_word(sized("mgsm", {"backend": "vllm", "languages": ["swh"], "limit": None, "max_new_tokens": 512,
                               "shots": 8})),
        **_word(sized("mmlu", {"batch_size": 16, "languages": ["swh"], "limit": None, "shots": 5})),
    }  # fmt: skip
    every = _spec("paper.yaml", selection={**paper.config["selection"], "constraint_evaluation": "all"})
    assert every.evals.primary_benchmarks("swh_1") == ["mgsm", "belebele", "flores", "mmlu"]
    assert every.evals.checkpoint_eval_indexes("swh_1", ["mgsm"]) == [
        paper.layout.checkpoint_index("swh_1", "mgsm"),
        paper.layout.checkpoint_index("swh_1", "other_mgsm_en"),
    ]
    assert every.selection.leader_experts() == [] and every.evals.checkpoint_indexes("swh", ["mmlu"]) == [
        paper.layout.checkpoint_index(run, "mmlu") for run in paper.runs.of("swh")
    ]
    assert paper.evals.task_data_files(["mgsm"]) == []

    class Wildcards:
        benchmark = "mmlu"

    assert paper.evals.job_benchmarks(Wildcards, ["mgsm", "belebele"]) == ["mmlu"]
    assert paper.evals.per_layout("grouped.json", "single.json") == "single.json"


def test_storage_scratch_and_keep_merged_place_the_big_files(tmp_path, monkeypatch):
    from layerswap.scratch import claim

    monkeypatch.chdir(tmp_path)  # the results folder's namespace marker is written under ./results
    scratch = str(tmp_path / "scratch")
    ns, _ = claim(scratch, Path("results"))  # what the main Snakemake process does before building the DAG
    spec = _spec("config.yaml", storage={"scratch": scratch + "/", "keep_merged": ["swap_default"], "hf_home": None})
    assert Path(ns).parent == Path(scratch) and spec.layout.experts() == f"{ns}/experts"
    assert spec.layout.selection("math") == "results/selection/math.json"  # the small files stay in results/
    assert {f"{ns}/experts/math_1/checkpoints.json", f"{ns}/experts/math_2/checkpoints.json"} <= set(spec.results())
    merged = spec.merges.merged_models
    assert len(merged) == 4 * 9 and merged[0] == f"{ns}/merged/swap_default/toy_swh/l1m1"
    assert set(spec.merges.merged_models) <= set(spec.results())


def test_accelerate_launch_uses_the_most_gpus_that_split_the_batch(tmp_path):
    spec = _spec(
        "config.yaml",
        sft={
            **_config("config.yaml")["sft"],
            "launcher": "accelerate",
            "accelerate_config": "cluster/accelerate_fsdp.yaml",
        },
    )
    launch = spec.runs.sft_launch("toy_swh_1", 6, tmp_path)  # batch 16 on 6 GPUs: 4 processes
    assert launch.startswith("accelerate launch --config_file ") and "--num_processes 4 " in launch
    assert launch.endswith(" -m layerswap.train.sft")


def _rendezvous_port(launch: str) -> int:
    """The rendezvous port `accelerate launch` gives the job that runs `launch` (accelerate's own argument handling,
    up to the point where it would start torchrun)."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import prepare_multi_gpu_env

    args = launch_command_parser().parse_args(shlex.split(launch)[2:] + ["--base", "b"])
    args, _, _ = _validate_launch_command(args)
    prepare_multi_gpu_env(args)
    return int(args.main_process_port)


def test_two_sft_jobs_on_one_node_get_different_rendezvous_ports(paper):
    """Two SFT jobs started together on one node (the paper's launcher) must not meet at one rendezvous port: the
    first holds its port while the second starts. The launch words themselves are the same for every job and every
    planning of the workflow, so the param never differs between identical runs."""
    import socket

    first, second = (paper.runs.sft_launch(run, 1, REPO) for run in ("math_1", "swh_1"))
    port = _rendezvous_port(first)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:  # the first job's rendezvous store
        held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        held.bind(("127.0.0.1", port))
        held.listen()
        assert _rendezvous_port(second) != port
    assert first == second == _spec("paper.yaml").runs.sft_launch("math_1", 1, REPO)


def test_ablations_have_their_merge_configs_runs_and_files(default):
    assert set(default.merges.configs) > set(default.config["merges"]["configs"])
    assert not set(default.merges.configs) - set(
        with_merge_configs(
            default.config,
            {k: v for k, v in default.merges.configs.items() if k not in default.config["merges"]["configs"]},
        )["merges"]["configs"]
    )
    assert default.ablations.selected == list(default.ablations.planned)
    assert default.ablations.outputs("layer_count") == [
        default.layout.ablation_file("layer_count", f) for f in ("table.csv", "table.md", "figure.svg", "figure.png")
    ]
    # expert-set ablations: extra runs (never in `runs`), bases of their own where the ablation says so
    assert default.ablations.expert_sets and not set(default.runs.extra) & set(default.runs.main)
    run = next(iter(default.runs.extra))
    assert default.runs.spec(run) == default.runs.extra[run]
    for r in default.runs.other_base:
        assert default.runs.base_dir[r].startswith(default.layout.ablation_dir(""))
    params = _word(default.ablations.params("layer_count"))
    assert params["name"] == "layer_count" and params["languages"] == default.merges.langs


def test_canonical_languages_put_english_first_and_drop_repeats():
    assert canonical_languages(["swh", "en", "ben", "swh"]) == ["en", "ben", "swh"]


def test_hub_arguments_are_shell_words_or_nothing(paper):
    assert paper.hf_home_arg == "" and revision_arg({"revision": None}) == ""
    config = _config("paper.yaml", storage={"hf_home": "/data/hf home", "scratch": None, "keep_merged": False})
    spec = Spec(config)
    assert spec.hf_home_arg == "--hf-home '/data/hf home'"
    assert revision_arg({"source": "x", "revision": "abc 1"}) == "--revision 'abc 1'"
    assert spec.ablations.planned == {} and spec.merges.configs == config["merges"]["configs"]


def test_table5_shows_what_the_checkpoints_were_evaluated_on():
    """Checkpoint tasks without MBPP / MMLU: the tables job is told so (it asked for base/mbpp.json and failed
    after the whole DAG had run); the same tasks in another order give the same params."""
    trimmed = _spec(
        "config.yaml",
        evaluation={**_config("config.yaml")["evaluation"], "checkpoint_tasks": ["mgsm", "flores", "belebele"]},
    )
    assert _word(trimmed.report.table_params())["benchmarks"] == ["belebele", "flores", "mgsm"]
    default = _spec("config.yaml")
    assert _word(default.report.table_params())["benchmarks"] == ["belebele", "flores", "mbpp", "mgsm", "mmlu"]
    assert "benchmarks" not in _word(trimmed.report.table_params(table2=False))  # the Table 1 figure: no rerun
    assert _word(_spec("toy_transfer.yaml").report.table_params())["benchmarks"] == ["belebele", "flores", "mgsm"]


PARTS = ["runs", "merge_jobs", "evaluation_jobs", "data_jobs", "report_jobs", "ablation_jobs"]


def test_spec_holds_its_parts_and_no_part_reads_another_s_private_attributes(default):
    """`Spec` is built by composition (no mixin reading the attributes another class sets): each part is a plain
    class with explicit constructor arguments, and what one part reads of another is public (`x._name` only on
    `self`)."""
    import ast

    assert Spec.__mro__ == (Spec, object)
    for name in PARTS:
        path = REPO / "layerswap" / "workflow" / f"{name}.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                assert [ast.unparse(b) for b in node.bases] == [], f"{path.name}: {node.name} has base classes"
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                assert ast.unparse(node.value) == "self", f"{path.name}:{node.lineno}: {ast.unparse(node)}"
    held = {type(v).__module__ for v in vars(default).values()}
    assert {f"layerswap.workflow.{n}" for n in PARTS} <= held
