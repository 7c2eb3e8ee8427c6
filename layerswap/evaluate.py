"""`layerswap evaluate`: lm-eval on checkpoints (and, through `layerswap evaluate-merges`, on merges built in memory);
one JSON per (model, benchmark).

One process evaluates many models (the dominant cost of the workflow is per process, not per model):
- the toy task YAMLs (`layerswap/tasks/toy/<benchmark>.yaml`) are templates; for this job one small YAML per
  (benchmark, language or FLORES direction) is written into a temporary include dir that `include:`s the template and
  sets the task name, the data file, the shots and the limit. lm-eval indexes only that dir
  (`TaskManager(include_path=..., include_defaults=False)`, never its ~14,700 built-in tasks) and builds every task
  once (`TaskManager.load`);
- ONE `HFLM` wraps one model instance; each further model only swaps the weights in with `load_state_dict` (a
  checkpoint's safetensors, or the state dict that `layerswap.merge.engine.build_state_dict(recipe, cache)` builds in
  memory). A new instance (and HFLM) is built only when the architecture config or the tokenizer changes;
- per model, one `lm_eval.evaluator.evaluate(lm, task_dict, cache_requests=True, bootstrap_iters=0,
  log_samples=True)` over all tasks, after re-seeding each task's few-shot sampler (`task.set_fewshot_seed(seed)`),
  so prompts are identical for every model; the request cache lives in the job's temp dir.

Data: `<data-dir>/<file>_<lang>.jsonl` (schemas in docs/ARCHITECTURE.md). When a benchmark runs with shots > 0, the
first `max(FEWSHOT_POOL, shots)` lines of each file are its few-shot pool (lm-eval `fewshot_split`) and are never
scored; with 0 shots every line is scored. `limit` keeps the first `limit` scored items.

Task sets (`--task-set`, from the config's `world` through the rules' params): `toy` (above) or `paper`: the paper's
benchmarks as lm-eval tasks over pre-staged hub datasets (`PAPER_BENCHMARKS`, `plan_paper`; lm-eval indexes only the
task folders these need plus `layerswap/tasks/paper/`), listed for `layerswap prestage` by `hub_artefacts(config)`.
Backends (`--backend`): `hf` (above) or `vllm` (GPU clusters): vLLM needs a checkpoint on disk, so a recipe is first
written with `layerswap.merge.engine.write_merged` to a temporary dir; one vLLM engine per model.

Output (written atomically: temp name, then rename): `<out-dir>/<model-id>/<benchmark>.json` and
`<benchmark>.samples.jsonl`. The JSON holds no timestamps or paths, so the same inputs give the same bytes.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import logging
import os
import random
import sys
import tempfile
import time
from pathlib import Path

from layerswap.contracts import write_json_atomic, write_text_atomic
from layerswap.errors import UserError
from layerswap.jsonl import json_object

log = logging.getLogger("layerswap.evaluate")

RESOURCES = ("tasks",)  # read at run time (layerswap.fingerprint hashes them with this module)
TASK_DIR = Path(__file__).resolve().parent / "tasks" / "toy"
PAPER_TASK_DIR = Path(__file__).resolve().parent / "tasks" / "paper"
TASK_SETS = ("toy", "paper")
BACKENDS = ("hf", "vllm")
FEWSHOT_POOL = 8
LAST_INTEGER = "(-?[0-9]+)"  # the regex of mgsm.yaml's last-integer filter (group_select: -1)
BENCHMARK_KEYS = {"shots", "languages", "limit", "execute_code", "max_new_tokens"}


@dataclasses.dataclass(frozen=True)
class Benchmark:
    file: str  # data file prefix: <file>_<lang>.jsonl
    metric: str
    filter: str  # lm-eval filter name of the reported metric
    filter_doc: str  # what the filter does, for the JSON
    directions: bool = False  # FLORES: en->lang and lang->en per non-English language
    unsafe: bool = False  # runs model-written code


BENCHMARKS: dict[str, Benchmark] = {
    "mgsm": Benchmark("mgsm", "exact_match", "last-integer",
                      f"last-integer: regex {LAST_INTEGER} group_select -1, take_first"),
    "belebele": Benchmark("belebele", "acc", "none", "none (argmax loglikelihood over the 4 answer texts)"),
    "flores": Benchmark("flores", "bleu", "none", "none (generation up to newline; sacrebleu corpus BLEU)",
                        directions=True),
    "mmlu": Benchmark("mmlu", "acc", "none", "none (argmax loglikelihood over the 4 choice texts)"),
    "mbpp": Benchmark("mbpp", "pass_at_1", "execute",
                      "execute: greedy generation run against test_list in the sandbox -> passed|failed|timeout",
                      unsafe=True),
}


@dataclasses.dataclass(frozen=True)
class TaskPlan:
    benchmark: str
    key: str  # language code or "<src>-<tgt>"
    name: str  # lm-eval task name
    template: str  # template file name in TASK_DIR ("" for the paper set)
    data_file: Path | None
    shots: int
    pool: int
    limit: int | None
    unavailable: str | None = None  # paper set: why this language has no task (then it is not run; score null)

    def overrides(self, data_path: str) -> dict:
        return {
            "task": self.name,
            "num_fewshot": self.shots,
            "dataset_kwargs": {"path": data_path, "fewshot_pool": self.pool, "limit": self.limit, "lang": self.key},
        }


@dataclasses.dataclass
class BenchmarkPlan:
    name: str
    shots: int
    limit: int | None
    tasks: list[TaskPlan]
    skipped: str | None
    config_hash: str = ""
    task_set: str = "toy"
    variant: str | None = None  # paper set: how the task differs from the paper's (MBPP: English prompts)
    max_new_tokens: int | None = None  # generation budget of generate_until tasks (None: the task YAML's own)
    # what lm-eval runs per task key, read back from the loaded task (shots, generation, BLEU tokenizer)
    settings: dict = dataclasses.field(default_factory=dict)

    @property
    def bench(self):
        return PAPER_BENCHMARKS[self.name] if self.task_set == "paper" else BENCHMARKS[self.name]

    @property
    def run_tasks(self) -> list[TaskPlan]:
        return [t for t in self.tasks if not t.unavailable]


# ----------------------------------------------------------------------------------------------------- arguments
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", type=Path,
                        help="toy task set: folder with <benchmark>_<lang>.jsonl files (required there; unused by paper)")
    parser.add_argument("--task-set", default="toy", choices=TASK_SETS,
                        help="toy: task YAMLs over the toy world's files; paper: the paper's lm-eval tasks over "
                        "pre-staged hub datasets (config world: hf)")
    parser.add_argument("--backend", default="hf", choices=BACKENDS,
                        help="hf: one HFLM, weights swapped per model (merges built in memory); vllm: one vLLM engine "
                        "per model (a recipe is written to a temporary checkpoint dir first)")
    parser.add_argument("--benchmarks-json", required=True,
                        help='JSON {benchmark: {shots, languages?, limit?, execute_code?}}; benchmarks: '
                        + ", ".join(BENCHMARKS))
    parser.add_argument("--model", action="append", required=True, metavar="ID=SOURCE",
                        help="model id (output subfolder) = checkpoint dir or merge recipe .json; repeatable")
    parser.add_argument("--out-dir", required=True, type=Path)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--device", default="auto", help="auto (cuda if available, else cpu), cpu, cuda, cuda:N")
    parser.add_argument("--dtype", default="auto",
                        help="dtype of the evaluated weights: auto (bfloat16 on a GPU, as SFT trains, float32 on a "
                             "CPU), float32, bfloat16, ...; recorded in each result file")
    parser.add_argument("--verbose", action="store_true", help="show lm-eval's own log lines")
    parser.add_argument("--index", type=Path,
                        help="also write this JSON index of the evaluated models and their result files")
    parser.add_argument("--run", help="SFT run name recorded in the index (checkpoint evaluations)")


def parse_benchmarks(text: str) -> dict[str, dict]:
    expected = "a non-empty object {benchmark: {shots, ...}}"
    spec = json_object(text, "--benchmarks-json", expected)
    if not spec:
        raise UserError(f"--benchmarks-json: expected {expected}")
    out = {}
    for name, cfg in spec.items():
        if name not in BENCHMARKS:
            raise UserError(f"--benchmarks-json: unknown benchmark {name!r} (known: {', '.join(BENCHMARKS)})")
        cfg = {} if cfg is None else cfg
        if not isinstance(cfg, dict):
            raise UserError(f"--benchmarks-json: {name}: expected an object")
        unknown = set(cfg) - BENCHMARK_KEYS
        if unknown:
            raise UserError(f"--benchmarks-json: {name}: unknown key(s) {sorted(unknown)} "
                            f"(known: {sorted(BENCHMARK_KEYS)})")
        shots = cfg.get("shots", 0)
        if not isinstance(shots, int) or isinstance(shots, bool) or shots < 0:
            raise UserError(f"--benchmarks-json: {name}.shots must be an integer >= 0, got {shots!r}")
        limit = cfg.get("limit")
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
            raise UserError(f"--benchmarks-json: {name}.limit must be null or an integer >= 1, got {limit!r}")
        langs = cfg.get("languages")
        if langs is not None and (not isinstance(langs, list) or not all(isinstance(x, str) and x for x in langs)):
            raise UserError(f"--benchmarks-json: {name}.languages must be a list of language codes")
        execute = cfg.get("execute_code", False)
        if not isinstance(execute, bool):
            raise UserError(f"--benchmarks-json: {name}.execute_code must be true or false")
        budget = cfg.get("max_new_tokens")
        if budget is not None and (not isinstance(budget, int) or isinstance(budget, bool) or budget < 1):
            raise UserError(f"--benchmarks-json: {name}.max_new_tokens must be null or an integer >= 1, got {budget!r}")
        out[name] = {"shots": shots, "limit": limit, "languages": langs, "execute_code": execute,
                     "max_new_tokens": budget}
    return out


def parse_models(items: list[str], recipes: bool = False) -> list[tuple[str, Path]]:
    """`--model ID=SOURCE` items; a SOURCE is a checkpoint dir, or with `recipes` a merge recipe file."""
    models, seen = [], set()
    for item in items:
        model_id, sep, source = item.partition("=")
        if not sep or not model_id or not source:
            raise UserError(f"--model {item!r}: expected ID=SOURCE")
        parts = Path(model_id).parts
        if Path(model_id).is_absolute() or ".." in parts or model_id != "/".join(parts):
            raise UserError(f"--model {item!r}: the id must be a relative path without '..' (it names a folder)")
        if model_id in seen:
            raise UserError(f"--model {item!r}: id {model_id!r} given twice")
        seen.add(model_id)
        src = Path(source)
        if src.is_dir():
            if not (src / "config.json").is_file():
                raise UserError(f"--model {model_id}: {src} has no config.json (not a HF checkpoint dir)")
            check_model_dir(src)
        elif src.suffix.lower() in {".json", ".yaml", ".yml"}:
            if not recipes:
                raise UserError(f"--model {model_id}: {src} is a merge recipe; `layerswap evaluate-merges` evaluates "
                                "recipes (`layerswap evaluate` only checkpoint dirs)")
            if not src.is_file():
                raise UserError(f"--model {model_id}: recipe {src} does not exist")
        else:
            raise UserError(f"--model {model_id}: {src} is neither a checkpoint dir nor a recipe .json file")
        models.append((model_id, src))
    return models


TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json")


def check_model_dir(src: Path) -> None:
    """Refuse, before anything is evaluated or written, a checkpoint dir that would not load cleanly: truncated or
    corrupt safetensors headers, pickle-only weights (never loaded), no tokenizer. One UserError naming the file."""
    from layerswap.checkpoints import Checkpoint

    Checkpoint(str(src)).close()
    if not any((src / f).is_file() for f in TOKENIZER_FILES):
        raise UserError(f"{src}: no tokenizer ({', '.join(TOKENIZER_FILES)}) in checkpoint directory")


def check_finite(model, source: Path) -> None:
    """A NaN/Inf weight makes every score meaningless: refuse it, naming the checkpoint and tensor."""
    import math

    import torch

    with torch.no_grad():
        for name, param in model.state_dict().items():
            if param.is_floating_point() and param.numel():
                lo, hi = torch.aminmax(param.detach().float())
                if not (math.isfinite(float(lo)) and math.isfinite(float(hi))):
                    raise UserError(f"{source}: tensor {name} contains NaN or Inf")


# ---------------------------------------------------------------------------------------------------- task plan
def _languages_on_disk(data_dir: Path, prefix: str) -> list[str]:
    return sorted(p.name[len(prefix) + 1: -len(".jsonl")] for p in data_dir.glob(f"{prefix}_*.jsonl"))


def plan_benchmarks(data_dir: Path, spec: dict[str, dict]) -> list[BenchmarkPlan]:
    if not data_dir.is_dir():
        raise UserError(f"--data-dir {data_dir}: not a directory")
    plans = []
    for name, cfg in spec.items():
        bench = BENCHMARKS[name]
        langs = cfg["languages"] if cfg["languages"] is not None else _languages_on_disk(data_dir, bench.file)
        if not langs:
            raise UserError(f"{data_dir}: no {bench.file}_<lang>.jsonl files for benchmark {name}")
        if len(set(langs)) != len(langs):
            raise UserError(f"--benchmarks-json: {name}.languages lists a language twice: {langs}")
        shots, limit = cfg["shots"], cfg["limit"]
        pool = max(FEWSHOT_POOL, shots) if shots > 0 else 0
        tasks = []
        for lang in langs:
            if bench.directions and lang == "en":
                continue  # FLORES: English is the other side of every direction
            path = data_dir / f"{bench.file}_{lang}.jsonl"
            if not path.is_file():
                raise UserError(f"--benchmarks-json: {name}: language {lang!r} has no data file {path}")
            if pool:
                with path.open(encoding="utf-8") as fh:
                    n_lines = sum(1 for line in fh if line.strip())
                if n_lines <= pool:
                    raise UserError(f"{path}: {n_lines} items, but {shots}-shot {name} keeps the first {pool} as the "
                                    "few-shot pool: nothing left to score")
            if bench.directions:
                for key, template in ((f"en-{lang}", "flores_from_en.yaml"), (f"{lang}-en", "flores_to_en.yaml")):
                    tasks.append(TaskPlan(name, key, f"toy_{name}_{key}", template, path, shots, pool, limit))
            else:
                tasks.append(TaskPlan(name, lang, f"toy_{name}_{lang}", f"{name}.yaml", path, shots, pool, limit))
        if not tasks:
            raise UserError(f"--benchmarks-json: {name}: no language besides en to translate from/to")
        skipped = None
        if bench.unsafe and not cfg["execute_code"]:
            skipped = (f"{name} not run: it executes model-written code, which is off "
                       f"(set execute_code: true for {name} to run it in the sandbox)")
        plan = BenchmarkPlan(name, shots, limit, tasks, skipped, max_new_tokens=cfg.get("max_new_tokens"))
        plan.config_hash = _config_hash(plan)
        plans.append(plan)
    return plans


def _config_hash(plan: BenchmarkPlan) -> str:
    """sha256 of what defines the tasks: template YAMLs, the helper module, the per-task overrides (paths by name)."""
    h = hashlib.sha256()
    files = sorted({t.template for t in plan.tasks}) + ["utils.py"]
    for fname in files:
        h.update(fname.encode() + b"\0" + (TASK_DIR / fname).read_bytes() + b"\0")
    for t in plan.tasks:
        h.update(json.dumps(t.overrides(t.data_file.name), sort_keys=True).encode() + b"\0")
    if plan.max_new_tokens is not None:
        h.update(f"max_new_tokens={plan.max_new_tokens}".encode())
    return h.hexdigest()


def write_task_yamls(plans: list[BenchmarkPlan], include_dir: Path) -> list[str]:
    import yaml

    include_dir.mkdir(parents=True, exist_ok=True)
    names = []
    for plan in plans:
        if plan.skipped:
            continue
        for t in plan.tasks:
            cfg = {"include": str(TASK_DIR / t.template), **t.overrides(str(t.data_file.resolve()))}
            (include_dir / f"{t.name}.yaml").write_text(yaml.safe_dump(cfg, sort_keys=True), encoding="utf-8")
            names.append(t.name)
    return names


# ------------------------------------------------------------------------------------------------ paper task set
@dataclasses.dataclass(frozen=True)
class PaperBenchmark:
    """A paper benchmark as lm-eval tasks: `task` (lm-eval task or group name, from the hf language code) in the
    lm-eval task `folder` (relative to lm_eval/tasks; None: layerswap/tasks/paper), scored by `metric,filter`."""
    metric: str
    filter: str  # lm-eval filter name of the reported metric (the `<metric>,<filter>` result key)
    filter_doc: str
    paper_shots: int  # the paper's setting (Table 5); config shots are used, a difference is logged
    directions: bool = False
    unsafe: bool = False
    group: bool = False  # the task name is an lm-eval group (metric aggregated over its subtasks)
    own_fewshot: bool = True  # the task has a few-shot split (ours for FLORES/MBPP have none: 0-shot only)


PAPER_BENCHMARKS: dict[str, PaperBenchmark] = {
    # 8-shot chain of thought with MGSM's own exemplars in the target language (lm-eval mgsm_native_cot_*: the
    # train split's 8 worked answers, the MGSM paper's main setting); greedy; the final number is the answer.
    "mgsm": PaperBenchmark("exact_match", "flexible-extract",
                           "8-shot native chain of thought (MGSM train exemplars in the target language); greedy "
                           "(em@maj1); flexible-extract: the last number of the generation, regex "
                           "(-?[$0-9.,]{2,})|(-?[0-9]+) group_select -1, take_first; exact_match "
                           "ignore_case+ignore_punctuation", 8),
    "belebele": PaperBenchmark("acc", "none", "none (argmax loglikelihood over the letters A-D; lm-eval's "
                               "first_n few-shot sampler over the test split)", 5),
    "flores": PaperBenchmark("bleu", "none", "none (greedy generation up to newline; sacreBLEU corpus BLEU, "
                             "tokenize ja-mecab for Japanese targets, 13a for the others)", 0,
                             directions=True, own_fewshot=False),
    "mmlu": PaperBenchmark("acc", "none", "none (argmax loglikelihood over A-D; group acc weighted by subtask size)",
                           5, group=True),
    "mbpp": PaperBenchmark("pass_at_1", "execute", "execute: greedy generation run against test_list in the sandbox "
                           "-> passed|failed|timeout", 0, unsafe=True, own_fewshot=False),
}
MBPP_VARIANT = ("English MBPP (google-research-datasets/mbpp, lm-eval's mbpp prompt, 0-shot) for every language key: "
                "no translated MBPP exists in lm-eval 0.4.13; the same number is recorded under each language")


def lm_eval_task_root() -> Path:
    """lm_eval/tasks inside site-packages, found without importing lm_eval (its import costs seconds)."""
    import importlib.util

    spec = importlib.util.find_spec("lm_eval")
    if spec is None or not spec.submodule_search_locations:
        raise UserError("lm-eval is not installed (pip install lm-eval)")
    return Path(list(spec.submodule_search_locations)[0]) / "tasks"


def _hf_language(lang: str) -> dict:
    from layerswap.languages import HF_LANGUAGES

    if lang not in HF_LANGUAGES:
        raise UserError(f"paper task set: unknown language {lang!r} (known: {', '.join(HF_LANGUAGES)})")
    return HF_LANGUAGES[lang]


def paper_task(benchmark: str, key: str, root: Path | None = None) -> tuple[str, str | None, str | None]:
    """(lm-eval task name, task folder relative to lm_eval/tasks or None for ours, reason it is unavailable or None)
    for one benchmark and language (FLORES: direction "en-<lang>" / "<lang>-en")."""
    root = root or lm_eval_task_root()
    if benchmark == "mgsm":
        code = _hf_language(key)["mgsm"]
        name, folder = f"mgsm_native_cot_{code}", "mgsm/native_cot"
        ok = (root / folder / f"{name}.yaml").is_file()
        return name, folder, None if ok else f"MGSM has no {key} split ({name} not in lm-eval)"
    if benchmark == "belebele":
        code = _hf_language(key)["flores"]
        name, folder = f"belebele_{code}", "belebele"
        ok = (root / folder / f"{name}.yaml").is_file()
        return name, folder, None if ok else f"Belebele has no {code} ({name} not in lm-eval)"
    if benchmark == "mmlu":
        code = _hf_language(key)["mgsm"]  # Global-MMLU uses ISO 639-1 codes, as MGSM does
        name, folder = f"global_mmlu_full_{code}", f"global_mmlu/full/{code}"
        ok = (root / folder / f"_{name}.yaml").is_file()
        return name, folder, None if ok else f"Global-MMLU has no {code} ({name} not in lm-eval)"
    if benchmark == "flores":
        src, _, tgt = key.partition("-")
        for lang in (src, tgt):
            _hf_language(lang)
        name = f"layerswap_flores_{key}"
        ok = (PAPER_TASK_DIR / f"flores_{key}.yaml").is_file()
        return name, None, None if ok else f"no FLORES task YAML for {key} in layerswap/tasks/paper"
    if benchmark == "mbpp":
        _hf_language(key)
        return "layerswap_mbpp", None, None
    raise UserError(f"paper task set: unknown benchmark {benchmark!r} (known: {', '.join(PAPER_BENCHMARKS)})")


def plan_paper(spec: dict[str, dict], default_languages: list[str] | None = None) -> list[BenchmarkPlan]:
    """The paper benchmarks of `spec` as lm-eval tasks. An unknown language code is an error (one line); a known
    language that a benchmark lacks is kept as `unavailable` (its score null, the reason in the JSON and the log)."""
    root = lm_eval_task_root()
    plans = []
    for name, cfg in spec.items():
        bench = PAPER_BENCHMARKS[name]
        langs = cfg["languages"] if cfg["languages"] is not None else (default_languages or ["en"])
        if len(set(langs)) != len(langs):
            raise UserError(f"--benchmarks-json: {name}.languages lists a language twice: {langs}")
        shots, limit = cfg["shots"], cfg["limit"]
        if shots and not bench.own_fewshot:
            raise UserError(f"--benchmarks-json: {name}: the paper task set runs {name} 0-shot only (no few-shot "
                            f"split), got shots {shots}")
        if shots != bench.paper_shots:
            log.warning("evaluate: WARNING %s: %d-shot, the paper uses %d-shot", name, shots, bench.paper_shots)
        keys = []
        for lang in langs:
            if bench.directions:
                if lang != "en":
                    keys += [f"en-{lang}", f"{lang}-en"]
            else:
                keys.append(lang)
        if not keys:
            raise UserError(f"--benchmarks-json: {name}: no language besides en to translate from/to")
        tasks = []
        for key in keys:
            task, _, why = paper_task(name, key, root)
            tasks.append(TaskPlan(name, key, task, "", None, shots, 0, limit, why))
        skipped = None
        if bench.unsafe and not cfg["execute_code"]:
            skipped = (f"{name} not run: it executes model-written code, which is off "
                       f"(set execute_code: true for {name} to run it in the sandbox)")
        elif not any(not t.unavailable for t in tasks):
            skipped = f"{name} not run: no requested language is available (" + "; ".join(
                t.unavailable for t in tasks) + ")"
        plan = BenchmarkPlan(name, shots, limit, tasks, skipped, task_set="paper", max_new_tokens=cfg.get("max_new_tokens"),
                             variant=MBPP_VARIANT if name == "mbpp" else None)
        plan.config_hash = _paper_config_hash(plan, root)
        plans.append(plan)
    return plans


def paper_include_paths(plans: list[BenchmarkPlan], root: Path | None = None) -> list[str]:
    """Only the lm-eval task folders the plans need, plus layerswap/tasks/paper (never all ~14,700 tasks)."""
    root = root or lm_eval_task_root()
    folders = {paper_task(p.name, t.key, root)[1] for p in plans if not p.skipped for t in p.run_tasks}
    paths = [str(root / f) for f in sorted(f for f in folders if f)]
    return paths + [str(PAPER_TASK_DIR)]


def _paper_config_hash(plan: BenchmarkPlan, root: Path) -> str:
    """sha256 of the YAMLs (and helper modules) defining the plan's tasks, and the per-task settings."""
    h = hashlib.sha256()
    files: set[Path] = set()
    for t in plan.run_tasks:
        _, folder, _ = paper_task(plan.name, t.key, root)
        base = root / folder if folder else PAPER_TASK_DIR
        if plan.name == "mmlu":
            files |= set(base.glob("*yaml")) | set(base.glob("*.py"))
        elif folder:
            files |= {p for p in base.iterdir() if p.is_file() and (p.suffix in {".yaml", ".py"} or "yaml" in p.name)
                      and (p.stem == t.name or "template" in p.name or p.name in {"cot_yaml", "utils.py"})}
        else:
            files |= {base / ("mbpp.yaml" if plan.name == "mbpp" else f"flores_{t.key}.yaml"),
                      base / "_flores_template_yaml", base / "utils.py"}
    for f in sorted(files):
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    for t in plan.tasks:
        h.update(json.dumps([t.key, t.name, t.shots, t.limit, t.unavailable]).encode() + b"\0")
    if plan.max_new_tokens is not None:
        h.update(f"max_new_tokens={plan.max_new_tokens}".encode())
    return h.hexdigest()


def _paper_artefacts(benchmark: str, key: str) -> list[dict]:
    """The hub datasets (one dict per split) that one paper task reads; mirrors the task YAMLs."""
    if benchmark == "mgsm":
        code = _hf_language(key)["mgsm"]
        return [{"hub_id": "juletxara/mgsm", "subset": code, "split": s, "columns": ["question", "answer_number"]}
                for s in ("train", "test")]
    if benchmark == "belebele":
        return [{"hub_id": "facebook/belebele", "subset": _hf_language(key)["flores"], "split": "test",
                 "columns": ["flores_passage", "question", "mc_answer1", "mc_answer4", "correct_answer_num"]}]
    if benchmark == "mmlu":
        code = _hf_language(key)["mgsm"]
        return [{"hub_id": "CohereForAI/Global-MMLU", "subset": code, "split": s,
                 "columns": ["question", "option_a", "option_d", "answer", "subject"]} for s in ("test", "dev")]
    if benchmark == "flores":
        return [{"hub_id": "openlanguagedata/flores_plus", "subset": _hf_language(lang)["flores"], "split": "devtest",
                 "columns": ["id", "text"]} for lang in key.split("-")]
    if benchmark == "mbpp":
        return [{"hub_id": "google-research-datasets/mbpp", "subset": "full", "split": "test",
                 "columns": ["task_id", "text", "test_list", "test_setup_code"]}]
    raise UserError(f"paper task set: unknown benchmark {benchmark!r}")


def hub_artefacts(config: dict) -> list[dict]:
    """Every evaluation dataset (hub_id, subset, split, purpose) the paper task set can read for `config`, for
    `layerswap prestage`; none for the toy world. Languages: each task's own list, else English + the targets; MGSM
    also `mgsm_languages`. Languages a benchmark lacks are left out (the evaluation reports them unavailable)."""
    if config.get("world") == "toy":
        return []
    tasks = (config.get("evaluation") or {}).get("tasks") or {}
    targets = ["en"] + [lang for lang in config.get("languages") or [] if lang != "en"]
    root = lm_eval_task_root()
    out, seen = [], set()
    for name, cfg in tasks.items():
        if name not in PAPER_BENCHMARKS:
            continue
        langs = list((cfg or {}).get("languages") or targets)
        langs += [lang for lang in targets + (config.get("mgsm_languages") or [] if name == "mgsm" else [])
                  if lang not in langs]
        for lang in langs:
            keys = ([f"en-{lang}", f"{lang}-en"] if lang != "en" else []) if PAPER_BENCHMARKS[name].directions \
                else [lang]
            for key in keys:
                if paper_task(name, key, root)[2]:
                    continue
                for item in _paper_artefacts(name, key):
                    ident = (item["hub_id"], item["subset"], item["split"])
                    if ident not in seen:
                        seen.add(ident)
                        out.append({**item, "purpose": f"evaluation: {name}"})
    return out


# ------------------------------------------------------------------------------------------------------- models
def _arch_key(model_dir: Path) -> str:
    """Models with equal keys can share one instance: config (minus bookkeeping) and tokenizer files."""
    cfg = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    for k in ("_name_or_path", "transformers_version", "torch_dtype", "dtype", "architectures_version"):
        cfg.pop(k, None)
    h = hashlib.sha256(json.dumps(cfg, sort_keys=True).encode())
    for fname in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json",
                  "tokenizer.model"):
        p = model_dir / fname
        if p.is_file():
            h.update(fname.encode() + p.read_bytes())
    return h.hexdigest()


def _read_checkpoint(model_dir: Path) -> dict:
    from safetensors.torch import load_file

    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        raise UserError(f"{model_dir}: no *.safetensors weights")
    state = {}
    for f in files:
        state.update(load_file(str(f)))
    return state


class ModelHost:
    """Holds one model instance + HFLM; swaps weights in for each model of the job."""

    def __init__(self, batch_size: int, device: str, dtype: str, quiet: bool = True, merges=None):
        self.batch_size, self.device, self.dtype, self.quiet = batch_size, device, dtype, quiet
        self.merges = merges  # the layerswap.merge.engine module (evaluate-merges), or None: checkpoints only
        self.key: str | None = None
        self.model = None
        self.lm = None
        self.merge_cache = None  # layerswap.merge.engine.ExpertCache: experts opened once, shared by the job's recipes
        self.phase: dict[str, float] = {}  # seconds of the last load: state_dict, build, load_state_dict

    def _build(self, model_dir: Path) -> None:
        import torch
        from lm_eval.models.huggingface import HFLM
        from transformers import AutoModelForCausalLM, AutoTokenizer

        dtype = getattr(torch, self.dtype, None)
        if not isinstance(dtype, torch.dtype):
            raise UserError(f"--dtype {self.dtype}: not a torch dtype")
        device = self.device
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.model = self.lm = None
        model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=dtype)
        model.to(device).eval()
        tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
        self.model = model
        self.lm = (_quiet_hflm() if self.quiet else HFLM)(pretrained=model, tokenizer=tokenizer,
                                                          batch_size=self.batch_size)

    def load(self, source: Path):
        """Make `source` (checkpoint dir or recipe file) the weights of the held model; returns the HFLM."""
        t0 = time.perf_counter()
        self.phase = {}
        state = None
        if source.is_dir():
            model_dir = source
        else:
            merge = self.merges
            recipe = merge.load_recipe(str(source))
            if self.merge_cache is None:
                self.merge_cache = merge.ExpertCache()
            model_dir = Path(merge.model_dir_of(recipe))
            check_model_dir(model_dir)
            state = merge.build_state_dict(recipe, self.merge_cache)
            self.phase["state_dict"] = time.perf_counter() - t0
        key = _arch_key(model_dir)
        if key != self.key:
            t1 = time.perf_counter()
            self._build(model_dir)
            self.key = key
            self.phase["build"] = time.perf_counter() - t1
            if state is None:
                check_finite(self.model, source)
                return self.lm  # from_pretrained already loaded this checkpoint
        t2 = time.perf_counter()
        checked = state is not None  # a merge's inputs were checked for NaN/Inf as they were read
        if state is None:
            state = _read_checkpoint(model_dir)
        self._load_state(state, source)
        if not checked:
            check_finite(self.model, source)
        self.phase["load_state_dict"] = time.perf_counter() - t2
        return self.lm

    def _load_state(self, state: dict, source: Path) -> None:
        import torch

        with torch.no_grad():
            result = self.model.load_state_dict(state, strict=False)
        if result.unexpected_keys:
            raise UserError(f"{source}: weights not in the model: {sorted(result.unexpected_keys)[:5]}")
        # a missing key is fine only when it is tied to a loaded one (lm_head.weight tied to embed_tokens.weight)
        params = dict(self.model.named_parameters(remove_duplicate=False))
        loaded = {params[k].data_ptr() for k in state if k in params}
        missing = [k for k in result.missing_keys if k not in params or params[k].data_ptr() not in loaded]
        if missing:
            raise UserError(f"{source}: weights missing for {sorted(missing)[:5]}")

    def release(self) -> None:
        """After a model's evaluation: nothing (the HF host keeps its instance for the next model's weights)."""

    def close(self) -> None:
        if self.merge_cache is not None:
            self.merge_cache.close()


def require_vllm() -> None:
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        raise UserError("--backend vllm: the vllm package is not installed (pip install vllm, on a GPU machine); "
                        "or use --backend hf")


class VLLMHost:
    """One vLLM engine per model (`lm_eval.models.vllm_causallms.VLLM`). vLLM loads from disk only, so a merge recipe
    is first written with `layerswap.merge.engine.write_merged` to a temporary dir (removed after the model's evaluation)."""

    def __init__(self, batch_size: int, device: str, dtype: str, tmp_dir: Path, seed: int = 0, merges=None):
        self.batch_size, self.device, self.dtype, self.tmp_dir, self.seed = batch_size, device, dtype, tmp_dir, seed
        self.merges = merges
        self.lm = None
        self.written: Path | None = None
        self.phase: dict[str, float] = {}

    def load(self, source: Path):
        require_vllm()
        from lm_eval.models.vllm_causallms import VLLM

        t0 = time.perf_counter()
        self.phase = {}
        model_dir = source
        if not source.is_dir():
            merge = self.merges
            recipe = merge.load_recipe(str(source))
            self.tmp_dir.mkdir(parents=True, exist_ok=True)
            model_dir = Path(tempfile.mkdtemp(prefix="merged-", dir=self.tmp_dir)) / "model"
            merge.write_merged(recipe, str(model_dir))
            self.written = model_dir
            self.phase["write_merged"] = time.perf_counter() - t0
        t1 = time.perf_counter()
        kwargs = {"pretrained": str(model_dir), "dtype": self.dtype, "batch_size": self.batch_size, "seed": self.seed}
        if self.device not in ("auto", "cuda"):
            kwargs["device"] = self.device
        self.lm = VLLM(**kwargs)
        self.phase["build"] = time.perf_counter() - t1
        return self.lm

    def release(self) -> None:
        """Free the engine (and the merged checkpoint on disk) before the next model."""
        import gc
        import shutil

        self.lm = None
        gc.collect()
        if self.written is not None:
            shutil.rmtree(self.written.parent, ignore_errors=True)
            self.written = None

    def close(self) -> None:
        self.release()


def _task_leaves(task_dict: dict, name: str) -> list[str]:
    """The loaded leaf tasks of `name` (itself, or a group's subtasks, recursively) in an lm-eval task dict."""
    if name in task_dict["tasks"]:
        return [name]
    return [leaf for child in (task_dict.get("group_map") or {}).get(name, [])
            for leaf in _task_leaves(task_dict, child)]


def _set_task_settings(task_dict: dict, plans: list[BenchmarkPlan]) -> None:
    """Set each loaded leaf task's num_fewshot to its benchmark's shots (paper set; groups: every subtask) and, where
    the benchmark sets max_new_tokens, the generation budget (max_gen_toks) of its generate_until tasks."""
    for plan in plans:
        if plan.skipped:
            continue
        for t in plan.run_tasks:
            leaves = _task_leaves(task_dict, t.name)
            for leaf in leaves:
                task = task_dict["tasks"][leaf]
                if plan.task_set == "paper":
                    task.set_config(key="num_fewshot", value=t.shots)
                if plan.max_new_tokens is not None and task.config.output_type == "generate_until":
                    kwargs = dict(task.config.generation_kwargs or {}, max_gen_toks=plan.max_new_tokens)
                    task.set_config(key="generation_kwargs", value=kwargs)
            plan.settings[t.key] = task_settings(task_dict["tasks"][leaves[0]])


def task_settings(task) -> dict:
    """The settings a loaded lm-eval task runs with, as recorded in each evaluation file: shots, the generation
    (budget, sampling, stop strings) of generate_until tasks, and the sacreBLEU tokenizer of a BLEU aggregation."""
    cfg = task.config
    out = {"num_fewshot": cfg.num_fewshot, "output_type": cfg.output_type}
    if cfg.output_type == "generate_until":
        gen = cfg.generation_kwargs or {}
        out["generation"] = {"max_gen_toks": gen.get("max_gen_toks", 256),  # lm-eval's HFLM/vLLM default
                             "do_sample": bool(gen.get("do_sample", False)), "until": gen.get("until")}
    for metric in cfg.metric_list or []:
        tokenize = getattr(metric.get("aggregation"), "sacrebleu_tokenize", None)
        if tokenize:
            out["bleu_tokenize"] = tokenize
    return out


def _paper_samples(task_dict, plans: list[BenchmarkPlan]) -> dict[str, list[int]] | None:
    """Per-task `limit` of the paper set as lm-eval `samples` (the first `limit` items of every leaf task)."""
    if task_dict is None or not any(p.task_set == "paper" and p.limit for p in plans):
        return None
    out = {}
    for plan in plans:
        if plan.skipped or not plan.limit:
            continue
        for t in plan.run_tasks:
            for leaf in _task_leaves(task_dict, t.name):
                task = task_dict["tasks"][leaf]
                out[leaf] = list(range(min(plan.limit, len(task.eval_docs))))
    return out or None



def _quiet_hflm():
    """HFLM without its per-request-type progress bars (lm-eval passes disable_tqdm=False explicitly)."""
    from lm_eval.models.huggingface import HFLM

    class QuietHFLM(HFLM):
        def loglikelihood(self, requests, disable_tqdm: bool = True):
            return super().loglikelihood(requests, disable_tqdm=True)

        def generate_until(self, requests, disable_tqdm: bool = True):
            return super().generate_until(requests, disable_tqdm=True)

    return QuietHFLM


def check_truncation(lm, plans: list[BenchmarkPlan], results: dict) -> None:
    """HFLM cuts prompts longer than the model's context from the LEFT without a word; say so (once per model
    architecture: prompts are the same for every model)."""
    tok, max_len = lm.tokenizer, lm.max_length
    for plan in plans:
        if plan.skipped:
            continue
        for t in plan.run_tasks:
            over = 0
            for s in (s for leaf in _leaves(results, t.name) for s in results["samples"][leaf]):
                args = s["arguments"]
                if isinstance(args[0][1], str):
                    n = max(len(tok(a[0] + a[1]).input_ids) for a in args)
                else:
                    n = len(tok(args[0][0]).input_ids) + int(args[0][1].get("max_gen_toks", 256))
                over += n > max_len
            if over:
                log.warning("evaluate: WARNING %s: %d prompts (+ generation budget) exceed the model's %d tokens; "
                            "lm-eval cuts them from the left", t.name, over, max_len)


# ------------------------------------------------------------------------------------------------------ results
def _number(x):
    return None if x is None else float(x)


def _leaves(results: dict, name: str) -> list[str]:
    """The leaf tasks whose samples make up `name` (itself, or a group's subtasks: global_mmlu_full_<xx>)."""
    if name in results.get("samples", {}):
        return [name]
    out = []
    for child in results.get("group_subtasks", {}).get(name, []):
        out += _leaves(results, child)
    return out


def _n_samples(results: dict, name: str) -> int:
    if name in results["n-samples"]:
        return int(results["n-samples"][name]["effective"])
    return sum(int(results["n-samples"][leaf]["effective"]) for leaf in _leaves(results, name))


def _sample_record(plan: BenchmarkPlan, task: TaskPlan, s: dict, leaf: str | None = None) -> dict:
    bench = plan.bench
    args = s["arguments"]
    rec = {"key": task.key, "task": leaf or task.name, "doc_id": s["doc_id"], "prompt": args[0][0]}
    if isinstance(args[0][1], str):  # loglikelihood requests: (context, continuation) per choice
        lls = [float(r[0]) for r in s["filtered_resps"]]
        best = max(range(len(lls)), key=lambda i: lls[i])
        rec.update({"choices": [a[1] for a in args], "choice_loglikelihoods": lls, "extracted": best,
                    "target": s["target"], "correct": bool(s.get(bench.metric))})
    else:
        rec.update({"generation": s["resps"][0][0], "extracted": s["filtered_resps"][0],
                    "target": str(s["target"])})
        rec["correct"] = None if bench.metric == "bleu" else bool(s.get(bench.metric))

    return rec


def resolve_dtype(dtype: str, device: str, torch) -> str:
    """`auto`: bfloat16 where the model runs on a GPU (the precision SFT trains in), float32 on a CPU."""
    if dtype != "auto":
        return dtype
    on_gpu = device.startswith("cuda") or (device == "auto" and torch.cuda.is_available())
    return "bfloat16" if on_gpu else "float32"


def write_outputs(out_dir: Path, model_id: str, plan: BenchmarkPlan, results: dict | None, seed: int,
                  version: str, dtype: str | None = None) -> None:
    bench = plan.bench
    scores, n, samples = {}, {}, []
    if results is not None:
        logged = set()
        for t in plan.tasks:
            if t.unavailable:
                scores[t.key], n[t.key] = None, 0
                continue
            value = results["results"][t.name].get(f"{bench.metric},{bench.filter}")
            scores[t.key] = _number(value)
            n[t.key] = _n_samples(results, t.name)
            if t.name not in logged:  # paper MBPP: one English task recorded under several language keys
                logged.add(t.name)
                samples += [_sample_record(plan, t, s, leaf) for leaf in _leaves(results, t.name)
                            for s in results["samples"][leaf]
                            if plan.task_set == "toy" or s.get("filter") in (None, bench.filter)]
    doc = {
        "model_id": model_id, "benchmark": plan.name, "metric": bench.metric, "scores": scores, "n": n,
        "lm_eval_tasks": {t.key: t.name for t in plan.tasks}, "shots": plan.shots, "filter": bench.filter_doc,
        "seed": seed, "limit": plan.limit, "lm_eval_version": version, "task_config_hash": plan.config_hash,
        "skipped": plan.skipped,
    }
    if plan.max_new_tokens is not None:
        doc["max_new_tokens"] = plan.max_new_tokens
    if dtype is not None and results is not None:
        doc["dtype"] = dtype  # of the evaluated weights
    if plan.task_set == "paper":
        doc["task_set"] = "paper"
        doc["lm_eval"] = {t.key: ({"task": t.name, "shots": t.shots, "filter": bench.filter, "metric": bench.metric,
                                   "result_key": f"{bench.metric},{bench.filter}", "group": bench.group,
                                   **plan.settings.get(t.key, {})}
                                  if not t.unavailable else {"unavailable": t.unavailable}) for t in plan.tasks}
        if plan.variant:
            doc["variant"] = plan.variant
    base = out_dir / model_id
    write_text_atomic(base / f"{plan.name}.samples.jsonl",
                      "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in samples))
    write_text_atomic(base / f"{plan.name}.json", json.dumps(doc, indent=2, ensure_ascii=False) + "\n")


# ---------------------------------------------------------------------------------------------------------- run
def run(args: argparse.Namespace, merges=None) -> dict:
    """Evaluate every model on every benchmark; returns phase timings in seconds (for scripts/bench_evaluate.py).
    `merges`: the layerswap.merge.engine module, given by `layerswap evaluate-merges` so recipes can be models."""
    t0 = time.perf_counter()
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    log.setLevel(logging.INFO)
    spec = parse_benchmarks(args.benchmarks_json)
    models = parse_models(args.model, recipes=merges is not None)
    task_set, backend = getattr(args, "task_set", "toy"), getattr(args, "backend", "hf")
    if backend == "vllm":
        require_vllm()
    if task_set == "paper":
        plans = plan_paper(spec)
    else:
        if args.data_dir is None:
            raise UserError("--data-dir is required with --task-set toy")
        plans = plan_benchmarks(Path(args.data_dir), spec)
    if args.batch_size < 1 or args.threads < 1:
        raise UserError("--batch-size and --threads must be >= 1")
    for plan in plans:
        if plan.skipped:
            log.info("evaluate: SKIPPED %s: %s", plan.name, plan.skipped)
        for t in plan.tasks:
            if t.unavailable and not plan.skipped:
                log.info("evaluate: UNAVAILABLE %s %s: %s", plan.name, t.key, t.unavailable)
    unsafe = any(p.bench.unsafe and not p.skipped for p in plans)

    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["HF_DATASETS_OFFLINE"] = "1"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if not args.verbose:
        os.environ.setdefault("TQDM_DISABLE", "1")  # lm-eval's per-task progress bars
    timings = {"imports": 0.0, "tasks": 0.0, "model_load": 0.0, "evaluate": 0.0, "write": 0.0, "per_model": []}
    if all(p.skipped for p in plans):  # nothing to run (e.g. MBPP without execute_code): no model, no lm-eval import
        from importlib.metadata import version

        for model_id, _ in models:
            for plan in plans:
                write_outputs(Path(args.out_dir), model_id, plan, None, args.seed, version("lm_eval"))
            log.info("evaluate: %s: %s", model_id, ", ".join(f"{p.name}=skipped" for p in plans))
        if args.index:
            write_index(args.index, args.run, models, plans, Path(args.out_dir))
        timings["total"] = time.perf_counter() - t0
        return timings
    with tempfile.TemporaryDirectory(prefix="layerswap-eval-") as tmp:
        os.environ["LM_HARNESS_CACHE_PATH"] = str(Path(tmp) / "cache")
        import numpy as np
        import torch

        torch.set_num_threads(args.threads)
        args.dtype = resolve_dtype(args.dtype, args.device, torch)
        import lm_eval
        import lm_eval.caching.cache as lm_cache
        from lm_eval.evaluator import evaluate
        from lm_eval.models.huggingface import HFLM  # noqa: F401  (imported here so its cost counts as imports)
        from lm_eval.tasks import TaskManager
        from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: F401

        lm_cache.PATH = str(Path(tmp) / "cache")  # the module reads the variable once, at its first import
        _cache_jinja_templates()
        if not args.verbose:
            logging.getLogger("lm_eval").setLevel(logging.ERROR)
        version = lm_eval.__version__
        t1 = time.perf_counter()
        timings["imports"] = t1 - t0

        task_dict = None
        if task_set == "paper":
            names = sorted({t.name for p in plans if not p.skipped for t in p.run_tasks})
            if names:
                tm = TaskManager(include_path=paper_include_paths(plans), include_defaults=False)
                task_dict = tm.load(names)
                _set_task_settings(task_dict, plans)
        else:
            names = write_task_yamls(plans, Path(tmp) / "tasks")
            if names:
                tm = TaskManager(include_path=str(Path(tmp) / "tasks"), include_defaults=False)
                task_dict = tm.load(names)
                _set_task_settings(task_dict, plans)
        t2 = time.perf_counter()
        timings["tasks"] = t2 - t1
        log.info("evaluate: %d lm-eval tasks loaded in %.1f s (imports %.1f s)", len(names), t2 - t1, t1 - t0)
        if unsafe:
            from layerswap.evaluation.sandbox import network_isolation

            log.info("evaluate: model-written code runs in a subprocess sandbox; network isolation: %s",
                     network_isolation())

        if backend == "vllm":
            host = VLLMHost(args.batch_size, args.device, args.dtype, Path(tmp) / "models", seed=args.seed,
                            merges=merges)
        else:
            host = ModelHost(args.batch_size, args.device, args.dtype, quiet=not args.verbose, merges=merges)
        try:
            _evaluate_models(args, models, plans, task_dict, host, unsafe, version, timings, evaluate, np, torch)
        finally:
            host.close()
    if args.index:
        write_index(args.index, args.run, models, plans, Path(args.out_dir))
    timings["total"] = time.perf_counter() - t0
    timings["cpu_total"] = time.process_time()
    return timings


def write_index(path: Path, run: str | None, models: list[tuple[str, Path]], plans: list[BenchmarkPlan],
                out_dir: Path) -> None:
    """One file naming every (model, benchmark) result of this job, for rules whose outputs vary per run."""
    from layerswap.fingerprint import file_sha256

    files = {mid: {p.name: str(out_dir / mid / f"{p.name}.json") for p in plans} for mid, _ in models}
    index = {
        "run": run,
        "checkpoints": [{"model_id": mid, "name": mid.rsplit("/", 1)[-1], "path": str(src)} for mid, src in models],
        "files": files,
        "sha256": {f: file_sha256(Path(f)) for by_bench in files.values() for f in by_bench.values()},
    }
    write_json_atomic(path, index)


def _evaluate_models(args, models, plans, task_dict, host, unsafe, version, timings, evaluate, np, torch) -> None:
    """Per model: swap its weights in, re-seed, one lm-eval `evaluate` over all tasks, write one file per benchmark."""
    for model_id, source in models:
        ta, cpu_a = time.perf_counter(), time.process_time()
        results = None
        if task_dict is not None:
            lm = host.load(source)
            tb = time.perf_counter()
            for task in task_dict["tasks"].values():
                task.set_fewshot_seed(seed=args.seed)
            random.seed(args.seed)
            np.random.seed(args.seed)
            torch.manual_seed(args.seed)
            results = evaluate(lm, task_dict, cache_requests=True, bootstrap_iters=0, log_samples=True,
                               confirm_run_unsafe_code=unsafe, samples=_paper_samples(task_dict, plans))
            if "build" in host.phase and isinstance(host, ModelHost):  # first model of an architecture
                check_truncation(lm, plans, results)
            host.release()
        else:
            tb = time.perf_counter()
        tc = time.perf_counter()
        for plan in plans:
            write_outputs(Path(args.out_dir), model_id, plan, None if plan.skipped else results, args.seed,
                          version, args.dtype)
        td = time.perf_counter()
        timings["model_load"] += tb - ta
        timings["evaluate"] += tc - tb
        timings["write"] += td - tc
        timings["per_model"].append({"model_id": model_id, "load": tb - ta, "evaluate": tc - tb,
                                     "cpu": time.process_time() - cpu_a, "load_phases": dict(host.phase)})
        summary = ", ".join(
            f"{p.name}={'skipped' if p.skipped else _summary(results, p)}" for p in plans)
        log.info("evaluate: %s: load %.2f s, evaluate %.2f s: %s", model_id, tb - ta, tc - tb, summary)


def _cache_jinja_templates() -> None:
    """lm-eval compiles a Jinja template on every `apply_template` call (~0.3 ms; thousands per model for targets and
    choices); compile each distinct template once. Same environment, same template: identical strings."""
    import functools

    import lm_eval.utils as lm_utils

    if getattr(lm_utils.apply_template, "_layerswap_cached", False) or not hasattr(lm_utils, "env"):
        return
    compiled = functools.lru_cache(maxsize=1024)(lm_utils.env.from_string)

    def apply_template(template: str, doc: dict) -> str:
        return compiled(template).render(**doc)

    apply_template._layerswap_cached = True
    lm_utils.apply_template = apply_template


def _summary(results: dict, plan: BenchmarkPlan) -> str:
    bench = plan.bench
    vals = [results["results"][t.name].get(f"{bench.metric},{bench.filter}") for t in plan.run_tasks]
    vals = [float(v) for v in vals if v is not None]
    return f"{sum(vals) / len(vals):.3g}" if vals else "n/a"
