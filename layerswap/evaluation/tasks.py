"""Evaluation task plans: what lm-eval scores for each benchmark of the registry (layerswap/benchmarks.py), read
from its task YAMLs (`Scoring`; the paper tasks with their YAML facts in `PAPER_TASKS`), the plan types, the
`--benchmarks-json` spec, the toy task set (task YAMLs over the toy world's files), and the settings of loaded lm-eval
tasks. The paper task set's plan lives in `paper_tasks`."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Annotated, Literal

from layerswap.benchmarks import BENCHMARKS, PAPER_TASK_DIR, Benchmark, HubSplits, LmEvalTask
from layerswap.command_params import AtLeast, build
from layerswap.errors import UserError
from layerswap.jsonl import json_object
from layerswap.layout import eval_data_file

RESOURCES = ("tasks/toy", "tasks/paper")  # read at run time (layerswap.fingerprint hashes them with this module)
TASK_DIR = Path(__file__).resolve().parents[1] / "tasks" / "toy"
TASK_SETS = ("toy", "paper")
BACKENDS = ("hf", "vllm")  # lm-eval's HFLM, lm-eval's vLLM wrapper (evaluation.backend; --backend; TaskSettings)
FEWSHOT_POOL = 8


def read_task_yaml(path: Path) -> dict:
    """A task YAML as lm-eval writes them (`!function` tags kept as their text), with its `include` merged under it."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("!function", lambda loader, node: loader.construct_scalar(node))
    data = yaml.load(path.read_text(encoding="utf-8"), Loader=Loader) or {}
    if "include" in data:
        data = {**read_task_yaml(path.parent / data.pop("include")), **data}
    return data


def _filter_doc(yaml_filter: dict) -> str:
    """'<name>: regex <pattern> group_select <n>, take_first' for a YAML filter of regex/take_first steps."""
    steps = []
    for step in yaml_filter["filter"]:
        if step["function"] == "regex":
            steps.append(
                f"regex {step['regex_pattern']}"
                + (f" group_select {step['group_select']}" if "group_select" in step else "")
            )
        else:
            steps.append(step["function"])
    return f"{yaml_filter['name']}: " + ", ".join(steps)


@dataclasses.dataclass(frozen=True)
class Scoring:
    """What an evaluation file reports for a benchmark in one task set, as its task YAML says: the lm-eval result key
    `<metric>,<filter>` of the score, and what the filter does (written beside the score)."""

    metric: str
    filter: str  # lm-eval filter name of the reported metric
    filter_doc: str


def _toy_scoring(bench: Benchmark) -> Scoring:
    """A benchmark's toy task: metric and filter as its template YAML says (the first of each)."""
    task = read_task_yaml(TASK_DIR / bench.toy_templates[0][1])
    filters = task.get("filter_list") or []
    doc = bench.toy_scoring or (_filter_doc(filters[0]) if filters else "none")
    return Scoring(task["metric_list"][0]["metric"], filters[0]["name"] if filters else "none", doc)


def _paper_task(bench: Benchmark) -> LmEvalTask:
    """A benchmark's paper task; for ours (layerswap/tasks/paper/), the metric, filter, dataset, subset and split as
    its YAML says."""
    paper = bench.paper
    assert paper is not None
    if paper.yaml is None:
        return paper
    task = read_task_yaml(PAPER_TASK_DIR / paper.yaml)
    filters = task.get("filter_list") or []
    hub = HubSplits(
        task["dataset_path"], paper.hub.subset or task.get("dataset_name"), (task["test_split"],), paper.hub.columns
    )
    return dataclasses.replace(
        paper, metric=task["metric_list"][0]["metric"], filter=filters[0]["name"] if filters else "none", hub=hub
    )


#: Per benchmark, the scoring of its toy task; per benchmark the paper task set runs, its task with the YAML's facts.
TOY_SCORING: dict[str, Scoring] = {name: _toy_scoring(b) for name, b in BENCHMARKS.items()}
PAPER_TASKS: dict[str, LmEvalTask] = {name: _paper_task(b) for name, b in BENCHMARKS.items() if b.paper is not None}
LAST_INTEGER = read_task_yaml(TASK_DIR / "mgsm.yaml")["filter_list"][0]["filter"][0]["regex_pattern"]  # (-?[0-9]+)


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
    def bench(self) -> Benchmark:
        return BENCHMARKS[self.name]

    @property
    def scoring(self) -> Scoring:
        if self.task_set == "paper":
            task = PAPER_TASKS[self.name]
            return Scoring(task.metric, task.filter, task.filter_doc)
        return TOY_SCORING[self.name]

    @property
    def run_tasks(self) -> list[TaskPlan]:
        return [t for t in self.tasks if not t.unavailable]


@dataclasses.dataclass
class TaskSettings:
    """One benchmark's settings in --benchmarks-json (layerswap/workflow/evaluation_jobs.py: benchmark_params)."""

    shots: Annotated[int, AtLeast(0)] = 0
    limit: Annotated[int, AtLeast(1)] | None = None  # items per language (None: all)
    languages: list[Annotated[str, AtLeast(1)]] | None = None  # None: every language with a data file (toy)
    execute_code: bool = False  # MBPP runs model-written code only with this
    max_new_tokens: Annotated[int, AtLeast(1)] | None = None  # generation budget (None: the task YAML's own)
    batch_size: Annotated[int, AtLeast(1)] | None = None  # in place of --batch-size (None: --batch-size)
    backend: Literal["hf", "vllm"] | None = None  # in place of --backend (None: --backend)
    # per language key, a batch in place of the job's where the plan's memory fit gives a smaller one
    # (layerswap/workflow/batch_fit.py; the toy world passes none)
    batch_sizes: dict[str, Annotated[int, AtLeast(1)]] | None = None
    # the longest prompt + generation budget the plan expects of this benchmark's keys (the toy world passes none)
    context_tokens: Annotated[int, AtLeast(1)] | None = None


def key_batch_sizes(spec: dict[str, TaskSettings], plans: list[BenchmarkPlan], task_dict: dict) -> dict[str, int]:
    """{lm-eval leaf task: its batch} of the keys whose batch differs from the job's (`batch_sizes`): what
    `per_task_batches` applies."""
    out = {}
    for plan in plans:
        sizes = spec[plan.name].batch_sizes or {}
        for t in plan.run_tasks:
            if t.key in sizes:
                out |= {leaf: sizes[t.key] for leaf in task_leaves(task_dict, t.name)}
    return out


def job_context_tokens(spec: dict[str, TaskSettings]) -> int | None:
    """The longest prompt + budget the job's benchmarks expect (`context_tokens`), None where none says."""
    given = [cfg.context_tokens for cfg in spec.values() if cfg.context_tokens]
    return max(given) if given else None


def job_batch_size(spec: dict[str, TaskSettings], default: int) -> int:
    """The batch size of a model host evaluating these benchmarks: each benchmark's own
    (`evaluation.tasks.<name>.batch_size`, e.g. a smaller one for log-likelihood tasks whose long prompts hold batch x
    length x vocabulary logits), else `default` (--batch-size, evaluation.batch_size); the smallest where a host
    evaluates several."""
    return min(cfg.batch_size or default for cfg in spec.values())


def job_backends(spec: dict[str, TaskSettings], default: str) -> dict[str, str]:
    """{benchmark: the backend that evaluates it}: its own (`backend` in --benchmarks-json, from a mapping in
    evaluation.backend), else `default` (--backend)."""
    return {name: cfg.backend or default for name, cfg in spec.items()}


def parse_benchmarks(text: str) -> dict[str, TaskSettings]:
    """--benchmarks-json: {benchmark: its settings (or null: the defaults)}, a benchmark of layerswap/benchmarks.py."""
    expected = "a non-empty object {benchmark: {shots, ...}}"
    spec = json_object(text, "--benchmarks-json", expected)
    if not spec:
        raise UserError(f"--benchmarks-json: expected {expected}")
    out = {}
    for name, cfg in spec.items():
        if name not in BENCHMARKS:
            raise UserError(f"--benchmarks-json: unknown benchmark {name!r} (known: {', '.join(BENCHMARKS)})")
        out[name] = build(TaskSettings, {} if cfg is None else cfg, "--benchmarks-json", f"{name}.")
    return out


def _data_file(data_dir: Path, file: str, lang: str) -> Path:
    """An evaluation set in `--data-dir` (the results layout's evaluation data folder): `<file>_<lang>.jsonl`."""
    return data_dir / eval_data_file(file, lang)


def _languages_on_disk(data_dir: Path, prefix: str) -> list[str]:
    head, tail = _data_file(data_dir, prefix, "*").name.split("*")
    return sorted(p.name[len(head) : -len(tail)] for p in data_dir.glob(f"{head}*{tail}"))


def plan_benchmarks(data_dir: Path, spec: dict[str, TaskSettings]) -> list[BenchmarkPlan]:
    if not data_dir.is_dir():
        raise UserError(f"--data-dir {data_dir}: not a directory")
    plans = []
    for name, cfg in spec.items():
        bench = BENCHMARKS[name]
        langs = cfg.languages if cfg.languages is not None else _languages_on_disk(data_dir, name)
        if not langs:
            raise UserError(f"{data_dir}: no {name}_<lang>.jsonl files for benchmark {name}")
        if len(set(langs)) != len(langs):
            raise UserError(f"--benchmarks-json: {name}.languages lists a language twice: {langs}")
        shots, limit = cfg.shots, cfg.limit
        pool = max(FEWSHOT_POOL, shots) if shots > 0 else 0
        tasks = []
        for lang in langs:
            if bench.directions and lang == "en":
                continue  # FLORES: English is the other side of every direction
            path = _data_file(data_dir, name, lang)
            if not path.is_file():
                raise UserError(f"--benchmarks-json: {name}: language {lang!r} has no data file {path}")
            if pool:
                with path.open(encoding="utf-8") as fh:
                    n_lines = sum(1 for line in fh if line.strip())
                if n_lines <= pool:
                    raise UserError(
                        f"{path}: {n_lines} items, but {shots}-shot {name} keeps the first {pool} as the "
                        "few-shot pool: nothing left to score"
                    )
            for key, template in bench.toy_templates:  # FLORES: one task per direction
                key = key.format(lang=lang)
                tasks.append(TaskPlan(name, key, f"toy_{name}_{key}", template, path, shots, pool, limit))
        if not tasks:
            raise UserError(f"--benchmarks-json: {name}: no language besides en to translate from/to")
        skipped = None
        if bench.unsafe and not cfg.execute_code:
            skipped = (
                f"{name} not run: it executes model-written code, which is off "
                f"(set execute_code: true for {name} to run it in the sandbox)"
            )
        plan = BenchmarkPlan(name, shots, limit, tasks, skipped, max_new_tokens=cfg.max_new_tokens)
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


def group_leaves(name: str, leaves, groups: dict) -> list[str]:
    """The leaf tasks of `name`: itself if it is among `leaves`, else the leaves of its subtasks in `groups`
    (lm-eval groups such as global_mmlu_full_<xx>), recursively."""
    if name in leaves:
        return [name]
    return [leaf for child in groups.get(name, []) for leaf in group_leaves(child, leaves, groups)]


def task_leaves(task_dict: dict, name: str) -> list[str]:
    """The loaded leaf tasks of `name` in an lm-eval task dict."""
    return group_leaves(name, task_dict["tasks"], task_dict.get("group_map") or {})


def set_task_settings(task_dict: dict, plans: list[BenchmarkPlan]) -> None:
    """Set each loaded leaf task's num_fewshot to its benchmark's shots (paper set; groups: every subtask) and, where
    the benchmark sets max_new_tokens, the generation budget (max_gen_toks) of its generate_until tasks."""
    for plan in plans:
        if plan.skipped:
            continue
        for t in plan.run_tasks:
            leaves = task_leaves(task_dict, t.name)
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
        out["generation"] = {
            "max_gen_toks": gen.get("max_gen_toks", 256),  # lm-eval's HFLM/vLLM default
            "do_sample": bool(gen.get("do_sample", False)),
            "until": gen.get("until"),
        }
    for metric in cfg.metric_list or []:
        tokenize = getattr(metric.get("aggregation"), "sacrebleu_tokenize", None)
        if tokenize:
            out["bleu_tokenize"] = tokenize
    return out


def paper_samples(task_dict, plans: list[BenchmarkPlan]) -> dict[str, list[int]] | None:
    """Per-task `limit` of the paper set as lm-eval `samples` (the first `limit` items of every leaf task)."""
    if task_dict is None or not any(p.task_set == "paper" and p.limit for p in plans):
        return None
    out = {}
    for plan in plans:
        if plan.skipped or not plan.limit:
            continue
        for t in plan.run_tasks:
            for leaf in task_leaves(task_dict, t.name):
                task = task_dict["tasks"][leaf]
                out[leaf] = list(range(min(plan.limit, len(task.eval_docs))))
    return out or None
