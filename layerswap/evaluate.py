"""`layerswap evaluate`: lm-eval on checkpoints and in-memory merges; one JSON per (model, benchmark).

One process evaluates many models (the dominant cost of the workflow is per process, not per model):
- the toy task YAMLs (`layerswap/tasks/toy/<benchmark>.yaml`) are templates; for this job one small YAML per
  (benchmark, language or FLORES direction) is written into a temporary include dir that `include:`s the template and
  sets the task name, the data file, the shots and the limit. lm-eval indexes only that dir
  (`TaskManager(include_path=..., include_defaults=False)`, never its ~14,700 built-in tasks) and builds every task
  once (`TaskManager.load`);
- ONE `HFLM` wraps one model instance; each further model only swaps the weights in with `load_state_dict` (a
  checkpoint's safetensors, or the state dict that `layerswap.merge.build_state_dict(recipe, cache)` builds in
  memory). A new instance (and HFLM) is built only when the architecture config or the tokenizer changes;
- per model, one `lm_eval.evaluator.evaluate(lm, task_dict, cache_requests=True, bootstrap_iters=0,
  log_samples=True)` over all tasks, after re-seeding each task's few-shot sampler (`task.set_fewshot_seed(seed)`),
  so prompts are identical for every model; the request cache lives in the job's temp dir.

Data: `<data-dir>/<file>_<lang>.jsonl` (schemas in docs/ARCHITECTURE.md). When a benchmark runs with shots > 0, the
first `max(FEWSHOT_POOL, shots)` lines of each file are its few-shot pool (lm-eval `fewshot_split`) and are never
scored; with 0 shots every line is scored. `limit` keeps the first `limit` scored items.

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

from layerswap.errors import UserError

log = logging.getLogger("layerswap.evaluate")

TASK_DIR = Path(__file__).resolve().parent / "tasks" / "toy"
FEWSHOT_POOL = 8
LAST_INTEGER = "(-?[0-9]+)"  # the regex of mgsm.yaml's last-integer filter (group_select: -1)
BENCHMARK_KEYS = {"shots", "languages", "limit", "execute_code"}


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
    template: str  # template file name in TASK_DIR
    data_file: Path
    shots: int
    pool: int
    limit: int | None

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


# ----------------------------------------------------------------------------------------------------- arguments
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", required=True, type=Path, help="folder with <benchmark>_<lang>.jsonl files")
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
    parser.add_argument("--dtype", default="float32", help="dtype of the evaluated weights (float32, bfloat16, ...)")
    parser.add_argument("--verbose", action="store_true", help="show lm-eval's own log lines")
    parser.add_argument("--index", type=Path,
                        help="also write this JSON index of the evaluated models and their result files")
    parser.add_argument("--run", help="SFT run name recorded in the index (checkpoint evaluations)")


def parse_benchmarks(text: str) -> dict[str, dict]:
    try:
        spec = json.loads(text)
    except json.JSONDecodeError as err:
        raise UserError(f"--benchmarks-json: not valid JSON ({err})") from None
    if not isinstance(spec, dict) or not spec:
        raise UserError("--benchmarks-json: expected a non-empty object {benchmark: {shots, ...}}")
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
        out[name] = {"shots": shots, "limit": limit, "languages": langs, "execute_code": execute}
    return out


def parse_models(items: list[str]) -> list[tuple[str, Path]]:
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
    from layerswap.merge.io import Checkpoint

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
        plan = BenchmarkPlan(name, shots, limit, tasks, skipped)
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


# ------------------------------------------------------------------------------------------------------- models
def _read_recipe(path: Path) -> dict:
    try:
        text = path.read_text(encoding="utf-8")
        if path.suffix.lower() == ".json":
            recipe = json.loads(text)
        else:
            import yaml

            recipe = yaml.safe_load(text)
    except (OSError, ValueError) as err:
        raise UserError(f"{path}: cannot read merge recipe ({err})") from None
    if not isinstance(recipe, dict):
        raise UserError(f"{path}: a merge recipe must be a JSON object")
    return recipe


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

    def __init__(self, batch_size: int, device: str, dtype: str, quiet: bool = True):
        self.batch_size, self.device, self.dtype, self.quiet = batch_size, device, dtype, quiet
        self.key: str | None = None
        self.model = None
        self.lm = None
        self.merge_cache = None  # layerswap.merge.ExpertCache: experts opened once, shared by the job's recipes
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
            from layerswap import merge

            recipe = merge.load_recipe(str(source)) if hasattr(merge, "load_recipe") else _read_recipe(source)
            if self.merge_cache is None:
                self.merge_cache = merge.ExpertCache() if hasattr(merge, "ExpertCache") else {}
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

    def close(self) -> None:
        if hasattr(self.merge_cache, "close"):
            self.merge_cache.close()

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
        for t in plan.tasks:
            over = 0
            for s in results["samples"][t.name]:
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
def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _number(x):
    return None if x is None else float(x)


def _sample_record(plan: BenchmarkPlan, task: TaskPlan, s: dict) -> dict:
    bench = BENCHMARKS[plan.name]
    args = s["arguments"]
    rec = {"key": task.key, "task": task.name, "doc_id": s["doc_id"], "prompt": args[0][0]}
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


def write_outputs(out_dir: Path, model_id: str, plan: BenchmarkPlan, results: dict | None, seed: int,
                  version: str) -> None:
    bench = BENCHMARKS[plan.name]
    scores, n, samples = {}, {}, []
    if results is not None:
        for t in plan.tasks:
            value = results["results"][t.name].get(f"{bench.metric},{bench.filter}")
            scores[t.key] = _number(value)
            n[t.key] = int(results["n-samples"][t.name]["effective"])
            samples += [_sample_record(plan, t, s) for s in results["samples"][t.name]]
    doc = {
        "model_id": model_id, "benchmark": plan.name, "metric": bench.metric, "scores": scores, "n": n,
        "lm_eval_tasks": {t.key: t.name for t in plan.tasks}, "shots": plan.shots, "filter": bench.filter_doc,
        "seed": seed, "limit": plan.limit, "lm_eval_version": version, "task_config_hash": plan.config_hash,
        "skipped": plan.skipped,
    }
    base = out_dir / model_id
    _atomic_write(base / f"{plan.name}.samples.jsonl",
                  "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in samples))
    _atomic_write(base / f"{plan.name}.json", json.dumps(doc, indent=2, ensure_ascii=False) + "\n")


# ---------------------------------------------------------------------------------------------------------- run
def run(args: argparse.Namespace) -> dict:
    """Evaluate every model on every benchmark; returns phase timings in seconds (for scripts/bench_evaluate.py)."""
    t0 = time.perf_counter()
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    log.setLevel(logging.INFO)
    spec = parse_benchmarks(args.benchmarks_json)
    models = parse_models(args.model)
    plans = plan_benchmarks(Path(args.data_dir), spec)
    if args.batch_size < 1 or args.threads < 1:
        raise UserError("--batch-size and --threads must be >= 1")
    for plan in plans:
        if plan.skipped:
            log.info("evaluate: SKIPPED %s: %s", plan.name, plan.skipped)
    unsafe = any(BENCHMARKS[p.name].unsafe and not p.skipped for p in plans)

    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["HF_DATASETS_OFFLINE"] = "1"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if not args.verbose:
        os.environ.setdefault("TQDM_DISABLE", "1")  # lm-eval's per-task progress bars
    timings = {"imports": 0.0, "tasks": 0.0, "model_load": 0.0, "evaluate": 0.0, "write": 0.0, "per_model": []}
    with tempfile.TemporaryDirectory(prefix="layerswap-eval-") as tmp:
        os.environ["LM_HARNESS_CACHE_PATH"] = str(Path(tmp) / "cache")
        import numpy as np
        import torch

        torch.set_num_threads(args.threads)
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

        names = write_task_yamls(plans, Path(tmp) / "tasks")
        task_dict = None
        if names:
            tm = TaskManager(include_path=str(Path(tmp) / "tasks"), include_defaults=False)
            task_dict = tm.load(names)
        t2 = time.perf_counter()
        timings["tasks"] = t2 - t1
        log.info("evaluate: %d lm-eval tasks loaded in %.1f s (imports %.1f s)", len(names), t2 - t1, t1 - t0)
        if unsafe:
            from layerswap.evaluation.sandbox import network_isolation

            log.info("evaluate: model-written code runs in a subprocess sandbox; network isolation: %s",
                     network_isolation())

        host = ModelHost(args.batch_size, args.device, args.dtype, quiet=not args.verbose)
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
    from layerswap.training import file_sha256

    files = {mid: {p.name: str(out_dir / mid / f"{p.name}.json") for p in plans} for mid, _ in models}
    index = {
        "run": run,
        "checkpoints": [{"model_id": mid, "name": mid.rsplit("/", 1)[-1], "path": str(src)} for mid, src in models],
        "files": files,
        "sha256": {f: file_sha256(Path(f)) for by_bench in files.values() for f in by_bench.values()},
    }
    _atomic_write(path, json.dumps(index, indent=1, sort_keys=True) + "\n")


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
                               confirm_run_unsafe_code=unsafe)
            if "build" in host.phase:  # first model of an architecture
                check_truncation(lm, plans, results)
        else:
            tb = time.perf_counter()
        tc = time.perf_counter()
        for plan in plans:
            write_outputs(Path(args.out_dir), model_id, plan, None if plan.skipped else results, args.seed,
                          version)
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
    bench = BENCHMARKS[plan.name]
    vals = [results["results"][t.name].get(f"{bench.metric},{bench.filter}") for t in plan.tasks]
    vals = [float(v) for v in vals if v is not None]
    return f"{sum(vals) / len(vals):.3g}" if vals else "n/a"
