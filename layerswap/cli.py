"""`layerswap <command>`: the one entry point the Snakemake rules call.

Only the module of the requested command is imported, so light commands (tables, select) do not pay for
torch/transformers/lm-eval start-up.

Errors a user can act on are one line on stderr and exit status 1: a `UserError` (bad input), and an operating-system
error (disk full, permission denied, read-only file system, missing file), a file that is not UTF-8 or not YAML
(`layerswap.errors.one_line`). `layerswap --debug <command> ...` (or `LAYERSWAP_DEBUG=1`) adds the traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback

from layerswap.errors import UserError, one_line

#: Set to 1 (or give `--debug` before the command) for the traceback behind a one-line error.
DEBUG_ENV = "LAYERSWAP_DEBUG"

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
    "manifest": ("layerswap.audit.manifest", "hash every results file with the job, params and software that made it"),
    "audit": ("layerswap.audit.check", "re-hash results against a manifest (drift), trace a table cell, or repair"),
    "ablation-table": ("layerswap.report.ablation_table",
                       "an ablation's table (CSV + Markdown) and figure from evaluation files"),
    "cost": ("layerswap.workflow.cost", "print a config's plan cost: jobs per rule, GPU-hours and disk by stage"),
}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = os.environ.get(DEBUG_ENV, "") not in ("", "0")
    if argv and argv[0] == "--debug":
        debug, argv = True, argv[1:]
    if argv and argv[0] not in COMMANDS and argv[0] not in {"-h", "--help"}:
        import difflib

        near = difflib.get_close_matches(argv[0], list(COMMANDS), n=1)
        print(f"layerswap: error: unknown command '{argv[0]}'" + (f" (did you mean '{near[0]}'?)" if near else "")
              + "; `layerswap --help` lists the commands", file=sys.stderr)
        return 2
    if not argv or argv[0] in {"-h", "--help"}:
        lines = [f"  {name:<13} {help_}" for name, (_, help_) in COMMANDS.items()]
        print("usage: layerswap [--debug] <command> [options]\n\ncommands:\n" + "\n".join(lines)
              + f"\n\n--debug (or {DEBUG_ENV}=1): show the traceback behind a one-line error", file=sys.stderr)
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    module = importlib.import_module(COMMANDS[name][0])
    parser = argparse.ArgumentParser(prog=f"layerswap {name}", description=COMMANDS[name][1])
    module.add_arguments(parser)
    args = parser.parse_args(rest)
    try:
        module.run(args)
    except UserError as err:  # one clear line, no traceback, for bad input
        return _report(name, str(err), debug, hint=False)
    except Exception as err:  # noqa: BLE001 - only the kinds one_line knows; anything else is a bug: re-raised
        line = one_line(err)
        if line is None:
            raise
        return _report(name, line, debug, hint=True)
    return 0


def _report(name: str, line: str, debug: bool, hint: bool) -> int:
    if debug:
        traceback.print_exc()
    elif hint:
        line += f" (traceback: layerswap --debug {name} ..., or {DEBUG_ENV}=1)"
    print(f"layerswap {name}: error: {line}", file=sys.stderr)
    return 1


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
