"""Top-k checkpoint selection per expert type (paper section 3.1), with a per-run cap for diversity.

The score is a weighted sum of selection metrics (weights from config): the paper ranks math experts by MGSM
English plus the MGSM average over languages, and language experts "primarily" by Belebele plus FLORES in their
language. Constraints (config `selection.constraints`) are what the paper's secondary measures are ("we also ensure
slight improvement on MBPP, MMLU and MGSM"): a candidate whose metric is below the base model's by more than the
margin is rejected, whatever its score, and the selection file says which constraint it failed.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from statistics import mean
from typing import Annotated, Literal

from layerswap.command_params import AtLeast, parse
from layerswap.contracts import SELECTION_METRICS, read_evaluation_index, read_json, write_json_atomic
from layerswap.errors import UserError


def _scores(index: dict, ckpt_id: str, benchmark: str, index_path: Path) -> dict[str, float]:
    """A checkpoint's scores on a benchmark, from the evaluation file its index names, checked against the sha256 the
    index records for it."""
    try:
        path = index["files"][ckpt_id][benchmark]
    except (KeyError, TypeError):
        raise UserError(f"{index_path}: no '{benchmark}' evaluation for {ckpt_id}") from None
    recorded = (index.get("sha256") or {}).get(path)
    return _scores_of(read_json(path, "evaluation", recorded, index_path), path)


def _scores_of(doc, path) -> dict:
    scores = doc.get("scores") if isinstance(doc, dict) else None
    if not isinstance(scores, dict):
        raise UserError(f"evaluation file {path}: 'scores' must be an object keyed by language")
    return scores


# Selection metrics: (benchmark, score key), owned by the file contracts.
METRICS = SELECTION_METRICS


def metrics_of(names: list[str], lang: str | None, get, mgsm_languages: list[str]) -> dict[str, float]:
    """The named selection metrics of one checkpoint; `get(benchmark)` returns that benchmark's scores dict."""
    out = {}
    for name in names:
        if name not in METRICS:
            raise UserError(f"selection weight '{name}': unknown metric; allowed: {', '.join(METRICS)}")
        benchmark, key = METRICS[name]
        if "{lang}" in key and lang is None:
            raise UserError(f"selection weight '{name}': needs a target language (not for math experts)")
        scores = get(benchmark)
        out[name] = mean(scores[l] for l in mgsm_languages) if key == "*" else scores[key.format(lang=lang)]
    return out


def base_metrics(base_evals: list[Path], names: list[str], lang: str | None, mgsm_languages: list[str]) -> dict:
    """The base model's values of the constrained metrics, from its evaluation files (`<benchmark>.json`)."""
    by_benchmark = {}
    for path in base_evals:
        doc = read_json(path, "evaluation")
        if not isinstance(doc, dict) or not isinstance(doc.get("benchmark"), str):
            raise UserError(f"evaluation file {path}: no 'benchmark' name")
        by_benchmark[doc["benchmark"]] = (path, _scores_of(doc, path))

    def get(benchmark):
        if benchmark not in by_benchmark:
            raise UserError(
                f"selection constraints: no base evaluation of '{benchmark}' among --base-evals "
                f"({', '.join(map(str, base_evals)) or 'none'})"
            )
        path, scores = by_benchmark[benchmark]
        if any(v is None for v in scores.values()):
            raise UserError(
                f"{path}: the base model has no {benchmark} score for every language ({scores}); a constraint needs one"
            )
        return scores

    return metrics_of(names, lang, get, mgsm_languages)


def failed_constraints(metrics: dict, base: dict, constraints: dict[str, float]) -> list[dict]:
    """The constraints a candidate fails: its metric is below the base's by more than the margin."""
    return [
        {"metric": m, "value": metrics[m], "base": base[m], "margin": margin}
        for m, margin in constraints.items()
        if metrics[m] < base[m] - margin - 1e-12
    ]


def select(
    indexes: list[Path],
    expert: str,
    kind: str,
    lang: str | None,
    weights: dict[str, float],
    top_k: int,
    max_per_run: int,
    mgsm_languages: list[str],
    constraints: dict[str, float] | None = None,
    base_evals: list[Path] = (),
) -> dict:
    constraints = constraints or {}
    base = base_metrics(list(base_evals), list(constraints), lang, mgsm_languages) if constraints else {}
    names = list(dict.fromkeys([*weights, *constraints]))
    candidates = []
    for index_path in indexes:
        index = read_evaluation_index(index_path)
        for ckpt in index["checkpoints"]:
            cid = ckpt["model_id"]
            metrics = metrics_of(names, lang, lambda b: _scores(index, cid, b, index_path), mgsm_languages)
            score = sum(w * metrics[m] for m, w in weights.items())
            candidates.append(
                {
                    "run": index["run"],
                    "checkpoint": ckpt["name"],
                    "path": ckpt["path"],
                    "model_id": cid,
                    "score": round(score, 6),
                    "metrics": metrics,
                    "failed": failed_constraints(metrics, base, constraints),
                }
            )
    # Highest score first; ties broken by run then checkpoint name, so the choice is deterministic.
    candidates.sort(key=lambda c: (-c["score"], c["run"], c["checkpoint"]))
    per_run: dict[str, int] = {}
    selected = []
    for c in candidates:
        if c["failed"]:
            c["status"] = "failed constraint " + "; ".join(
                f"{f['metric']}: {f['value']:.4g} < base {f['base']:.4g} - margin {f['margin']:g}" for f in c["failed"]
            )
        elif len(selected) == top_k:
            c["status"] = "below top-k"
        elif max_per_run is not None and per_run.get(c["run"], 0) >= max_per_run:  # None: no cap
            c["status"] = "run cap"
        else:
            per_run[c["run"]] = per_run.get(c["run"], 0) + 1
            c["status"] = "selected"
            selected.append({**c, "rank": len(selected) + 1})
    if len(selected) < top_k:
        rejected = {m: sum(any(f["metric"] == m for f in c["failed"]) for c in candidates) for m in constraints}
        why = "".join(f", {n} fail selection.constraints.{kind}.{m}" for m, n in rejected.items() if n)
        raise UserError(
            f"expert '{expert}': only {len(selected)} checkpoints selectable for top_k={top_k} "
            f"(max_per_run={max_per_run}, {len(candidates)} candidates{why})"
        )
    return {
        "expert_type": expert,
        "kind": kind,
        "top_k": top_k,
        "max_per_run": max_per_run,
        "weights": weights,
        "constraints": constraints,
        "base": base,
        "selected": selected,
        "candidates": candidates,
    }


@dataclass
class Params:
    """--params-json of `layerswap select` (layerswap/workflow/selection_jobs.py: SelectionJobs.params)."""

    kind: Literal["math", "language", "joint"]
    weights: Annotated[dict[str, float], AtLeast(1)]  # selection metric -> weight
    top_k: Annotated[int, AtLeast(1)]
    mgsm_languages: Annotated[list[str], AtLeast(1)]
    lang: str | None = None  # the target language (None for math experts)
    max_per_run: Annotated[int, AtLeast(1)] | None = None  # None: no cap
    constraints: dict[str, float] = field(default_factory=dict)  # metric -> margin below the base


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--index", nargs="+", required=True, type=Path, help="evaluation index files of the runs")
    parser.add_argument("--expert", required=True)
    parser.add_argument(
        "--params-json", required=True, help="kind, lang, weights, constraints, top_k, max_per_run, mgsm_languages"
    )
    parser.add_argument(
        "--base-evals",
        nargs="*",
        default=[],
        type=Path,
        help="the base model's evaluation files of the constrained benchmarks",
    )
    parser.add_argument("--out", required=True, type=Path)


def run(args: argparse.Namespace) -> None:
    p = parse(Params, args.params_json)
    result = select(
        args.index,
        args.expert,
        p.kind,
        p.lang,
        p.weights,
        p.top_k,
        p.max_per_run,
        p.mgsm_languages,
        p.constraints,
        args.base_evals,
    )
    write_json_atomic(args.out, result)
    for s in result["selected"]:
        print(f"{args.expert} #{s['rank']}: {s['run']}/{s['checkpoint']} score={s['score']}")
    for c in result["candidates"]:
        if c["failed"]:
            print(f"{args.expert} rejected: {c['run']}/{c['checkpoint']} score={c['score']}: {c['status']}")
