"""`layerswap merge --recipe R.json --out DIR [--force]`: write a recipe's merged model as a HF directory (what DIR
may be: layerswap/merge/output.py)."""

from __future__ import annotations

import argparse

from layerswap.merge.engine import write_merged
from layerswap.merge.recipes import Recipe


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--recipe", required=True, help="merge recipe (JSON or YAML)")
    parser.add_argument(
        "--out",
        required=True,
        help="output model directory: new, empty, or (with --force) a previous merge output; replaced "
        "atomically. Never a folder this command did not write, nor one holding a recipe input",
    )
    parser.add_argument("--force", action="store_true", help="replace DIR if it is a previous merge output")
    parser.add_argument("--max-shard-bytes", type=int, default=2**30, help="largest safetensors shard")


def run(args: argparse.Namespace) -> None:
    write_merged(Recipe.load(args.recipe), args.out, args.max_shard_bytes, force=args.force, protect=(args.recipe,))
