"""Workflow config: the checks a schema cannot express, after JSON-schema validation with defaults
(layerswap/config_schema.py, which also words every config error), and the helpers the rules use.

The Snakefile calls, at parse time::

    validate_config(config, "config/schema.yaml")   # fills defaults in place, one-line UserError on failure
    check(config)                                    # cross-key rules below, one-line UserError on failure

and uses `effective_runs`, `checkpoints_of`, `expert_type`, `mix_of` to build the DAG. `layerswap check-config FILE`
does the same from the command line and prints `ok`.

Every error is one line: ``config key '<dotted.path>': <what is wrong>; allowed: <values>``.

Language codes
--------------
``en`` is English. Real languages use ISO 639-3 codes (``swh``, ``tel``, ``ben``, ``jpn``, ``deu``, ``fra``, ``zho``,
``rus``, ``spa``, ``tha``, ``yor``): the paper's four targets are ISO 639-3 and so are Aya's ``language_code`` and
the FLORES prefixes, so one scheme covers targets, MGSM languages and data sources; `HF_LANGUAGES` maps each code to
its code in each benchmark's dataset (`layerswap.languages`, its one owner). Toy languages are ``toy_<code>`` and
exist only as keys of ``toy_world.languages``.

Known target languages
----------------------
* world ``toy``: the keys of ``toy_world.languages``.
* world ``hf``: the paper's targets `PAPER_TARGETS` (swh, tel, ben, jpn), plus any language code that some entry of
  ``data_sources`` lists under ``languages`` (so a new target needs at least one data source that names it), and
  only those with an entry in `HF_LANGUAGES` (every benchmark evaluates a target language: without its codes none
  could).
``mgsm_languages`` (and ``evaluation.tasks.mgsm.languages``) must be ``en`` or a toy language (toy world), or a
language with a math benchmark: one of MGSM's, or of its translation's (AfriMGSM: Yoruba) (hf world).
"""

from __future__ import annotations

import math
from pathlib import Path

from layerswap.benchmarks import BENCHMARKS, MATH, SELECTION_METRICS, TARGETED_METRICS
from layerswap.config_schema import SCHEMA_PATH, key_error, read_config_file, validate_config
from layerswap.data.config_checks import check_mixes, check_prompt
from layerswap.data.hub import is_local_source
from layerswap.data.mixes import language_mix
from layerswap.errors import UserError
from layerswap.languages import HF_LANGUAGES, check_codes, task_for
from layerswap.merge.params import ParamError
from layerswap.merge.registry import METHODS, SWAP
from layerswap.train.gguf_base import is_gguf_source

#: The paper's target languages (hf world).
PAPER_TARGETS: tuple[str, ...] = ("swh", "tel", "ben", "jpn")
#: Checkpoints one SFT run may save: each is a job's output, evaluated and listed (the paper's runs save 8 to 16);
#: more is a typo (`num_samples: 1e15`), refused by counting, never by listing them.
MAX_CHECKPOINTS_PER_RUN = 1000
#: Selection metric -> evaluation task it is computed from.
METRIC_TASK: dict[str, str] = {metric: benchmark for metric, (benchmark, _) in SELECTION_METRICS.items()}
#: Selection metrics that need no target language (a math expert's).
UNTARGETED_METRICS: list[str] = [m for m in SELECTION_METRICS if m not in TARGETED_METRICS]


# ----------------------------------------------------------------------------------------------------------------
# helpers the Snakefile uses


def effective_runs(config: dict) -> dict[str, dict]:
    """Each SFT run merged over ``sft.defaults`` (run values win), in config order."""
    defaults = config["sft"].get("defaults") or {}
    out = {}
    for name, run in config["sft"]["runs"].items():
        out[name] = {**defaults, **run}
        if out[name].get("peft_method", "full") != "lora":
            out[name].pop("lora", None)  # LoRA settings of a full fine-tune are unused: no rerun when they change
        if out[name].get("chat_template", True) is True:
            out[name].pop("chat_template", None)  # the default, as runs had it before the key existed: no rerun
        if out[name].get("export_dtype", "base") == "base":
            out[name].pop("export_dtype", None)  # the default, as runs had it before the key existed: no rerun
    return out


def checkpoint_count(run: dict) -> int:
    """How many checkpoints an (effective) run saves: num_samples // checkpoint_every, counted, not listed."""
    every, total = int(run["checkpoint_every"]), int(run["num_samples"])
    if every <= 0:
        raise UserError(f"checkpoint_every must be > 0, got {every}")
    return total // every


def checkpoints_of(run: dict) -> list[int]:
    """Samples seen at each checkpoint of an (effective) run: every, 2*every, ..., up to num_samples."""
    every, count = int(run["checkpoint_every"]), checkpoint_count(run)
    if count > MAX_CHECKPOINTS_PER_RUN:
        raise UserError(f"{count} checkpoints in one run (at most {MAX_CHECKPOINTS_PER_RUN})")
    return [every * k for k in range(1, count + 1)]


def expert_type(expert: str) -> str:
    """``math`` | ``joint`` (joint_<lang>) | ``language``."""
    if expert == "math":
        return "math"
    return "joint" if expert.startswith("joint_") else "language"


def expert_language(expert: str) -> str | None:
    """Target language of a language or joint expert, None for math."""
    kind = expert_type(expert)
    return None if kind == "math" else expert[len("joint_") :] if kind == "joint" else expert


def experts(config: dict) -> list[str]:
    """Every expert the workflow selects checkpoints for: math, each language, joint_<lang> where a run exists."""
    joint = {run["expert"] for run in config["sft"]["runs"].values() if expert_type(run["expert"]) == "joint"}
    return [
        "math",
        *config["languages"],
        *[f"joint_{lang}" for lang in config["languages"] if f"joint_{lang}" in joint],
    ]


def runs_by_expert(config: dict) -> dict[str, list[str]]:
    """Expert -> names of its SFT runs (config order)."""
    out: dict[str, list[str]] = {}
    for name, run in config["sft"]["runs"].items():
        out.setdefault(run["expert"], []).append(name)
    return out


def mix_of(config: dict, expert: str) -> dict[str, int]:
    """{source: count} of the SFT data of `expert` (joint = sum of the mixes listed in ``mixes.joint``)."""
    mixes = config["mixes"]
    kind, lang = expert_type(expert), expert_language(expert)

    if kind == "math":
        return dict(mixes["math"])
    if kind == "language":
        return language_mix(mixes, lang)
    out: dict[str, int] = {}
    for part in mixes.get("joint", ["math", "language"]):
        for source, count in (dict(mixes["math"]) if part == "math" else language_mix(mixes, lang)).items():
            out[source] = out.get(source, 0) + count
    return out


def known_languages(config: dict) -> list[str]:
    """Target languages this config may use (see module docstring)."""
    if config.get("world") == "toy":
        return list((config.get("toy_world") or {}).get("languages") or {})
    out = list(PAPER_TARGETS)
    for source in (config.get("data_sources") or {}).values():
        out += [code for code in source.get("languages") or {} if code not in out and code != "en"]
    return out


def backend_for(evaluation: dict, benchmark: str) -> str:
    """The backend that evaluates `benchmark` under the `evaluation` config: `evaluation.backend` where it is one
    backend (hf, vllm), its entry for the benchmark where it is a mapping {benchmark: backend}, hf for a benchmark the
    mapping leaves out."""
    backend = evaluation.get("backend", "hf")
    if isinstance(backend, dict):
        return backend.get(benchmark, "hf")
    return backend


def mgsm_allowed(config: dict) -> list[str]:
    if config.get("world") == "toy":
        return ["en", *known_languages(config)]
    return [code for code in HF_LANGUAGES if task_for(BENCHMARKS[MATH].paper, code) is not None]


# ----------------------------------------------------------------------------------------------------------------
# checks beyond the schema


def check(config: dict) -> None:
    """Cross-key rules; raise a one-line UserError naming the key and the allowed values. Assumes validate_config."""
    _check_finite(config)
    world = config["world"]
    languages = list(config["languages"])
    known = known_languages(config)

    # world-specific structure
    if world == "toy":
        if "toy_world" not in config:
            raise key_error("toy_world", "required key is missing (world is toy)")
        from layerswap.data.toy_writers import aya_mix, pretrain_mix

        pretrain_mix(config["toy_world"].get("pretrain_mix"))  # its shares of the toy documents sum to <= 1
        aya_mix(config["toy_world"].get("aya_mix"))
        base = config["base"]
        if base["source"] == "toy":
            for key in ("toy_model", "toy_pretrain"):
                if key not in base:
                    raise key_error(f"base.{key}", "required key is missing (base.source is toy)")
        elif not (is_gguf_source(base["source"]) or is_local_source(base["source"])):
            raise key_error(
                "base.source",
                f"'{base['source']}' reads like a hub id, which needs world: hf (pre-staged from the hub)",
                "toy, a local HF model directory, or a GGUF file",
            )
    else:
        if config["base"]["source"] == "toy":
            raise key_error("base.source", "'toy' needs world: toy", "a local HF model directory or a hub id")
        if "toy_world" in config:
            raise key_error("toy_world", "is read only by world: toy (this config is world: hf); remove it")
    source = config["base"]["source"]
    if is_local_source(source) and not is_gguf_source(source) and not Path(source).expanduser().is_dir():
        raise key_error(
            "base.source",
            f"'{source}' is not a directory (a local HF model directory: config.json, tokenizer and *.safetensors)",
        )
    # keys of the toy base that another base would silently ignore
    for key in ("toy_model", "toy_pretrain"):
        if key in config["base"] and config["base"]["source"] != "toy":
            raise key_error(
                f"base.{key}",
                f"is read only when base.source is toy (it is '{config['base']['source']}'); remove it",
            )

    # languages
    for i, lang in enumerate(languages):
        if lang not in known:
            raise key_error(f"languages[{i}]", f"unknown language '{lang}'", known)
        if world == "hf" and lang not in HF_LANGUAGES:
            # a data source may name a language the paper task set cannot evaluate: refused here, not by the jobs
            raise key_error(
                f"languages[{i}]",
                f"'{lang}' has no entry in layerswap/languages.py:HF_LANGUAGES (its code in each benchmark's dataset), "
                "so no benchmark can evaluate it; docs/EXTENDING.md: adding a language",
                [code for code in HF_LANGUAGES if code != "en"],
            )
    if world == "hf":
        check_codes(config, languages)
    mgsm_ok = mgsm_allowed(config)
    for i, lang in enumerate(config["mgsm_languages"]):
        if lang not in mgsm_ok:
            raise key_error(f"mgsm_languages[{i}]", f"unknown MGSM language '{lang}'", mgsm_ok)
    eval_ok = list(dict.fromkeys(["en", *known, *([] if world == "toy" else HF_LANGUAGES)]))
    for task, spec in config["evaluation"]["tasks"].items():
        ok = mgsm_ok if task == "mgsm" else eval_ok
        for i, lang in enumerate(spec.get("languages") or []):
            if lang not in ok:
                raise key_error(f"evaluation.tasks.{task}.languages[{i}]", f"unknown language '{lang}'", ok)
    evaluation = config["evaluation"]
    for task in dict.fromkeys([*evaluation.get("merge_tasks", []), *evaluation.get("checkpoint_tasks", [])]):
        listed = (evaluation["tasks"].get(task) or {}).get("languages")
        if listed is None:  # every target language
            continue
        missing = [lang for lang in languages if lang not in listed]
        if missing:  # its jobs for that language would evaluate nothing, and the tables would lack it
            raise key_error(
                f"evaluation.tasks.{task}.languages",
                f"leaves out target language '{missing[0]}', whose experts and merges are evaluated on {task} "
                "(evaluation.checkpoint_tasks / merge_tasks): add it",
                [*listed, *missing],
            )
    for lang in config.get("language_names") or {}:
        if lang not in eval_ok:
            raise key_error(f"language_names.{lang}", f"unknown language '{lang}'", eval_ok)
    if config["analysis"]["table2_language"] not in languages:
        raise key_error(
            "analysis.table2_language", f"'{config['analysis']['table2_language']}' is not a target language", languages
        )

    check_prompt(config)
    check_mixes(config, languages, known)
    _check_runs(config, languages)
    table2 = config["analysis"]["table2_language"]
    joint = sorted(
        {
            run["expert"][len("joint_") :]
            for run in effective_runs(config).values()
            if run["expert"].startswith("joint_")
        }
    )
    if table2 not in joint:
        raise key_error(
            "analysis.table2_language",
            f"Table 2 compares the joint expert of '{table2}' with the merges, "
            f"but no run of sft.runs has expert 'joint_{table2}'",
            joint or ["none: add a joint_<lang> run"],
        )
    _check_selection(config)
    _check_merges(config)
    _check_evaluation(config)
    keep = config.get("storage", {}).get("keep_merged")
    for i, name in enumerate(keep if isinstance(keep, list) else []):
        if name not in config["merges"]["configs"]:
            raise key_error(
                f"storage.keep_merged[{i}]", f"unknown merge config '{name}'", list(config["merges"]["configs"])
            )


def _check_finite(value, where: str = "") -> None:
    """Every number of the config is finite: YAML's `.nan` and `.inf` pass the schema's bounds (NaN compares false
    with every bound) and would break a job later (an SFT run's lr, a selection weight, a merge density)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise key_error(where or "(config)", f"{value} is not a finite number", "a finite number")
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        _check_finite(item, f"{where}[{key}]" if isinstance(key, int) else f"{where}.{key}" if where else str(key))


def _origin(config: dict, run_name: str, field: str) -> str:
    return f"sft.runs.{run_name}.{field}" if field in config["sft"]["runs"][run_name] else f"sft.defaults.{field}"


def _check_runs(config: dict, languages: list[str]) -> None:
    allowed = ["math", *languages, *[f"joint_{lang}" for lang in languages]]
    from layerswap.train.params import PEFT_METHODS, peft_refusal

    for name, run in effective_runs(config).items():
        method = run.get("peft_method", "full")
        refusal = peft_refusal(method)
        if refusal:
            raise key_error(_origin(config, name, "peft_method"), refusal, PEFT_METHODS)
        if method != "lora" and "lora" in config["sft"]["runs"][name]:
            raise key_error(f"sft.runs.{name}.lora", "is set but the run's peft_method is full", "peft_method: lora")
        if run["expert"] not in allowed:
            raise key_error(f"sft.runs.{name}.expert", f"unknown expert '{run['expert']}'", allowed)
        outside = [i for i in (run.get("lora") or {}).get("layers") or [] if i >= config["base"]["num_layers"]]
        if method == "lora" and outside:
            raise key_error(
                _origin(config, name, "lora") + ".layers",
                f"layer {outside[0]} does not exist (the base has {config['base']['num_layers']} layers, 0-based)",
            )
        for field in ("num_samples", "checkpoint_every"):
            if field not in run:
                raise key_error(
                    f"sft.runs.{name}.{field}", "required key is missing (set it in the run or in sft.defaults)"
                )
        every, total, batch = run["checkpoint_every"], run["num_samples"], run["batch_size"]
        if every > 0 and total // every > MAX_CHECKPOINTS_PER_RUN:
            raise key_error(
                _origin(config, name, "num_samples"),
                f"{total:g} saves {int(total // every)} checkpoints of run '{name}' (num_samples / checkpoint_every "
                f"{every}): more than {MAX_CHECKPOINTS_PER_RUN}, each a job's output to evaluate",
                f"num_samples <= {every * MAX_CHECKPOINTS_PER_RUN}, or a larger checkpoint_every",
            )
        if every <= 0 or every > total:
            raise key_error(
                _origin(config, name, "checkpoint_every"),
                f"{every} does not fit num_samples {total} of run '{name}'",
                f"1..{total}",
            )
        if every % batch:
            raise key_error(
                _origin(config, name, "checkpoint_every"),
                f"{every} is not a multiple of batch_size {batch} of run '{name}' (checkpoints are saved "
                "at whole steps)",
                f"multiples of {batch}",
            )
        if total % every:
            raise key_error(
                _origin(config, name, "num_samples"),
                f"{total} is not a multiple of checkpoint_every {every} of run '{name}' (every checkpoint is "
                "listed, evaluated and checked; samples after the last one would train a model none of them "
                "is)",
                f"multiples of {every}",
            )


def _check_selection(config: dict) -> None:
    selection = config["selection"]
    top_k, cap = selection["top_k"], selection.get("max_per_run")
    runs = effective_runs(config)
    by_expert = runs_by_expert(config)
    for expert in experts(config):
        names = by_expert.get(expert, [])
        if not names:
            raise key_error(
                "sft.runs",
                f"no run trains expert '{expert}' (every target language needs one)",
                f"runs with expert: {expert}",
            )
        counts = {n: checkpoint_count(runs[n]) for n in names}
        usable = sum(min(c, cap) if cap else c for c in counts.values())
        if usable < top_k:
            detail = ", ".join(f"{n}: {c}" for n, c in counts.items())
            capped = f", at most {cap} per run (selection.max_per_run)" if cap else ""
            raise key_error(
                "selection.top_k",
                f"{top_k} needs {top_k} checkpoints of expert '{expert}' but its runs give {usable} ({detail}{capped})",
                f"top_k <= {usable}, or more runs/checkpoints",
            )
    kinds = {expert_type(e) for e in experts(config)}
    if "joint" in kinds and "joint" not in selection["weights"]:
        raise key_error("selection.weights.joint", "required key is missing (there are joint_<lang> runs)")
    evaluated = config["evaluation"]["checkpoint_tasks"]
    runs_code = {b for b, task in config["evaluation"]["tasks"].items() if (task or {}).get("execute_code", False)}
    for key in ("weights", "constraints"):
        for kind, metrics in selection.get(key, {}).items():
            for metric in metrics:
                where = f"selection.{key}.{kind}.{metric}"
                if kind == "math" and metric not in UNTARGETED_METRICS:
                    raise key_error(where, "math experts have no target language", UNTARGETED_METRICS)
                task = METRIC_TASK[metric]
                if task not in evaluated:
                    ok = [m for m, t in METRIC_TASK.items() if t in evaluated]
                    raise key_error(where, f"needs task '{task}' in evaluation.checkpoint_tasks", ok)
                if BENCHMARKS[task].unsafe and task not in runs_code:
                    raise key_error(
                        where,
                        f"{BENCHMARKS[task].title} gives no score unless evaluation.tasks.{task}.execute_code is true",
                        [m for m, t in METRIC_TASK.items() if not BENCHMARKS[t].unsafe],
                    )


def _check_merges(config: dict) -> None:
    merges, num_layers = config["merges"], config["base"]["num_layers"]
    configs = merges["configs"]
    for name, cfg in configs.items():
        try:  # each method's own check (layerswap/merge/methods/), against the base's depth
            METHODS[cfg["method"]].run_check(cfg, cfg, num_layers, f"base.num_layers = {num_layers}")
        except ParamError as err:
            where = f"merges.configs.{name}"
            raise key_error(f"{where}.{err.key}" if err.key else where, err.message, err.allowed) from None

    def of_method(method: str) -> list[str]:
        return [n for n, c in configs.items() if c["method"] == method]

    def need(key: str, value: str, method: str) -> None:
        ok = of_method(method)
        if value not in ok:
            what = (
                f"unknown config '{value}'"
                if value not in configs
                else f"config '{value}' has method {configs[value]['method']}"
            )
            raise key_error(key, f"{what} (needs method {method})", ok or f"none: add a {method} config")

    need("merges.default_swap", merges["default_swap"], SWAP)
    if merges.get("soup_then_swap") is not None:
        need("merges.soup_then_swap", merges["soup_then_swap"], SWAP)
    for method, names in merges["best_of"].items():  # keyed by method name (the schema knows the registered ones)
        for i, value in enumerate(names):
            need(f"merges.best_of.{method}[{i}]", value, method)


def _check_evaluation(config: dict) -> None:
    evaluation = config["evaluation"]
    tasks = list(evaluation["tasks"])
    for key in ("checkpoint_tasks", "merge_tasks"):
        for i, task in enumerate(evaluation[key]):
            if task not in tasks:
                raise key_error(f"evaluation.{key}[{i}]", f"task '{task}' has no entry in evaluation.tasks", tasks)
    backend = evaluation.get("backend", "hf")
    for task in backend if isinstance(backend, dict) else []:
        if task not in tasks:
            raise key_error(f"evaluation.backend.{task}", f"task '{task}' has no entry in evaluation.tasks", tasks)
    from layerswap.evaluation.vllm_check import check as check_backend

    check_backend(config)  # evaluation.backend: vllm and a model its attention cannot run


# ----------------------------------------------------------------------------------------------------------------
# CLI: layerswap check-config FILE


def load_config(path: str | Path, schema_path: str | Path = SCHEMA_PATH) -> dict:
    """Read a config file, validate it (defaults filled) and check it; return the completed config."""
    config = read_config_file(path)
    validate_config(config, schema_path)
    check(config)
    return config


def precheck_configfiles(argv: list[str] | None = None) -> None:
    """Before Snakemake reads them: each config file that `snakemake --configfile` names (in `argv`, default
    sys.argv) is readable UTF-8, valid YAML and a mapping, or the run stops with one line naming the file and line
    (read_config_file), exit status 1. Snakemake's own loader would say neither, or print a traceback. Called by the
    workflow profile (profiles/default/config.yaml), which Snakemake reads before the config files; the schema and
    the checks follow at parse time (rules/common.smk), naming the file as well."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--configfile", "--configfiles", nargs="+", action="extend", default=[])
    known, _ = parser.parse_known_args(sys.argv[1:] if argv is None else argv)
    for path in known.configfile:
        try:
            read_config_file(path)
        except UserError as err:
            print(f"config error: {err}", file=sys.stderr)
            raise SystemExit(1) from None


def add_arguments(parser) -> None:
    parser.add_argument("file", help="workflow config (YAML), e.g. config/config.yaml")
    parser.add_argument("--schema", default=str(SCHEMA_PATH), help="JSON schema (default: %(default)s)")


def run(args) -> None:
    load_config(args.file, args.schema)
    print("ok")
