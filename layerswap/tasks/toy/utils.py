"""Helpers the toy task YAMLs refer to with `!function utils.<name>` (resolved next to the YAML files).

The toy data files are local JSONL files in the real datasets' schemas (see docs/ARCHITECTURE.md). The per-job task
YAMLs that `layerswap.evaluation.tasks` writes pass, through `dataset_kwargs`:
  path          the JSONL file
  fewshot_pool  how many leading lines form the few-shot split (0 when the task runs 0-shot); these lines are never
                scored, so a few-shot exemplar is never also a test item
  limit         keep at most this many scored items (after the pool), or null
  lang          language code (or "<src>-<tgt>" for FLORES), copied into every doc as `lang`/`src`/`tgt` fields
"""

from __future__ import annotations

import json
from pathlib import Path


def load_split_jsonl(
    path: str, fewshot_pool: int = 0, limit: int | None = None, lang: str | None = None, **_ignored
) -> "datasets.DatasetDict":  # noqa: F821
    """`custom_dataset` loader: a DatasetDict with a `fewshot` split (first `fewshot_pool` lines) and a `test` split."""
    import datasets

    rows = []
    with Path(path).open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                rows.append(json.loads(line))
    if lang is not None:
        src, _, tgt = lang.partition("-")
        for row in rows:
            row["lang"] = lang
            if tgt:
                row["src"], row["tgt"] = src, tgt
    pool, test = rows[:fewshot_pool], rows[fewshot_pool:]
    if limit is not None:
        test = test[: int(limit)]
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(test), "fewshot": datasets.Dataset.from_list(pool)})


def mbpp_execute(resps, docs) -> list[list[str]]:
    """Filter (lm-eval `custom`): outcome per generation, run in `layerswap.evaluation.sandbox` (opt-in only)."""
    from layerswap.evaluation.sandbox import execute_all

    return execute_all(resps, docs)


def mbpp_process_results(doc: dict, results: list[str]) -> dict:
    from layerswap.evaluation.sandbox import pass_at_1

    return pass_at_1(doc, results)
