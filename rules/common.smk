# Config validation and the small get_* helpers the rules use. Nothing here reads files written by jobs,
# so the whole DAG is known at dry-run time.
import json
import shlex
from pathlib import Path
import sys

from layerswap.config import METRIC_TASK, check, checkpoints_of, effective_runs, validate_config
from layerswap.contracts import pair_ids
from layerswap.errors import UserError
from layerswap.fingerprint import command_hash
from layerswap.train.gguf_base import is_gguf_source
from layerswap.train.sft import checkpoint_name
from layerswap.workflow.ablations import enabled as enabled_ablations, plan as plan_ablations, with_merge_configs

# The config is validated (schema defaults filled in) and never changed after: what config_used records is the
# config. Ablation files add merge configs to a view of their own (MERGE_CONFIGS), checked with the rest.
try:
    SCHEMA = workflow.source_path("../config/schema.yaml")
    validate_config(config, SCHEMA)
    check(config)
    ABLATIONS_DIR = Path(workflow.basedir) / config["ablations_dir"]  # an absolute ablations_dir replaces the base
    ABLATIONS, ABLATION_MERGE_CONFIGS = plan_ablations(config, ABLATIONS_DIR)  # each ablation file has its target
    SELECTED_ABLATIONS = enabled_ablations(config.get("ablations"), list(ABLATIONS))  # what `ablations` builds
    check(validate_config(with_merge_configs(config, ABLATION_MERGE_CONFIGS), SCHEMA))
except UserError as err:
    sys.exit(f"config error: {err}")
MERGE_CONFIGS = {**config["merges"]["configs"], **ABLATION_MERGE_CONFIGS}

R = "results"  # shell commands spell it out ("results/..."): a shell reads only its rule's own values (--lint)
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
PAIRS = pair_ids(config["selection"]["top_k"])
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


# ---------------------------------------------------------------------------------------------------------
# helpers of rules/data.smk (functions live here, rules there: snakemake --lint)


def toy_dataset_params(name):
    """Only what one dataset depends on (seed, its languages, its size): a changed size or an added language
    reruns the datasets it touches, and what reads them, nothing else."""
    from layerswap.data import toyworld

    world = config["toy_world"]
    return as_json({"seed": world["seed"], **toyworld.dataset_inputs(name, world["languages"], world["sizes"])})


def mix_sources(expert):
    """[{name, schema, path, n, lang}] for an expert type, from `mixes` and `data_sources`."""
    mixes, sources = config["mixes"], config["data_sources"]

    def entries(group, lang):
        mix = mixes[group]
        if group == "language" and any(isinstance(v, dict) for v in mix.values()):
            mix = mix[lang]  # per-language mixes (paper config)
        files = {name: sources[name].get("file", "{name}_{lang}.jsonl").format(name=name, lang=lang) for name in mix}
        return [
            {"name": name, "schema": sources[name]["schema"], "n": n, "lang": lang,
             "path": f"{R}/data/raw/{files[name]}"}
            for name, n in mix.items()
        ]

    if expert == "math":
        found = entries("math", "en")
    elif expert.startswith("joint_"):
        found = entries("math", "en") + entries("language", expert[len("joint_"):])
    else:
        found = entries("language", expert)
    return sorted(found, key=lambda e: (e["name"], e["lang"]))  # a mapping's key order means nothing


# ---------------------------------------------------------------------------------------------------------
# helpers of rules/train.smk (functions live here, rules there: snakemake --lint)


def sft_launch(wildcards, resources):
    """The command that runs `layerswap sft`: the plain CLI, or `accelerate launch` with the repo's accelerate config
    and one process per GPU the job gets (resources.gpu, e.g. 8 from cluster/profile.yaml), at most batch_size. A derived param: moving
    a workflow from one launcher to the other does not retrain finished runs."""
    if config["sft"]["launcher"] != "accelerate":
        return "layerswap sft"
    # batch_size is the global batch: use the most GPUs that split it evenly (batch 4 on 8 GPUs: 4 processes)
    batch, gpus = int(run_spec(wildcards.run)["batch_size"]), max(1, int(resources.gpu))
    procs = max(n for n in range(1, min(batch, gpus) + 1) if batch % n == 0)
    # a relative accelerate config is the repository's (cluster/...), wherever --directory points
    accel = Path(config["sft"]["accelerate_config"])
    accel = accel if accel.is_absolute() or accel.exists() else Path(workflow.basedir) / accel
    return (f"accelerate launch --config_file {shlex.quote(str(accel))} "
            f"--num_processes {procs} -m layerswap.train.sft")


# ---------------------------------------------------------------------------------------------------------
# helpers of rules/select.smk (functions live here, rules there: snakemake --lint)


def checkpoint_models(run):
    return {
        f"ckpt/{run}/{checkpoint_name(s)}": f"{EXPERTS}/{run}/{checkpoint_name(s)}"
        for s in checkpoints_of(run_spec(run))
    }


def checkpoint_eval_rule_params(run, benchmarks):
    return benchmark_params(benchmarks, checkpoint_languages(run))


def selection_params(expert):
    kind = expert_kind(expert)
    lang = None if kind == "math" else expert.removeprefix("joint_")
    return as_json({
        "kind": kind, "lang": lang, "weights": config["selection"]["weights"][kind],
        "constraints": config["selection"]["constraints"].get(kind, {}),
        "top_k": config["selection"]["top_k"], "max_per_run": config["selection"]["max_per_run"],
        "mgsm_languages": config["mgsm_languages"],
    })


# ---------------------------------------------------------------------------------------------------------
# helpers of rules/evaluate.smk (functions live here, rules there: snakemake --lint)


def merge_eval_outputs(group, lang, names, benchmarks=None):
    return [f for n in names for f in eval_files(f"merge/{group}/{lang}/{n}", benchmarks or MERGE_BENCHMARKS)]


def merge_models(group, lang, names, recipes):
    return " ".join(f"--model merge/{group}/{lang}/{n}={r}" for n, r in zip(names, recipes))


# Output patterns of the merge evaluations with {cfg}/{lang} (and {benchmark}) wildcards.
def merge_eval_patterns(group, names, benchmarks):
    files = merge_eval_outputs("GROUP", "LANG", names, benchmarks)
    return [f.replace("GROUP", group).replace("LANG", "{lang}") for f in files]


# Each evaluation rule serves both job layouts of evaluation.tasks_per_job. A grouped job evaluates a fixed list of
# benchmarks, a single job the one in its {benchmark} wildcard.
def job_benchmarks(wildcards, grouped):
    """The benchmarks of one evaluation job: `grouped`, or the job's {benchmark} in the single layout."""
    return [wildcards.benchmark] if SINGLE_TASK_JOBS else grouped


def per_layout(grouped, single):
    """An evaluation job's output (or log) path(s): `grouped`, or the {benchmark} pattern `single` (single layout)."""
    return single if SINGLE_TASK_JOBS else grouped


def base_eval_groups():
    """grouped: the base's benchmarks that selection constraints read get a job of their own (evaluate_base_select),
    so that editing another task's settings reruns no selection; (rest, constrained). single: (all, [])."""
    if SINGLE_TASK_JOBS:
        return BENCHMARKS, []
    constrained = [b for b in BENCHMARKS if any(b in constraint_benchmarks(k) for k in ("math", "language", "joint"))]
    rest = [b for b in BENCHMARKS if b not in constrained]
    return (rest, constrained) if rest and constrained else (BENCHMARKS, [])


def table2_groups():
    """[(models {id: source}, their input files, the languages their own MGSM files hold)] of Table 2's columns
    (rules/evaluate.smk computes it once, T2_GROUPS)."""
    mgsm = "mgsm" in BENCHMARKS
    groups = [({"base": f"{R}/base"}, [f"{R}/base/config.json"], task_languages("mgsm") if mgsm else [])]
    for run in [r for e in ("math", T2, f"joint_{T2}") for r in runs_of(e)]:
        langs = task_languages("mgsm", checkpoint_languages(run)) if mgsm else []
        groups.append((checkpoint_models(run), [f"{EXPERTS}/{run}/checkpoints.json"], langs))
    for cfg in T2_CONFIGS:
        recipes = {f"merge/{cfg}/{T2}/{p}": f"{R}/merges/{cfg}/{T2}/{p}.json" for p in PAIRS}
        groups.append((recipes, list(recipes.values()), task_languages("mgsm", [T2])))
    return groups


def table2_models(lang):
    """Table 2's models whose own evaluation files lack MGSM in `lang`: {model id: checkpoint dir or recipe}."""
    return {m: src for models, _, langs in T2_GROUPS if lang not in langs for m, src in models.items()}


def table2_index(lang):
    return f"{R}/evals/by_language/{lang}/table2_{T2}.json"


# ---------------------------------------------------------------------------------------------------------
# helpers of rules/analysis.smk (functions live here, rules there: snakemake --lint)


def table_report(stem, ext):
    sub, caption = TABLE_PAGES[stem]
    fmt = "rendered (HTML)" if ext == "html" else ext.upper()
    return report(f"{R}/tables/{stem}.{ext}", category="Tables", subcategory=sub, caption=caption,
                  labels={"table": stem, "format": fmt})


def figure_report(name, ext):
    sub, caption = FIGURES[name]
    fmt = "numbers (CSV)" if ext == "csv" else ext.upper()
    return report(f"{R}/figures/{name}.{ext}", category="Figures", subcategory=sub, caption=caption,
                  labels={"figure": name, "format": fmt})


def table_inputs():
    files = [f"{R}/selection/{e}.json" for e in EXPERT_TYPES]
    files += [i for e in EXPERT_TYPES for i in checkpoint_indexes(e)]
    files += eval_files("base", BENCHMARKS)
    for cfg in PAIR_CONFIGS:
        for lang in LANGS:
            files += merge_eval_outputs(cfg, lang, PAIRS)
    for lang in LANGS:
        files += merge_eval_outputs("soupswap", lang, ["langsoup", "multisoup"])
    return files + [table2_index(lang) for lang in T2_LANGS]


def table_params(table2=True):
    """The tables' params; table2=False: without the Table 2 language (the Table 1 figure does not show it)."""
    m = config["merges"]
    names = config.get("language_names", {})
    params = {
        "languages": LANGS, "mgsm_languages": config["mgsm_languages"], "top_k": config["selection"]["top_k"],
        "best_of": m["best_of"], "default_swap": m["default_swap"], "world": config["world"],
        "language_names": names, "seed": config["seed"], "bootstrap_draws": config["analysis"]["bootstrap_draws"],
    }
    return as_json(params | ({"table2_language": config["analysis"]["table2_language"]} if table2 else {}))


def swap_grid_inputs():
    return [f"{R}/evals/merge/{c}/{l}/{p}/mgsm.json" for c in SWAP_CONFIGS for l in LANGS for p in PAIRS]


def table1_bars_inputs():
    """Exactly what Table 1 reads: selections and checkpoint indexes of math + each language, base MGSM, and the
    MGSM of every pair of the default swap and the soup/swap best-of configs."""
    m = config["merges"]
    experts = ["math"] + LANGS
    files = [f"{R}/selection/{e}.json" for e in experts]
    files += [i for e in experts for i in checkpoint_indexes(e, ["mgsm"])]
    files += eval_files("base", ["mgsm"])
    configs = dict.fromkeys(m["best_of"]["soup"] + m["best_of"]["swap"] + [m["default_swap"]])
    files += [f"{R}/evals/merge/{c}/{l}/{p}/mgsm.json" for c in configs for l in LANGS for p in PAIRS]
    return files


# ---------------------------------------------------------------------------------------------------------
# helpers of rules/audit.smk (functions live here, rules there: snakemake --lint)


def manifest_inputs():
    files = TABLES + BEST_CONFIGS + REPORT_FILES + table_inputs() + swap_grid_inputs() + table1_bars_inputs()
    files += [f"{R}/base/config.json"]
    files += [f"{EXPERTS}/{run}/checkpoints.json" for run in RUNS]
    files += [f for run in RUNS for f in checkpoint_eval_indexes(run)]
    files += [f"{R}/data/sft/{e}.{ext}" for e in expert_types() for ext in ("jsonl", "manifest.json")]
    files += [f"{R}/merges/{c}/{l}/{p}.json" for c in PAIR_CONFIGS for l in LANGS for p in PAIRS]
    files += [f"{R}/merges/soupswap/{l}/{m}.json" for l in LANGS for m in SOUPS]
    files += MERGED_MODELS
    return list(dict.fromkeys(files))


# ---------------------------------------------------------------------------------------------------------
# helpers of rules/ablations.smk (functions live here, rules there: snakemake --lint)


def ablation_runs_of(name, set_name, expert):
    prefix = f"ax_{name}_{set_name}_"
    return sorted(r for r, p in EXPERT_ABLATIONS[name]["runs"].items() if r.startswith(prefix) and p["expert"] == expert)


def ablation_selection(name, set_name, expert):
    return f"{R}/ablations/{name}/selection/{set_name}/{expert}.json"


def ablation_base_evals(name, set_name, expert):
    """The base evaluations an ablation selection's constraints compare with: of the base its runs trained from."""
    benchmarks = constraint_benchmarks(expert_kind(expert))
    (base,) = {ABLATION_RUN_BASE[r] for r in ablation_runs_of(name, set_name, expert)} or {None}
    return eval_files("base" if base is None else base.removeprefix(f"{R}/"), benchmarks)


def ablation_merge_selection(cfg, lang, which):
    m = ABLATION_MERGES[cfg]
    expert = lang if which == "lang" else "math"
    if m[f"{which}_from"] == "main":
        return f"{R}/selection/{expert}.json"
    return ablation_selection(m["ablation"], m["set"], expert)


def ablation_configs(name):
    return list(dict.fromkeys(v["config"] for v in ABLATIONS[name]["variants"] if v["config"]))


def ablation_extra_benchmarks(name):
    """Benchmarks an ablation reports beyond the merge tasks every merge gets (evaluate_ablation_merges)."""
    return [b for b in ABLATIONS[name]["metrics"] if b not in MERGE_BENCHMARKS]


def ablation_inputs(name):
    files = []
    if name in EXPERT_ABLATIONS:  # every selection of the ablation's own experts (also those no merge reads)
        files += [ablation_selection(name, s, e) for s, es in EXPERT_ABLATIONS[name]["selections"].items() for e in es]
    for cfg in ablation_configs(name):
        for lang in LANGS:
            files += merge_eval_outputs(cfg, lang, PAIRS, ABLATIONS[name]["metrics"])
    return files


def ablation_params(name):
    spec = ABLATIONS[name]
    return as_json({
        "name": name, "title": spec["title"], "plan": spec["plan"], "metrics": spec["metrics"],
        "variants": spec["variants"], "languages": LANGS, "top_k": config["selection"]["top_k"],
        "world": config["world"], "language_names": config.get("language_names", {}),
        "seed": config["seed"], "bootstrap_draws": config["analysis"]["bootstrap_draws"],
    })


def ablation_report(name, file):
    return report(f"{R}/ablations/{name}/{file}", category="Ablations", subcategory=ABLATIONS[name]["title"],
                  caption="../report/ablation.rst", labels={"ablation": name, "file": file})
