"""``layerswap prepare-base --source S --out results/base`` (rule ``prepare_base``): a local HF directory or a
pre-staged hub snapshot (`layerswap.data.hub.snapshot`) -> ``results/base``: symbolic links to its config, tokenizer
and safetensors files, and the weights' sha256 as linked. A directory with only pickle weights (``*.bin``/``*.pt``) is
refused.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from layerswap.checkpoints import PICKLE_SUFFIXES, weight_files
from layerswap.data.hub import MODEL_PATTERNS, is_local_source, snapshot
from layerswap.errors import UserError
from layerswap.hashcache import sha256
from layerswap.hf_cache import use_hf_home


def model_files(directory: Path) -> list[Path]:
    """Config, tokenizer and safetensors files of a HF model directory; refuses pickle-only weights."""
    files = sorted(p for p in directory.iterdir() if p.is_file())
    weights = [p for p in files if p.suffix == ".safetensors"]
    if not weights:
        pickles = [p.name for p in files if p.suffix in PICKLE_SUFFIXES]
        what = f"only pickle weights ({', '.join(pickles[:3])})" if pickles else "no weights"
        raise UserError(
            f"base model {directory}: {what}; need *.safetensors (convert it, e.g. save_pretrained "
            "with safe_serialization=True)"
        )
    if not (directory / "config.json").is_file():
        raise UserError(f"base model {directory}: no config.json")
    return [
        p
        for p in files
        if p.suffix == ".safetensors"
        or p.suffix == ".json"
        or p.name.startswith("tokenizer")
        or p.suffix in (".model", ".tiktoken")
    ]


def prepare_base(source: str, out: Path, revision: str | None = None, snapshot_fn=None) -> list[str]:
    """Link the base model's files into `out` (config.json last, so it marks a complete directory)."""
    local = Path(source).expanduser()
    if local.is_dir():
        directory = local.resolve()
    elif is_local_source(source):
        raise UserError(f"base.source {source}: no such directory")
    else:
        item = {"kind": "model", "hub_id": source, "revision": revision, "allow_patterns": MODEL_PATTERNS}
        directory = (snapshot_fn or (lambda i: snapshot(i, local_files_only=True)))(item)
    files = model_files(directory)
    out.mkdir(parents=True, exist_ok=True)
    for old in out.iterdir():
        if old.is_symlink() or old.is_file():
            old.unlink()
    ordered = sorted(files, key=lambda p: p.name == "config.json")
    for path in ordered:
        (out / path.name).symlink_to(path.resolve())
    # the weights' sha256 as linked (`weights_sha256`): every job that reads the base checks it against this record
    # (layerswap.checkpoints.export_records), hashed once per file state (layerswap.hashcache)
    weights = {p.name: sha256(p) for p in weight_files(out)}
    (out / "layerswap_source.json").write_text(
        json.dumps({"source": source, "revision": revision, "directory": str(directory), "weights_sha256": weights})
        + "\n"
    )
    return [p.name for p in ordered]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--source", required=True, help="a local HF directory or a hub id (pre-staged)")
    parser.add_argument("--revision", default=None)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--hf-home", default=None)


def run(args: argparse.Namespace) -> None:
    use_hf_home(args.hf_home)
    names = prepare_base(args.source, args.out, args.revision)
    print(f"linked {len(names)} files into {args.out}")
