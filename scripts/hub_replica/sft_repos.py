"""The replica's SFT sources (one per data source config/paper.yaml names) and the external files a loading script
used to read (allenai/nllb's TSVs); EVIDENCE.md gives each layout's evidence."""

from __future__ import annotations

import json

from .files import N, Repo, card, csv, jsonl, parquet, text, tsv_gz


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
