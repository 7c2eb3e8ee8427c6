"""The toy base model: a word-level `tokenizers` tokenizer and a tiny LlamaForCausalLM pretrained on the corpus.

This plays the part of the downloaded Llama 3.1 8B in the paper config: its output is an ordinary Hugging Face
model directory (config.json, model.safetensors, tokenizer files).

Resumable like SFT (`layerswap.train.sft`): the Trainer saves its state CHECKPOINTS times per run into
`<out>.work/trainer-<key>/` (key: hash of corpus, vocabulary and every parameter, so a changed run never resumes from
another's state), and a killed run resumes from its newest complete Trainer checkpoint when it runs again, ending
with the same weights as an uninterrupted run (CPU). The state is deleted once the model is exported. The progress log
is `<out>.work/log.jsonl` (a fresh start begins it anew).
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import torch
from tokenizers import Regex, Tokenizer, models, pre_tokenizers
from transformers import (
    DataCollatorForLanguageModeling,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerFast,
    Trainer,
    TrainingArguments,
)

from layerswap.fingerprint import file_sha256
from layerswap.jsonl import read_jsonl
from layerswap.train.training import (
    JsonlLogger,
    TokenDataset,
    export_model,
    last_complete_checkpoint,
    remove_other_states,
    run_key,
    trainer_state,
)

SPECIALS = ["<pad>", "<unk>", "<s>", "</s>"]
#: Trainer checkpoints per pretraining run (resumable state; the last two are kept).
CHECKPOINTS = 10


def build_tokenizer(vocab: list[str]) -> PreTrainedTokenizerFast:
    """Word-level tokenizer: splits on spaces, keeps '\\n' as a token; decoding joins tokens with spaces."""
    words = SPECIALS + [w for w in vocab if w not in SPECIALS]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(r"\n"), "isolated"), pre_tokenizers.Split(Regex(r"[^\S\n]+"), "removed")]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        model_max_length=1 << 16,
    )


def packed_blocks(texts: list[str], tokenizer: PreTrainedTokenizerFast, seq_len: int) -> TokenDataset:
    """Concatenate documents (each ended by EOS) and cut the stream into seq_len blocks."""
    stream: list[int] = []
    for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]:
        stream += ids + [tokenizer.eos_token_id]
    blocks = [stream[i : i + seq_len] for i in range(0, len(stream) - seq_len + 1, seq_len)]
    return TokenDataset([{"input_ids": b} for b in blocks])


def pretrain(
    corpus: Path, vocab_file: Path, out_dir: Path, model_params: dict, train_params: dict, num_layers: int, seed: int
) -> None:
    torch.set_num_threads(int(train_params.get("threads", 1)))
    tokenizer = build_tokenizer(json.loads(Path(vocab_file).read_text(encoding="utf-8")))
    texts = [row["text"] for row in read_jsonl(corpus, ("text",))]
    data = packed_blocks(texts, tokenizer, train_params["seq_len"])
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        num_hidden_layers=num_layers,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        **model_params,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    work = Path(out_dir).with_name(Path(out_dir).name + ".work")
    state = trainer_state_dir(work, corpus, vocab_file, model_params, train_params, num_layers, seed)
    steps = train_params["steps"]
    args = TrainingArguments(
        output_dir=str(state),
        max_steps=steps,
        per_device_train_batch_size=train_params["batch_size"],
        learning_rate=train_params["lr"],
        warmup_steps=train_params["warmup_steps"],
        lr_scheduler_type="cosine",
        weight_decay=0.01,
        seed=seed,
        data_seed=seed,
        save_strategy="steps",
        save_steps=max(1, steps // CHECKPOINTS),
        save_total_limit=2,
        report_to=[],
        logging_steps=50,
        use_cpu=not torch.cuda.is_available(),
        dataloader_num_workers=0,
        disable_tqdm=False,
    )
    collator = DataCollatorForLanguageModeling(tokenizer, mlm=False)
    trainer = Trainer(
        model=model, args=args, train_dataset=data, data_collator=collator, callbacks=[JsonlLogger(work / "log.jsonl")]
    )
    resume = last_complete_checkpoint(state)
    if resume:
        print(f"resuming {out_dir} from {resume}", flush=True)
    trainer.train(resume_from_checkpoint=resume)
    meta = {
        "kind": "toy-base",
        "tokens_seen": steps * train_params["batch_size"] * train_params["seq_len"],
        "corpus_blocks": len(data),
        "seed": seed,
    }
    export_model(model, tokenizer, Path(out_dir), meta)
    shutil.rmtree(state)  # the run is complete: it never resumes


def trainer_state_dir(
    work: Path, corpus: Path, vocab_file: Path, model_params: dict, train_params: dict, num_layers: int, seed: int
) -> Path:
    """`<work>/trainer-<key>/`, the resumable Trainer state of this run; another run's state goes, and a fresh start
    begins the progress log anew."""
    key = run_key(
        {
            "corpus": file_sha256(corpus),
            "vocab": file_sha256(vocab_file),
            "model": model_params,
            "train": train_params,
            "layers": num_layers,
            "seed": seed,
        }
    )
    remove_other_states(work, key)
    return trainer_state(work, key)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--corpus", required=True, type=Path)
    parser.add_argument("--vocab", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--model-json", required=True, help="LlamaConfig fields (hidden size, heads, ...)")
    parser.add_argument("--train-json", required=True, help="steps, batch_size, seq_len, lr, warmup_steps, threads")
    parser.add_argument("--num-layers", required=True, type=int)
    parser.add_argument("--seed", type=int, default=0)


def run(args: argparse.Namespace) -> None:
    pretrain(
        args.corpus,
        args.vocab,
        args.out,
        json.loads(args.model_json),
        json.loads(args.train_json),
        args.num_layers,
        args.seed,
    )
