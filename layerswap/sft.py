"""Expert SFT with the transformers Trainer: response-only loss, a checkpoint every N samples, resumable.

Each checkpoint is exported as a plain Hugging Face directory `<out>/s<samples:07d>/` (safetensors, config,
tokenizer, `layerswap_meta.json` with the base fingerprint); the Trainer's own resumable state lives in
`<out>/trainer/`, so a killed run resumes from its last checkpoint when the workflow runs again.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
from pathlib import Path

import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    DataCollatorForSeq2Seq,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)
from transformers.trainer_utils import get_last_checkpoint

from layerswap.errors import UserError
from layerswap.training import JsonlLogger, export_model, file_sha256, read_jsonl, sft_examples

SCHEDULERS = {"linear": "linear", "wsd": "warmup_stable_decay"}


def checkpoint_name(samples: int) -> str:
    return f"s{samples:07d}"


def checkpoint_samples(num_samples: int, every: int) -> list[int]:
    """Samples seen at each checkpoint: every, 2*every, ..., up to num_samples."""
    return list(range(every, num_samples + 1, every))


def base_fingerprint(base: Path) -> str:
    """sha256 of the base weights (first shard or single file), recorded in every expert checkpoint."""
    files = sorted(Path(base).glob("*.safetensors"))
    if not files:
        raise UserError(f"{base}: no *.safetensors file (only safetensors checkpoints are loaded)")
    return file_sha256(files[0])


class ExportCheckpoints(TrainerCallback):
    """On every Trainer save, export the weights as `<out>/s<samples>/` (atomic)."""

    def __init__(self, out_dir: Path, tokenizer, batch_size: int, meta: dict):
        self.out_dir, self.tokenizer, self.batch_size, self.meta = out_dir, tokenizer, batch_size, meta

    def on_save(self, args, state, control, model=None, **kwargs):  # noqa: D102 (Trainer hook)
        samples = state.global_step * self.batch_size
        export_model(model, self.tokenizer, self.out_dir / checkpoint_name(samples),
                     {**self.meta, "samples": samples, "step": state.global_step})


def training_arguments(p: dict, work: Path) -> TrainingArguments:
    """Map the paper's knobs (Table 4) onto TrainingArguments."""
    if p["scheduler"] not in SCHEDULERS:
        raise UserError(f"sft param 'scheduler': unknown '{p['scheduler']}'; allowed: {', '.join(SCHEDULERS)}")
    for key in ("num_samples", "checkpoint_every"):
        if p[key] % p["batch_size"]:
            raise UserError(f"sft param '{key}' ({p[key]}) must be a multiple of batch_size ({p['batch_size']})")
    steps = p["num_samples"] // p["batch_size"]
    kwargs: dict = {}
    if p["scheduler"] == "wsd":
        decay = max(1, int(0.2 * (steps - p["warmup_steps"])))
        kwargs["lr_scheduler_kwargs"] = {"num_stable_steps": steps - p["warmup_steps"] - decay,
                                         "num_decay_steps": decay}
    return TrainingArguments(
        output_dir=str(work), max_steps=steps, per_device_train_batch_size=p["batch_size"],
        learning_rate=p["lr"], weight_decay=p["weight_decay"], max_grad_norm=p["max_grad_norm"],
        lr_scheduler_type=SCHEDULERS[p["scheduler"]], warmup_steps=p["warmup_steps"], adam_beta2=p["adam_beta2"],
        seed=p["seed"], data_seed=p["seed"], save_strategy="steps",
        save_steps=p["checkpoint_every"] // p["batch_size"], save_only_model=False, report_to=[],
        logging_steps=max(1, steps // 20), use_cpu=not torch.cuda.is_available(), dataloader_num_workers=0,
        **kwargs,
    )


def train_expert(base: Path, data: Path, out_dir: Path, params: dict, template: str) -> None:
    torch.set_num_threads(int(params.get("threads", 1)))
    out_dir = Path(out_dir)
    tokenizer = AutoTokenizer.from_pretrained(base)
    rows = read_jsonl(data, ("prompt", "response"))
    dataset = sft_examples(rows, tokenizer, template, params["seq_len"])
    model = AutoModelForCausalLM.from_pretrained(base, use_safetensors=True, torch_dtype=torch.float32)
    meta = {"base": str(base), "base_sha256": base_fingerprint(base), "data_sha256": file_sha256(data),
            "params": params}
    # Resumable Trainer state is keyed by everything that defines the run, so a changed run never resumes
    # from another run's state.
    key = hashlib.sha256(json.dumps(meta, sort_keys=True).encode()).hexdigest()[:12]
    for stale in out_dir.glob("trainer-*"):
        if stale.name != f"trainer-{key}":
            shutil.rmtree(stale)
    work = out_dir / f"trainer-{key}"
    args = training_arguments(params, work)
    trainer = Trainer(
        model=model, args=args, train_dataset=dataset,
        data_collator=DataCollatorForSeq2Seq(tokenizer, padding=True, label_pad_token_id=-100),
        callbacks=[JsonlLogger(out_dir / "log.jsonl"), ExportCheckpoints(out_dir, tokenizer, params["batch_size"], meta)],
    )
    resume = get_last_checkpoint(str(work)) if work.is_dir() else None
    if resume:
        print(f"resuming {out_dir} from {resume}")
    trainer.train(resume_from_checkpoint=resume)
    write_manifest(out_dir, params)


def write_manifest(out_dir: Path, params: dict) -> None:
    """`checkpoints.json`: every exported checkpoint with its weights' sha256 (the rule's declared output)."""
    entries = []
    for samples in checkpoint_samples(params["num_samples"], params["checkpoint_every"]):
        ckpt = out_dir / checkpoint_name(samples)
        weights = ckpt / "model.safetensors"
        if not weights.is_file():
            raise UserError(f"{weights}: missing after training (checkpoint_every/batch_size mismatch?)")
        entries.append({"name": ckpt.name, "path": str(ckpt), "samples": samples, "sha256": file_sha256(weights)})
    manifest = {"run_dir": str(out_dir), "params": params, "checkpoints": entries}
    tmp = out_dir / "checkpoints.json.tmp"
    tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    tmp.replace(out_dir / "checkpoints.json")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--base", required=True, type=Path)
    parser.add_argument("--data", required=True, type=Path)
    parser.add_argument("--out-dir", required=True, type=Path)
    parser.add_argument("--params-json", required=True, help="the run's hyperparameters (sft.defaults + run) and prompt template")


def run(args: argparse.Namespace) -> None:
    params = json.loads(args.params_json)
    train_expert(args.base, args.data, args.out_dir, params, params.get("template", "Q: {prompt}\nA:"))
