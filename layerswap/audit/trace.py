"""`layerswap audit --trace TABLE ROW COLUMN`: one table cell back to the files behind it.

The table is recomputed with `layerswap.report.tables` itself, with scores that carry the evaluation file they came
from; the cell's evaluation files, sample logs, merge recipes and checkpoints are printed with their manifest hashes
and whether the file on disk still matches. A min/max/best-of cell traces to the model that attains it; an average
to all its models.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path

from layerswap.contracts import BASE_MODEL_ID, merge_model_parts
from layerswap.errors import UserError
from layerswap.fingerprint import file_sha256
from layerswap.layout import Layout


class Traced(float):
    """A float that remembers the evaluation files it was computed from (arithmetic unions them)."""

    sources: frozenset

    def __new__(cls, value: float, sources=frozenset()):
        obj = float.__new__(cls, value)
        obj.sources = frozenset(sources)
        return obj


def _traced_op(name: str):
    base = getattr(float, name)

    def op(self, other):
        result = base(self, other)
        if result is NotImplemented:
            return result
        return Traced(result, self.sources | getattr(other, "sources", frozenset()))

    return op


for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__"):
    setattr(Traced, _name, _traced_op(_name))


def tables_params(manifest: dict) -> str:
    for job in (manifest.get("jobs") or {}).values():
        if job.get("rule") == "tables" and job.get("shellcmd"):
            words = shlex.split(job["shellcmd"])
            if "--params-json" in words:
                return words[words.index("--params-json") + 1]
    raise UserError("manifest: no record of the tables job (its --params-json); rerun the workflow to write one")


def _norm(text: str) -> str:
    return re.sub(r"\s*/\s*", "/", str(text).strip()).casefold()


def find_cell(table, row: str, column: str):
    rows = {}
    for key, labels in table.rows:
        names = {
            "/".join(str(x) for x in labels),
            str(labels[0]) if len(labels) == 1 else None,
            "/".join(str(x) for x in key) if isinstance(key, tuple) else str(key),
        }
        for n in names - {None}:
            rows.setdefault(_norm(n), key)
    cols = {}
    for key, label in table.columns:
        cols.setdefault(_norm(key), key)
        cols.setdefault(_norm(label), key)
    rkey, ckey = rows.get(_norm(row)), cols.get(_norm(column))
    if rkey is None:
        raise UserError(f"{table.name}: no row {row!r}; rows: " + "; ".join("/".join(l) for _, l in table.rows))
    if ckey is None:
        raise UserError(f"{table.name}: no column {column!r}; columns: " + "; ".join(k for k, _ in table.columns))
    return rkey, ckey


def _recipe_models(recipe, out: list[str]) -> None:
    if isinstance(recipe, dict):
        for k, v in recipe.items():
            if k in ("params",):
                continue
            _recipe_models(v, out)
    elif isinstance(recipe, list):
        for v in recipe:
            _recipe_models(v, out)
    elif isinstance(recipe, str) and recipe not in out and ("/" in recipe or os.sep in recipe):
        out.append(recipe)


def trace(manifest: dict, root: Path, table_file: str, row: str, column: str) -> dict:
    """The files behind one cell of a table of the results folder `root` (the command's, `layerswap.audit.confine`)."""
    from layerswap.report import tables
    from layerswap.report.evals import Evals

    root = Path(root)
    stem = Path(table_file).name.split(".", 1)[0]
    params = tables.Params.from_json(tables_params(manifest))

    class TracingEvals(Evals):
        def score(self, model_id, bench, key):
            return Traced(super().score(model_id, bench, key), {str(self.source(model_id, bench, key))})

        def maybe_score(self, model_id, bench, key):
            value = super().maybe_score(model_id, bench, key)
            return Traced(value, {str(self.source(model_id, bench, key))}) if isinstance(value, float) else value

    layout = Layout.at(root)
    built = tables.build_tables(layout.selection_dir(), layout.evals(), params, evals=TracingEvals(layout.evals()))
    if stem not in built:
        raise UserError(f"{table_file}: not one of the tables ({', '.join(built)})")
    table = built[stem]
    rkey, ckey = find_cell(table, row, column)
    value = table.cells.get((rkey, ckey))
    evals = sorted(getattr(value, "sources", frozenset()))
    files = manifest["files"]

    def entry(path: str) -> dict:
        rec = files.get(path)
        on_disk = Path(path).is_file()
        status = (
            "not in manifest"
            if rec is None
            else "missing"
            if not on_disk
            else ("ok" if file_sha256(Path(path)) == rec["sha256"] else "changed")
        )
        return {"path": path, "sha256": rec and rec["sha256"], "status": status, "job": rec and rec.get("job")}

    out = {
        "table": stem,
        "row": "/".join(str(x) for x in (rkey if isinstance(rkey, tuple) else (rkey,))),
        "column": ckey,
        "value": None if value is None else (float(value) if isinstance(value, float) else value),
        "displayed": table.display(rkey, ckey),
        "evaluations": [],
        "samples": [],
        "recipes": [],
        "checkpoints": [],
    }
    checkpoints: list[str] = []
    for e in evals:
        out["evaluations"].append(entry(e))
        samples = e[: -len(".json")] + ".samples.jsonl"
        if Path(samples).exists() or samples in files:
            out["samples"].append(entry(samples))
        model_id = layout.evaluated_model(e)
        if model_id.startswith("merge/"):
            recipe = str(Path(layout.recipe(*merge_model_parts(model_id))))
            out["recipes"].append(entry(recipe))
            try:
                _recipe_models(json.loads(Path(recipe).read_text()), checkpoints)
            except (OSError, ValueError):
                pass
        elif model_id.startswith("ckpt/"):
            checkpoints.append(str(Path(layout.checkpoint(*model_id[len("ckpt/") :].split("/", 1)))))
        elif model_id == BASE_MODEL_ID:
            checkpoints.append(str(Path(layout.base())))
    for ck in dict.fromkeys(checkpoints):
        weights = sorted(
            p
            for p in files
            if p.startswith(ck.rstrip("/") + "/") and p.endswith(".safetensors") and "/adapter/" not in p
        )
        out["checkpoints"].append({"path": ck, "weights": [entry(w) for w in weights]})
    if not evals:
        out["note"] = (
            "no numeric score behind this cell (a label, 'skipped' or 'n/a' cell); "
            "see the evaluation files of its column"
        )
    return out


def print_trace(t: dict) -> None:
    print(f"{t['table']} [{t['row']}, {t['column']}] = {t['displayed']!s} (value {t['value']})")
    for kind in ("evaluations", "samples", "recipes"):
        for e in t[kind]:
            print(f"  {kind[:-1]:<10} {e['path']}  sha256 {str(e['sha256'])[:16]}  {e['status']}  made by {e['job']}")
    for ck in t["checkpoints"]:
        print(f"  checkpoint {ck['path']}")
        for w in ck["weights"]:
            print(f"    weights  {w['path']}  sha256 {str(w['sha256'])[:16]}  {w['status']}")
    if t.get("note"):
        print(f"  note: {t['note']}")
