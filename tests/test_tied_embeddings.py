"""Merges of models that tie their output head to the input embedding (SmolLM2, Llama 3.2 1B/3B): the merged model
holds one embedding tensor, and the directory `write_merged` writes loads with `from_pretrained` to the same logits
as the in-memory merge that evaluation builds (`layerswap.evaluation.evaluate.ModelHost`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from layerswap.errors import UserError
from layerswap.evaluation.evaluate import ModelHost
from layerswap.merge.engine import build_state_dict, write_merged
from layerswap.merge.merger import Merger
from layerswap.merge.recipes import Recipe

VOCAB = 40
LAYERS = 4
HEAD, EMBED = "lm_head.weight", "model.embed_tokens.weight"


def save_tokenizer(model_dir: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tokens = ["<unk>", "<pad>", "<s>", "</s>"] + [f"w{i}" for i in range(VOCAB - 4)]
    tok = Tokenizer(models.WordLevel({t: i for i, t in enumerate(tokens)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="<unk>", pad_token="<pad>", bos_token="<s>", eos_token="</s>"
    ).save_pretrained(model_dir)


def tied_model(seed: int, like=None):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=LAYERS,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=64,
        bos_token_id=2,
        eos_token_id=3,
        pad_token_id=1,
        tie_word_embeddings=True,
    )
    model = LlamaForCausalLM(cfg)
    if like is not None:  # an "expert": the base plus a seeded change to every weight (the tied head included)
        with torch.no_grad():
            for name, param in model.named_parameters():
                param.copy_(like.state_dict()[name] + 0.05 * torch.randn_like(param))
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    return model


def save(model, path: Path, separate_head: bool = False) -> str:
    """save_pretrained; `separate_head`: from a state dict of untied copies, as an export that casts each tensor on
    its own (e.g. to bf16) writes it: the file then holds lm_head.weight beside the embedding."""
    state = {k: v.clone() for k, v in model.state_dict().items()} if separate_head else None
    model.save_pretrained(path, state_dict=state)
    save_tokenizer(path)
    return str(path)


@pytest.fixture(scope="module")
def tied(tmp_path_factory):
    root = tmp_path_factory.mktemp("tied")
    base = tied_model(0)
    task, lang = tied_model(1, like=base), tied_model(2, like=base)
    paths = {
        "base": save(base, root / "base"),
        "task": save(task, root / "task"),
        "lang": save(lang, root / "lang", separate_head=True),
    }
    assert HEAD not in load_file(str(Path(paths["task"]) / "model.safetensors"))
    assert HEAD in load_file(str(Path(paths["lang"]) / "model.safetensors"))
    return root, paths, {"task": task.state_dict(), "lang": lang.state_dict()}


RECIPES = {
    "swap": lambda p: {
        "method": "layer_swap",
        "base": p["base"],
        "inputs": {"task": p["task"], "lang": p["lang"]},
        "params": {"bottom": 1, "top": 1},
    },
    "soup": lambda p: {
        "method": "soup",
        "base": p["base"],
        "inputs": {"models": [p["task"], p["lang"]]},
        "params": {"weighting": "magnitude"},
    },
    "ties": lambda p: {
        "method": "ties",
        "base": p["base"],
        "inputs": {"models": [p["task"], p["lang"]]},
        "params": {"density": 0.5},
    },
}


@pytest.mark.parametrize("method", sorted(RECIPES))
def test_tied_merge_writes_one_embedding_and_loads_to_the_in_memory_logits(tied, method: str) -> None:
    from transformers import AutoModelForCausalLM

    root, paths, experts = tied
    recipe = RECIPES[method](paths)
    mem = build_state_dict(recipe)
    assert HEAD not in mem and EMBED in mem
    if method == "swap":  # non-layer tensors (the embedding, hence the head) are the experts' average
        want = (experts["task"][EMBED] + experts["lang"][EMBED]) / 2
        assert torch.allclose(mem[EMBED], want, atol=1e-6)

    out = root / f"merged_{method}"
    write_merged(recipe, str(out), max_shard_bytes=8000)
    index = json.loads((out / "model.safetensors.index.json").read_text())
    assert HEAD not in index["weight_map"] and EMBED in index["weight_map"]
    assert json.loads((out / "config.json").read_text())["tie_word_embeddings"] is True

    ids = torch.tensor([[2, 5, 9, 14, 7, 30, 11, 3]])
    written = AutoModelForCausalLM.from_pretrained(str(out), dtype=torch.float32).eval()
    assert written.lm_head.weight.data_ptr() == written.model.embed_tokens.weight.data_ptr()
    assert torch.equal(written.lm_head.weight, mem[EMBED])

    recipe_file = root / f"{method}.json"
    recipe_file.write_text(json.dumps(recipe))
    merger = Merger()
    host = ModelHost(batch_size=1, device="cpu", dtype="float32", merger=merger)  # evaluation's in-memory path
    try:
        host.load(Recipe.load(recipe_file))
        with torch.no_grad():
            in_memory = host.model(ids).logits
            on_disk = written(ids).logits
    finally:
        host.close()
        merger.close()
    assert torch.equal(host.model.lm_head.weight, mem[EMBED])
    assert torch.equal(in_memory, on_disk)
    # the merge moved the head with the embedding: it is neither expert's
    for expert in experts.values():
        assert not torch.allclose(on_disk, _logits(expert, written, ids))


def _logits(state: dict, model, ids: torch.Tensor) -> torch.Tensor:
    from transformers import LlamaForCausalLM

    other = LlamaForCausalLM(model.config)
    other.load_state_dict(state)
    with torch.no_grad():
        return other.eval()(ids).logits


def test_tied_and_untied_models_do_not_merge(tied, tmp_path: Path) -> None:
    from transformers import LlamaConfig, LlamaForCausalLM

    _, paths, _ = tied
    cfg = json.loads((Path(paths["task"]) / "config.json").read_text())
    cfg["tie_word_embeddings"] = False
    untied = LlamaForCausalLM(LlamaConfig(**{k: v for k, v in cfg.items() if k not in ("architectures", "model_type")}))
    path = save(untied, tmp_path / "untied")
    recipe = RECIPES["swap"](paths) | {"inputs": {"task": paths["task"], "lang": path}}
    with pytest.raises(UserError, match="tie_word_embeddings"):
        build_state_dict(recipe)
