"""The evaluation store under audit (layerswap.evaluation.store).

A result a job copied from the store was not computed by that job: its bytes are vouched for by the store entry, which
is a folder anyone can edit. So what fed each result is recorded (`<root>/store/fed/`, one record per result file:
entry key and sha256, written by the job as it copies), `layerswap manifest` lists those records under `store`, and
`layerswap audit` checks each one:

- `store: <file> ... entry <key> is gone`: the entry that fed it no longer exists (cannot be checked);
- `store: <file> ... its key.json does not hash to the key`: the entry's key documents were edited;
- `store: <file> ... the entry's file differs`: the entry changed after it fed the result (or its key.json's sha256
  does not match its file);
- every result fed by the store is named (`store: <file>: copied from entry <key>, not evaluated by its job`), and
  `layerswap audit --reevaluate-store` evaluates each such model again, without the store, from the arguments its
  entry records (checked against the entry's key: the same job, the same model), and names every result whose bytes
  differ from the fresh evaluation: a store entry edited together with its key.json cannot make a result differ from a
  fresh evaluation without the audit naming it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import tempfile
from pathlib import Path

from layerswap.workflow.layout import Layout


def _store_root(root: Path) -> Path:
    return Path(Layout.at(root).store())


def fed_records(root: Path, files: dict[str, dict]) -> dict[str, dict]:
    """{result file: {"entry": key, "sha256": ...}} for each file of `files` (the manifest's) whose bytes are those
    a job copied from the store (its fed record, layerswap.evaluation.store.fed_record)."""
    from layerswap.evaluation.store import fed_record

    store = _store_root(root)
    out: dict[str, dict] = {}
    if not store.parent.is_dir():
        return out
    for p, entry in files.items():
        rec = fed_record(store, p)
        if not rec.is_file():
            continue
        try:
            doc = json.loads(rec.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and doc.get("sha256") == entry.get("sha256") and isinstance(doc.get("entry"), str):
            out[p] = {"entry": doc["entry"], "sha256": doc["sha256"]}
    return out


def _entry_dir(store: Path, key: str) -> Path | None:
    if len(key) != 64 or any(c not in "0123456789abcdef" for c in key):
        return None
    return store / key[:2] / key


def check_store(manifest: dict, reevaluate: bool = False) -> tuple[list[str], list[str]]:
    """(problems, notes): one line per store-fed result whose entry is gone, edited, or (with `reevaluate`) differs
    from a fresh evaluation; notes name every store-fed result."""
    from layerswap.evaluation.store import entry_key

    root = Path(manifest["root"])
    store = _store_root(root)
    problems, notes, fresh_checks = [], [], {}
    for p, rec in sorted((manifest.get("store") or {}).items()):
        key = str(rec.get("entry"))
        entry = _entry_dir(store, key)
        if entry is None or not entry.is_dir():
            problems.append(
                f"store: {p}: copied from entry {key[:16]}…, which is gone (the result cannot be checked; "
                f"evaluate it again: rm {p} && snakemake {p})"
            )
            continue
        try:
            doc = json.loads((entry / "key.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            doc = None
        if entry_key(doc) != key:
            problems.append(
                f"store: {p}: entry {entry} was edited: its key.json does not hash to the key "
                f"(remove it: rm -r {entry}; then rm {p} && snakemake {p})"
            )
            continue
        name = Path(p).name
        try:
            digest = hashlib.sha256((entry / name).read_bytes()).hexdigest()
        except OSError:
            digest = None
        if digest != rec.get("sha256") or (doc.get("files") or {}).get(name) != digest:
            problems.append(
                f"store: {p}: the entry's file {entry / name} differs from the one that fed the result "
                f"(remove it: rm -r {entry}; then rm {p} && snakemake {p})"
            )
            continue
        notes.append(
            f"store: {p}: copied from entry {key[:16]}…, not evaluated by its job"
            + ("" if reevaluate else " (`layerswap audit --reevaluate-store` evaluates it again)")
        )
        if reevaluate and name.endswith(".json") and not name.endswith(".samples.jsonl"):
            fresh_checks.setdefault(key, (entry, doc, []))[2].append(p)
    for key, (entry, doc, paths) in sorted(fresh_checks.items()):
        problems += reevaluate_entry(entry, doc, paths)
    return problems, notes


def reevaluate_entry(entry: Path, doc: dict, paths: list[str]) -> list[str]:
    """Evaluate the model of a store entry again, without the store, from the arguments it records, and compare each
    result file in `paths` with the fresh one. The fresh evaluation's own key must be the entry's (same job, same
    model), else the entry cannot be checked and is named."""
    from layerswap.evaluation import evaluate, evaluate_merges
    from layerswap.evaluation.store import _sha256, job_key, model_doc

    args_doc = doc.get("args") or {}
    model = doc.get("model") or {}
    model_id, source = model.get("model_id"), args_doc.get("source")
    command = args_doc.get("command")
    if not model_id or not source or command not in ("evaluate", "evaluate-merges"):
        return [
            f"store: {p}: entry {entry} records no arguments to evaluate it again (made by an older version); "
            f"evaluate it without the store: rm -r {entry} && rm {p} && snakemake {p}"
            for p in paths
        ]
    module = evaluate_merges if command == "evaluate-merges" else evaluate
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    with tempfile.TemporaryDirectory(prefix="layerswap-audit-") as tmp:
        argv = ["--model", f"{model_id}={source}", "--out-dir", tmp, "--benchmarks-json", args_doc["benchmarks_json"]]
        for k in ("data_dir", "batch_size", "seed", "threads", "device", "dtype", "task_set", "backend", "hf_home"):
            if args_doc.get(k) is not None:
                argv += [f"--{k.replace('_', '-')}", str(args_doc[k])]
        args = parser.parse_args(argv)
        from layerswap.merge import engine

        merges = engine if command == "evaluate-merges" else None
        import torch

        from layerswap.evaluation.hosts import resolve_dtype
        from layerswap.evaluation.tasks import parse_benchmarks, plan_benchmarks

        device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
        if args.task_set == "paper":
            from layerswap.evaluation.paper_tasks import plan_paper

            plans = plan_paper(parse_benchmarks(args.benchmarks_json))
        else:
            plans = plan_benchmarks(Path(args.data_dir), parse_benchmarks(args.benchmarks_json))
        job = job_key(args, plans, resolve_dtype(args.dtype, args.device, torch), device, command)
        if _sha256(job) != doc["job"] or model_doc(model_id, Path(source), merges) != model:
            return [
                f"store: {p}: entry {entry} cannot be evaluated again here (its job or model differs from what "
                f"{source} and this machine give now); evaluate it without the store: rm -r {entry} && rm {p} "
                f"&& snakemake {p}"
                for p in paths
            ]
        logging.getLogger("layerswap.evaluate").info(
            "audit: evaluating %s again (store entry %s)", model_id, entry.name
        )
        module.run(args)
        out = []
        for p in paths:
            fresh = Path(tmp) / model_id / Path(p).name
            same = fresh.is_file() and os.path.isfile(p) and fresh.read_bytes() == Path(p).read_bytes()
            if not same:
                out.append(
                    f"store: {p}: differs from a fresh evaluation of {model_id} (store entry {entry} is wrong: "
                    f"rm -r {entry} && rm {p} && snakemake {p})"
                )
    return out
