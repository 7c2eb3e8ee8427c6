"""`layerswap evaluate-leaders` (rule evaluate_checkpoint_leaders; selection.constraint_evaluation: leaders): the
constraint benchmarks of an expert type's selection, evaluated on the candidates selection reaches in score order
only, not on every checkpoint.

The runs' indexes of the primary evaluations (`--primary`: every checkpoint on what the selection weights read) and
the base's evaluations of the constraint benchmarks give each candidate its score; the walk of `layerswap select`
(layerswap/select.py: `walk`, its docstring says why this evaluates what selection reads and no more) lists the
candidates it reaches whose constraint results are missing: round one, the top_k leaders within max_per_run; each
further round, the candidates that take the places of those that failed. Each round is one `layerswap evaluate` of
those candidates on the constraint benchmarks (`--benchmarks-json`), into the same files and store as every
checkpoint evaluation; the job ends when the walk lists none, and writes the index `layerswap select --leaders`
reads (`--index`: the files and their sha256, and the rounds).

A job cut short (time limit, preemption, kill -9) resumes from the store: the rounds depend on the scores alone, so
a rerun walks the same rounds, copies what the store keeps and evaluates the rest, and writes the same bytes. Each
round builds its model host anew (a few seconds of a job that is mostly evaluation; the rounds are few: one when the
leaders pass).
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from layerswap import select
from layerswap.command_params import parse
from layerswap.contracts import write_json_atomic
from layerswap.errors import UserError
from layerswap.evaluation import evaluate
from layerswap.evaluation.results import result_file
from layerswap.evaluation.tasks import parse_benchmarks

log = logging.getLogger("layerswap.evaluate")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    evaluate.add_arguments(parser)  # --model: every candidate; --index: this job's index; --store
    parser.add_argument(
        "--primary",
        nargs="+",
        required=True,
        type=Path,
        help="the runs' evaluation indexes of the primary benchmarks (what `layerswap select --index` reads)",
    )
    parser.add_argument(
        "--base-evals", nargs="+", required=True, type=Path, help="the base's evaluations of the constraint benchmarks"
    )
    parser.add_argument("--expert", required=True)
    parser.add_argument(
        "--params-json",
        required=True,
        help="the selection's params, as `layerswap select --params-json` takes them (on_no_pass aside: the walk "
        "evaluates the same candidates either way)",
    )


def run(args: argparse.Namespace) -> None:
    evaluate.start_logging()
    p = parse(select.Params, args.params_json)
    if args.index is None:
        raise UserError("--index: required (the index `layerswap select --leaders` reads)")
    if args.only_models is not None or args.only_selected is not None:
        raise UserError("--only-models / --only-selected: the walk chooses which candidates are evaluated")
    wanted = select.constraint_benchmarks(p.constraints)
    given = list(parse_benchmarks(args.benchmarks_json))
    if not set(given) <= set(wanted):
        raise UserError(
            f"--benchmarks-json: evaluates {', '.join(given)}; the selection's constraints read "
            f"{', '.join(wanted) or 'nothing'}"
        )
    sources = dict(item.partition("=")[::2] for item in args.model)
    base = select.base_metrics(args.base_evals, list(p.constraints), p.lang, p.mgsm_languages)
    evals = select.Evaluations()
    runs = [(path, evals.add_index(path)) for path in args.primary]
    for path, index in runs:  # a constraint benchmark this job does not evaluate: the primary indexes hold it
        for c in index["checkpoints"]:
            lacking = [b for b in wanted if b not in given and not evals.has(c["model_id"], b)]
            if lacking:
                raise UserError(
                    f"{path}: no '{lacking[0]}' evaluation for {c['model_id']}, and --benchmarks-json does not "
                    "evaluate it (a constraint benchmark is evaluated on every checkpoint or on the leaders)"
                )
    out_dir, rounds = Path(args.out_dir), []
    while True:
        cands = select.candidates(runs, evals, p.lang, p.weights, p.constraints, base, p.mgsm_languages)
        _, unknown, _ = select.walk(cands, p.top_k, p.max_per_run, p.on_no_pass)
        if not unknown:
            break
        ids = [cands[i]["model_id"] for i in unknown]
        missing = [m for m in ids if m not in sources]
        if missing:
            raise UserError(f"--model: {', '.join(missing)} (candidates of --primary) are not among this job's models")
        rounds.append(ids)
        log.info("evaluate-leaders: %s round %d: %s", args.expert, len(rounds), ", ".join(ids))
        models = [f"{m}={sources[m]}" for m in ids]
        evaluate.run(argparse.Namespace(**{**vars(args), "model": models, "index": None, "run": None}))
        for m in ids:
            for bench in given:
                evals.add(m, bench, result_file(out_dir, m, bench))
    done = [m for r in rounds for m in r]
    write_json_atomic(args.index, leaders_index(args.expert, rounds, cands, given, out_dir))
    log.info(
        "evaluate-leaders: %s: %d of %d candidates evaluated on %s, in %d round(s)",
        args.expert,
        len(done),
        len(cands),
        ", ".join(given),
        len(rounds),
    )


def leaders_index(expert: str, rounds: list[list[str]], cands: list[dict], benchmarks: list[str], out_dir: Path):
    """The job's index (an evaluation index, `contracts.read_evaluation_index`): the evaluated candidates, round by
    round, their files and the files' sha256."""
    from layerswap.fingerprint import file_sha256

    by_id = {c["model_id"]: c for c in cands}
    done = [m for r in rounds for m in r]
    files = {m: {b: str(result_file(out_dir, m, b)) for b in benchmarks} for m in done}
    return {
        "expert": expert,
        "run": None,
        "rounds": rounds,
        "checkpoints": [
            {"model_id": m, "run": by_id[m]["run"], "name": by_id[m]["checkpoint"], "path": by_id[m]["path"]}
            for m in done
        ],
        "files": files,
        "sha256": {f: file_sha256(Path(f)) for by_bench in files.values() for f in by_bench.values()},
    }
