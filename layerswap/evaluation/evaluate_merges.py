"""`layerswap evaluate-merges`: `layerswap evaluate` whose models may also be merge recipes, built in memory (HF
backend: one state dict per recipe, swapped into the held model) or written to a temporary dir (vLLM). With `--store`,
only the models whose results are not kept there are evaluated (`layerswap.evaluation.store`).

A command of its own so that base and checkpoint evaluations do not import the merge engine: an edit to it reruns
the evaluations of merges and nothing else (`layerswap.fingerprint.command_hash`).
"""

from __future__ import annotations

import argparse

from layerswap.evaluation import evaluate
from layerswap.merge import engine


def add_arguments(parser: argparse.ArgumentParser) -> None:
    evaluate.add_arguments(parser)  # --store included


def run(args: argparse.Namespace) -> dict:
    return evaluate.run(args, merges=engine)
