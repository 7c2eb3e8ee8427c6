"""Expert SFT with the transformers Trainer: response-only loss, a checkpoint every N samples, resumable.

Checkpoint contract
-------------------
Each checkpoint is exported as a plain Hugging Face directory `<out>/s<samples:07d>/` (safetensors, config, tokenizer,
`layerswap_meta.json`, `layerswap_base.json` with the base fingerprint), in the run's `export_dtype` (`base`, the
default: the base model's dtype; `bf16`; `fp32`: the fp32 master weights as they are; see docs/EXPORT_PRECISION.md).
The export is atomic: it is written to a hidden `<out>/.tmp-s<samples>/` and renamed, so a crash never leaves an `s*`
directory without its full file set. `<out>/checkpoints.json` is written last, after every checkpoint exists. The
Trainer's own resumable state lives in `<out>/trainer-<key>/` (key = hash of base, data and params), so a killed run
resumes from its last complete Trainer checkpoint when the workflow runs again, and a changed run never resumes from
another run's state (its stale `s*` directories are removed when it starts). Once the manifest is written the run is
complete and `trainer-<key>/` is deleted (fp32 weights and Adam moments: ~190 GB for an 8B full fine-tune); a run
whose every export of this key exists is complete without it, and trains no more. Each export's `layerswap_meta.json`
records the sha256 of its weight files as written; `checkpoints.json` is written only after every weight file is
checked against it (a file changed since is one error naming it; an export whose weight files are gone is trained
again).

Full fine-tuning or LoRA
------------------------
`peft_method: full` (default) trains every weight. `peft_method: lora` trains LoRA adapters through peft
(`lora: {r, alpha, dropout, target_modules, layers}`, `layers`: peft's `layers_to_transform`, for layer-restricted
SFT); every checkpoint then holds BOTH the adapter (`<ckpt>/adapter/`:
adapter_config.json + adapter_model.safetensors) and the merged full weights as the normal checkpoint files, so every
merge method (layer swap, soups, TIES) reads LoRA experts exactly like full fine-tunes. The merge is peft's own
`merge_and_unload`, run on a CPU copy built from the gathered state dict, so training goes on with the unmerged
adapters. Resuming works the same way (the Trainer keeps adapter + optimizer state).

Not supported for merging, and refused by the config check (`sft.*.peft_method`): prefix/prompt tuning (it adds
virtual tokens, no per-layer weights, so there is nothing to swap layer by layer) and AdapterFusion (it needs a
fusion layer over several adapters at inference time, which no weight-space merge can express). Other peft methods
(IA3, DoRA, ...) are not offered: only LoRA is checked to merge into plain weights here.

Launchers
---------
On a CPU (toy world) the rule runs the plain CLI `layerswap sft ...`. On a cluster (`sft.launcher: accelerate`) the
same module runs under `accelerate launch --config_file cluster/accelerate_fsdp.yaml --num_processes <gpus> -m
layerswap.train.sft ...`: the Trainer picks FSDP (full shard, bf16) up from the environment accelerate sets. Checkpoint
export then works as follows, with accelerate's own facilities: every process calls
`trainer.accelerator.get_state_dict(trainer.model)` (a collective under FSDP: the full state dict is gathered,
offloaded to CPU, on rank 0 only); only the main process writes the checkpoint directory (layerswap/train/export.py:
its weights are written and hashed on a background thread from that CPU copy while every process trains on; the main
process waits for it before the Trainer's next save) and `checkpoints.json`. The Trainer's resumable state is saved by
the Trainer itself (sharded under FSDP with `fsdp_state_dict_type: SHARDED_STATE_DICT`).

The run's params that the config check reads too live in layerswap/train/params.py, the checkpoint folder name in
layerswap/contracts.py. Imports of torch/transformers/peft are deferred to the functions that need them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
from pathlib import Path

from layerswap.contracts import (
    CHECKPOINT_DIR_RE,
    EXPORT_META,
    WEIGHTS_RECORD,
    checkpoint_name,
    checkpoint_samples,
    write_json_atomic,
)
from layerswap.errors import UserError
from layerswap.fingerprint import file_sha256
from layerswap.layout import R
from layerswap.scratch import check_owner
from layerswap.train.export import export_dtype, export_key, make_export_callback
from layerswap.train.params import SCHEDULERS, export_dtype_name, lora_settings, peft_method

#: Trainer checkpoints kept in `trainer-<key>/` (each holds optimizer state: ~12 bytes/parameter for a full FT).
SAVE_TOTAL_LIMIT = 2


def base_fingerprint(base: Path) -> str:
    """sha256 of the base weights (first shard or single file), recorded in every expert checkpoint. The base is
    checked first against the record of the job that wrote it (`checkpoints.verify_weights`)."""
    from layerswap.checkpoints import sha256_once, verify_weights

    files = sorted(Path(base).glob("*.safetensors"))
    if not files:
        raise UserError(f"{base}: no *.safetensors file (only safetensors checkpoints are loaded)")
    verify_weights(base)
    return sha256_once(files[0])


# ----------------------------------------------------------------------------------------------------------------
# training


def training_arguments(p: dict, work: Path):
    """Map the paper's knobs (Table 4) onto TrainingArguments."""
    import torch
    from transformers import TrainingArguments

    if p["scheduler"] not in SCHEDULERS:
        raise UserError(f"sft param 'scheduler': unknown '{p['scheduler']}'; allowed: {', '.join(SCHEDULERS)}")
    peft_method(p)
    for key in ("num_samples", "checkpoint_every"):
        if p[key] % p["batch_size"]:
            raise UserError(f"sft param '{key}' ({p[key]}) must be a multiple of batch_size ({p['batch_size']})")
    # batch_size is the global batch (the paper's); under accelerate launch each of the WORLD_SIZE processes takes
    # an equal share (the rule starts at most batch_size processes, a divisor of it).
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if p["batch_size"] % world:
        raise UserError(
            f"sft param 'batch_size' ({p['batch_size']}) must be a multiple of the number of processes ({world})"
        )
    steps = p["num_samples"] // p["batch_size"]
    kwargs: dict = {}
    if p["scheduler"] == "wsd":
        decay = max(1, int(0.2 * (steps - p["warmup_steps"])))
        kwargs["lr_scheduler_kwargs"] = {
            "num_stable_steps": steps - p["warmup_steps"] - decay,
            "num_decay_steps": decay,
        }
    if p.get("gradient_checkpointing"):
        kwargs.update(gradient_checkpointing=True, gradient_checkpointing_kwargs={"use_reentrant": False})
    precision = p.get("precision", "fp32")
    return TrainingArguments(
        output_dir=str(work),
        max_steps=steps,
        per_device_train_batch_size=p["batch_size"] // world,
        learning_rate=p["lr"],
        weight_decay=p["weight_decay"],
        max_grad_norm=p["max_grad_norm"],
        lr_scheduler_type=SCHEDULERS[p["scheduler"]],
        warmup_steps=p["warmup_steps"],
        adam_beta2=p["adam_beta2"],
        seed=p["seed"],
        data_seed=p["seed"],
        save_strategy="steps",
        save_steps=p["checkpoint_every"] // p["batch_size"],
        save_only_model=False,
        save_total_limit=SAVE_TOTAL_LIMIT,
        report_to=[],
        logging_steps=max(1, steps // 20),
        use_cpu=not torch.cuda.is_available(),
        dataloader_num_workers=0,
        bf16=precision == "bf16",
        fp16=precision == "fp16",
        include_num_input_tokens_seen="non_padding",
        **kwargs,
    )


def _clean_stale(out_dir: Path, key: str) -> None:
    """Remove what belongs to another configuration of this run (or to an interrupted export)."""
    from layerswap.train.training import remove_other_states

    remove_other_states(out_dir, key)
    for tmp in out_dir.glob(".tmp-*"):
        shutil.rmtree(tmp, ignore_errors=True)
    for ckpt in out_dir.iterdir():
        if ckpt.is_dir() and CHECKPOINT_DIR_RE.match(ckpt.name) and export_key(ckpt) != key:
            shutil.rmtree(ckpt)


def _padding_tokenizer(base: Path, tokenizer):
    """The tokenizer the batch collator pads with. Base models often have no pad token (Llama 3): pad with EOS
    there; padded positions are masked (attention 0, label -100), so the choice does not reach the loss. A second
    instance, so the checkpoints keep the base model's tokenizer files unchanged."""
    if tokenizer.pad_token is not None:
        return tokenizer
    from transformers import AutoTokenizer

    padding = AutoTokenizer.from_pretrained(base)
    padding.pad_token = padding.eos_token
    return padding


def train_expert(base: Path, data: Path, out_dir: Path, params: dict, template: str) -> None:
    from layerswap.jsonl import read_jsonl
    from layerswap.train.training import sft_examples

    out_dir = Path(out_dir)
    # the export folder lies in this results folder's scratch namespace, never another's (scratch.py)
    check_owner(out_dir, Path(R))
    method = peft_method(params)
    export_dtype_name(params)
    rows = read_jsonl(data, ("prompt", "response"))  # bad data fails before any model is loaded

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, DataCollatorForSeq2Seq, Trainer

    from layerswap.train.training import JsonlLogger, last_complete_checkpoint, run_key, trainer_state

    torch.set_num_threads(int(params.get("threads", 1)))
    tokenizer = AutoTokenizer.from_pretrained(base)
    dataset = sft_examples(rows, tokenizer, template, params["seq_len"], params.get("chat_template", True))
    meta = {
        "base": str(base),
        "base_sha256": base_fingerprint(base),
        "data_sha256": file_sha256(data),
        "params": params,
    }
    # Resumable Trainer state is keyed by everything that defines the run, so a changed run never resumes
    # from another run's state.
    key = run_key(meta)
    meta["run_key"] = key
    work = out_dir / f"trainer-{key}"
    args = training_arguments(params, work)
    if exports_complete(out_dir, params, key):  # killed after the last export: nothing to train
        if args.process_index == 0:
            _clean_stale(out_dir, key)
            _finish(out_dir, params, key, work)  # each export's weights checked against what it recorded
            print(
                f"{out_dir}: every checkpoint of this configuration is exported and intact; the run is complete",
                flush=True,
            )
        return
    if args.process_index == 0:  # one process tidies the run directory (under accelerate launch too)
        print(
            f"{out_dir}: {args.world_size} training process(es), {args.per_device_train_batch_size} sample(s) "
            f"per process and step",
            flush=True,
        )
        out_dir.mkdir(parents=True, exist_ok=True)
        _clean_stale(out_dir, key)
        trainer_state(out_dir, key)  # a fresh start: the progress log begins anew
    # LoRA keeps the frozen base in the training precision; a full fine-tune keeps fp32 master weights (the
    # Trainer's mixed precision computes in bf16).
    load_dtype = torch.bfloat16 if method == "lora" and params.get("precision") == "bf16" else torch.float32
    model = AutoModelForCausalLM.from_pretrained(base, use_safetensors=True, dtype=load_dtype)
    if method == "lora":
        from peft import LoraConfig, TaskType, get_peft_model

        lora = lora_settings(params)
        model = get_peft_model(
            model,
            LoraConfig(
                task_type=TaskType.CAUSAL_LM,
                r=lora["r"],
                lora_alpha=lora["alpha"],
                lora_dropout=lora["dropout"],
                target_modules=list(lora["target_modules"]),
                layers_to_transform=lora.get("layers"),
            ),
        )
    export = make_export_callback(out_dir, tokenizer, params, meta, export_dtype(params, base))
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        data_collator=DataCollatorForSeq2Seq(
            _padding_tokenizer(base, tokenizer), padding=True, label_pad_token_id=-100
        ),
        callbacks=[JsonlLogger(out_dir / "log.jsonl"), export],
    )
    export.trainer = trainer
    resume = last_complete_checkpoint(work) if work.is_dir() else None
    if resume and not _can_resume(out_dir, params, key, resume, args.max_steps):
        if trainer.is_world_process_zero():  # earlier exports are gone and cannot be rebuilt: start over
            print(f"{out_dir}: exports before {resume} are missing; training from the start", flush=True)
            shutil.rmtree(work)
        trainer.accelerator.wait_for_everyone()
        resume = None
    if resume and trainer.is_world_process_zero():
        print(f"resuming {out_dir} from {resume}", flush=True)
    trainer.train(resume_from_checkpoint=resume)
    trainer.accelerator.wait_for_everyone()  # every process is done with the Trainer state before it goes
    if trainer.is_world_process_zero():
        _finish(out_dir, params, key, work)
    trainer.accelerator.wait_for_everyone()


def exports_complete(out_dir: Path, params: dict, key: str) -> bool:
    """Every checkpoint of the schedule is exported by this configuration (run key)."""
    return all(
        export_key(Path(out_dir) / checkpoint_name(s)) == key
        for s in checkpoint_samples(params["num_samples"], params["checkpoint_every"])
    )


def _finish(out_dir: Path, params: dict, key: str, work: Path) -> None:
    """The manifest, then the Trainer state goes: a complete run never resumes, and the state is most of its disk."""
    write_manifest(out_dir, params, key)
    if work.is_dir():
        shutil.rmtree(work)


def _can_resume(out_dir: Path, params: dict, key: str, resume: str, max_steps: int) -> bool:
    """A run (not complete: see exports_complete) resumes from Trainer state `resume` only if every checkpoint before
    the resume step was exported by this configuration; the resume step itself is re-exported on train begin. Not
    from the final step (an export is missing there): resuming there would make the Trainer take one step too many."""
    step = int(resume.rsplit("-", 1)[-1])
    if step >= max_steps:
        return False
    valid = [
        export_key(out_dir / checkpoint_name(s)) == key
        for s in checkpoint_samples(params["num_samples"], params["checkpoint_every"])
        if s // params["batch_size"] <= step
    ]
    return all(valid[:-1])


def write_manifest(out_dir: Path, params: dict, key: str | None = None) -> None:
    """`checkpoints.json`: every exported checkpoint with its weights' sha256 (the rule's declared output).

    Written only once every checkpoint of the schedule exists and, given `key` (the sft job), belongs to this run
    and holds the very weights it recorded at export (`layerswap_meta.json`: a changed file is one error naming it,
    never recorded). Each file is hashed once per process: right after training, the export's own hash is reused.
    """
    from layerswap.checkpoints import sha256_once, verify_export, weight_files
    from layerswap.layout import RUN_RECORD

    entries = []
    for samples in checkpoint_samples(params["num_samples"], params["checkpoint_every"]):
        ckpt = out_dir / checkpoint_name(samples)
        weights = weight_files(ckpt)
        if not weights:
            raise UserError(
                f"{ckpt}: no model.safetensors (or index and shards) after training "
                "(checkpoint_every/batch_size mismatch?)"
            )
        if key is not None:
            if export_key(ckpt) != key:
                raise UserError(f"{ckpt}: written by another configuration of this run (run_key differs)")
            recorded = json.loads((ckpt / EXPORT_META).read_text())[WEIGHTS_RECORD]
            verify_export(ckpt, recorded, ckpt / EXPORT_META)
        entry = {"name": ckpt.name, "path": str(ckpt), "samples": samples}
        if len(weights) == 1:
            entry["sha256"] = sha256_once(weights[0])
        else:  # sharded (transformers 4.x shards an 8B export at 5 GB): every shard and the index
            entry["files"] = {p.name: sha256_once(p) for p in weights}
            entry["sha256"] = hashlib.sha256(
                "".join(f"{n} {h}\n" for n, h in entry["files"].items()).encode()
            ).hexdigest()
        if (ckpt / "adapter" / "adapter_model.safetensors").is_file():
            entry["adapter"] = str(ckpt / "adapter")
        entries.append(entry)
    manifest = {"run_dir": str(out_dir), "params": params, "checkpoints": entries}
    write_json_atomic(out_dir / RUN_RECORD, manifest)


# ----------------------------------------------------------------------------------------------------------------
# CLI: layerswap sft ...   (or: accelerate launch ... -m layerswap.train.sft ...)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--base", required=True, type=Path)
    parser.add_argument("--data", required=True, type=Path)
    parser.add_argument("--out-dir", required=True, type=Path)
    parser.add_argument(
        "--params-json", required=True, help="the run's hyperparameters (sft.defaults + run) and prompt template"
    )


def run(args: argparse.Namespace) -> None:
    params = json.loads(args.params_json)
    train_expert(args.base, args.data, args.out_dir, params, params.get("template", "Q: {prompt}\nA:"))


if __name__ == "__main__":  # `python -m layerswap.train.sft ...`, as `accelerate launch -m layerswap.train.sft` runs it
    import sys

    from layerswap.cli import exit_fast, main

    exit_fast(main(["sft", *sys.argv[1:]]))
