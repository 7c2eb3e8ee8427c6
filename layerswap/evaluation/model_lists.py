"""Which of an evaluation job's `--model` candidates it evaluates: all of them, or those a file written earlier in
the DAG names (`--only-models`: Table 2's models, `layerswap table2-models`; `--only-selected`: the top-k checkpoints
of a selection file, `layerswap select`). The candidates are every model the job may be asked for, known when the
DAG is built; the file, written by a job, says which of them a table reads. Filtering happens before any model is
opened, so a candidate left out costs nothing.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from layerswap.contracts import checkpoint_model_id, read_json, read_selection
from layerswap.errors import UserError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--only-models",
        type=Path,
        help="evaluate only the --model ids this JSON file lists under 'models' (layerswap table2-models)",
    )
    parser.add_argument(
        "--only-selected",
        type=Path,
        help="evaluate only the --model ids of the checkpoints this selection file selects (its top --top-k)",
    )
    parser.add_argument("--top-k", type=int, default=None, help="with --only-selected: how many of its entries")


def wanted(args: argparse.Namespace) -> list[str] | None:
    """The model ids the job's file names (None: no file, every candidate)."""
    if getattr(args, "only_models", None) is not None and getattr(args, "only_selected", None) is not None:
        raise UserError("--only-models and --only-selected: give one of them")
    if getattr(args, "only_models", None) is not None:
        data = read_json(args.only_models, "model list")
        models = data.get("models") if isinstance(data, dict) else None
        if not isinstance(models, list) or not all(isinstance(m, str) and m for m in models):
            raise UserError(f"{args.only_models}: expected an object with 'models': [model id, ...]")
        return models
    if getattr(args, "only_selected", None) is not None:
        if args.top_k is None or args.top_k < 1:
            raise UserError("--only-selected needs --top-k >= 1")
        entries = read_selection(args.only_selected, ("run", "checkpoint"))[: args.top_k]
        return [checkpoint_model_id(e["run"], e["checkpoint"]) for e in entries]
    return None


def restrict(items: list[str], args: argparse.Namespace) -> list[str]:
    """The `--model ID=SOURCE` items to evaluate. With --only-models every listed id must be a candidate (a model the
    job cannot build is an error naming it); with --only-selected the selection's checkpoints of other runs are not
    this job's (a run's job evaluates its own), so only the candidates among them are kept."""
    ids = wanted(args)
    if ids is None:
        return items
    by_id = {item.partition("=")[0]: item for item in items}
    if getattr(args, "only_models", None) is not None:
        missing = [m for m in ids if m not in by_id]
        if missing:
            raise UserError(
                f"{args.only_models}: model(s) {', '.join(missing[:5])} are not among this job's --model candidates"
            )
    return [by_id[m] for m in dict.fromkeys(ids) if m in by_id]
