"""A tiny evaluation world for the tests and the measurements: fixture files of all five benchmarks in two languages
(`make_data`) and a random word-level Llama over their vocabulary (`make_model`). Fast to build on a CPU; its scores
mean nothing, only that the evaluation code runs end to end and deterministically."""

from __future__ import annotations

import json
from pathlib import Path

import torch

LANGS = ["en", "toy_swh"]
WORDS = {
    "en": [
        "tom",
        "has",
        "apples",
        "gets",
        "more",
        "how",
        "many",
        "does",
        "have",
        "now",
        "the",
        "answer",
        "is",
        "a",
        "cat",
        "sat",
        "on",
        "mat",
        "where",
        "did",
        "sit",
        "red",
        "blue",
        "dog",
        "what",
        "color",
        "sky",
    ],
    "toy_swh": [
        "tomu",
        "ana",
        "mapera",
        "anapata",
        "zaidi",
        "ngapi",
        "sasa",
        "jibu",
        "ni",
        "paka",
        "alikaa",
        "juu",
        "mkeka",
        "wapi",
        "nyekundu",
        "bluu",
        "mbwa",
        "rangi",
        "anga",
        "gani",
    ],
}
N_ITEMS = 12


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def make_data(data_dir: Path) -> set[str]:
    """Fixture files for all 5 benchmarks and 2 languages; returns the vocabulary used."""
    data_dir.mkdir(parents=True, exist_ok=True)
    vocab: set[str] = set()

    def text(*parts: object) -> str:
        s = " ".join(str(p) for p in parts)
        vocab.update(s.split(" "))
        return s

    for lang in LANGS:
        w = WORDS[lang]
        mgsm, bele, flores, mmlu, mbpp = [], [], [], [], []
        for i in range(N_ITEMS):
            a, b = i % 7 + 1, i % 5 + 2
            mgsm.append(
                {
                    "question": text(w[0], w[1], a, w[2], w[0], w[3], b, w[4], w[5], w[6], w[7], w[0], w[8], w[9]),
                    "answer": text(a, "+", b, "=", a + b, ".", w[10], w[11], w[12], a + b),
                    "answer_number": a + b,
                    "equation_solution": f"{a} + {b} = {a + b}",
                }
            )
            bele.append(
                {
                    "link": f"l{i}",
                    "question_number": i,
                    "flores_passage": text(w[13], w[14], w[15], w[16]),
                    "question": text(w[17], w[18], w[13], w[19]),
                    "mc_answer1": text(w[15], w[16]),
                    "mc_answer2": text(w[1], w[2]),
                    "mc_answer3": text(w[4], w[5]),
                    "mc_answer4": text(w[6], w[7]),
                    "correct_answer_num": str(i % 4 + 1),
                    "dialect": lang,
                    "ds": "2023-01-01",
                }
            )
            flores.append(
                {
                    "id": i,
                    "sentence_eng": text(*WORDS["en"][i % 5 : i % 5 + 4]),
                    "sentence": text(*WORDS[lang][i % 5 : i % 5 + 4]),
                }
            )
            mmlu.append(
                {
                    "question": text(w[-4], w[-3], w[-2], w[-1]),
                    "subject": "toy",
                    "choices": [text(w[-6]), text(w[-5]), text(w[0]), text(w[3])],
                    "answer": i % 4,
                }
            )
            mbpp.append(
                {
                    "task_id": i,
                    "text": text(w[2], w[3], "a", "b"),
                    "code": text("def f ( a , b ) : return a + b +", i % 3),
                    "test_list": [text(f"assert f ( 1 , 2 ) == {3 + i % 3}")],
                    "test_setup_code": "",
                    "challenge_test_list": [],
                }
            )
        _write_jsonl(data_dir / f"mgsm_{lang}.jsonl", mgsm)
        _write_jsonl(data_dir / f"belebele_{lang}.jsonl", bele)
        _write_jsonl(data_dir / f"flores_{lang}.jsonl", flores)
        _write_jsonl(data_dir / f"mmlu_{lang}.jsonl", mmlu)
        _write_jsonl(data_dir / f"mbpp_{lang}.jsonl", mbpp)
    vocab.update(["Q:", "A:", "translate", "to", ":", "en", "toy_swh", *[str(i) for i in range(30)]])
    return vocab


def make_model(model_dir: Path, vocab: set[str], seed: int = 0, hidden: int = 32, layers: int = 2) -> Path:
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    specials = ["<unk>", "<pad>", "<s>", "</s>", "\n"]
    tokens = specials + sorted(vocab - set(specials))
    tok = Tokenizer(models.WordLevel({t: i for i, t in enumerate(tokens)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex("\n"), behavior="isolated"),
            pre_tokenizers.Split(" ", behavior="removed"),
        ]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="<unk>", pad_token="<pad>", bos_token="<s>", eos_token="</s>"
    )
    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=len(tokens),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=256,
        bos_token_id=2,
        eos_token_id=3,
        pad_token_id=1,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(cfg)
    model.save_pretrained(model_dir)
    fast.save_pretrained(model_dir)
    return model_dir
