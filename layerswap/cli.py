"""`layerswap <command>`: the one entry point the Snakemake rules call.

Only the module of the requested command is imported, so light commands (tables, select) do not pay for
torch/transformers/lm-eval start-up.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from layerswap.errors import UserError

COMMANDS: dict[str, tuple[str, str]] = {
    "check-config": ("layerswap.config", "validate a workflow config file"),
    "toy-data": ("layerswap.data.toyworld", "write the synthetic toy-world datasets"),
    "mix": ("layerswap.data.mixes", "normalise source datasets into one SFT mix"),
    "toy-base": ("layerswap.train.pretrain", "build the toy tokenizer and pretrain the toy base model"),
    "sft": ("layerswap.train.sft", "fine-tune an expert, saving a checkpoint every N samples"),
    "select": ("layerswap.select", "pick the top-k checkpoints of an expert type"),
    "checkpoint-index": ("layerswap.select", "one evaluation index of a run from its per-benchmark indexes"),
    "recipes": ("layerswap.merge.recipes", "write merge recipes for the 3x3 pairs of one language"),
    "merge": ("layerswap.merge.cli", "build a merge recipe and write it as a HF model directory"),
    "evaluate": ("layerswap.evaluation.evaluate", "evaluate checkpoints with lm-eval"),
    "evaluate-merges": ("layerswap.evaluation.evaluate_merges", "evaluate checkpoints and merge recipes (built in memory)"),
    "tables": ("layerswap.report.tables", "build the paper's tables from evaluation files"),
    "heatmap": ("layerswap.report.figures", "plot parameter-change heatmaps"),
    "charts": ("layerswap.report.charts", "figures and report pages from evaluation and table files"),
    "plan": ("layerswap.workflow.plan", "dry-run snakemake and summarise, per rule, which jobs would run and why"),
    "prestage": ("layerswap.data.prestage", "download every hub artefact a config needs into the HF cache"),
    "hub-data": ("layerswap.data.hub", "one pre-staged hub source -> its schema's JSONL + manifest"),
    "prepare-base": ("layerswap.data.hub", "link a local or pre-staged base model into results/base"),
    "gguf-base": ("layerswap.train.gguf_base", "dequantise a GGUF base model into a safetensors HF directory"),
    "manifest": ("layerswap.audit", "hash every results file with the job, params and software that made it"),
    "audit": ("layerswap.audit", "re-hash results against the manifest (drift), or trace a table cell"),
    "ablation-table": ("layerswap.workflow.ablations", "an ablation's table (CSV + Markdown) and figure from evaluation files"),
    "cost": ("layerswap.workflow.cost", "print a config's plan cost: jobs per rule, GPU-hours and disk by stage"),
}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in {"-h", "--help"} or argv[0] not in COMMANDS:
        lines = [f"  {name:<13} {help_}" for name, (_, help_) in COMMANDS.items()]
        print("usage: layerswap <command> [options]\n\ncommands:\n" + "\n".join(lines), file=sys.stderr)
        return 0 if argv and argv[0] in {"-h", "--help"} else 2
    name, rest = argv[0], argv[1:]
    module = importlib.import_module(COMMANDS[name][0])
    parser = argparse.ArgumentParser(prog=f"layerswap {name}", description=COMMANDS[name][1])
    module.add_arguments(parser)
    args = parser.parse_args(rest)
    try:
        module.run(args)
    except UserError as err:  # one clear line, no traceback, for bad input
        print(f"layerswap {name}: error: {err}", file=sys.stderr)
        return 1
    return 0


def exit_fast(code: int) -> None:
    """Exit without interpreter teardown: after torch + lm-eval it costs 1-2 s per job, and every output file
    is already closed and renamed into place by then."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def entry() -> None:
    """Console-script entry point."""
    exit_fast(main())


if __name__ == "__main__":
    entry()
