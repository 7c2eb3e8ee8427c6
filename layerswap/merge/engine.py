"""Merge engine: a recipe becomes a tree of tensor sources, filled chunk by chunk into memory or onto disk (each merge
node runs its method's computation, layerswap/merge/methods/)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any, Iterator

import torch

from layerswap.checkpoints import (
    BASE_FINGERPRINT_FILE,
    TIED_HEAD,
    Checkpoint,
    chunk_ranges,
    ties_head,
    write_sharded,
)
from layerswap.contracts import naming, replace_dir
from layerswap.errors import UserError
from layerswap.merge.layers import layer_of
from layerswap.merge.output import MARKER, check_target, marker
from layerswap.merge.params import Method
from layerswap.merge.recipes import Recipe, canonical_json
from layerswap.merge.registry import METHODS

CHUNK = 1 << 20  # elements per chunk: the unit of reading, computing and writing
CONFIG_KEYS = ("architectures", "model_type", "num_hidden_layers", "vocab_size")
COPIED_FILES = (
    "config.json",
    "generation_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "merges.txt",
    "vocab.json",
    "vocab.txt",
    "chat_template.jinja",
    "chat_template.json",
)
F32 = torch.float32


def _natural(name: str) -> list[Any]:
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]


class ExpertCache:
    """Opened checkpoints (validated headers, open files) and magnitude weights, shared across merges of one job.

    Tensors are read with pread, not mmap: after the first merge they come from the OS page cache, and the process
    holds only the chunks in flight and the merged state dict it returns."""

    def __init__(self) -> None:
        self._checkpoints: dict[str, Checkpoint] = {}
        self.magnitudes: dict[str, float] = {}

    def checkpoint(self, path: str) -> Checkpoint:
        key = os.path.realpath(path)
        if key not in self._checkpoints:
            self._checkpoints[key] = Checkpoint(path)
        return self._checkpoints[key]

    def close(self) -> None:
        for ckpt in self._checkpoints.values():
            ckpt.close()
        self._checkpoints.clear()


class Scratch:
    """Reusable 1-D buffers, one per (slot, dtype), so chunk loops allocate nothing."""

    def __init__(self) -> None:
        self._bufs: dict[tuple[str, torch.dtype], torch.Tensor] = {}

    def get(self, slot: str, dtype: torch.dtype, n: int) -> torch.Tensor:
        buf = self._bufs.get((slot, dtype))
        if buf is None or buf.numel() < n:
            buf = self._bufs[(slot, dtype)] = torch.empty(max(n, 1), dtype=dtype)
        return buf[:n]


class Node:
    """A source of named tensors: a checkpoint or a merge of other nodes."""

    label: str
    names: list[str]
    shapes: dict[str, tuple[int, ...]]
    dtypes: dict[str, torch.dtype]
    config: dict
    experts: list[Checkpoint]

    def fill(self, name: str, start: int, stop: int, dest: torch.Tensor) -> None:
        raise NotImplementedError

    def prepare(self) -> None:
        """Whole-model passes (magnitude weights) done once before tensors are filled."""

    def key(self, name: str) -> Any:
        """What the value of tensor `name` is computed from (JSON-able): equal keys, equal values, bit for bit."""
        raise NotImplementedError


class Leaf(Node):
    """A checkpoint's tensors; with a tied head (`tie_word_embeddings: true`) a separate copy of the head that some
    writers keep (a state dict saved with untied tensors) is left out: the head is the embedding, merged once."""

    def __init__(self, ckpt: Checkpoint) -> None:
        self.ckpt, self.label, self.config, self.experts = ckpt, ckpt.path, ckpt.config, [ckpt]
        tied = {TIED_HEAD} if ties_head(ckpt.config) else set()
        self.names = sorted((n for n in ckpt.tensors if n not in tied), key=_natural)
        self.shapes = {n: ckpt.tensors[n].shape for n in self.names}
        self.dtypes = {n: ckpt.tensors[n].dtype for n in self.names}

    def fill(self, name: str, start: int, stop: int, dest: torch.Tensor) -> None:
        self.ckpt.read_into(name, start, stop, dest)

    def key(self, name: str) -> Any:
        return ["leaf", os.path.realpath(self.ckpt.path), name]


def read_raw(node: Node, name: str, start: int, stop: int, scratch: Scratch, slot: str) -> torch.Tensor:
    dest = scratch.get(slot + ":raw", node.dtypes[name], stop - start)
    node.fill(name, start, stop, dest)
    return dest


def read_f32(node: Node, name: str, start: int, stop: int, scratch: Scratch, slot: str) -> torch.Tensor:
    out = scratch.get(slot, F32, stop - start)
    if node.dtypes[name] == F32:
        node.fill(name, start, stop, out)
    else:
        out.copy_(read_raw(node, name, start, stop, scratch, slot))
    return out


def fill_as(node: Node, name: str, start: int, stop: int, dest: torch.Tensor, scratch: Scratch) -> None:
    if node.dtypes[name] == dest.dtype:
        node.fill(name, start, stop, dest)
    else:
        dest.copy_(read_raw(node, name, start, stop, scratch, "convert"))


def check_compatible(where: str, nodes: list[Node]) -> None:
    """Same architecture, layer count, vocabulary, tensor names and shapes, or a one-line UserError."""
    first = nodes[0]
    for other in nodes[1:]:
        for key in CONFIG_KEYS:
            if first.config.get(key) != other.config.get(key):
                raise UserError(
                    f"{where}: config {key} {other.config.get(key)!r} in {other.label} differs from "
                    f"{first.config.get(key)!r} in {first.label}"
                )
        if ties_head(first.config) != ties_head(other.config):
            raise UserError(
                f"{where}: config tie_word_embeddings {ties_head(other.config)} in {other.label} differs from "
                f"{ties_head(first.config)} in {first.label}"
            )
        missing = sorted(set(first.shapes) ^ set(other.shapes), key=_natural)
        if missing:
            holder = first.label if missing[0] in first.shapes else other.label
            lacks = other.label if holder == first.label else first.label
            raise UserError(f"{where}: tensor {missing[0]} is in {holder} but not in {lacks}")
        for name in first.names:
            if first.shapes[name] != other.shapes[name]:
                raise UserError(
                    f"{where}: tensor {name} has shape {list(other.shapes[name])} in {other.label} "
                    f"but {list(first.shapes[name])} in {first.label}"
                )


def magnitude_rows(delta: torch.Tensor, shape: tuple[int, ...]) -> tuple[float, int]:
    """(sum of row means of |delta|, number of rows) for a row-aligned chunk of a 2-D tensor."""
    cols = shape[-1]
    rows = delta.numel() // cols
    return float(delta.abs_().view(rows, cols).mean(dim=1).sum(dtype=torch.float64)), rows


def magnitude(node: Node, base: Node, cache: ExpertCache, key: str) -> float:
    """1 / mean over all rows of all 1-D and 2-D tensors of the row mean |W_ft - W_pre| (rounded to 12 digits)."""
    if key in cache.magnitudes:
        return cache.magnitudes[key]
    scratch = Scratch()
    total, rows = 0.0, 0
    for name in node.names:
        shape = node.shapes[name]
        if len(shape) not in (1, 2) or 0 in shape:
            continue
        row_sum = 0.0
        for start, stop in chunk_ranges(shape, CHUNK):
            delta = read_f32(node, name, start, stop, scratch, "x")
            delta.sub_(read_f32(base, name, start, stop, scratch, "base"))
            if len(shape) == 2:
                s, r = magnitude_rows(delta, shape)
                total, rows = total + s, rows + r
            else:
                row_sum += float(delta.abs_().sum(dtype=torch.float64))
        if len(shape) == 1:
            total, rows = total + row_sum / shape[0], rows + 1
    mean = total / max(rows, 1)
    if not mean > 0 or not math.isfinite(mean):
        raise UserError(f"{node.label}: mean |W - W_base| is {mean}; magnitude weight is undefined (same as base?)")
    cache.magnitudes[key] = float(f"{1.0 / mean:.12g}")
    return cache.magnitudes[key]


class Merge(Node):
    """One merge of a recipe: its method's computation (`method.compute(self)`, layerswap/merge/methods/) over the
    input nodes and the optional base, after the compatibility checks; output dtypes of the first input. The methods
    read through the helpers below (chunks in reusable float32 buffers), so they import nothing of the engine."""

    def __init__(
        self,
        method: Method,
        where: str,
        recipe: dict,
        inputs: list[Node],
        refs: list[Any],
        base: Node | None,
        cache: ExpertCache,
    ) -> None:
        self.method, self.label, self.recipe, self.params = method, where, recipe, recipe["params"]
        self.inputs, self.refs, self.base, self.cache = inputs, refs, base, cache
        check_compatible(where, inputs + ([base] if base is not None else []))
        first = inputs[0]
        self.names, self.shapes, self.dtypes, self.config = first.names, first.shapes, first.dtypes, first.config
        self.experts = [c for node in inputs for c in node.experts]
        self.scratch = Scratch()
        n_layers = self.config.get("num_hidden_layers")
        if not isinstance(n_layers, int) or n_layers <= 0:
            raise UserError(f"{first.label}: config.json has no valid num_hidden_layers ({n_layers!r})")
        self.n_layers = n_layers
        for name in self.names:
            layer = layer_of(name)
            if layer is not None and layer >= n_layers:
                raise UserError(f"{first.label}: tensor {name} has layer index {layer} >= num_hidden_layers {n_layers}")
        self.compute = method.compute(self)

    def prepare(self) -> None:
        for node in self.inputs:
            node.prepare()
        self.compute.prepare()

    def fill(self, name: str, start: int, stop: int, dest: torch.Tensor) -> None:
        self.compute.fill(name, start, stop, dest)

    def key(self, name: str) -> Any:
        """The method's own key where it declares one (a layer swap: which expert's tensor, or which mean of which
        tensors), else the whole recipe and the tensor's name (exact for any method; shares nothing across recipes).
        Valid after `prepare()` (magnitude weights)."""
        own = getattr(self.compute, "key", None)
        if own is not None:
            return own(name)
        return ["merge", canonical_json(self.recipe), name, str(self.dtypes[name])]

    # what a method's computation reads through
    def read(self, src: Node, name: str, start: int, stop: int, slot: str) -> torch.Tensor:
        """Elements [start, stop) of tensor `name` of `src` as float32, in this merge's buffer `slot`."""
        return read_f32(src, name, start, stop, self.scratch, slot)

    def read_raw(self, src: Node, name: str, start: int, stop: int, slot: str) -> torch.Tensor:
        """The same in the tensor's own dtype."""
        return read_raw(src, name, start, stop, self.scratch, slot)

    def copy(self, src: Node, name: str, start: int, stop: int, dest: torch.Tensor) -> None:
        """Elements [start, stop) of `src`'s tensor `name` into `dest`, converted to its dtype."""
        fill_as(src, name, start, stop, dest, self.scratch)

    def chunks(self, name: str) -> list[tuple[int, int]]:
        """The element ranges a tensor is filled in."""
        return chunk_ranges(self.shapes[name], CHUNK)

    def buffer(self, slot: str, dtype: torch.dtype, n: int) -> torch.Tensor:
        return self.scratch.get(slot, dtype, n)

    def magnitude_weights(self) -> list[float]:
        assert self.base is not None
        base_key = canonical_json(self.recipe["base"])
        return [
            magnitude(node, self.base, self.cache, canonical_json([ref, base_key]))
            for node, ref in zip(self.inputs, self.refs)
        ]


def _node(ref: str | dict, cache: ExpertCache, where: str) -> Node:
    return Leaf(cache.checkpoint(ref)) if isinstance(ref, str) else build_node(ref, cache, where)


def build_node(recipe: dict, cache: ExpertCache, where: str = "recipe") -> Merge:
    """The node tree of a validated recipe (defaults filled in)."""
    method = METHODS[recipe["method"]]
    keyed = method.input_refs(recipe["inputs"])
    nodes = [_node(ref, cache, f"{where}.inputs.{key}") for key, ref in keyed]
    base = None if recipe["base"] is None else _node(recipe["base"], cache, f"{where}.base")
    return Merge(method, where, recipe, nodes, [ref for _, ref in keyed], base, cache)


def check_bases(root: Merge, allow_different: bool) -> str | None:
    """The experts' common base fingerprint (layerswap_base.json); differing ones are refused unless allowed."""
    seen: dict[str, str] = {}
    for ckpt in root.experts:
        if ckpt.base_fingerprint is not None:
            seen.setdefault(ckpt.base_fingerprint, ckpt.path)
    if len(seen) > 1 and not allow_different:
        (fa, pa), (fb, pb) = list(seen.items())[:2]
        raise UserError(
            f"{pb}: {BASE_FINGERPRINT_FILE} base_sha256 {fb[:12]} differs from {fa[:12]} in {pa} "
            "(set allow_different_base: true to merge experts of different bases)"
        )
    return next(iter(seen)) if len(seen) == 1 else None


def as_recipe(recipe: Recipe | dict) -> Recipe:
    """A Recipe as given; a recipe mapping (tests, scripts) validated here."""
    return recipe if isinstance(recipe, Recipe) else Recipe.of(recipe)


def _open(recipe: Recipe, cache: ExpertCache) -> tuple[Merge, str | None]:
    root = build_node(recipe.full, cache)
    fingerprint = check_bases(root, bool(recipe.full.get("allow_different_base", False)))
    root.prepare()
    return root, fingerprint


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Chunk ops are memory-bound: one torch thread is as fast and leaves a core for I/O (no OpenMP spin-waits). Only
    on the main thread: torch's set_num_threads reaches the other threads too, so a merge built ahead on a background
    thread (layerswap/merge/merger.py, which limits that thread's own OpenMP team instead) leaves the evaluation beside
    it as it was set (the chunk ops' results do not depend on the thread count: elementwise, exact selections, serial
    random draws)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def build_state_dict(recipe: Recipe | dict, cache: ExpertCache | None = None) -> dict[str, torch.Tensor]:
    """The merged weights in memory; pass one ExpertCache to reuse opened experts across several merges."""
    return build_changes(recipe, cache, None)[1]


#: What a model holds: tensor name -> (key of its value, bytes). Two merges' tensors with equal keys are equal.
TensorKeys = dict[str, tuple[str, int]]


def _keys(root: Merge) -> TensorKeys:
    out: TensorKeys = {}
    for name in root.names:
        digest = hashlib.sha256(json.dumps(root.key(name), sort_keys=True).encode()).hexdigest()[:32]
        out[name] = (digest, math.prod(root.shapes[name]) * torch.empty((), dtype=root.dtypes[name]).element_size())
    return out


def tensor_keys(recipe: Recipe | dict, cache: ExpertCache) -> TensorKeys:
    """Every tensor of the merge with the key of its value (its sources and the method's params), nothing built."""
    with one_thread():
        return _keys(_open(as_recipe(recipe), cache)[0])


def build_changes(
    recipe: Recipe | dict, cache: ExpertCache | None, held: TensorKeys | None
) -> tuple[TensorKeys, dict[str, torch.Tensor]]:
    """(the merge's tensor keys, the merged tensors whose key differs from `held`'s: what a model holding `held`
    must load to hold this merge; every tensor where `held` is None or names other tensors). Backend-neutral: the HF
    host copies them into its parameters, the vLLM host loads them into its engine."""
    recipe = as_recipe(recipe)
    own = cache is None
    cache = cache or ExpertCache()
    try:
        with one_thread():
            root, _ = _open(recipe, cache)
            keys = _keys(root)
            if held is not None and held.keys() != keys.keys():
                held = None
            out: dict[str, torch.Tensor] = {}
            for name in root.names:
                if held is not None and held[name][0] == keys[name][0]:
                    continue
                tensor = torch.empty(root.shapes[name], dtype=root.dtypes[name])
                flat = tensor.view(-1)
                for start, stop in chunk_ranges(root.shapes[name], CHUNK):
                    root.fill(name, start, stop, flat[start:stop])
                out[name] = tensor
            return keys, out
    finally:
        if own:
            cache.close()


def shared_bytes(a: TensorKeys, b: TensorKeys) -> int:
    """Bytes of the tensors two merges share (same name, same key): what a switch from one to the other keeps."""
    return sum(size for name, (key, size) in a.items() if name in b and b[name][0] == key)


def switch_order(keys: list[TensorKeys]) -> list[int]:
    """An order of the merges (indices) in which consecutive ones share many bytes: greedy, from the first, each next
    the one sharing the most with the last (ties: the earliest). Deterministic for the same keys."""
    if not keys:
        return []
    order, left = [0], list(range(1, len(keys)))
    while left:
        last = keys[order[-1]]
        best = max(left, key=lambda i: (shared_bytes(last, keys[i]), -i))
        order.append(best)
        left.remove(best)
    return order


def _copy_side_files(src: Path, dst: Path) -> None:
    for path in sorted(src.iterdir()):
        if path.is_file() and (path.name in COPIED_FILES or path.name.startswith("tokenizer")):
            shutil.copyfile(path, dst / path.name)


def write_merged(
    recipe: Recipe | dict,
    out_dir: str,
    max_shard_bytes: int = 2**30,
    force: bool = False,
    protect: tuple[str, ...] = (),
) -> None:
    """Write the merge as a HF model dir (sharded safetensors + index, config, tokenizer), atomically.

    `out_dir` is checked first and again just before it is replaced (`layerswap.merge.output.check_target`): never a
    directory this tool did not write, nor one that is, holds or lies in an input (or a path in `protect`); a previous
    merge output only with `force`. The output gets the marker `output.MARKER`, listing the files written."""
    out, shown = Path(os.path.abspath(out_dir)), Path(out_dir)  # errors name the path as given
    recipe = as_recipe(recipe)
    guarded = (*recipe.inputs, *protect)
    check_target(out_dir, guarded, force)
    hidden = out.parent / f".{out.name}.tmp-"
    with naming(shown, hidden):
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=hidden.name, dir=out.parent))
    cache = ExpertCache()
    try:
        with one_thread(), naming(shown, hidden):  # OS errors name the output, not the hidden temporary dir
            root, fingerprint = _open(recipe, cache)
            entries = [(name, root.dtypes[name], root.shapes[name]) for name in root.names]
            write_sharded(tmp, entries, root.fill, max_shard_bytes, CHUNK, shown, hidden)
            _copy_side_files(Path(recipe.model_dir), tmp)
            provenance = {"recipe": recipe.written, "recipe_hash": recipe.hash}
            (tmp / "layerswap_recipe.json").write_text(json.dumps(provenance, indent=1, sort_keys=True) + "\n")
            if fingerprint is not None:
                (tmp / BASE_FINGERPRINT_FILE).write_text(json.dumps({"base_sha256": fingerprint}) + "\n")
            files = [p.name for p in tmp.iterdir()]
            (tmp / MARKER).write_text(json.dumps(marker(recipe.hash, files), indent=1) + "\n")
        check_target(out_dir, guarded, force)  # the merge took a while: DIR may have changed meanwhile
        with naming(shown, hidden):
            replace_dir(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        cache.close()
