"""`layerswap evaluate`: lm-eval on checkpoints (and, through `layerswap evaluate-merges`, on merges built in memory);
one JSON per (model, benchmark).

One process evaluates many models (the dominant cost of the workflow is per process, not per model):
- the toy task YAMLs (`layerswap/tasks/toy/<benchmark>.yaml`) are templates; for this job one small YAML per
  (benchmark, language or FLORES direction) is written into a temporary include dir that `include:`s the template and
  sets the task name, the data file, the shots and the limit. lm-eval indexes only that dir
  (`TaskManager(include_path=..., include_defaults=False)`, never its ~14,700 built-in tasks) and builds every task
  once (`TaskManager.load`);
- ONE `HFLM` wraps one model instance; each further model only swaps the weights in with `load_state_dict` (a
  checkpoint's safetensors, or the state dict that the job's `layerswap.merge.merger.Merger` builds in memory from a
  `layerswap.merge.recipes.Recipe`, read and validated once by `layerswap evaluate-merges`). A new instance (and
  HFLM) is built only when the architecture config or the tokenizer changes;
- per model, one `lm_eval.evaluator.evaluate(lm, task_dict, cache_requests=True, bootstrap_iters=0,
  log_samples=True)` over all tasks, after re-seeding each task's few-shot sampler (`task.set_fewshot_seed(seed)`),
  so prompts are identical for every model; the request cache lives in the job's temp dir.

Data: `<data-dir>/<file>_<lang>.jsonl` (schemas in docs/ARCHITECTURE.md). When a benchmark runs with shots > 0, the
first `max(FEWSHOT_POOL, shots)` lines of each file are its few-shot pool (lm-eval `fewshot_split`) and are never
scored; with 0 shots every line is scored. `limit` keeps the first `limit` scored items.

Task sets (`--task-set`, from the config's `world` through the rules' params): `toy` (above) or `paper`: the paper's
benchmarks as lm-eval tasks over pre-staged hub datasets (`PAPER_TASKS`, `plan_paper`; lm-eval indexes only the
task folders these need plus `layerswap/tasks/paper/`), whose datasets `layerswap prestage` fetches
(`layerswap.workflow.prestage.evaluation_artefacts`).
Backends (`--backend`, or a benchmark's own `backend` in --benchmarks-json): `hf` (above) or `vllm`: one vLLM engine,
built from the first model's checkpoint; each further model's weights (a merge built in memory) are loaded into the
running engine and its prefix cache reset (`layerswap.evaluation.vllm_weights`); where the installed vLLM cannot, the
log says so and each model gets its own engine, a recipe being written first with `Merger.write` to a temporary dir.
Benchmarks of two backends: one host each in this process (`Part`). Context (`layerswap.evaluation.context`): the
requests are built before any model runs; vLLM's max_model_len is `--context-tokens` or the longest request; a request
that would not fit (either backend) is refused in one line, never cut.

Output (written atomically: temp name, then rename): `<out-dir>/<model-id>/<benchmark>.json` and
`<benchmark>.samples.jsonl`. The JSON holds no timestamps or paths, so the same inputs give the same bytes.

This module is the command (arguments, the run loop); the rest of the stage is beside it in `layerswap/evaluation/`:
`tasks` (the benchmark table, plans, toy task set), `paper_tasks` (paper task set, hub artefacts), `hosts` (HF and
vLLM model hosts), `results` (result files and index), `sandbox` (model-written code).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from layerswap import hashcache
from layerswap.benchmarks import BENCHMARKS
from layerswap.errors import UserError
from layerswap.evaluation import model_lists, store
from layerswap.evaluation.batches import per_task_batches
from layerswap.evaluation.context import Context, build_requests, reseed
from layerswap.evaluation.hosts import (
    ModelHost,
    VLLMHost,
    check_model_dir,
    check_vllm_models,
    require_vllm,
    resolve_dtype,
)
from layerswap.evaluation.job import EvaluationJob
from layerswap.evaluation.paper_tasks import paper_include_paths, plan_paper  # noqa: F401 (plan_paper: re-export)
from layerswap.evaluation.results import score_summary, write_index, write_outputs
from layerswap.evaluation.tasks import (
    BACKENDS,
    TASK_SETS,
    BenchmarkPlan,
    job_batch_size,
    job_context_tokens,
    key_batch_sizes,
    paper_samples,
    parse_benchmarks,  # noqa: F401 (re-exported: the benchmarks JSON and plans are read from here too)
    plan_benchmarks,  # noqa: F401
    set_task_settings,
    write_task_yamls,
)
from layerswap.hf_cache import use_hf_home

log = logging.getLogger("layerswap.evaluate")


# ----------------------------------------------------------------------------------------------------- arguments
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir",
        type=Path,
        help="toy task set: folder with <benchmark>_<lang>.jsonl files (required there; unused by paper)",
    )
    parser.add_argument(
        "--task-set",
        default="toy",
        choices=TASK_SETS,
        help="toy: task YAMLs over the toy world's files; paper: the paper's lm-eval tasks over "
        "pre-staged hub datasets (config world: hf)",
    )
    parser.add_argument(
        "--backend",
        default="hf",
        choices=BACKENDS,
        help="the backend of every benchmark whose settings in --benchmarks-json name none: hf: one HF model "
        "(lm-eval's HFLM), each further model's weights swapped in (merges built in memory); vllm: one vLLM engine "
        "(lm-eval's vLLM wrapper), each further model's weights loaded into it (a new engine only for another "
        "architecture). Where the benchmarks name both, the job holds one host of each and evaluates each model on "
        "both",
    )
    parser.add_argument(
        "--benchmarks-json",
        required=True,
        help="JSON {benchmark: {shots, languages?, limit?, max_new_tokens?, batch_size?, batch_sizes? (per language "
        "key), context_tokens?, backend?, execute_code?}}; benchmarks: " + ", ".join(BENCHMARKS),
    )
    parser.add_argument(
        "--context-tokens",
        type=int,
        default=None,
        help="the job's context: the longest prompt plus generation budget (evaluation jobs' context_tokens param, "
        "from the plan): vLLM's max_model_len, and HF's where below the model's. Default: on vLLM the longest the "
        "job's requests need, at most the model's max_position_embeddings; on HF the model's context. On either "
        "backend a request that does not fit is refused in one line, never cut",
    )
    parser.add_argument(
        "--model",
        action="append",
        required=True,
        metavar="ID=SOURCE",
        help="model id (output subfolder) = checkpoint dir or merge recipe .json; repeatable",
    )
    parser.add_argument("--out-dir", required=True, type=Path)
    parser.add_argument(
        "--batch-size",
        type=int,
        required=True,
        help="requests per batch (the rules pass evaluation.batch_size: config/schema.yaml owns its default), unless "
        "the benchmarks JSON gives a benchmark its own batch_size",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--device", default="auto", help="auto (cuda if available, else cpu), cpu, cuda, cuda:N")
    parser.add_argument(
        "--dtype",
        default="auto",
        help="dtype of the evaluated weights: auto (bfloat16 on a GPU, as SFT trains, float32 on a "
        "CPU), float32, bfloat16, ...; recorded in each result file",
    )
    parser.add_argument("--verbose", action="store_true", help="show lm-eval's own log lines")
    parser.add_argument(
        "--index", type=Path, help="also write this JSON index of the evaluated models and their result files"
    )
    parser.add_argument("--run", help="SFT run name recorded in the index (checkpoint evaluations)")
    model_lists.add_arguments(parser)
    parser.add_argument(
        "--store",
        type=Path,
        default=None,
        help="results kept by content (layerswap.evaluation.store): a model whose result for this exact evaluation "
        "is there is copied, not evaluated; each model's results are added as soon as they are written, so a job "
        "cut short resumes after the last finished model",
    )
    parser.add_argument(
        "--hf-home",
        default=None,
        help="the pre-staged Hugging Face cache the paper task set's datasets are read from "
        "(storage.hf_home; default: the environment's HF_HOME)",
    )


def job_models(args: argparse.Namespace, recipes: bool = False) -> list[tuple[str, Path]]:
    """The job's `--model ID=SOURCE` items (restricted by --only-models / --only-selected), parsed."""
    return parse_models(model_lists.restrict(args.model, args), recipes)


def start_logging() -> None:
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    log.setLevel(logging.INFO)


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
                raise UserError(
                    f"--model {model_id}: {src} is a merge recipe; `layerswap evaluate-merges` evaluates "
                    "recipes (`layerswap evaluate` only checkpoint dirs)"
                )
            if not src.is_file():
                raise UserError(f"--model {model_id}: recipe {src} does not exist")
        else:
            raise UserError(f"--model {model_id}: {src} is neither a checkpoint dir nor a recipe .json file")
        models.append((model_id, src))
    return models


# ---------------------------------------------------------------------------------------------------------- run
def run(args: argparse.Namespace, models: list | None = None, merger=None) -> dict:
    """Evaluate every model on every benchmark; returns phase timings in seconds (for
    scripts/measure/bench_evaluate.py).
    `models` and `merger` are given by `layerswap evaluate-merges`: (id, checkpoint dir or merge recipe, a
    layerswap.merge.recipes.Recipe) and the job's layerswap.merge.merger.Merger that builds the recipes; without them,
    the `--model` checkpoint dirs. With `--store`, models whose results the store keeps are copied from it, not
    evaluated (layerswap.evaluation.store)."""
    t0 = time.perf_counter()
    start_logging()
    settings = EvaluationJob.from_args(args, "evaluate" if merger is None else "evaluate-merges")
    spec = settings.spec
    if models is None:
        models = job_models(args)
    task_set = settings.task_set
    backends = settings.backends()
    plans = settings.plans()
    context_tokens = settings.context_tokens
    # the benchmarks each backend evaluates (those that score something)
    by_backend = {b: [p for p in plans if backends[p.name] == b and not p.skipped and p.run_tasks] for b in BACKENDS}
    by_backend = {b: own for b, own in by_backend.items() if own}
    if "vllm" in by_backend:
        require_vllm()
    for plan in plans:
        if plan.skipped:
            log.info("evaluate: SKIPPED %s: %s", plan.name, plan.skipped)
        for t in plan.tasks:
            if t.unavailable and not plan.skipped:
                log.info("evaluate: UNAVAILABLE %s %s: %s", plan.name, t.key, t.unavailable)
    unsafe = any(p.bench.unsafe and not p.skipped for p in plans)

    use_hf_home(settings.hf_home)
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["HF_DATASETS_OFFLINE"] = "1"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if not args.verbose:
        os.environ.setdefault("TQDM_DISABLE", "1")  # lm-eval's per-task progress bars
    timings = {"imports": 0.0, "tasks": 0.0, "model_load": 0.0, "evaluate": 0.0, "write": 0.0, "per_model": []}
    if not models or all(
        p.skipped for p in plans
    ):  # nothing to run (e.g. MBPP without execute_code): no model, no lm-eval import
        from importlib.metadata import version

        for model_id, src in models:
            recipe = None if isinstance(src, Path) else src.hash
            for plan in plans:
                write_outputs(Path(args.out_dir), model_id, plan, None, settings.seed, version("lm_eval"), None, recipe)
            log.info("evaluate: %s: %s", model_id, ", ".join(f"{p.name}=skipped" for p in plans))
        if args.index:
            write_index(args.index, args.run, models, plans, Path(args.out_dir))
        timings["total"] = time.perf_counter() - t0
        return timings
    all_models, keys, keeper = models, {}, None
    if getattr(args, "store", None) is not None:
        models, keeper, keys = store.reuse(settings, args.store, Path(args.out_dir), models, plans)
        if not models:
            log.info("evaluate: store: reused %d, evaluated 0", keeper.reused)
            log.info("evaluate: %s", hashcache.summary())
            if args.index:
                write_index(args.index, args.run, all_models, plans, Path(args.out_dir))
            timings["total"] = time.perf_counter() - t0
            return timings
    with tempfile.TemporaryDirectory(prefix="layerswap-eval-") as tmp:
        os.environ["LM_HARNESS_CACHE_PATH"] = str(Path(tmp) / "cache")
        import torch

        torch.set_num_threads(settings.threads)
        device, dtype = settings.device, resolve_dtype(settings.dtype, settings.device, torch)
        if "vllm" in by_backend:  # before any model is loaded: this machine's vLLM runs these models in this dtype
            check_vllm_models(
                [src if isinstance(src, Path) else Path(src.model_dir) for _, src in models],
                dtype,
            )
        import lm_eval
        import lm_eval.caching.cache as lm_cache
        import lm_eval.evaluator  # noqa: F401  (_evaluate_models runs it; imported here so its cost counts as imports)
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

        if task_set == "paper":
            names = sorted({t.name for p in plans if not p.skipped for t in p.run_tasks})
            tm = TaskManager(include_path=paper_include_paths(plans), include_defaults=False) if names else None
        else:
            names = write_task_yamls(plans, Path(tmp) / "tasks")
            tm = TaskManager(include_path=str(Path(tmp) / "tasks"), include_defaults=False) if names else None
        parts = []
        for backend, own in by_backend.items():  # each backend's tasks, requests, context and model host
            task_dict = tm.load(sorted({t.name for p in own for t in p.run_tasks}))
            set_task_settings(task_dict, own)
            requests = build_requests(task_dict, own, settings.seed, paper_samples(task_dict, own))
            own_spec = {p.name: spec[p.name] for p in own}
            context = Context(backend, requests, context_tokens, job_context_tokens(own_spec))
            batch = job_batch_size(own_spec, settings.batch_size)
            if backend == "vllm":
                host = VLLMHost(
                    batch,
                    device,
                    dtype,
                    Path(tmp) / "models",
                    settings.seed,
                    merger,
                    context_for=context.of_model,
                )
            else:
                host = ModelHost(batch, device, dtype, quiet=not args.verbose, merger=merger)
            for model_dir in dict.fromkeys(src if isinstance(src, Path) else Path(src.model_dir) for _, src in models):
                context.of_model(model_dir)  # before any model is loaded: every request fits (else one line)
            parts.append(Part(backend, own, task_dict, context, host, key_batch_sizes(spec, own, task_dict), batch))
            log.info("evaluate: %s backend: %s", backend, ", ".join(p.name for p in own))
        t2 = time.perf_counter()
        timings["tasks"] = t2 - t1
        log.info("evaluate: %d lm-eval tasks loaded in %.1f s (imports %.1f s)", len(names), t2 - t1, t1 - t0)
        if unsafe:
            from layerswap.evaluation.sandbox import network_isolation

            log.info(
                "evaluate: model-written code runs in a subprocess sandbox; network isolation: %s", network_isolation()
            )

        job = Job(plans, parts, Path(args.out_dir), settings.seed, dtype, version, unsafe)

        def keep(model_id: str) -> None:  # the store keeps what was just evaluated
            key, doc, source = keys[model_id]
            keeper.put(key, doc, job.out_dir, model_id, plans, source)
            keeper.evaluated += 1

        try:
            _evaluate_models(job, models, timings, None if keeper is None else keep)
        finally:
            for part in parts:
                part.host.close()
    if keeper is not None:
        log.info("evaluate: store: reused %d, evaluated %d", keeper.reused, keeper.evaluated)
    log.info("evaluate: %s", hashcache.summary())
    if args.index:
        write_index(args.index, args.run, all_models, plans, Path(args.out_dir))
    timings["total"] = time.perf_counter() - t0
    timings["cpu_total"] = time.process_time()
    return timings


@dataclass(frozen=True)
class Part:
    """The benchmarks of a job one backend evaluates: their plans, lm-eval tasks, requests (`context`) and model host.

    A job whose benchmarks name two backends (evaluation.backend a mapping, in a job of several benchmarks:
    `tasks_per_job: grouped`) holds one host of each in this process and evaluates each model on both, rather than
    being split into a job per backend: imports, task loading, the experts' reads and each merge's build are paid once
    per job, the DAG and each job's outputs are the same whatever the backends, and the hosts' results are those of a
    job of their own (each host runs lm-eval's `evaluate` on its own tasks only: results are per task, each one's
    requests are the same, and the log-likelihood requests of a host are batched together as in an HF-only job whose
    log-likelihood benchmarks are the same: tests/test_vllm_dag.py). The cost: both models in memory at once (the vLLM
    engine sized on a GPU from what the HF model leaves free: vllm_weights.engine_memory). With `tasks_per_job: single`
    (config/paper.yaml) every job evaluates one benchmark, so one backend."""

    backend: str
    plans: list[BenchmarkPlan]
    task_dict: dict
    context: Context  # its requests' context per model architecture, checked before any model is loaded
    host: ModelHost | VLLMHost
    batches: dict[str, int]  # lm-eval leaf task -> its batch where it differs from the part's (`batch_sizes`)
    batch_size: int  # the part's batch (the smallest of its benchmarks' batch_size)


@dataclass(frozen=True)
class Job:
    """What every model of one evaluate job is evaluated with, and what its result files record."""

    plans: list[BenchmarkPlan]
    parts: list[Part]  # per backend; none where no task runs (every one skipped or unavailable)
    out_dir: Path
    seed: int
    dtype: str
    lm_eval_version: str
    unsafe: bool  # a benchmark runs model-written code


def _evaluate_models(
    job: Job, models: list[tuple[str, Path]], timings: dict, kept: Callable[[str], None] | None = None
) -> None:
    """Per model (in the hosts' order: merges sharing tensors one after another), per part of the job: swap its weights
    into the part's host, re-seed, one lm-eval `evaluate` over the part's tasks; then write one file per benchmark and
    `kept(model_id)` (the store keeps them). Adds each model's phases to `timings`."""
    from lm_eval.evaluator import evaluate

    plans, seed = job.plans, job.seed
    backend = {p.name: part.backend for part in job.parts for p in part.plans}  # the engine that scores each benchmark
    for model_id, source in job.parts[0].host.order(models) if job.parts else models:
        cpu_a = time.process_time()
        results, load, run, phases = None, 0.0, 0.0, {}
        for part in job.parts:
            ta = time.perf_counter()
            lm = part.host.load(source)
            tb = time.perf_counter()
            reseed(part.task_dict, seed)
            with per_task_batches(lm, part.batches, part.batch_size):
                got = evaluate(
                    lm,
                    part.task_dict,
                    cache_requests=True,
                    bootstrap_iters=0,
                    log_samples=True,
                    confirm_run_unsafe_code=job.unsafe,
                    samples=paper_samples(part.task_dict, part.plans),
                )
            part.host.release()
            results = got if results is None else _merged(results, got)
            load, run = load + tb - ta, run + time.perf_counter() - tb
            prefix = f"{part.backend}." if len(job.parts) > 1 else ""
            phases.update({prefix + k: v for k, v in part.host.phase.items()})
        tc = time.perf_counter()
        recipe = None if isinstance(source, Path) else source.hash
        for plan in plans:
            write_outputs(
                job.out_dir,
                model_id,
                plan,
                None if plan.skipped else results,
                seed,
                job.lm_eval_version,
                job.dtype,
                recipe,
                backend.get(plan.name),
            )
        if kept is not None:
            kept(model_id)
        td = time.perf_counter()
        timings["model_load"] += load
        timings["evaluate"] += run
        timings["write"] += td - tc
        timings["per_model"].append(
            {
                "model_id": model_id,
                "load": load,
                "evaluate": run,
                "cpu": time.process_time() - cpu_a,
                "load_phases": phases,
            }
        )
        summary = ", ".join(f"{p.name}={'skipped' if p.skipped else score_summary(results, p)}" for p in plans)
        log.info("evaluate: %s: load %.2f s, evaluate %.2f s: %s", model_id, load, run, summary)


def _merged(a: dict, b: dict) -> dict:
    """Two lm-eval results of disjoint tasks as one (the per-task mappings joined; the rest as `a` has it)."""
    return {k: {**v, **b.get(k, {})} if isinstance(v, dict) else v for k, v in {**b, **a}.items()}


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
