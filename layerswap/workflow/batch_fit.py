"""Batches that fit: per (benchmark, language key) the evaluation batch whose memory fits the GPU, from the model's
shapes and that key's lengths (layerswap/workflow/token_counts.py).

Memory of one batch of B items on the HF backend (bytes; arithmetic, each term a tensor lm-eval / transformers hold at
once, not measured at 8B):
- the weights: parameters x 2 (bf16, what `layerswap evaluate` runs on a GPU);
- the KV cache: B x tokens x 2 (K and V) x layers x key-value heads x head size x 2 bytes (Llama 3.1 8B: 128 KiB a
  token); tokens = the longest prompt + the generation budget (HF pads a batch to its longest; lm-eval sorts requests
  longest first, so the first batch holds the longest prompts); a log-likelihood forward keeps its cache too;
- the largest transient of a decoder layer: the MLP's gate, up and product, B x tokens x 3 x intermediate x 2 bytes;
- log-likelihood tasks: lm-eval's logits and their log-softmax, both [B, tokens, vocabulary] in bf16.
The usable memory is HEADROOM of the GPU's (CUDA context, allocator fragmentation). The batch is the job's batch
halved until it fits; where even one item does not fit, the config is refused in one line naming the key.

vLLM manages its own memory (a KV-cache pool from `gpu_memory_utilization`; sequences beyond it wait): its batch is
never shrunk, but one sequence (the key's longest prompt + budget) must fit the pool, and the plan counts the
sequences the pool holds at once (`concurrency`).
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

from layerswap.errors import UserError
from layerswap.workflow.token_counts import Lengths

GB = 1e9
#: an upper bound on the toy world's word-level vocabulary (about 190 words): its bases are counted with this many
TOY_VOCAB = 1024
HEADROOM = 0.9  # estimate: of the GPU's memory, what tensors may use (CUDA context ~0.5-1 GB, fragmentation)
VLLM_UTILIZATION = 0.9  # vLLM's default gpu_memory_utilization
BF16 = 2
#: the GPU the rates were measured on (config/paper.yaml: one H100 80GB), where evaluation.gpu_memory_gb is unset
DEFAULT_GPU_GB = 80.0


def count_parameters(
    hidden: int, intermediate: int, layers: int, heads: int, kv_heads: int, vocab: int, tied: bool = False
) -> int:
    """Weights of a Llama-shaped decoder: attention (q, o full; k, v per key-value head), gated MLP, two norms per
    layer, the embeddings (and an untied LM head), the final norm."""
    head_dim = hidden // heads
    layer = 2 * hidden * hidden + 2 * hidden * kv_heads * head_dim + 3 * hidden * intermediate + 2 * hidden
    return layers * layer + vocab * hidden * (1 if tied else 2) + hidden


def parameters(config: dict) -> int | None:
    """The base's parameter count: `base.parameters`, else from its shape (toy, or a local directory's config.json);
    None where neither is known before the run (a hub id or a GGUF file without `base.parameters`)."""
    base = config["base"]
    if base.get("parameters"):
        return int(base["parameters"])
    if base["source"] == "toy":
        m = base.get("toy_model") or {}
        if not m:
            return None
        return count_parameters(
            m["hidden_size"],
            m["intermediate_size"],
            base["num_layers"],
            m["num_attention_heads"],
            m["num_key_value_heads"],
            TOY_VOCAB,
        )
    shape = Path(base["source"]) / "config.json"
    if shape.is_file():
        try:
            c = json.loads(shape.read_text(encoding="utf-8"))
            return count_parameters(
                c["hidden_size"],
                c["intermediate_size"],
                c["num_hidden_layers"],
                c["num_attention_heads"],
                c.get("num_key_value_heads", c["num_attention_heads"]),
                c["vocab_size"],
                bool(c.get("tie_word_embeddings", False)),
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None
    return None


@dataclasses.dataclass(frozen=True)
class Shapes:
    """What a Llama-shaped decoder holds per token and in all."""

    layers: int
    hidden: int
    intermediate: int
    kv_heads: int
    head_dim: int
    vocab: int
    parameters: int

    @property
    def kv_bytes(self) -> int:
        """KV cache bytes a token holds (bf16)."""
        return 2 * self.layers * self.kv_heads * self.head_dim * BF16

    @property
    def weight_bytes(self) -> float:
        return self.parameters * BF16


def shapes_of(config: dict, parameters: int | None, hf_home: str | None = None) -> Shapes | None:
    """The base's shapes: `base.shape` (a copy of its config.json's fields), a local base's config.json, the toy
    base's `toy_model`, or the pre-staged hub snapshot's config.json in `hf_home`; None where none is known."""
    base = config["base"]
    shape = base.get("shape")
    if not shape and base["source"] == "toy" and base.get("toy_model"):
        shape = {**base["toy_model"], "num_hidden_layers": base["num_layers"], "vocab_size": TOY_VOCAB}
    if not shape:
        path = Path(base["source"]).expanduser() / "config.json"
        if not path.is_file():
            path = _cached_config(base, hf_home)
        if path is not None and path.is_file():
            shape = json.loads(path.read_text(encoding="utf-8"))
    if not shape:
        return None
    heads = int(shape["num_attention_heads"])
    hidden = int(shape["hidden_size"])
    layers = int(shape["num_hidden_layers"])
    kv = int(shape.get("num_key_value_heads", heads))
    vocab = int(shape["vocab_size"])
    params = parameters or count_parameters(hidden, int(shape["intermediate_size"]), layers, heads, kv, vocab)
    head_dim = int(shape.get("head_dim") or hidden // heads)
    return Shapes(layers, hidden, int(shape["intermediate_size"]), kv, head_dim, vocab, int(params))


def _cached_config(base: dict, hf_home: str | None) -> Path | None:
    """The pre-staged base's config.json in the HF cache `hf_home` (storage.hf_home; not the environment's: the jobs'
    params must not depend on it), or None."""
    if not hf_home:
        return None
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    cache = str(Path(hf_home).expanduser() / "hub")
    found = try_to_load_from_cache(base["source"], "config.json", cache_dir=cache, revision=base.get("revision"))
    return Path(found) if isinstance(found, str) else None


def tokens(lengths: Lengths) -> int:
    """The longest sequence of a key: its longest prompt + continuation or generation budget."""
    return int(lengths.prompt_max + math.ceil(lengths.continuation) + lengths.new_tokens)


def batch_bytes(shapes: Shapes, lengths: Lengths, batch: int) -> dict[str, float]:
    """The HF backend's memory of one batch, by part (bytes)."""
    n = batch * tokens(lengths)
    parts = {
        "weights": shapes.weight_bytes,
        "kv_cache": n * shapes.kv_bytes,
        "activations": n * 3 * shapes.intermediate * BF16,
    }
    if not lengths.new_tokens:  # log-likelihood: logits and log-softmax over the whole sequence
        parts["logits"] = 2 * n * shapes.vocab * BF16
    return parts


class Fit:
    """Batches per key for one config: `gpu_gb` of GPU memory (evaluation.gpu_memory_gb)."""

    def __init__(self, shapes: Shapes, gpu_gb: float):
        self.shapes, self.gpu_gb = shapes, gpu_gb
        self.usable = gpu_gb * GB * HEADROOM

    def batch(self, where: str, lengths: Lengths, batch: int, backend: str) -> int:
        """The batch of a key (`where`: its config key and language key, for the refusal); vLLM: `batch`."""
        if backend == "vllm":
            self.concurrency(where, lengths, batch)  # refuses a sequence the pool cannot hold
            return batch
        b = batch
        while b >= 1:
            if sum(batch_bytes(self.shapes, lengths, b).values()) <= self.usable:
                return b
            b //= 2
        parts = batch_bytes(self.shapes, lengths, 1)
        detail = ", ".join(f"{k} {v / GB:,.1f} GB" for k, v in parts.items())
        raise UserError(
            f"config key '{where}': even one item does not fit on the GPU: its longest prompt and budget "
            f"({tokens(lengths):,} tokens) need {sum(parts.values()) / GB:,.1f} GB ({detail}) of "
            f"{self.usable / GB:,.1f} GB usable (evaluation.gpu_memory_gb {self.gpu_gb:g} x {HEADROOM}); lower its "
            "shots or max_new_tokens, or give a larger GPU"
        )

    def pool_bytes(self) -> float:
        """vLLM's KV-cache pool: its share of the GPU less the weights and one forward's activations (estimate)."""
        return self.gpu_gb * GB * VLLM_UTILIZATION - self.shapes.weight_bytes * 1.1

    def concurrency(self, where: str, lengths: Lengths, batch: int) -> int:
        """Sequences vLLM runs at once for a key: at most `batch`, as many as its KV pool holds (the shared prefix
        held once: prefix caching)."""
        own = (tokens(lengths) - lengths.shared) * self.shapes.kv_bytes
        room = self.pool_bytes() - lengths.shared * self.shapes.kv_bytes
        if own > room:
            raise UserError(
                f"config key '{where}': one sequence ({tokens(lengths):,} tokens) needs {own / GB:,.1f} GB of KV "
                f"cache, more than vLLM's pool of {max(room, 0) / GB:,.1f} GB on a {self.gpu_gb:g} GB GPU "
                "(evaluation.gpu_memory_gb); lower its shots or max_new_tokens, or give a larger GPU"
            )
        return max(1, min(batch, int(room // own)))


def gpu_gb(config: dict) -> float | None:
    """The GPU memory evaluations are sized for: evaluation.gpu_memory_gb; unset: DEFAULT_GPU_GB in the paper world
    (one GPU per evaluation job), none in the toy world (CPU jobs: nothing is sized)."""
    given = config["evaluation"].get("gpu_memory_gb")
    if given:
        return float(given)
    return DEFAULT_GPU_GB if config["world"] != "toy" else None


class Sizing:
    """Per (benchmark, language key) of one config: its lengths, batch and context (the longest prompt + budget), for
    the plan and for the evaluation jobs' params. None of a toy config without evaluation.gpu_memory_gb (`of`)."""

    def __init__(self, config: dict, hf_home: str | None, gpu: float):
        from layerswap.config import backend_for
        from layerswap.workflow.token_counts import TokenCounts

        self.config, self.tasks = config, config["evaluation"]["tasks"]
        self.counts = TokenCounts(config, hf_home)
        shapes = shapes_of(config, parameters(config), hf_home)
        if shapes is None:
            raise UserError(
                f"config key 'base.shape': the shapes of base.source {config['base']['source']!r} are not known "
                "before the run (not pre-staged); copy its config.json's fields here to size the evaluation batches"
            )
        self.fit = Fit(shapes, gpu)
        self.backend = {b: backend_for(config["evaluation"], b) for b in self.tasks}
        self._batches: dict[tuple[str, str], int] = {}

    @classmethod
    def of(cls, config: dict, hf_home: str | None) -> Sizing | None:
        gpu = gpu_gb(config)
        return None if gpu is None else cls(config, hf_home, gpu)

    def job_batch(self, bench: str) -> int:
        return int(self.tasks[bench].get("batch_size") or self.config["evaluation"]["batch_size"])

    def lengths(self, bench: str, key: str) -> Lengths:
        return self.counts.lengths(bench, key)

    def batch(self, bench: str, key: str) -> int:
        if (bench, key) not in self._batches:
            where = f"evaluation.tasks.{bench}"
            self._batches[bench, key] = self.fit.batch(
                f"{where} ({key})", self.lengths(bench, key), self.job_batch(bench), self.backend[bench]
            )
        return self._batches[bench, key]

    def check(self) -> None:
        """Every (benchmark, key) the config evaluates has a batch that fits (or the one-line refusal of `batch`)."""
        from layerswap.workflow.token_counts import evaluated_keys

        for bench, key in evaluated_keys(self.config):
            self.batch(bench, key)

    def params(self, bench: str, keys: list[str]) -> dict:
        """What a job of `bench` over `keys` passes besides the benchmark's settings: `batch_sizes` {key: batch}
        where a key's batch differs from the job's, `context_tokens` (its longest prompt + budget)."""
        sizes = {k: self.batch(bench, k) for k in keys}
        out: dict = {"context_tokens": max(tokens(self.lengths(bench, k)) for k in keys)} if keys else {}
        shrunk = {k: b for k, b in sizes.items() if b != self.job_batch(bench)}
        return out | ({"batch_sizes": shrunk} if shrunk else {})
