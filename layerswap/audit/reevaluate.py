"""`layerswap audit --reevaluate-store`: a model whose results the evaluation store fed is evaluated again, without the
store, from the arguments its entry records, or the manifest's record of the entry where the store was deleted
(layerswap.audit.store_check names the results it compares)."""

from __future__ import annotations

import argparse
import logging
import os
import tempfile
from pathlib import Path


def _redo(entry: Path, path: str) -> str:
    """The commands that evaluate `path` again by its job, without the entry (removed first where it is there)."""
    return (f"rm -r {entry} && " if Path(entry).is_dir() else "") + f"rm {path} && snakemake {path}"


def reevaluate_entry(entry: Path, doc: dict, paths: list[str]) -> list[str]:
    """Evaluate the model of a store entry again, without the store, from the settings it records
    (layerswap.evaluation.job.EvaluationJob.record), and compare each result file in `paths` with the fresh one. The
    fresh evaluation's own key must be the entry's (same job, same model), else the entry cannot be checked and is
    named."""
    from layerswap.errors import UserError
    from layerswap.evaluation import evaluate, evaluate_merges
    from layerswap.evaluation.job import COMMANDS, EvaluationJob
    from layerswap.evaluation.store import _sha256, job_key, model_doc

    args_doc = doc.get("args") or {}
    model = doc.get("model") or {}
    model_id, source = model.get("model_id"), args_doc.get("source")
    try:
        job = (
            EvaluationJob.from_record(args_doc) if model_id and source and args_doc.get("command") in COMMANDS else None
        )
    except UserError as err:  # written by another version, or edited
        job, why = None, f" ({err})"
    else:
        why = " (made by an older version)"
    if job is None:
        return [
            f"store: {p}: entry {entry} records no arguments to evaluate it again{why}; "
            f"evaluate it without the store: {_redo(entry, p)}"
            for p in paths
        ]
    module = evaluate_merges if job.command == "evaluate-merges" else evaluate
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    with tempfile.TemporaryDirectory(prefix="layerswap-audit-") as tmp:
        args = parser.parse_args(["--model", f"{model_id}={source}", "--out-dir", tmp, *job.argv()])
        from layerswap.merge.recipes import Recipe

        model_source = (
            Recipe.load(source) if job.command == "evaluate-merges" and not Path(source).is_dir() else Path(source)
        )
        import torch

        device, dtype = job.resolved(torch)
        if (
            _sha256(job_key(job, job.plans(), dtype, device)) != doc["job"]
            or model_doc(model_id, model_source) != model
        ):
            return [
                f"store: {p}: entry {entry} cannot be evaluated again here (its job or model differs from what "
                f"{source} and this machine give now); evaluate it without the store: {_redo(entry, p)}"
                for p in paths
            ]
        logging.getLogger("layerswap.evaluate").info(
            "audit: evaluating %s again (store entry %s)", model_id, entry.name
        )
        module.run(args)
        out = []
        for p in paths:
            fresh = Path(tmp) / model_id / Path(p).name
            same = fresh.is_file() and os.path.isfile(p) and fresh.read_bytes() == Path(p).read_bytes()
            if not same:
                out.append(
                    f"store: {p}: differs from a fresh evaluation of {model_id} (store entry {entry} is wrong: "
                    f"{_redo(entry, p)})"
                )
    return out
