# Config validation and the small get_* helpers the rules use. Nothing here reads files written by jobs,
# so the whole DAG is known at dry-run time.
import json
import shlex
import sys

from layerswap.config import check, checkpoints_of, effective_runs, validate_config
from layerswap.errors import UserError
from layerswap.fingerprint import code_hash
from layerswap.sft import checkpoint_name

try:
    validate_config(config, workflow.source_path("../config/schema.yaml"))
    check(config)
except UserError as err:
    sys.exit(f"config error: {err}")

R = "results"
LANGS = list(config["languages"])
RUNS = effective_runs(config)
K = range(1, config["selection"]["top_k"] + 1)
PAIRS = [f"l{i}m{j}" for i in K for j in K]
EVAL = config["evaluation"]
BENCHMARKS = list(EVAL["checkpoint_tasks"])
MERGE_BENCHMARKS = list(EVAL["merge_tasks"])
PAIR_CONFIGS = list(config["merges"]["configs"])
ALL_LANGS = ["en"] + (list(config["toy_world"]["languages"]) if config["world"] == "toy" else LANGS)


wildcard_constraints:
    run="[A-Za-z0-9_]+",
    expert="[A-Za-z0-9_]+",
    lang="[A-Za-z0-9_]+",
    cfg="[A-Za-z0-9_]+",


def as_json(value):
    """A config value as one shell-quoted JSON word (params compare it for reruns)."""
    return shlex.quote(json.dumps(value, sort_keys=True))


def runs_of(expert):
    return sorted(r for r, p in RUNS.items() if p["expert"] == expert)


def expert_types():
    return sorted({p["expert"] for p in RUNS.values()})


def expert_kind(expert):
    if expert == "math":
        return "math"
    return "joint" if expert.startswith("joint_") else "language"


def run_manifests(expert):
    return [f"{R}/experts/{run}/checkpoints.json" for run in runs_of(expert)]


def checkpoint_indexes(expert):
    return [f"{R}/evals/ckpt/{run}/index.json" for run in runs_of(expert)]


def eval_data_files(benchmarks, languages=None):
    """The evaluation data files a set of benchmarks reads (FLORES pairs English with each other language)."""
    langs = languages or ALL_LANGS
    files = []
    for b in benchmarks:
        files += [f"{R}/data/eval/{b}_{l}.jsonl" for l in langs if not (b == "flores" and l == "en")]
    return files


def benchmark_params(benchmarks, languages=None):
    """The benchmarks' settings as JSON; `languages` (if given) narrows every benchmark to those languages."""
    spec = {b: dict(EVAL["tasks"][b]) for b in benchmarks}
    if languages is not None:
        for b, task in spec.items():
            task["languages"] = [l for l in languages if not (b == "flores" and l == "en")]
    return as_json(spec)


def checkpoint_languages(run):
    """Languages a run's checkpoints are evaluated in: all for math runs (Table 5), else English + its own."""
    expert = RUNS[run]["expert"]
    if expert == "math":
        return None
    return ["en", expert.removeprefix("joint_")]


def merge_languages(lang):
    """Merges are evaluated in their target language; the Table 2 language also in every MGSM language."""
    if lang == config["analysis"]["table2_language"]:
        return list(dict.fromkeys(config["mgsm_languages"] + [lang]))
    return [lang]


def eval_files(model_dir, benchmarks):
    return [f"{R}/evals/{model_dir}/{b}.json" for b in benchmarks]
