"""The paper task set: each paper benchmark and language as an lm-eval task over pre-staged hub datasets
(`plan_paper`; lm-eval indexes only the task folders these need plus `layerswap/tasks/paper/`), and the hub datasets
those tasks read (`paper_artefacts`; `layerswap.workflow.prestage` lists them for a config)."""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

from layerswap.benchmarks import PAPER_TASK_DIR
from layerswap.errors import UserError
from layerswap.evaluation.tasks import PAPER_TASKS, BenchmarkPlan, LmEvalTask, TaskPlan, TaskSettings
from layerswap.languages import HF_LANGUAGES, task_for, translation_note

log = logging.getLogger("layerswap.evaluate")

RESOURCES = ("tasks/paper",)  # read at run time (layerswap.fingerprint hashes them with this module)


def lm_eval_task_root() -> Path:
    """lm_eval/tasks inside site-packages, found without importing lm_eval (its import costs seconds)."""
    import importlib.util

    spec = importlib.util.find_spec("lm_eval")
    if spec is None or not spec.submodule_search_locations:
        raise UserError("lm-eval is not installed (pip install lm-eval)")
    return Path(list(spec.submodule_search_locations)[0]) / "tasks"


def _hf_language(lang: str) -> dict:
    if lang not in HF_LANGUAGES:
        raise UserError(f"paper task set: unknown language {lang!r} (known: {', '.join(HF_LANGUAGES)})")
    return HF_LANGUAGES[lang]


def _benchmark(benchmark: str) -> LmEvalTask:
    if benchmark not in PAPER_TASKS:
        raise UserError(f"paper task set: unknown benchmark {benchmark!r} (known: {', '.join(PAPER_TASKS)})")
    return PAPER_TASKS[benchmark]


def _task(bench: LmEvalTask, key: str) -> tuple[LmEvalTask, list[str] | None]:
    """The task that scores one key (the benchmark's own, or its translation for a language its dataset lacks:
    layerswap.languages.task_for) and the key's language codes there (two for a FLORES direction); codes None where
    the dataset lacks a language of the key. An unknown language is a one-line error."""
    langs = key.split("-") if bench.directions else [key]
    infos = [_hf_language(lang) for lang in langs]
    task = (None if bench.directions else task_for(bench, key)) or bench
    if task.code is None:
        return task, [key]
    codes = [info.get(task.code) for info in infos]
    return task, None if None in codes else codes


def _located(bench: LmEvalTask, key: str, root: Path) -> tuple[str, str | None, str | None, str | None]:
    """(lm-eval task name, its folder, the name of its marker file (None: it has none, or no code), the reason it is
    unavailable or None) of one key: what `paper_task` answers and the task config hash reads the YAMLs by."""
    task, codes = _task(bench, key)
    fields = {"key": key, "code": codes[0] if codes else key}
    name = task.task.format(**fields)
    folder = task.folder.format(**fields) if task.folder else None
    if codes is None:  # the language's entry has no code of this dataset
        return name, folder, None, task.missing.format(task=name, **fields)
    if task.marker is None:
        return name, folder, None, None
    marker = task.marker.format(task=name, **fields)
    ok = ((root / folder) if folder else PAPER_TASK_DIR).joinpath(marker).is_file()
    return name, folder, marker, None if ok else task.missing.format(task=name, **fields)


def paper_task(benchmark: str, key: str, root: Path | None = None) -> tuple[str, str | None, str | None]:
    """(lm-eval task name, task folder relative to lm_eval/tasks or None for ours, reason it is unavailable or None)
    for one benchmark and task key (a language; FLORES: direction "en-<lang>" / "<lang>-en")."""
    name, folder, _, why = _located(_benchmark(benchmark), key, root or lm_eval_task_root())
    return name, folder, why


def plan_paper(spec: dict[str, TaskSettings], default_languages: list[str] | None = None) -> list[BenchmarkPlan]:
    """The paper benchmarks of `spec` as lm-eval tasks. An unknown language code is an error (one line); a known
    language that a benchmark lacks is kept as `unavailable` (its score null, the reason in the JSON and the log)."""
    root = lm_eval_task_root()
    plans = []
    for name, cfg in spec.items():
        bench = _benchmark(name)
        langs = cfg.languages if cfg.languages is not None else (default_languages or ["en"])
        if len(set(langs)) != len(langs):
            raise UserError(f"--benchmarks-json: {name}.languages lists a language twice: {langs}")
        shots, limit = cfg.shots, cfg.limit
        if shots and not bench.own_fewshot:
            raise UserError(
                f"--benchmarks-json: {name}: the paper task set runs {name} 0-shot only (no few-shot "
                f"split), got shots {shots}"
            )
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
        if bench.unsafe and not cfg.execute_code:
            skipped = (
                f"{name} not run: it executes model-written code, which is off "
                f"(set execute_code: true for {name} to run it in the sandbox)"
            )
        elif not any(not t.unavailable for t in tasks):
            skipped = (
                f"{name} not run: no requested language is available (" + "; ".join(t.unavailable for t in tasks) + ")"
            )
        # a key whose task is the benchmark's translation (a language its dataset lacks) says so
        translated = [] if bench.directions else [translation_note(bench, t.key) for t in tasks if not t.unavailable]
        variants = [bench.variant, *translated]
        plan = BenchmarkPlan(
            name,
            shots,
            limit,
            tasks,
            skipped,
            task_set="paper",
            max_new_tokens=cfg.max_new_tokens,
            variant="; ".join(v for v in variants if v) or None,
        )
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
    bench = PAPER_TASKS[plan.name]
    for t in plan.run_tasks:
        _, folder, marker, _ = _located(bench, t.key, root)
        base = root / folder if folder else PAPER_TASK_DIR
        if bench.group:  # an lm-eval group: every YAML and helper of its folder
            files |= set(base.glob("*yaml")) | set(base.glob("*.py"))
        elif folder:
            files |= {
                p
                for p in base.iterdir()
                if p.is_file()
                and (p.suffix in {".yaml", ".py"} or "yaml" in p.name)
                and (
                    p.stem == t.name
                    or p.name == marker
                    or "template" in p.name
                    or p.name.endswith("_yaml")
                    or p.name == "utils.py"
                )
            }
        else:
            files |= {base / (bench.marker or bench.yaml).format(key=t.key), base / bench.yaml, base / "utils.py"}
    for f in sorted(files):
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    for t in plan.tasks:
        h.update(json.dumps([t.key, t.name, t.shots, t.limit, t.unavailable]).encode() + b"\0")
    if plan.max_new_tokens is not None:
        h.update(f"max_new_tokens={plan.max_new_tokens}".encode())
    return h.hexdigest()


def paper_artefacts(benchmark: str, key: str) -> list[dict]:
    """The hub datasets (one dict per split) that one paper task reads; from the benchmark table, as the task YAMLs."""
    task, codes = _task(_benchmark(benchmark), key)
    hub = task.hub
    return [
        {"hub_id": hub.hub_id, "subset": hub.subset.format(code=code), "split": split, "columns": list(hub.columns)}
        for code in codes or []
        for split in hub.splits
    ]
