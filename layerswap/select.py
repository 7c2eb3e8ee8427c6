"""Top-k checkpoint selection per expert type (paper section 3.1), with a per-run cap for diversity.

The score is a weighted sum of selection metrics (weights from config): the paper ranks math experts by MGSM
English plus the MGSM average over languages, and language experts "primarily" by Belebele plus FLORES in their
language. Constraints (config `selection.constraints`) are what the paper's secondary measures are ("we also ensure
slight improvement on MBPP, MMLU and MGSM"): a candidate whose metric is below the base model's by more than the
margin is passed over, whatever its score, and the selection file says which constraint it failed.

Where fewer than top_k candidates pass (within the per-run cap), `on_no_pass` (config `selection.on_no_pass`)
decides. `best` (the default) fills the places left with the best of the others by score, and each of them keeps in
the selection file the constraints it failed (Table 5 notes them): the paper ensures an improvement where there is
one, it does not stop without one; its own selected experts sit below the base on a secondary measure on average
(its Table 5: Swahili experts MGSM-swh 0.247 vs 0.248, Japanese experts MMLU 0.518 vs 0.520), within the noise of
the benchmark. `stop` refuses in one line, naming how many candidates failed which constraint.

The walk (`walk`): candidates by score, highest first (ties: run, then checkpoint name). Pass one takes each that
passes, skipping a run at its cap, until top_k are taken; pass two (`best` only) takes the best of the failed ones
within the cap. Pass one reads the constraint metrics of the candidates it reaches only, and pass two reaches none
that pass one did not (a run at its cap stays at it). So the constraint benchmarks need evaluating on those alone:
`walk` lists the reached candidates whose constraint metrics are unknown (their evaluation files not given yet),
counting them as passing; every one of them is reached whatever they turn out to be (a failure only leaves a place
open longer), and `layerswap evaluate-leaders` (layerswap/evaluation/leaders.py) evaluates them, then the next ones
the walk reaches, until it lists none. The picks are those of a selection with every checkpoint evaluated.
"""

from __future__ import annotations

import argparse
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from statistics import mean
from typing import Annotated, Literal

from layerswap.benchmarks import SELECTION_METRICS, TARGETED_METRICS
from layerswap.command_params import AtLeast, parse
from layerswap.contracts import read_evaluation_index, read_json, write_json_atomic
from layerswap.errors import UserError

#: selection.on_no_pass: fill the places no passing candidate takes with the best failed ones, or stop
ON_NO_PASS = ("best", "stop")


def _scores_of(doc, path) -> dict:
    scores = doc.get("scores") if isinstance(doc, dict) else None
    if not isinstance(scores, dict):
        raise UserError(f"evaluation file {path}: 'scores' must be an object keyed by language")
    return scores


class Evaluations:
    """The checkpoints' evaluation files that evaluation indexes name ({model id: {benchmark: file}}), each read
    when a score is needed and checked against the sha256 its index records."""

    def __init__(self) -> None:
        self._files: dict[str, dict[str, tuple[str, str | None, Path | None]]] = {}

    def add_index(self, path: Path) -> dict:
        """Take in the files an index names; returns the index."""
        index = read_evaluation_index(path)
        recorded = index.get("sha256") or {}
        for model_id, files in index["files"].items():
            for bench, file in (files or {}).items():
                self._files.setdefault(model_id, {})[bench] = (file, recorded.get(file), path)
        return index

    def add(self, model_id: str, benchmark: str, path: Path) -> None:
        """A file this process has just written."""
        self._files.setdefault(model_id, {})[benchmark] = (str(path), None, None)

    def has(self, model_id: str, benchmark: str) -> bool:
        return benchmark in self._files.get(model_id, {})

    def scores(self, model_id: str, benchmark: str, index_path: Path) -> dict[str, float]:
        """A checkpoint's scores on a benchmark (`index_path`: the index that names the checkpoint, for messages)."""
        try:
            path, recorded, recorded_in = self._files[model_id][benchmark]
        except KeyError:
            raise UserError(f"{index_path}: no '{benchmark}' evaluation for {model_id}") from None
        return _scores_of(read_json(path, "evaluation", recorded, recorded_in), path)


# Selection metrics: (benchmark, score key), declared by the benchmarks' entries.
METRICS = SELECTION_METRICS


def metrics_of(names: list[str], lang: str | None, get, mgsm_languages: list[str]) -> dict[str, float]:
    """The named selection metrics of one checkpoint; `get(benchmark)` returns that benchmark's scores dict."""
    out = {}
    for name in names:
        if name not in METRICS:
            raise UserError(f"selection weight '{name}': unknown metric; allowed: {', '.join(METRICS)}")
        benchmark, key = METRICS[name]
        if name in TARGETED_METRICS and lang is None:
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


def constraint_benchmarks(constraints: dict[str, float]) -> list[str]:
    """The benchmarks the constraints' metrics read, in metric order."""
    return list(dict.fromkeys(METRICS[m][0] for m in constraints))


def candidates(
    runs: list[tuple[Path, dict]],
    evals: Evaluations,
    lang: str | None,
    weights: dict[str, float],
    constraints: dict[str, float],
    base: dict,
    mgsm_languages: list[str],
) -> list[dict]:
    """Every checkpoint of the runs' indexes ((path, index) each), in walk order: its score, metrics and the
    constraints it fails ('failed': None where the constraint benchmarks' files are not among `evals`)."""
    names = list(dict.fromkeys([*weights, *constraints]))
    out = []
    for index_path, index in runs:
        for ckpt in index["checkpoints"]:
            cid = ckpt["model_id"]
            known = all(evals.has(cid, b) for b in constraint_benchmarks(constraints))
            metrics = metrics_of(
                names if known else list(weights),
                lang,
                lambda b: evals.scores(cid, b, index_path),
                mgsm_languages,
            )
            score = sum(w * metrics[m] for m, w in weights.items())
            out.append(
                {
                    "run": index["run"],
                    "checkpoint": ckpt["name"],
                    "path": ckpt["path"],
                    "model_id": cid,
                    "score": round(score, 6),
                    "metrics": metrics,
                    "failed": failed_constraints(metrics, base, constraints) if known else None,
                }
            )
    # Highest score first; ties broken by run then checkpoint name, so the choice is deterministic.
    out.sort(key=lambda c: (-c["score"], c["run"], c["checkpoint"]))
    return out


def walk(
    cands: list[dict], top_k: int, max_per_run: int | None, on_no_pass: str
) -> tuple[list[int], list[int], dict[int, str]]:
    """(taken, unknown, why): the positions in `cands` (walk order) of the candidates taken, in order; of those
    pass one reached whose constraints are unknown (taken as passing; pass two waits until there are none); and why
    pass one passed each other one over ('failed', 'below top-k' or 'run cap'). See the module docstring."""
    taken, unknown, why = [], [], {}
    per_run: Counter = Counter()

    def room(c) -> bool:
        return max_per_run is None or per_run[c["run"]] < max_per_run  # None: no cap

    def take(i) -> None:
        taken.append(i)
        per_run[cands[i]["run"]] += 1

    for i, c in enumerate(cands):
        if c["failed"]:
            why[i] = "failed"
        elif len(taken) == top_k:
            why[i] = "below top-k"
        elif not room(c):
            why[i] = "run cap"
        else:
            if c["failed"] is None:
                unknown.append(i)
            take(i)
    if on_no_pass == "best" and not unknown:
        for i, c in enumerate(cands):
            if len(taken) < top_k and c["failed"] and room(c):
                take(i)
    return sorted(taken), unknown, why


def _failures(failed: list[dict]) -> str:
    return "; ".join(f"{f['metric']}: {f['value']:.4g} < base {f['base']:.4g} - margin {f['margin']:g}" for f in failed)


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
    on_no_pass: str = "best",
    leaders: list[Path] = (),
) -> dict:
    """`indexes`: the runs' evaluation indexes (every checkpoint is a candidate); `leaders`: indexes of `layerswap
    evaluate-leaders`, holding the constraint benchmarks' files of the candidates the walk reaches."""
    constraints = constraints or {}
    base = base_metrics(list(base_evals), list(constraints), lang, mgsm_languages) if constraints else {}
    evals = Evaluations()
    runs = [(path, evals.add_index(path)) for path in indexes]
    for path in leaders:
        evals.add_index(path)
    cands = candidates(runs, evals, lang, weights, constraints, base, mgsm_languages)
    taken, unknown, why = walk(cands, top_k, max_per_run, on_no_pass)
    if unknown:
        ids = [cands[i]["model_id"] for i in unknown]
        raise UserError(
            f"expert '{expert}': no {'/'.join(constraint_benchmarks(constraints))} evaluation of "
            f"{', '.join(ids[:3])}{' and more' if len(ids) > 3 else ''}, which selection reaches in score order "
            f"({', '.join(map(str, leaders)) or 'no --leaders index given'})"
        )
    selected = []
    for i, c in enumerate(cands):
        if i in taken:
            c["status"] = "selected"
            if c["failed"]:
                c["status"] = (
                    f"selected although it failed constraint {_failures(c['failed'])}: fewer than top_k={top_k} "
                    f"candidates pass (selection.on_no_pass: {on_no_pass})"
                )
            selected.append({**c, "rank": len(selected) + 1})
        elif why[i] == "failed":
            c["status"] = "failed constraint " + _failures(c["failed"])
        else:
            c["status"] = why[i] + (" (constraints not evaluated)" if c["failed"] is None and constraints else "")
    if len(selected) < top_k:
        rejected = Counter(f["metric"] for c in cands for f in c["failed"] or ())
        why_short = "".join(
            f", {rejected[m]} fail selection.constraints.{kind}.{m}" for m in constraints if rejected[m]
        )
        raise UserError(
            f"expert '{expert}': only {len(selected)} checkpoints selectable for top_k={top_k} "
            f"(max_per_run={max_per_run}, {len(cands)} candidates{why_short})"
            + (
                f"; selection.on_no_pass: {on_no_pass} (best: take the best of the others by score)"
                if why_short
                else ""
            )
        )
    out = {
        "expert_type": expert,
        "kind": kind,
        "top_k": top_k,
        "max_per_run": max_per_run,
        "weights": weights,
        "constraints": constraints,
        "base": base,
    }
    if constraints:
        out["on_no_pass"] = on_no_pass
    return out | {"selected": selected, "candidates": cands}


@dataclass
class Params:
    """--params-json of `layerswap select` (layerswap/workflow/selection_jobs.py: SelectionJobs.params) and of
    `layerswap evaluate-leaders`."""

    kind: Literal["math", "language", "joint"]
    weights: Annotated[dict[str, float], AtLeast(1)]  # selection metric -> weight
    top_k: Annotated[int, AtLeast(1)]
    mgsm_languages: Annotated[list[str], AtLeast(1)]
    lang: str | None = None  # the target language (None for math experts)
    max_per_run: Annotated[int, AtLeast(1)] | None = None  # None: no cap
    constraints: dict[str, float] = field(default_factory=dict)  # metric -> margin below the base
    on_no_pass: Literal["best", "stop"] = "best"  # fewer than top_k pass: the best failed ones, or stop


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--index", nargs="+", required=True, type=Path, help="evaluation index files of the runs")
    parser.add_argument(
        "--leaders",
        nargs="*",
        default=[],
        type=Path,
        help="the index of `layerswap evaluate-leaders` (none: every candidate's constraint evaluations are in "
        "--index): the constraint benchmarks of the candidates selection reaches in score order",
    )
    parser.add_argument("--expert", required=True)
    parser.add_argument(
        "--params-json",
        required=True,
        help="kind, lang, weights, constraints, top_k, max_per_run, mgsm_languages, on_no_pass",
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
        p.on_no_pass,
        args.leaders,
    )
    write_json_atomic(args.out, result)
    for s in result["selected"]:
        print(f"{args.expert} #{s['rank']}: {s['run']}/{s['checkpoint']} score={s['score']}")
        if s["failed"]:
            print(f"{args.expert} #{s['rank']} is below the base: {s['status']}")
    for c in result["candidates"]:
        if c["failed"] and c["status"].startswith("failed"):
            print(f"{args.expert} rejected: {c['run']}/{c['checkpoint']} score={c['score']}: {c['status']}")
