"""The replica's evaluation datasets, as lm-eval's tasks and ours read them: MGSM, Belebele, FLORES+, Global-MMLU,
MBPP."""

from __future__ import annotations

from .files import N, Repo, card, jsonl, parquet, text

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
