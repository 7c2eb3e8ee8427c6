"""``layerswap checkpoint-index --out <run>/index.json <run>/index.<benchmark>.json ...`` (rule ``checkpoint_index``):
one evaluation index of a run from its per-benchmark indexes (tasks_per_job: single), the index `layerswap select`
reads."""

from __future__ import annotations

import argparse
from pathlib import Path

from layerswap.contracts import read_evaluation_index, write_json_atomic


def merge_indexes(paths: list[Path]) -> dict:
    """One evaluation index from a run's per-benchmark indexes (tasks_per_job: single), for `select`."""
    merged = None
    for path in paths:
        part = read_evaluation_index(path)
        if merged is None:
            merged = {**part, "files": {}, "sha256": {}}
        for model_id, files in part["files"].items():
            merged["files"].setdefault(model_id, {}).update(files)
        merged["sha256"].update(part["sha256"])
    return merged


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("parts", nargs="+", type=Path, help="the run's index.<benchmark>.json files")


def run(args: argparse.Namespace) -> None:
    write_json_atomic(args.out, merge_indexes(args.parts))
