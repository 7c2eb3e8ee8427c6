"""The replica's base models: tiny Llamas with Llama 3.1 8B's config keys, safetensors shards, a byte-level BPE
tokenizer and a pickle `original/` folder that must never be fetched."""

from __future__ import annotations

import functools
import json
from pathlib import Path

from .files import WORD, Repo, card

# ------------------------------------------------------------------------------------------------- base models
BASE_LAYERS = 12  # hub_replica.shaped.LAYERS
SPECIAL = [
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|reserved_special_token_0|>",
    "<|reserved_special_token_1|>",
    "<|finetune_right_pad_id|>",
    "<|reserved_special_token_2|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eom_id|>",
    "<|eot_id|>",
    "<|python_tag|>",
]


def _corpus() -> list[str]:
    lines = []
    for lang, word in WORD.items():
        for i in range(200):
            lines.append(f"{word} {i} + {i * 7 % 13} = {i + i * 7 % 13}. Question: Answer: The answer is {i}.")
    lines += ["def add(a, b):\n    return a + b\n", "assert add(1, 2) == 3", "Translate the following sentence"]
    return lines


@functools.lru_cache(maxsize=None)
def _tokenizer_files(chat_template: str | None) -> dict[str, bytes]:
    """A byte-level BPE tokenizer as Llama 3 has (trained here on synthetic text, 1024 entries + Llama 3's special
    tokens; <|begin_of_text|> prepended by the post-processor), saved by transformers."""
    import tempfile

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(
        _corpus(),
        trainers.BpeTrainer(
            vocab_size=1024, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
        ),
    )
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.TemplateProcessing(
        single="<|begin_of_text|> $A",
        pair="<|begin_of_text|> $A <|begin_of_text|> $B",
        special_tokens=[("<|begin_of_text|>", bos)],
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|begin_of_text|>",
        eos_token="<|end_of_text|>",
        model_max_length=131072,
        clean_up_tokenization_spaces=True,
    )
    if chat_template:
        fast.chat_template = chat_template
    with tempfile.TemporaryDirectory() as d:
        fast.save_pretrained(d)
        return {p.name: p.read_bytes() for p in Path(d).iterdir()}


def _model_files(rope_scaling: dict | None, max_pos: int, seed: int) -> dict[str, bytes]:
    """A tiny LlamaForCausalLM saved as sharded bf16 safetensors with an index, as the real repository has; its
    config.json and tokenizer_config.json are written in the real files' own format (transformers 4.4x keys:
    `rope_scaling`, `torch_dtype`, `PreTrainedTokenizerFast`), which the installed transformers must read."""
    import tempfile

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = _tokenizer_files(None)
    vocab = json.loads(tokenizer["tokenizer.json"])
    added = {t["content"]: t["id"] for t in vocab["added_tokens"]}
    size = max([*vocab["model"]["vocab"].values(), *added.values()]) + 1
    config = {
        "architectures": ["LlamaForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": added["<|begin_of_text|>"],
        "eos_token_id": added["<|end_of_text|>"],
        "hidden_act": "silu",
        "hidden_size": 32,
        "initializer_range": 0.02,
        "intermediate_size": 64,
        "max_position_embeddings": max_pos,
        "mlp_bias": False,
        "model_type": "llama",
        "num_attention_heads": 4,
        "num_hidden_layers": BASE_LAYERS,
        "num_key_value_heads": 2,
        "pretraining_tp": 1,
        "rms_norm_eps": 1e-05,
        "rope_scaling": rope_scaling,
        "rope_theta": 500000.0,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "transformers_version": "4.43.0.dev0",
        "use_cache": True,
        "vocab_size": size,
    }
    torch.manual_seed(seed)
    model = LlamaForCausalLM(LlamaConfig(**config)).to(torch.bfloat16)
    with tempfile.TemporaryDirectory() as d:
        model.save_pretrained(d, max_shard_size="100KB")
        files = {p.name: p.read_bytes() for p in Path(d).iterdir() if "safetensors" in p.name}
    files["config.json"] = json.dumps(config, indent=2).encode()
    files["generation_config.json"] = json.dumps(
        {
            "bos_token_id": config["bos_token_id"],
            "do_sample": True,
            "eos_token_id": config["eos_token_id"],
            "temperature": 0.6,
            "top_p": 0.9,
            "transformers_version": "4.43.0.dev0",
        },
        indent=2,
    ).encode()
    files["tokenizer_config.json"] = json.dumps(
        {
            "added_tokens_decoder": {
                str(i): {
                    "content": c,
                    "lstrip": False,
                    "normalized": False,
                    "rstrip": False,
                    "single_word": False,
                    "special": True,
                }
                for c, i in added.items()
            },
            "bos_token": "<|begin_of_text|>",
            "clean_up_tokenization_spaces": True,
            "eos_token": "<|end_of_text|>",
            "model_input_names": ["input_ids", "attention_mask"],
            "model_max_length": 131072,
            "tokenizer_class": "PreTrainedTokenizerFast",
        },
        indent=2,
    ).encode()
    files["special_tokens_map.json"] = json.dumps(
        {
            "bos_token": {
                "content": "<|begin_of_text|>",
                "lstrip": False,
                "normalized": False,
                "rstrip": False,
                "single_word": False,
            },
            "eos_token": {
                "content": "<|end_of_text|>",
                "lstrip": False,
                "normalized": False,
                "rstrip": False,
                "single_word": False,
            },
        },
        indent=2,
    ).encode()
    files["tokenizer.json"] = tokenizer["tokenizer.json"]
    return files


_MODEL_CACHE: dict = {}


def _model_repo(repo_id: str, rope_scaling: dict | None, max_pos: int, seed: int) -> Repo:
    key = (repo_id, seed)
    if key not in _MODEL_CACHE:
        _MODEL_CACHE[key] = _model_files(rope_scaling, max_pos, seed)
    files = dict(_MODEL_CACHE[key])
    files.update(
        {
            "README.md": card(gated=True, extra="Llama license (replica)\n"),
            "LICENSE": b"LLAMA COMMUNITY LICENSE (replica)\n",
            "USE_POLICY.md": b"# Acceptable use policy (replica)\n",
            # the original Meta checkpoint is a pickle: never downloaded (layerswap.data.hub.MODEL_PATTERNS)
            "original/consolidated.00.pth": b"PICKLE (replica: must never be fetched)\n",
            "original/params.json": b'{"dim": 32, "n_layers": 12}\n',
            "original/tokenizer.model": b"tiktoken (replica)\n",
        }
    )
    return Repo(repo_id, kind="model", gated=True, files=files)


LLAMA31_ROPE = {
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
    "rope_type": "llama3",
}


def _model_repos() -> list[Repo]:
    return [
        _model_repo("meta-llama/Llama-3.1-8B", LLAMA31_ROPE, 131072, 0),
        _model_repo("meta-llama/Meta-Llama-3-8B", None, 8192, 1),
    ]
