"""`layerswap evaluate-merges`: `layerswap evaluate` whose models may also be merge recipes, built in memory (one
state dict per recipe, only the tensors that differ from the held model's: swapped into the HF model, or loaded into
the running vLLM engine; written to a temporary dir only for a vLLM that cannot reload weights). With `--store`, only
the models whose results are not kept there are evaluated (`layerswap.evaluation.store`).

Each recipe file is read and validated once, here (`Recipe.load`); the Recipe is what the store keys, the host
loads and the job's `Merger` builds, one merge ahead of the one evaluated (layerswap/merge/merger.py: the GPU does
not wait for the CPU's build; the log's last line says how many merges were built ahead). A command of its own so
that base and checkpoint evaluations do not import the merge engine: an edit to it reruns the evaluations of merges
and nothing else (`layerswap.fingerprint.command_hash`).
"""

from __future__ import annotations

import argparse
import logging

from layerswap.evaluation import evaluate
from layerswap.merge.merger import Merger
from layerswap.merge.recipes import Recipe


def add_arguments(parser: argparse.ArgumentParser) -> None:
    evaluate.add_arguments(parser)  # --store included


def run(args: argparse.Namespace) -> dict:
    evaluate.start_logging()
    models = [(m, src if src.is_dir() else Recipe.load(src)) for m, src in evaluate.job_models(args, recipes=True)]
    merger = Merger()
    try:
        timings = evaluate.run(args, models, merger)
    finally:
        merger.close()
    if merger.built:
        logging.getLogger("layerswap.evaluate").info(
            "evaluate: merges built ahead of their evaluation: %d of %d", merger.built_ahead, merger.built
        )
    return timings
