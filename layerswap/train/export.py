"""Expert checkpoint export during SFT: the Trainer callback that writes `<out>/s<samples>/` at every save (the contract
is in layerswap/train/sft.py's docstring), the LoRA merge for export, the export dtype, and an export's run key.

Every process calls `trainer.accelerator.get_state_dict(trainer.model)` (a collective under FSDP: the full weights
gathered to the main process, in its CPU memory); only the main process writes, and nobody waits for it: it keeps a
CPU copy of its own of the weights (the gathered one, or a copy where they are the model's own tensors: one process,
no FSDP), writes the tokenizer, and hands the rest (writing the weights, hashing them, the export's meta, its rename
into place) to a background thread (`training.Background`); every process goes on training at once (no barrier: at
paper scale the fp32 write alone took ~107 s, which every rank waited for). The callback waits for the export in
flight before the Trainer saves its next state (`on_step_end` with `should_save`: under FSDP the save is collective,
so the other ranks meet the main one there) and at the end of training. So no Trainer state is ever saved past an
unfinished export: a run killed while an export is being written or hashed resumes from the state of that very
checkpoint, whose export is then made again (`on_train_begin`), and a failed export stops training at the next save
with its one-line error. What stays in the training thread: the gather (a collective), the copy and the dtype cast,
and for LoRA the merge (it draws from torch's RNG, which must not move under training: `fork_rng`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from layerswap.contracts import EXPORT_META, WEIGHTS_RECORD, checkpoint_name, checkpoint_samples
from layerswap.train.params import EXPORT_DTYPES, export_dtype_name

if TYPE_CHECKING:  # training imports torch: this module is light until a job exports
    from layerswap.train.training import Background


def base_dtype(base: Path):
    """The dtype the base is stored in (config.json `dtype`/`torch_dtype`); checkpoints are exported in it."""
    import torch

    config = json.loads((Path(base) / "config.json").read_text())
    name = config.get("dtype") or config.get("torch_dtype") or "float32"
    dtype = getattr(torch, str(name).replace("torch.", ""), None)
    return dtype if isinstance(dtype, torch.dtype) else torch.float32


def export_dtype(params: dict, base: Path):
    """The torch dtype the run's checkpoints are exported in."""
    import torch

    name = EXPORT_DTYPES[export_dtype_name(params)]
    return base_dtype(base) if name is None else getattr(torch, name)


def merged_lora_model(peft_model, state_dict: dict):
    """A plain (unwrapped) model holding base + LoRA merged, built on CPU from a gathered peft state dict.

    Uses peft's own `merge_and_unload` on a skeleton made on the meta device and filled with copies of the
    tensors (`assign=True`), so the training model and its adapters are left untouched and no extra full model is
    ever materialised besides the copy.
    """
    import copy

    import torch
    from peft import get_peft_model
    from transformers import AutoModelForCausalLM

    base_model = peft_model.get_base_model()
    with torch.device("meta"):
        skeleton = AutoModelForCausalLM.from_config(base_model.config)
    skeleton = get_peft_model(skeleton, copy.deepcopy(peft_model.peft_config["default"]))
    tensors = {k: v.detach().to("cpu", copy=True) for k, v in state_dict.items()}
    result = skeleton.load_state_dict(tensors, strict=False, assign=True)
    meta = [n for n, t in skeleton.state_dict().items() if t.is_meta]
    if meta:
        raise RuntimeError(
            f"LoRA export: {len(meta)} tensors missing from the gathered state dict, e.g. {meta[0]} "
            f"(unexpected: {list(result.unexpected_keys)[:3]})"
        )
    return skeleton.merge_and_unload()


def own_copy(state_dict: dict, model, dtype=None) -> dict:
    """`state_dict` as CPU tensors no training step changes: a tensor that is on a device or shares its storage with
    one of `model`'s parameters or buffers (one process, no FSDP: the state dict is the model's own tensors) is
    copied; a gathered one (FSDP: a CPU copy already) is kept. Floating tensors cast to `dtype` if given."""
    import itertools

    live = {t.untyped_storage().data_ptr() for t in itertools.chain(model.parameters(), model.buffers())}
    out = {}
    for name, t in state_dict.items():
        to = dtype if dtype is not None and t.is_floating_point() else t.dtype
        shared = t.device.type != "cpu" or t.untyped_storage().data_ptr() in live
        out[name] = t.detach().to("cpu", to, copy=True) if shared else t.to(to)
    return out


def export_checkpoint(trainer, tokenizer, out_dir: Path, meta: dict, dtype, background: Background) -> None:
    """Export the Trainer's current weights as `out_dir` (called on every process: the gather is a collective; only
    the main one writes, on `background`, from a CPU copy of its own; no process waits for the write)."""
    import torch

    from layerswap.train.training import export_model

    # The export must not touch the training RNG (building the LoRA skeleton draws from it): the Trainer saved its
    # RNG state before this hook, and a resumed run must see the same stream as an uninterrupted one.
    devices = [torch.cuda.current_device()] if torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=devices):
        accelerator = trainer.accelerator
        state_dict = accelerator.get_state_dict(trainer.model)  # collective under FSDP: every rank must call it
        if accelerator.is_main_process:
            model = accelerator.unwrap_model(trainer.model)
            if meta["params"].get("peft_method", "full") == "lora":
                state_dict = own_copy(state_dict, model)
                merged = merged_lora_model(model, state_dict).to(dtype)

                def save_adapter(tmp: Path) -> None:
                    model.save_pretrained(tmp / "adapter", state_dict=state_dict, safe_serialization=True)

                export_model(merged, tokenizer, out_dir, meta, extra=save_adapter, background=background)
            else:
                cast = own_copy(state_dict, model, dtype)
                export_model(model, tokenizer, out_dir, meta, state_dict=cast, background=background)


def make_export_callback(out_dir: Path, tokenizer, params: dict, meta: dict, dtype):
    """A TrainerCallback that exports `<out>/s<samples>/` on every Trainer save (module docstring: finished in the
    background, waited for before the next save and at the end of training).

    On train begin (a resumed run), a checkpoint whose Trainer state was saved but whose export never finished (a
    crash between the two) is exported from the restored weights, so no checkpoint of the schedule goes missing.
    """
    from transformers import TrainerCallback

    from layerswap.train.training import Background

    schedule = set(checkpoint_samples(params["num_samples"], params["checkpoint_every"]))

    class ExportCheckpoints(TrainerCallback):
        trainer = None  # set after the Trainer exists (callbacks get the model, not the Trainer)

        def __init__(self) -> None:
            self.background = Background()

        def _export(self, state) -> None:
            samples = state.global_step * params["batch_size"]
            export_checkpoint(
                self.trainer,
                tokenizer,
                Path(out_dir) / checkpoint_name(samples),
                {**meta, "samples": samples, "step": state.global_step},
                dtype,
                self.background,
            )

        def _before_save(self, control) -> None:
            if control.should_save:  # the Trainer saves its state next: never past an unfinished export
                self.background.wait()

        def on_train_begin(self, args, state, control, **kwargs):  # noqa: D102 (Trainer hook)
            samples = state.global_step * params["batch_size"]
            if samples in schedule and export_key(Path(out_dir) / checkpoint_name(samples)) != meta["run_key"]:
                self._export(state)

        def on_step_end(self, args, state, control, **kwargs):  # noqa: D102 (Trainer hook, before its save)
            self._before_save(control)

        def on_epoch_end(self, args, state, control, **kwargs):  # noqa: D102 (Trainer hook, before its save)
            self._before_save(control)

        def on_save(self, args, state, control, **kwargs):  # noqa: D102 (Trainer hook)
            self._export(state)

        def on_train_end(self, args, state, control, **kwargs):  # noqa: D102 (Trainer hook)
            self.background.wait()

    return ExportCheckpoints()


def export_key(ckpt: Path) -> str | None:
    """The run key of an intact export: its meta names the weight files it wrote (with their sha256) and every one of
    them is there. An export whose weights were deleted, or that recorded none, is no export (it is trained again)."""
    try:
        meta = json.loads((ckpt / EXPORT_META).read_text())
    except (OSError, ValueError):
        return None
    files = meta.get(WEIGHTS_RECORD) if isinstance(meta, dict) else None
    if not isinstance(files, dict) or not files or not all((ckpt / str(name)).is_file() for name in files):
        return None
    return meta.get("run_key")
