"""Weights into a running vLLM engine, as RL frameworks do between rollouts (TRL's colocated GRPO, verl, OpenRLHF).

`WeightsExtension` is mixed into vLLM's GPU worker (``LLM(worker_extension_cls=...)``, named by its import path so
the worker imports it itself). Its method `layerswap_load_weights` hands an iterable of (HF tensor name, tensor) to
``self.model_runner.model.load_weights(weights=...)``: the model's own loader, which maps HF names onto vLLM's fused
parameters (q/k/v -> qkv_proj, gate/up -> gate_up_proj) and copies in place, so the engine, its KV-cache blocks and
CUDA graphs stay. The engine is built in-process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``, one GPU): collective_rpc then
calls the worker directly and the state dict passes by reference, not serialised. After the update the caller must
``LLM.reset_prefix_cache()``: cached prefix KV was computed with the previous weights.

Checked against vLLM's source (vllm/entrypoints/llm.py: ``LLM.collective_rpc(method, timeout, args, kwargs)``,
``LLM.reset_prefix_cache()``; ``worker_extension_cls`` an EngineArgs field), not run: vLLM needs a GPU.
"""

from __future__ import annotations

EXTENSION = "layerswap.evaluation.vllm_weights.WeightsExtension"
METHOD = "layerswap_load_weights"


class WeightsExtension:
    """Methods added to vLLM's worker (`self` is the worker: it has `model_runner`)."""

    def layerswap_load_weights(self, weights) -> int:
        import torch

        model = self.model_runner.model
        items = list(weights.items() if hasattr(weights, "items") else weights)
        with torch.no_grad():
            model.load_weights(weights=iter(items))
        return len(items)


def engine_of(lm):
    """The `vllm.LLM` an lm-eval `VLLM` wrapper holds (`self.model`; a data-parallel wrapper holds none)."""
    return getattr(lm, "model", None)


def can_update(llm) -> str | None:
    """None where `llm` has what an in-place update needs, else why not (one phrase, for the log)."""
    if llm is None:
        return "the lm-eval wrapper holds no engine (data_parallel_size > 1 builds one per call)"
    missing = [m for m in ("collective_rpc", "reset_prefix_cache") if not callable(getattr(llm, m, None))]
    if missing:
        return f"the installed vLLM's LLM has no {', '.join(missing)}"
    return None


def update_weights(llm, state: dict) -> None:
    """Load `state` ({HF name: tensor}) into every worker of `llm`, then drop the prefix cache of the old weights."""
    llm.collective_rpc(METHOD, args=(state,))
    llm.reset_prefix_cache()
