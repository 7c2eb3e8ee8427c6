"""Every repository of the Hub replica: the real repository's layout with a few synthetic rows.

One `Repo` per hub repository that `layerswap prestage --configfile config/paper.yaml` lists (SFT sources, the
evaluation datasets lm-eval reads, the base models), plus the external files a loading script used to read. Each
mirrors its real counterpart's file paths, config and split names, column names, row shapes and access (gated,
loading script); the evidence for each layout is in EVIDENCE.md beside this file. Rows are synthetic: short
numbered strings in the language's script, enough for the paper-shaped config's mixes and evaluation limits.

`build(root, breaks=...)` writes them as git repositories in olah's mirror layout
(`<root>/<datasets|models>/<org>/<name>`); `breaks` applies the deliberate faults the pre-flight tests use.
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import io
import json
from pathlib import Path
from typing import Callable

N = 24  # rows per synthetic split (the paper-shaped mixes ask for 4 per source)

# Per-language sample text: a word in the language's script, so rows look like the real languages to a reader.
WORD = {
    "en": "water",
    "swh": "maji",
    "tel": "నీరు",
    "ben": "জল",
    "jpn": "水",
    "deu": "Wasser",
    "fra": "eau",
    "zho": "水",
    "rus": "вода",
    "spa": "agua",
    "tha": "น้ำ",
}


@dataclasses.dataclass
class Repo:
    repo_id: str
    kind: str = "dataset"  # dataset | model
    files: dict[str, bytes | Callable[[], bytes]] = dataclasses.field(default_factory=dict)
    gated: bool = False
    # extra git refs: name -> {path: content} committed on top of nothing but these files (refs/convert/parquet)
    refs: dict[str, dict[str, bytes | Callable[[], bytes]]] = dataclasses.field(default_factory=dict)


# ------------------------------------------------------------------------------------------------- file writers
def parquet(rows: list[dict]) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), buf)
    return buf.getvalue()


def jsonl(rows: list[dict]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode()


def csv(rows: list[dict]) -> bytes:
    import pandas as pd

    return pd.DataFrame(rows).to_csv(index=False).encode()


def tsv_gz(rows: list[list]) -> bytes:
    text = "".join("\t".join(str(c) for c in r) + "\n" for r in rows)
    return gzip.compress(text.encode(), mtime=0)


def card(configs: list[dict] | None = None, gated: bool = False, extra: str = "") -> bytes:
    """A README.md whose YAML header holds `configs:` (as the real cards do) and, when gated, `extra_gated_*`."""
    import yaml

    meta: dict = {}
    if configs:
        meta["configs"] = configs
    if gated:
        meta["extra_gated_prompt"] = "You agree to the terms of use of this dataset."
    head = f"---\n{yaml.safe_dump(meta, sort_keys=False, allow_unicode=True)}---\n" if meta else ""
    return (head + "# Hub replica (synthetic rows)\n" + extra).encode()


def text(lang: str, what: str, i: int) -> str:
    return f"{WORD.get(lang, lang)} {what} {i}"


# ----------------------------------------------------------------------------------------------------- SFT data
def _sft_repos() -> list[Repo]:
    out = []
    out.append(
        Repo(
            "microsoft/orca-math-word-problems-200k",
            files={
                "README.md": card(
                    [{"config_name": "default", "data_files": [{"split": "train", "path": "data/train-*"}]}]
                ),
                "data/train-00000-of-00001.parquet": lambda: parquet(
                    [
                        {
                            "question": f"Tom has {i} apples and buys {i + 2}. How many?",
                            "answer": f"{i} + {i + 2} = {2 * i + 2}",
                        }
                        for i in range(N)
                    ]
                ),
            },
        )
    )
    aya_langs = {
        "swh": ("Swahili", "swh"),
        "tel": ("Telugu", "tel"),
        "ben": ("Bengali", "ben"),
        "jpn": ("Japanese", "jpn"),
        "en": ("English", "eng"),
    }
    aya_rows = [
        {
            "inputs": text(lang, "question", i),
            "targets": text(lang, "answer", i),
            "language": name,
            "language_code": code,
            "annotation_type": "original-annotations",
            "user_id": f"u{i % 5}",
        }
        for lang, (name, code) in aya_langs.items()
        for i in range(N)
    ]
    out.append(
        Repo(
            "CohereForAI/aya_dataset",
            files={
                "README.md": card(
                    [
                        {
                            "config_name": "default",
                            "default": True,
                            "data_files": [
                                {"split": "train", "path": "data/train-*"},
                                {"split": "test", "path": "data/test-*"},
                            ],
                        },
                        {
                            "config_name": "demographics",
                            "data_files": [{"split": "train", "path": "demographics/train-*"}],
                        },
                    ]
                ),
                "data/train-00000-of-00001.parquet": lambda: parquet(aya_rows),
                "data/test-00000-of-00001.parquet": lambda: parquet(aya_rows[::6]),
                "demographics/train-00000-of-00001.parquet": lambda: parquet(
                    [
                        {
                            "user_id": f"u{i}",
                            "age_range": [20, 30],
                            "gender": "n/a",
                            "country": "n/a",
                            "languages": ["eng"],
                            "dialects": [],
                        }
                        for i in range(5)
                    ]
                ),
            },
        )
    )
    # allenai/nllb: a loading script whose data lives outside the repo (gzipped TSV per language pair). The
    # replica keeps the script (datasets >= 4 refuses it, as it refuses the real one) and serves the TSV files
    # under /external/allennlp-data-bucket/nllb/ (see serve.py).
    out.append(
        Repo(
            "allenai/nllb",
            files={
                "README.md": card(),
                "nllb.py": b"# loading script (replica): downloads allennlp-data-bucket/nllb/{pair}.gz\n"
                b"import datasets\n",
                "dataset_infos.json": b"{}\n",
                "nllb_langs.tsv": b"eng_Latn\nswh_Latn\ntel_Telu\nben_Beng\njpn_Jpan\n",
            },
        )
    )
    out.append(
        Repo(
            "lelapa/Inkuba-instruct",
            gated=True,
            files={
                "README.md": card(
                    [
                        {
                            "config_name": "default",
                            "data_files": [
                                {"split": f"{lang}_{part}", "path": f"data/{lang}_{part}-*"}
                                for lang in ("hausa", "swahili", "xhosa", "yoruba", "isizulu")
                                for part in ("train", "dev")
                            ],
                        }
                    ],
                    gated=True,
                ),
                **{
                    f"data/{lang}_{part}-00000-of-00001.parquet": (
                        lambda lang=lang: parquet(
                            [
                                {
                                    "instruction": f"Translate to {lang}",
                                    "inputs": text("en", "sentence", i),
                                    "targets": text("swh" if lang == "swahili" else lang, "sentence", i),
                                    "task": "MMT",
                                    "data_source": "synthetic",
                                }
                                for i in range(N)
                            ]
                        )
                    )
                    for lang in ("hausa", "swahili", "xhosa", "yoruba", "isizulu")
                    for part in ("train", "dev")
                },
            },
        )
    )
    xp3_rows = [{"inputs": text("swh", "prompt", i), "targets": text("swh", "target", i)} for i in range(N)]
    out.append(
        Repo(
            "bigscience/xP3mt",
            files={
                "README.md": card(),
                "xP3mt.py": b"# loading script (replica)\nimport datasets\n",
                "sw/xp3_facebook_flores_swh_Latn_train_translate.jsonl": lambda: jsonl(xp3_rows),
            },
            refs={"refs/convert/parquet": {"sw/train/0000.parquet": lambda: parquet(xp3_rows)}},
        )
    )
    out.append(
        Repo(
            "Telugu-LLM-Labs/telugu_alpaca_yahma_cleaned_filtered_romanized",
            files={
                "README.md": b"---\nlicense: cc-by-4.0\n---\n",
                "yahma_alpaca_cleaned_telugu_filtered_and_romanized.csv": lambda: csv(
                    [
                        {
                            "instruction": text("en", "instruction", i),
                            "input": "" if i % 3 else text("en", "input", i),
                            "output": text("en", "output", i),
                            "telugu_instruction": text("tel", "instruction", i),
                            "telugu_input": "" if i % 3 else text("tel", "input", i),
                            "telugu_output": text("tel", "output", i),
                            "telugu_transliterated_instruction": f"neeru instruction {i}",
                            "telugu_transliterated_input": "",
                            "telugu_transliterated_output": f"neeru output {i}",
                        }
                        for i in range(N)
                    ]
                ),
            },
        )
    )
    out.append(
        Repo(
            "ai4bharat/indic-align",
            files={
                "README.md": card(
                    [
                        {
                            "config_name": "Indic_ShareLlama",
                            "data_files": [{"split": "train", "path": "indicalign-instruct/indicsharellama/*.parquet"}],
                        },
                        {
                            "config_name": "Dolly_T",
                            "data_files": [{"split": "train", "path": "indicalign-instruct/dolly/*"}],
                        },
                    ]
                ),
                "indicalign-instruct/indicsharellama/indic_sharellama.parquet": lambda: parquet(
                    [
                        {
                            "doc_id": f"doc-{i}",
                            "num_turns": 1 + i % 2,
                            "eng_Latn": [[text("en", "user", i), text("en", "assistant", i)]] * (1 + i % 2),
                            "ben_Beng": [[text("ben", "user", i), text("ben", "assistant", i)]] * (1 + i % 2),
                            "tel_Telu": [[text("tel", "user", i), text("tel", "assistant", i)]],
                            "__index_level_0__": i,
                        }
                        for i in range(N)
                    ]
                ),
                "indicalign-instruct/dolly/Dolly.parquet": lambda: parquet([{"id": 0, "ben_Beng": [["a", "b"]]}]),
            },
        )
    )
    out.append(
        Repo(
            "lumatic-ai/BongChat-v1-253k",
            files={
                "README.md": card(
                    [{"config_name": "default", "data_files": [{"split": "train", "path": "data/train-*"}]}]
                ),
                "data/train-00000-of-00001.parquet": lambda: parquet(
                    [
                        {
                            "instruction": text("ben", "instruction", i),
                            "input": "" if i % 2 else text("ben", "input", i),
                            "output": text("ben", "output", i),
                        }
                        for i in range(N)
                    ]
                ),
            },
        )
    )
    out.append(
        Repo(
            "izumi-lab/llm-japanese-dataset",
            files={
                "README.md": b"---\nlicense: cc-by-sa-4.0\nlanguage:\n- ja\n---\n# llm-japanese-dataset (replica)\n",
                "data-cc-by-sa.jsonl": lambda: jsonl(
                    [
                        {
                            "instruction": text("jpn", "instruction", i),
                            "input": "" if i % 2 else text("jpn", "input", i),
                            "output": text("jpn", "output", i),
                        }
                        for i in range(N)
                    ]
                ),
                "version.py": b"__version__ = '1.0.3'\n",
            },
        )
    )
    ichikara = ("20231115-1", "20231115-2", "20231115-5", "20231221-002", "20231221-003")
    out.append(
        Repo(
            "p1atdev/ichikara-instruction",
            files={
                "README.md": card(
                    [{"config_name": c, "data_files": [{"split": "train", "path": f"{c}/train-*"}]} for c in ichikara]
                ),
                **{
                    f"{c}/train-00000-of-00001.parquet": (
                        lambda c=c: parquet(
                            [
                                {
                                    "ID": f"{c}-{i}",
                                    "text": text("jpn", "instruction", i),
                                    "output": text("jpn", "output", i),
                                }
                                for i in range(N)
                            ]
                        )
                    )
                    for c in ichikara
                },
            },
        )
    )
    out.append(
        Repo(
            "kunishou/databricks-dolly-15k-ja",
            files={
                "README.md": b"---\nlicense: cc-by-sa-3.0\nlanguage:\n- ja\n---\n",
                "databricks-dolly-15k-ja.json": lambda: json.dumps(
                    [
                        {
                            "instruction": text("jpn", "instruction", i),
                            "input": "" if i % 2 else text("jpn", "context", i),
                            "output": text("jpn", "output", i),
                            "category": "open_qa",
                            "index": str(i),
                        }
                        for i in range(N)
                    ],
                    ensure_ascii=False,
                ).encode(),
            },
        )
    )
    return out


#: External files (not on the hub) that a loading script read: served by the replica under /external/.
def external_files() -> dict[str, bytes]:
    pairs = {
        "eng_Latn-swh_Latn": "swh",
        "eng_Latn-tel_Telu": "tel",
        "ben_Beng-eng_Latn": "ben",
        "eng_Latn-jpn_Jpan": "jpn",
    }
    out = {}
    for pair, lang in pairs.items():
        english_first = pair.startswith("eng")
        rows = []
        for i in range(N):
            en, xx = text("en", "sentence", i), text(lang, "sentence", i)
            src, tgt = (en, xx) if english_first else (xx, en)
            rows.append([src, tgt, f"{1.05 + i / 100:.4f}", "0.98", "0.97", "cc", "_", "cc", "_"])
        out[f"allennlp-data-bucket/nllb/{pair}.gz"] = tsv_gz(rows)
    return out


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


# ------------------------------------------------------------------------------------------- all, and the faults
def all_repos() -> list[Repo]:
    return _sft_repos() + _eval_repos() + _model_repos()


def _find(repos: list[Repo], repo_id: str) -> Repo:
    return next(r for r in repos if r.repo_id == repo_id)


def _drop_column(repos: list[Repo], arg: tuple[str, str]) -> None:
    """Rewrite every parquet file of a repository without one column."""
    import pyarrow.parquet as pq

    repo = _find(repos, arg[0])
    for path, content in list(repo.files.items()):
        if path.endswith(".parquet"):
            table = pq.read_table(io.BytesIO(content() if callable(content) else content))
            repo.files[path] = parquet(table.drop_columns([arg[1]]).to_pylist())


def _rename_config(repos: list[Repo], arg: tuple[str, str, str]) -> None:
    """Rename a config in the card (and its folder, where the files live in one)."""
    repo = _find(repos, arg[0])
    old, new = arg[1], arg[2]
    repo.files = {p.replace(f"{old}/", f"{new}/", 1): c for p, c in repo.files.items()}
    readme = repo.files["README.md"]
    repo.files["README.md"] = readme.replace(old.encode(), new.encode())


def _script_only(repos: list[Repo], repo_id: str) -> None:
    """Replace a repository's data by a loading script (as allenai/nllb is)."""
    repo = _find(repos, repo_id)
    repo.files = {"README.md": card(), f"{repo_id.split('/')[1]}.py": b"import datasets\n"}
    repo.refs = {}


def _language_code(repos: list[Repo], arg: tuple[str, str, str, str]) -> None:
    """Change one language value in a column of every parquet file (e.g. Aya's Swahili 'Swahili' -> 'Kiswahili')."""
    import pyarrow.parquet as pq

    repo_id, column, old, new = arg
    repo = _find(repos, repo_id)
    for path, content in list(repo.files.items()):
        if path.endswith(".parquet"):
            rows = pq.read_table(io.BytesIO(content() if callable(content) else content)).to_pylist()
            repo.files[path] = parquet([{**r, column: new if r.get(column) == old else r.get(column)} for r in rows])


#: name -> fault(repos, argument)
BREAKS = {
    "drop_column": _drop_column,
    "rename_config": _rename_config,
    "script_only": _script_only,
    "language_value": _language_code,
}


# ------------------------------------------------------------------------------------------- evaluation datasets
MGSM_LANGS = ["bn", "de", "en", "es", "fr", "ja", "ru", "sw", "te", "th", "zh"]
MGSM_WORD = {
    "bn": "ben",
    "de": "deu",
    "en": "en",
    "es": "spa",
    "fr": "fra",
    "ja": "jpn",
    "ru": "rus",
    "sw": "swh",
    "te": "tel",
    "th": "tha",
    "zh": "zho",
}
FLORES = {"eng_Latn": "en", "swh_Latn": "swh", "tel_Telu": "tel", "ben_Beng": "ben", "jpn_Jpan": "jpn"}
MMLU_LANGS = {"en": "en", "sw": "swh", "te": "tel", "bn": "ben", "ja": "jpn"}
MMLU_SUBJECTS = [
    "abstract_algebra",
    "anatomy",
    "astronomy",
    "business_ethics",
    "clinical_knowledge",
    "college_biology",
    "college_chemistry",
    "college_computer_science",
    "college_mathematics",
    "college_medicine",
    "college_physics",
    "computer_security",
    "conceptual_physics",
    "econometrics",
    "electrical_engineering",
    "elementary_mathematics",
    "formal_logic",
    "global_facts",
    "high_school_biology",
    "high_school_chemistry",
    "high_school_computer_science",
    "high_school_european_history",
    "high_school_geography",
    "high_school_government_and_politics",
    "high_school_macroeconomics",
    "high_school_mathematics",
    "high_school_microeconomics",
    "high_school_physics",
    "high_school_psychology",
    "high_school_statistics",
    "high_school_us_history",
    "high_school_world_history",
    "human_aging",
    "human_sexuality",
    "international_law",
    "jurisprudence",
    "logical_fallacies",
    "machine_learning",
    "management",
    "marketing",
    "medical_genetics",
    "miscellaneous",
    "moral_disputes",
    "moral_scenarios",
    "nutrition",
    "philosophy",
    "prehistory",
    "professional_accounting",
    "professional_law",
    "professional_medicine",
    "professional_psychology",
    "public_relations",
    "security_studies",
    "sociology",
    "us_foreign_policy",
    "virology",
    "world_religions",
]


def _mgsm_rows(code: str, split: str) -> list[dict]:
    lang = MGSM_WORD[code]
    rows = []
    for i in range(8 if split == "train" else N):
        a, b = i + 2, 3 * i + 1
        rows.append(
            {
                "question": f"{text(lang, 'question', i)}: {a} + {b}?",
                "answer": f"Step-by-Step Answer: {a} + {b} = {a + b}. The answer is {a + b}."
                if split == "train"
                else None,
                "answer_number": a + b,
                "equation_solution": f"{a} + {b} = {a + b}" if split == "train" else None,
            }
        )
    return rows


def _eval_repos() -> list[Repo]:
    out = []
    # juletxara/mgsm: see EVIDENCE.md for which layout the hub has today
    out.append(
        Repo(
            "juletxara/mgsm",
            files={
                "README.md": card(
                    [
                        {
                            "config_name": c,
                            "data_files": [
                                {"split": "train", "path": f"{c}/train-*"},
                                {"split": "test", "path": f"{c}/test-*"},
                            ],
                        }
                        for c in MGSM_LANGS
                    ]
                ),
                **{
                    f"{c}/{split}-00000-of-00001.parquet": (lambda c=c, split=split: parquet(_mgsm_rows(c, split)))
                    for c in MGSM_LANGS
                    for split in ("train", "test")
                },
            },
        )
    )
    out.append(
        Repo(
            "facebook/belebele",
            files={
                "README.md": card(
                    [{"config_name": c, "data_files": [{"split": "test", "path": f"data/{c}.jsonl"}]} for c in FLORES]
                ),
                **{
                    f"data/{c}.jsonl": (
                        lambda c=c, lang=lang: jsonl(
                            [
                                {
                                    "link": f"https://en.wikibooks.org/wiki/{i}",
                                    "question_number": 1,
                                    "flores_passage": text(lang, "passage", i),
                                    "question": text(lang, "question", i),
                                    **{f"mc_answer{k}": text(lang, f"option{k}", i) for k in range(1, 5)},
                                    "correct_answer_num": str(1 + i % 4),
                                    "dialect": c,
                                    "ds": "2023-05-03",
                                }
                                for i in range(N)
                            ]
                        )
                    )
                    for c, lang in FLORES.items()
                },
            },
        )
    )
    out.append(
        Repo(
            "CohereForAI/Global-MMLU",
            files={
                "README.md": card(
                    [
                        {
                            "config_name": c,
                            "data_files": [
                                {"split": "test", "path": f"{c}/test-*"},
                                {"split": "dev", "path": f"{c}/dev-*"},
                            ],
                        }
                        for c in MMLU_LANGS
                    ]
                ),
                **{
                    f"{c}/{split}-00000-of-00001.parquet": (
                        lambda c=c, lang=lang, split=split: parquet(
                            [
                                {
                                    "sample_id": f"{subject}/{split}/{i}",
                                    "subject": subject,
                                    "subject_category": "STEM",
                                    "question": text(lang, subject, i),
                                    "option_a": "1",
                                    "option_b": "2",
                                    "option_c": "3",
                                    "option_d": "4",
                                    "answer": "ABCD"[i % 4],
                                    "required_knowledge": "[]",
                                    "time_sensitive": "[]",
                                    "reference": "[]",
                                    "culture": "[]",
                                    "region": "[]",
                                    "country": "[]",
                                    "cultural_sensitivity_label": "CA",
                                    "is_annotated": False,
                                }
                                for subject in MMLU_SUBJECTS
                                for i in range(5 if split == "dev" else 2)
                            ]
                        )
                    )
                    for c, lang in MMLU_LANGS.items()
                    for split in ("test", "dev")
                },
            },
        )
    )
    out.append(
        Repo(
            "google-research-datasets/mbpp",
            files={
                "README.md": card(
                    [
                        {
                            "config_name": "full",
                            "default": True,
                            "data_files": [
                                {"split": s, "path": f"full/{s}-*"} for s in ("train", "test", "validation", "prompt")
                            ],
                        },
                        {
                            "config_name": "sanitized",
                            "data_files": [
                                {"split": s, "path": f"sanitized/{s}-*"}
                                for s in ("train", "test", "validation", "prompt")
                            ],
                        },
                    ]
                ),
                **{
                    f"{cfg}/{s}-00000-of-00001.parquet": (
                        lambda cfg=cfg: parquet(
                            [
                                {
                                    "task_id": 11 + i,
                                    ("text" if cfg == "full" else "prompt"): f"Write a function to add {i} to x.",
                                    "code": f"def add_{i}(x):\n    return x + {i}",
                                    "test_list": [f"assert add_{i}({k}) == {k + i}" for k in range(3)],
                                    "test_setup_code": "",
                                    "challenge_test_list": [],
                                }
                                for i in range(N)
                            ]
                        )
                    )
                    for cfg in ("full", "sanitized")
                    for s in ("train", "test", "validation", "prompt")
                },
            },
        )
    )
    out.append(
        Repo(
            "openlanguagedata/flores_plus",
            gated=True,
            files={
                "README.md": card(
                    [
                        {
                            "config_name": c,
                            "data_files": [{"split": s, "path": f"{s}/{c}.parquet"} for s in ("dev", "devtest")],
                        }
                        for c in FLORES
                    ],
                    gated=True,
                ),
                **{
                    f"{s}/{c}.parquet": (
                        lambda c=c, lang=lang, s=s: parquet(
                            [
                                {
                                    "id": i,
                                    "iso_639_3": c[:3],
                                    "iso_15924": c[4:],
                                    "glottocode": "repl1234",
                                    "text": text(lang, f"{s} sentence", i),
                                    "url": f"https://en.wikinews.org/wiki/{i}",
                                    "domain": "wikinews",
                                    "topic": "science",
                                    "has_image": "no",
                                    "has_hyperlink": "no",
                                    "last_updated": "1.0",
                                }
                                for i in range(N)
                            ]
                        )
                    )
                    for c, lang in FLORES.items()
                    for s in ("dev", "devtest")
                },
            },
        )
    )
    return out
