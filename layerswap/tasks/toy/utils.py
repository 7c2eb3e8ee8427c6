"""Helpers the toy task YAMLs refer to with `!function utils.<name>` (resolved next to the YAML files).

The toy data files are local JSONL files in the real datasets' schemas (see docs/ARCHITECTURE.md). The per-job task
YAMLs that `layerswap.evaluate` writes pass, through `dataset_kwargs`:
  path          the JSONL file
  fewshot_pool  how many leading lines form the few-shot split (0 when the task runs 0-shot); these lines are never
                scored, so a few-shot exemplar is never also a test item
  limit         keep at most this many scored items (after the pool), or null
  lang          language code (or "<src>-<tgt>" for FLORES), copied into every doc as `lang`/`src`/`tgt` fields
"""

from __future__ import annotations

import json
import os
from pathlib import Path


def load_split_jsonl(path: str, fewshot_pool: int = 0, limit: int | None = None, lang: str | None = None,
                     **_ignored) -> "datasets.DatasetDict":  # noqa: F821
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


def mbpp_program(doc: dict, completion: str) -> str:
    """The program run for one MBPP item: setup code, the model's code, then the item's asserts."""
    parts = [doc.get("test_setup_code") or "", completion, *list(doc.get("test_list") or [])]
    return "\n".join(p for p in parts if p)


def mbpp_execute(resps, docs) -> list[list[str]]:
    """Filter (lm-eval `custom`): run every generation against its item's asserts, several sandboxes at a time.

    Returns the outcome per response: "passed", "failed" or "timeout" (the sample log shows it as `extracted`).
    Runs only when the user opted in (`execute_code: true`); see `layerswap.evaluation.sandbox`."""
    from concurrent.futures import ThreadPoolExecutor

    from layerswap.evaluation.sandbox import run_program

    jobs = [(i, mbpp_program(doc, gen)) for i, (gens, doc) in enumerate(zip(resps, docs)) for gen in gens]
    with ThreadPoolExecutor(max_workers=max(1, min(8, os.cpu_count() or 1))) as pool:
        outcomes = list(pool.map(lambda job: run_program(job[1]).status, jobs))
    out: list[list[str]] = [[] for _ in resps]
    for (i, _), status in zip(jobs, outcomes):
        out[i].append(status)
    return out


def mbpp_process_results(doc: dict, results: list[str]) -> dict:
    """pass@1 of the greedy sample, from the outcome that `mbpp_execute` put in place of the generation."""
    return {"pass_at_1": 1.0 if results[0] == "passed" else 0.0}
