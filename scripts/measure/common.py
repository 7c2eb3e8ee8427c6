"""What the measurement scripts share: random Llama-shaped checkpoints (shapes, config.json, seeded noise), written
by the package's own sharded writer (`layerswap.checkpoints.write_sharded`, as `layerswap merge` writes a merge); a
small word-level tokenizer; the command lines of a Snakemake run and of `layerswap evaluate`; progress lines; and the
wall time and peak memory of a subprocess. Cheap to import: torch and the package are imported where a checkpoint is
written (a script timing its own imports imports this module first)."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import time
import zlib
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

# Shapes as `transformers.LlamaConfig` keywords (written to config.json as they are).
LLAMA_1B = dict(  # Llama-3.2-1B, untied head: 1.50B parameters (tied: 1.24B)
    vocab_size=128256,
    hidden_size=2048,
    intermediate_size=8192,
    num_hidden_layers=16,
    num_attention_heads=32,
    num_key_value_heads=8,
)
LLAMA_8B = dict(  # Llama-3.1-8B
    vocab_size=128256,
    hidden_size=4096,
    intermediate_size=14336,
    num_hidden_layers=32,
    num_attention_heads=32,
    num_key_value_heads=8,
    max_position_embeddings=8192,
)
TINY_SHARDED = dict(  # the 8B code path (several shards) at a size for tests
    vocab_size=512,
    hidden_size=64,
    intermediate_size=192,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=512,
)
#: Elements per chunk a random tensor is drawn and written in (bounded memory at any size).
CHUNK = 1 << 22
REPO = Path(__file__).resolve().parents[2]


def say(msg: str) -> None:
    """A progress line on stderr, with the time."""
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def shapes(cfg: dict) -> dict[str, tuple[int, ...]]:
    """Every tensor of a LlamaForCausalLM of `cfg`, in the order transformers saves them (no `lm_head.weight` where
    `tie_word_embeddings`)."""
    h, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    kv = cfg["num_key_value_heads"] * cfg.get("head_dim", h // heads)
    inter = cfg["intermediate_size"]
    out: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (cfg["vocab_size"], h)}
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        out |= {
            p + "self_attn.q_proj.weight": (h, h),
            p + "self_attn.k_proj.weight": (kv, h),
            p + "self_attn.v_proj.weight": (kv, h),
            p + "self_attn.o_proj.weight": (h, h),
            p + "mlp.gate_proj.weight": (inter, h),
            p + "mlp.up_proj.weight": (inter, h),
            p + "mlp.down_proj.weight": (h, inter),
            p + "input_layernorm.weight": (h,),
            p + "post_attention_layernorm.weight": (h,),
        }
    out["model.norm.weight"] = (h,)
    if not cfg.get("tie_word_embeddings", False):
        out["lm_head.weight"] = (cfg["vocab_size"], h)
    return out


def parameters(cfg: dict) -> int:
    return sum(math.prod(s) for s in shapes(cfg).values())


def hf_config(cfg: dict, dtype: str = "bfloat16") -> dict:
    """config.json of a LlamaForCausalLM of `cfg` (the keys `cfg` gives win)."""
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "head_dim": cfg["hidden_size"] // cfg["num_attention_heads"],
        "max_position_embeddings": 2048,
        "rms_norm_eps": 1e-5,
        "rope_theta": 500000.0,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "torch_dtype": dtype,
        "bos_token_id": 1,
        "eos_token_id": 2,
    } | cfg


def noise(seed: int, name: str, start: int, n: int) -> torch.Tensor:
    """N(0, 1) draws for elements start..start+n of tensor `name`: the same at any chunking."""
    import torch

    g = torch.Generator().manual_seed(seed * 1_000_003 + zlib.crc32(name.encode()) * 7919 + start)
    return torch.randn(n, generator=g)


def random_model(
    path: Path,
    cfg: dict,
    seed: int,
    base_seed: int | None = None,
    dtype: str = "bfloat16",
    max_shard_bytes: int = 2**30,
    tokenizer: Path | None = None,
    record_base: bool = True,
) -> Path:
    """A random Llama checkpoint at `path` (kept where it is already there): weights N(0, 0.02), norms 1 + N(0, 0.02);
    with `base_seed`: that base plus N(0, 0.002) noise (an "expert"). Sharded safetensors + index, config.json, and
    the tokenizer files of the directory `tokenizer` (or a word-level one of its own); written to a temporary sibling
    directory first, tensor by tensor, chunk by chunk (bounded memory at any size). `record_base`: the base record
    `layerswap_base.json` ("synthetic-<the base's seed>"), so models of one base are checked as such."""
    import torch

    from layerswap.checkpoints import BASE_FINGERPRINT_FILE, write_sharded

    if (path / "config.json").is_file():
        return path
    torch_dtype = getattr(torch, dtype)
    tmp = path.with_name(path.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)

    def fill(name: str, start: int, stop: int, dest: torch.Tensor) -> None:
        norm = name.endswith("norm.weight")
        x = 0.02 * noise(seed if base_seed is None else base_seed, name, start, stop - start) + (1.0 if norm else 0.0)
        if base_seed is not None:
            x = x.to(torch_dtype).float() + 0.002 * noise(seed, name, start, stop - start)
        dest.copy_(x)

    write_sharded(tmp, [(n, torch_dtype, s) for n, s in shapes(cfg).items()], fill, max_shard_bytes, CHUNK)
    (tmp / "config.json").write_text(json.dumps(hf_config(cfg, dtype), indent=1))
    if record_base:
        (tmp / BASE_FINGERPRINT_FILE).write_text(json.dumps({"base_sha256": f"synthetic-{base_seed or seed}"}))
    if tokenizer is None:
        word_tokenizer(tmp)
    else:
        for f in tokenizer.iterdir():
            if f.name.startswith(("tokenizer", "special_tokens")):
                shutil.copy(f, tmp / f.name)
    os.replace(tmp, path)
    return path


def word_tokenizer(path: Path) -> None:
    """A small word-level tokenizer (<unk> <pad> <s> </s> w0..w59): for models whose measurement reads no real text."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["<unk>", "<pad>", "<s>", "</s>"] + [f"w{i}" for i in range(60)]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="<unk>", pad_token="<pad>", bos_token="<s>", eos_token="</s>"
    ).save_pretrained(path)


def load_weights(model_dir: Path) -> dict[str, torch.Tensor]:
    """Every tensor of a checkpoint's safetensors files (one file or shards), by name."""
    from safetensors.torch import load_file

    out: dict[str, torch.Tensor] = {}
    for file in sorted(model_dir.glob("*.safetensors")):
        out |= load_file(str(file))
    return out


def snakemake_command(work: Path, *configfiles: Path) -> list[str]:
    """The workflow of this repository run in `work` with `configfiles`, by this interpreter's Snakemake (the caller
    adds `--cores` and the rest)."""
    snakefile = str(REPO / "Snakefile")
    return [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        snakefile,
        "--directory",
        str(work),
        "--configfile",
        *map(str, configfiles),
    ]


def swap_recipe(path: Path, task: Path, lang: Path, params: dict, base: Path | None = None) -> Path:
    """A layer-swap recipe of `task` and `lang` (`params`: bottom, top, ...) written to `path`."""
    recipe = {"method": "layer_swap", "inputs": {"task": str(task), "lang": str(lang)}, "params": params}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(recipe if base is None else {"base": str(base), **recipe}))
    return path


def evaluate_args(
    data: Path, out: Path, benchmarks: dict, batch_size: int, threads: int, models: list[str], seed: int = 0
) -> list[str]:
    """The options of `layerswap evaluate` (layerswap.evaluation.evaluate.add_arguments) for `models` ("ID=PATH")."""
    argv = ["--data-dir", str(data), "--out-dir", str(out), "--benchmarks-json", json.dumps(benchmarks)]
    argv += ["--batch-size", str(batch_size), "--seed", str(seed), "--threads", str(threads)]
    for model in models:
        argv += ["--model", model]
    return argv


def run_timed(cmd: list[str], env: dict | None = None) -> tuple[float, int]:
    """Wall seconds and peak RSS bytes of one subprocess (stdout dropped); exits with its stderr's tail on failure."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{err.decode()[-3000:]}")
    return wall, usage.ru_maxrss * 1024
