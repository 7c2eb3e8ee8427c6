"""`layerswap merge --recipe R.json --out DIR`: write a recipe's merged model as a HF directory."""

from __future__ import annotations

import argparse

from layerswap.merge.engine import write_merged
from layerswap.merge.recipes import load_recipe


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--recipe", required=True, help="merge recipe (JSON or YAML)")
    parser.add_argument("--out", required=True, help="output model directory (replaced atomically)")
    parser.add_argument("--max-shard-bytes", type=int, default=2**30, help="largest safetensors shard")


def run(args: argparse.Namespace) -> None:
    write_merged(load_recipe(args.recipe), args.out, args.max_shard_bytes)
