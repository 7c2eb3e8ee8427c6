"""Helpers of the paper task YAMLs (`layerswap/tasks/paper/`), referenced as `!function utils.<name>`.

Data comes from the Hugging Face hub, pre-staged by `layerswap prestage` (`layerswap.evaluate.hub_artefacts`) and read
offline by `layerswap evaluate` (HF_HUB_OFFLINE / HF_DATASETS_OFFLINE set).
"""

from __future__ import annotations

import os


def load_flores_pair(src: str, tgt: str, src_name: str, tgt_name: str, split: str = "devtest",
                     path: str = "openlanguagedata/flores_plus", **_metadata):
    """FLORES+ (the maintained FLORES-200) has one config per language; a translation item needs two of them. Rows are
    paired by `id` (the sentence id, the same in every language) and hold src_text/tgt_text plus the language names
    that the prompt uses. Returns {split: Dataset} in the source's row order."""
    import datasets

    src_ds = datasets.load_dataset(path, src, split=split)
    tgt_ds = datasets.load_dataset(path, tgt, split=split)
    tgt_by_id = {row["id"]: row["text"] for row in tgt_ds}
    rows = []
    for row in src_ds:
        if row["id"] not in tgt_by_id:
            raise ValueError(f"{path}: sentence id {row['id']} of {src}/{split} missing in {tgt}/{split}")
        rows.append({"id": row["id"], "src_text": row["text"], "tgt_text": tgt_by_id[row["id"]],
                     "src_name": src_name, "tgt_name": tgt_name})
    return datasets.DatasetDict({split: datasets.Dataset.from_list(rows)})


def mbpp_program(doc: dict, completion: str) -> str:
    """The program run for one MBPP item: setup code, the model's code, then the item's asserts."""
    parts = [doc.get("test_setup_code") or "", completion, *list(doc.get("test_list") or [])]
    return "\n".join(p for p in parts if p)


def mbpp_execute(resps, docs) -> list[list[str]]:
    """Filter (lm-eval `custom`): run each generation against its item's asserts in `layerswap.evaluation.sandbox`
    (subprocess, timeout, memory/CPU limits, no network). Returns "passed" | "failed" | "timeout" per response.
    Runs only when the user opted in (`execute_code: true` for mbpp)."""
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
