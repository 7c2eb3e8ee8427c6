# Config validation and the small get_* helpers the rules use. Nothing here reads files written by jobs,
# so the whole DAG is known at dry-run time.
import json
import shlex
from pathlib import Path
import sys

from layerswap.config import METRIC_TASK, check, checkpoints_of, effective_runs, validate_config
from layerswap.errors import UserError
from layerswap.fingerprint import command_hash
from layerswap.sft import checkpoint_name

try:
    validate_config(config, workflow.source_path("../config/schema.yaml"))
    check(config)
except UserError as err:
    sys.exit(f"config error: {err}")

R = "results"
# Expert checkpoints are the big artefacts: they live under storage.scratch when it is set (cluster scratch).
BIG = (config.get("storage", {}).get("scratch") or R).rstrip("/")
EXPERTS = f"{BIG}/experts"
MERGED = f"{BIG}/merged"  # merged models written by request (storage.keep_merged), same place rule
LANGS = list(config["languages"])
RUNS = effective_runs(config)
# Extra SFT runs of expert-set ablations (rules/ablations.smk fills these): never in RUNS, so runs_of and the main
# selection ignore them; run_spec finds a run's params in either.
ABLATION_RUNS = {}
ABLATION_RUN_BASE = {}
K = range(1, config["selection"]["top_k"] + 1)
PAIRS = [f"l{i}m{j}" for i in K for j in K]
EVAL = config["evaluation"]
TASK_SET = "toy" if config["world"] == "toy" else "paper"  # which lm-eval task set `layerswap evaluate` builds
BACKEND = EVAL.get("backend", "hf")
GPUS = 0 if config["world"] == "toy" else 1  # GPUs per SFT/evaluation job (the cluster profile may raise it)
# grouped: one evaluation job per model group (all its tasks); single: one job per (model group, task), so an
# edit to one task's settings reruns only that task's evaluations (paper config: GPU start-up is cheap there).
SINGLE_TASK_JOBS = EVAL["tasks_per_job"] == "single"
BENCHMARKS = list(EVAL["checkpoint_tasks"])
MERGE_BENCHMARKS = list(EVAL["merge_tasks"])
PAIR_CONFIGS = list(config["merges"]["configs"])
_keep = config["storage"]["keep_merged"]
KEEP_MERGED = PAIR_CONFIGS if _keep is True else list(_keep or [])
MERGED_MODELS = [f"{MERGED}/{c}/{l}/{p}" for c in KEEP_MERGED for l in LANGS for p in PAIRS]
# Evaluation languages in a canonical order (English, then by code): the order of a mapping or list in the config
# means nothing to an evaluation, so it must not reach params (only stale outputs rerun).
def canonical_languages(langs):
    return sorted(set(langs), key=lambda l: (l != "en", l))


ALL_LANGS = canonical_languages(["en", *(config["toy_world"]["languages"] if config["world"] == "toy" else LANGS)])


wildcard_constraints:
    run="[A-Za-z0-9_]+",
    expert="[A-Za-z0-9_]+",
    lang="[A-Za-z0-9_]+",
    cfg="[A-Za-z0-9_]+",


def as_json(value):
    """A config value as one shell-quoted JSON word (params compare it for reruns)."""
    return shlex.quote(json.dumps(value, sort_keys=True))


def run_spec(run):
    return RUNS[run] if run in RUNS else ABLATION_RUNS[run]


def runs_of(expert):
    return sorted(r for r, p in RUNS.items() if p["expert"] == expert)


def expert_types():
    return sorted({p["expert"] for p in RUNS.values()})


def expert_kind(expert):
    if expert == "math":
        return "math"
    return "joint" if expert.startswith("joint_") else "language"


def run_manifests(expert):
    return [f"{EXPERTS}/{run}/checkpoints.json" for run in runs_of(expert)]


# Benchmarks `layerswap select` reads for each expert kind (layerswap/select.py: metrics_of), plus those its
# configured weights name; checkpoint evaluations of these benchmarks are the only ones selection depends on.
SELECT_READS = {"math": ["mgsm"], "joint": ["mgsm"], "language": ["belebele", "flores"]}


def selection_benchmarks(run):
    kind = expert_kind(run_spec(run)["expert"])
    used = set(SELECT_READS[kind]) | set(constraint_benchmarks(kind)) | {
        METRIC_TASK[m] for m in config["selection"]["weights"].get(kind, {})}
    return [b for b in EVAL["tasks"] if b in used]


def constraint_benchmarks(kind):
    """Benchmarks of the selection constraints of an expert type: candidates and the base are compared on them."""
    used = {METRIC_TASK[m] for m in config["selection"]["constraints"].get(kind, {})}
    return [b for b in EVAL["tasks"] if b in used]


def other_checkpoint_benchmarks(run):
    """Checkpoint tasks selection does not read (Table 5 only)."""
    return [b for b in BENCHMARKS if b not in selection_benchmarks(run)]


def selection_indexes(expert):
    """The index files `select` reads: per run, the checkpoint evaluations of the selection benchmarks only."""
    return [f"{R}/evals/ckpt/{run}/index.json" for run in runs_of(expert)]


def checkpoint_eval_indexes(run, benchmarks=None):
    """Index files of a run's checkpoint evaluations (one per evaluation job), narrowed to the jobs that evaluate
    one of `benchmarks` if given: what reads those evaluations depends on these files."""
    wanted = set(EVAL["tasks"] if benchmarks is None else benchmarks)
    if SINGLE_TASK_JOBS:
        jobs = {f"index.{b}.json": [b] for b in selection_benchmarks(run) + other_checkpoint_benchmarks(run)}
    else:
        jobs = {"index.json": selection_benchmarks(run), "index.other.json": other_checkpoint_benchmarks(run)}
    return [f"{R}/evals/ckpt/{run}/{name}" for name, bs in jobs.items() if wanted & set(bs)]


def checkpoint_indexes(expert, benchmarks=None):
    return [f for run in runs_of(expert) for f in checkpoint_eval_indexes(run, benchmarks)]


def eval_data_files(benchmarks, languages=None):
    """The evaluation data files a set of benchmarks reads (FLORES pairs English with each other language)."""
    langs = languages or ALL_LANGS
    files = []
    for b in benchmarks:
        files += [f"{R}/data/eval/{b}_{l}.jsonl" for l in langs if not (b == "flores" and l == "en")]
    return files


def task_languages(benchmark, languages=None):
    """Languages an evaluation job runs `benchmark` in: `languages` if given, else the task's own list, else all."""
    langs = languages if languages is not None else EVAL["tasks"][benchmark].get("languages") or ALL_LANGS
    return [l for l in canonical_languages(langs) if not (benchmark == "flores" and l == "en")]


def task_data_files(benchmarks, languages=None):
    """Exactly the data files an evaluation job of these benchmarks reads (none in the hf world: lm-eval's own
    tasks read the pre-staged hub datasets)."""
    if config["world"] != "toy":
        return []
    return [f"{R}/data/eval/{b}_{l}.jsonl" for b in benchmarks for l in task_languages(b, languages)]


def benchmark_params(benchmarks, languages=None):
    """The benchmarks' settings as JSON, with explicit languages (see task_languages) and limit: all that an
    evaluation job computes with, and only for its own benchmarks (a change to another benchmark reruns nothing)."""
    spec = {}
    for b in benchmarks:
        task = dict(EVAL["tasks"][b])
        task["languages"] = task_languages(b, languages)
        task.setdefault("limit", EVAL.get("limit"))
        spec[b] = task
    return as_json(spec)


def checkpoint_languages(run):
    """Languages a run's checkpoints are evaluated in: all for math runs (Table 5), else English + the run's own
    language. Table 2's extra languages are files of their own (rules/evaluate.smk: evaluate_table2)."""
    expert = run_spec(run)["expert"]
    if expert == "math":
        return None
    return ["en", expert.removeprefix("joint_")]


# Every rule's `code` param is command_hash(<the layerswap command it runs>): the package files that command's import
# graph reaches (layerswap/fingerprint.py), so a code edit reruns exactly the jobs whose command can run it.


def eval_files(model_dir, benchmarks):
    return [f"{R}/evals/{model_dir}/{b}.json" for b in benchmarks]
