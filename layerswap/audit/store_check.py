"""What fed a run's results besides its jobs: the evaluation store (layerswap.evaluation.store), and checkpoints
outside the run's folders (layerswap.inputs).

A result a job copied from the store was not computed by that job: its bytes are vouched for by the store entry, which
is a folder anyone can edit. So what fed each result is recorded (`<root>/store/fed/`, one record per result file:
entry key and sha256, written by the job as it copies), `layerswap manifest` lists those records under `store` and
each entry's key documents (its job's hash, the model, the arguments that evaluate it again) under `store_entries`,
and `layerswap audit` checks each one. The fact travels with the result (issue 49): the store is a cache that can be
deleted (`rm -r results/store`), so the manifest job keeps a result's `store` record from the previous manifest
while the result has the same bytes and its job did not rerun (`carried_forward`).

- `store: <file> ... entry <key> is gone`: the entry that fed it no longer exists (it cannot be checked against it;
  `--reevaluate-store` evaluates the model again from the manifest's record of the entry);
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

import hashlib
import json
from pathlib import Path

from layerswap.errors import UserError
from layerswap.layout import Layout


def _store_root(root: Path) -> Path:
    return Path(Layout.at(root).store())


def fed_records(root: Path, files: dict[str, dict]) -> dict[str, dict]:
    """{result file: {"entry": key, "sha256": ...}} for each file of `files` (the manifest's) whose bytes are those
    a job copied from the store (its fed record, layerswap.evaluation.store.fed_record)."""
    from layerswap.contracts import store_fed_record as fed_record

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


def entry_docs(root: Path, keys) -> dict[str, dict]:
    """{key: {job, model, args}} of each store entry of `keys` whose `key.json` hashes to its key: what evaluates its
    model again without the store (the manifest's `store_entries`)."""
    from layerswap.contracts import store_entry_key as entry_key

    store = _store_root(root)
    out = {}
    for key in sorted(set(keys)):
        entry = _entry_dir(store, key)
        try:
            doc = json.loads((entry / "key.json").read_text(encoding="utf-8")) if entry is not None else None
        except (OSError, ValueError):
            continue
        if entry_key(doc) == key:
            out[key] = {k: doc.get(k) for k in ("job", "model", "args")}
    return out


def carried_forward(files: dict[str, dict], jobs: dict, fed: dict[str, dict], previous: dict) -> dict[str, dict]:
    """The `store` records of `previous` (the manifest as the run started) for files of this manifest that no fed
    record names now (the store was deleted) but that still have the bytes the store fed and whose job did not rerun
    (every output of it has the `endtime` the previous manifest recorded): a result fed from the store stays
    recorded as such, whatever happens to the store."""
    before = previous.get("store") if isinstance(previous.get("store"), dict) else {}
    ended: dict[str, object] = {}
    for job in (previous.get("jobs") or {}).values():
        if isinstance(job, dict) and isinstance((job.get("snakemake") or {}).get("endtime"), dict):
            ended.update(job["snakemake"]["endtime"])
    out = {}
    for p, rec in sorted(before.items()):
        entry = files.get(p)
        if p in fed or not isinstance(rec, dict) or not entry or rec.get("sha256") != entry.get("sha256"):
            continue
        ends = ((jobs.get(entry.get("job") or "") or {}).get("snakemake") or {}).get("endtime") or {}
        if ends and all(o in ended and ended[o] == end for o, end in ends.items()):
            out[p] = {"entry": rec.get("entry"), "sha256": rec.get("sha256")}
    return out


def _entry_dir(store: Path, key: str) -> Path | None:
    if len(key) != 64 or any(c not in "0123456789abcdef" for c in key):
        return None
    return store / key[:2] / key


def check_store(manifest: dict, root: Path, reevaluate: bool = False) -> tuple[list[str], list[str], list[tuple]]:
    """(problems, notes, entries to evaluate again): one line per store-fed result whose entry is gone or edited;
    notes name every store-fed result; with `reevaluate`, (entry, key doc, result files) of each checked entry, for
    layerswap.audit.reevaluate (kept apart: the manifest command imports this module, not the evaluation code). An
    entry that is gone is evaluated again from the manifest's record of it (`store_entries`, checked against its
    key) with `reevaluate`, else named as a problem. `root`: the results folder the command runs on."""
    from layerswap.contracts import store_entry_key as entry_key

    store = _store_root(Path(root))
    recorded = manifest.get("store_entries") if isinstance(manifest.get("store_entries"), dict) else {}
    problems, notes, fresh_checks = [], [], {}
    for p, rec in sorted((manifest.get("store") or {}).items()):
        key = str(rec.get("entry"))
        entry = _entry_dir(store, key)
        if entry is None or not entry.is_dir():
            kept = recorded.get(key)
            if reevaluate and entry is not None and entry_key(kept) == key:
                notes.append(
                    f"store: {p}: copied from entry {key[:16]}…, which is gone; evaluated again from the manifest's "
                    "record of the entry"
                )
                fresh_checks.setdefault(key, (entry, kept, []))[2].append(p)  # sample logs too: no entry holds them
                continue
            problems.append(
                f"store: {p}: copied from entry {key[:16]}…, which is gone ("
                + (
                    "`layerswap audit --reevaluate-store` evaluates it again from the manifest's record of the entry"
                    if entry_key(kept) == key
                    else "the manifest holds no record of it to evaluate it again"
                )
                + f"; or evaluate it again by its job: rm {p} && snakemake {p})"
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
    return problems, notes, [fresh_checks[k] for k in sorted(fresh_checks)]


def outside_inputs(root: Path) -> dict[str, dict]:
    """{input path: {"recipes": [...], "files": {name: sha256}}} of every recipe (a JSON file in a `merges` folder)
    under the results folder `root` whose inputs lie outside the run's roots (the manifest's `outside_inputs`; empty
    where no roots are set)."""
    from layerswap.fingerprint import file_sha256 as sha256  # what is on disk, never the verify-once cache
    from layerswap.inputs import outside, roots

    where = roots()
    found: dict[str, dict] = {}
    if where is None or not Path(root).is_dir():
        return found
    for recipe_file in sorted(f for f in Path(root).rglob("*.json") if "merges" in f.relative_to(root).parts):
        try:
            paths = _recipe_inputs(json.loads(recipe_file.read_text(encoding="utf-8")))
        except (UserError, OSError, ValueError):
            continue  # not a recipe the run reads (its own check names it)
        for p in paths:
            if outside(p, where):
                entry = found.setdefault(p, {"recipes": [], "files": {}})
                entry["recipes"].append(str(recipe_file))
    for p, entry in found.items():
        d = Path(p)
        files = sorted(f for f in d.iterdir() if f.is_file()) if d.is_dir() else []
        entry["files"] = {f.name: sha256(f) for f in files}
    return found


def _recipe_inputs(recipe) -> list[str]:
    """The checkpoint paths a recipe names (its base and inputs, nested recipes' included), read from the JSON as
    `layerswap.merge.recipes.input_paths` reads a validated one; here without the merge package, which the manifest
    command must not import (its code fingerprint would rerun the manifest on every merge engine edit)."""
    if not isinstance(recipe, dict):
        return []
    inputs = recipe.get("inputs") if isinstance(recipe.get("inputs"), dict) else {}
    refs = [recipe.get("base"), *(inputs.get("models") or []), *(inputs.get(k) for k in ("task", "lang"))]
    paths: list[str] = []
    for ref in refs:
        if isinstance(ref, dict):
            paths += _recipe_inputs(ref)
        elif isinstance(ref, str):
            paths.append(ref)
    return list(dict.fromkeys(paths))
