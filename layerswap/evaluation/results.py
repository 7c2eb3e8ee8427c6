"""Result files of an evaluation job: one JSON per (model, benchmark) with its `.samples.jsonl` beside, and the
job's index. Written atomically; the JSON holds no timestamps or paths, so the same inputs give the same bytes."""

from __future__ import annotations

import json
from pathlib import Path

from layerswap.contracts import write_json_atomic, write_text_atomic
from layerswap.evaluation.tasks import BenchmarkPlan, TaskPlan, group_leaves
from layerswap.layout import eval_result_file


def result_file(out_dir: Path, model_id: str, bench: str) -> Path:
    """A model's evaluation of one benchmark in a job's `--out-dir` (the results layout's evaluations folder, or a
    folder laid out as it is): `<out_dir>/<model id>/<bench>.json`; its per-item log beside it (`samples_file`)."""
    return Path(out_dir) / eval_result_file(model_id, bench)


def samples_file(result: Path) -> Path:
    """The per-item log beside an evaluation file: `<bench>.samples.jsonl`."""
    return result.with_name(result.name.removesuffix(".json") + ".samples.jsonl")


def _number(x):
    return None if x is None else float(x)


def result_leaves(results: dict, name: str) -> list[str]:
    """The leaf tasks whose samples make up `name` in lm-eval results (itself, or a group's subtasks)."""
    return group_leaves(name, results.get("samples", {}), results.get("group_subtasks", {}))


def _n_samples(results: dict, name: str) -> int:
    if name in results["n-samples"]:
        return int(results["n-samples"][name]["effective"])
    return sum(int(results["n-samples"][leaf]["effective"]) for leaf in result_leaves(results, name))


def _sample_record(plan: BenchmarkPlan, task: TaskPlan, s: dict, leaf: str | None = None) -> dict:
    scoring = plan.scoring
    args = s["arguments"]
    rec = {"key": task.key, "task": leaf or task.name, "doc_id": s["doc_id"], "prompt": args[0][0]}
    if isinstance(args[0][1], str):  # loglikelihood requests: (context, continuation) per choice
        lls = [float(r[0]) for r in s["filtered_resps"]]
        best = max(range(len(lls)), key=lambda i: lls[i])
        rec.update(
            {
                "choices": [a[1] for a in args],
                "choice_loglikelihoods": lls,
                "extracted": best,
                "target": s["target"],
                "correct": bool(s.get(scoring.metric)),
            }
        )
    else:
        rec.update({"generation": s["resps"][0][0], "extracted": s["filtered_resps"][0], "target": str(s["target"])})
        rec["correct"] = None if scoring.metric == "bleu" else bool(s.get(scoring.metric))

    return rec


def write_outputs(
    out_dir: Path,
    model_id: str,
    plan: BenchmarkPlan,
    results: dict | None,
    seed: int,
    version: str,
    dtype: str | None = None,
    recipe_hash: str | None = None,
    backend: str | None = None,
) -> None:
    """`recipe_hash`: of the merge recipe evaluated (`layerswap.merge.recipe_hash`), recorded in the file; `backend`:
    the engine that scored it (hf, vllm), recorded where something was scored."""
    scoring = plan.scoring
    scores, n, samples = {}, {}, []
    if results is not None:
        logged = set()
        for t in plan.tasks:
            if t.unavailable:
                scores[t.key], n[t.key] = None, 0
                continue
            value = results["results"][t.name].get(f"{scoring.metric},{scoring.filter}")
            scores[t.key] = _number(value)
            n[t.key] = _n_samples(results, t.name)
            if t.name not in logged:  # paper MBPP: one English task recorded under several language keys
                logged.add(t.name)
                samples += [
                    _sample_record(plan, t, s, leaf)
                    for leaf in result_leaves(results, t.name)
                    for s in results["samples"][leaf]
                    if plan.task_set == "toy" or s.get("filter") in (None, scoring.filter)
                ]
    doc = {
        "model_id": model_id,
        "benchmark": plan.name,
        "metric": scoring.metric,
        "scores": scores,
        "n": n,
        "lm_eval_tasks": {t.key: t.name for t in plan.tasks},
        "shots": plan.shots,
        "filter": scoring.filter_doc,
        "seed": seed,
        "limit": plan.limit,
        "lm_eval_version": version,
        "task_config_hash": plan.config_hash,
        "skipped": plan.skipped,
    }
    if plan.max_new_tokens is not None:
        doc["max_new_tokens"] = plan.max_new_tokens
    if dtype is not None and results is not None:
        doc["dtype"] = dtype  # of the evaluated weights
    if backend is not None and results is not None:
        doc["backend"] = backend  # the audit checks it against the job's record (layerswap/audit/records.py)
    if recipe_hash is not None:
        doc["recipe_hash"] = recipe_hash
    if plan.task_set == "paper":
        doc["task_set"] = "paper"
        doc["lm_eval"] = {
            t.key: (
                {
                    "task": t.name,
                    "shots": t.shots,
                    "filter": scoring.filter,
                    "metric": scoring.metric,
                    "result_key": f"{scoring.metric},{scoring.filter}",
                    "group": plan.bench.paper.group,
                    **plan.settings.get(t.key, {}),
                }
                if not t.unavailable
                else {"unavailable": t.unavailable}
            )
            for t in plan.tasks
        }
        if plan.variant:
            doc["variant"] = plan.variant
    result = result_file(out_dir, model_id, plan.name)
    write_text_atomic(samples_file(result), "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in samples))
    write_text_atomic(result, json.dumps(doc, indent=2, ensure_ascii=False) + "\n")


def write_index(
    path: Path, run: str | None, models: list[tuple[str, Path]], plans: list[BenchmarkPlan], out_dir: Path
) -> None:
    """One file naming every (model, benchmark) result of this job, for rules whose outputs vary per run."""
    from layerswap.fingerprint import file_sha256

    files = {mid: {p.name: str(result_file(out_dir, mid, p.name)) for p in plans} for mid, _ in models}
    index = {
        "run": run,
        "checkpoints": [{"model_id": mid, "name": mid.rsplit("/", 1)[-1], "path": str(src)} for mid, src in models],
        "files": files,
        "sha256": {f: file_sha256(Path(f)) for by_bench in files.values() for f in by_bench.values()},
    }
    write_json_atomic(path, index)


def score_summary(results: dict, plan: BenchmarkPlan) -> str:
    scoring = plan.scoring
    vals = [results["results"][t.name].get(f"{scoring.metric},{scoring.filter}") for t in plan.run_tasks]
    vals = [float(v) for v in vals if v is not None]
    return f"{sum(vals) / len(vals):.3g}" if vals else "n/a"
