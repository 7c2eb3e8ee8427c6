"""Reproducibility audits: `layerswap manifest` writes `results/manifest.json`; `layerswap audit` checks it.

Manifest (one per run, the last job of the DAG):
- `files`: every file under the results root (logs/, .snakemake/ and the manifest itself excepted) with its size and
  sha256 (streamed). Large weights are hashed once: a sha256 already recorded by the job that wrote the file (expert
  `checkpoints.json`, evaluation `index*.json`) is reused when the file is not newer than that record and its size is
  unchanged.
- `jobs`: what made each file: Snakemake's own per-output record (`.snakemake/metadata/`, written by Snakemake after
  each job, so it holds the params *as evaluated*, lambdas included, and the exact shell command), reduced to rule,
  params, shell command, and its inputs with their sha256. Files inside a job's output directory that are not
  declared outputs (checkpoint weights, sample logs) point to the job of the nearest declared output in the same or
  an ancestor directory. A file no Snakemake record covers has `"job": null`.
- `workflow` (git commit + dirty flag, null without git), `software` (Python, packages), `hardware` (CPU model and
  instruction-set flags from /proc/cpuinfo, torch's CPU kernel level, CPU count, GPU names), `seeds`, the
  run's `config` and a few reproducibility-relevant environment variables.
- Secrets never go in: any config key, environment variable or param whose name contains TOKEN, KEY, SECRET or
  PASSWORD is dropped, and the values of such environment variables are redacted wherever they would appear.

Audit: `layerswap audit --manifest M` first prints one `hardware:` line per difference between the manifest's
machine and this one (machine, CPU model, instruction-set flags, torch's CPU kernel level, GPUs, cpu_count), which
is informational and never fails the audit; then it re-hashes what is on disk and prints one line per drift
(changed, missing, extra); exit status 1 on drift. `layerswap audit --manifest M --trace TABLE ROW COLUMN`
recomputes the table with `layerswap.report.tables` itself, with scores that carry the evaluation file they came from, and
prints the cell's evaluation files, sample logs, merge recipes and checkpoints with their manifest hashes. A
min/max/best-of cell traces to the model that attains it; an average to all its models.
"""

from __future__ import annotations

import argparse
import base64
import datetime as _dt
import hashlib
import json
import os
import platform
import re
import shlex
import subprocess
import sys
from pathlib import Path

from layerswap.contracts import write_json_atomic
from layerswap.errors import UserError
from layerswap.jsonl import json_object

MANIFEST_FORMAT = 1
EXCLUDED_DIRS = ("logs", ".snakemake")
SECRET_WORDS = ("TOKEN", "KEY", "SECRET", "PASSWORD")
PACKAGES = ("torch", "transformers", "accelerate", "lm-eval", "snakemake", "safetensors", "peft", "tokenizers",
            "pandas", "altair", "numpy", "datasets", "sacrebleu")
ENV_RECORDED = ("CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "PYTHONHASHSEED", "HF_HOME",
                "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "TOKENIZERS_PARALLELISM", "CUBLAS_WORKSPACE_CONFIG")
CHUNK = 1 << 20


# ------------------------------------------------------------------------------------------------------- helpers
def is_secret(name: str) -> bool:
    return any(w in str(name).upper() for w in SECRET_WORDS)


def secret_values() -> list[str]:
    """Values of secret-named environment variables (long enough to be worth redacting)."""
    return sorted({v for k, v in os.environ.items() if is_secret(k) and len(v) >= 6}, key=len, reverse=True)


def drop_secrets(value):
    """A copy of a JSON value without dict entries whose key names a secret."""
    if isinstance(value, dict):
        return {k: drop_secrets(v) for k, v in value.items() if not is_secret(k)}
    if isinstance(value, list):
        return [drop_secrets(v) for v in value]
    return value


def redact(text: str, secrets: list[str]) -> str:
    for s in secrets:
        text = text.replace(s, "***")
    return text


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


def walk(root: Path, exclude: set[Path] = frozenset()) -> list[Path]:
    """Every regular file under root, sorted, minus EXCLUDED_DIRS at the top level and `exclude`."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        d = Path(dirpath)
        if d == root:
            dirnames[:] = [n for n in dirnames if n not in EXCLUDED_DIRS]
        dirnames.sort()
        for name in filenames:
            p = d / name
            if p.is_file() and not p.is_symlink() and p not in exclude:
                out.append(p)
    return sorted(out)


def recorded_hashes(root: Path) -> dict[str, tuple[str, float]]:
    """sha256s the jobs already recorded: {path: (sha256, mtime of the record)}."""
    known: dict[str, tuple[str, float]] = {}
    for rec in list(root.glob("experts/*/checkpoints.json")) + list(root.glob("evals/ckpt/*/index*.json")) \
            + list(root.glob("evals/by_language/*/table2_*.json")):
        try:
            data = json.loads(rec.read_text())
        except (OSError, ValueError):
            continue
        t = rec.stat().st_mtime
        for entry in data.get("checkpoints", []) if isinstance(data.get("checkpoints"), list) else []:
            if isinstance(entry, dict) and "sha256" in entry and "path" in entry and "samples" in entry:
                files = entry.get("files") or {"model.safetensors": entry["sha256"]}  # sharded: one per file
                for name, digest in files.items():
                    known[os.path.normpath(str(Path(entry["path"]) / name))] = (digest, t)
        for path, digest in (data.get("sha256") or {}).items():
            known[os.path.normpath(path)] = (digest, t)
    return known


def hash_files(files: list[Path], known: dict[str, tuple[str, float]] | None = None) -> dict[str, dict]:
    known = known or {}
    out = {}
    for p in files:
        st = p.stat()
        rec = known.get(os.path.normpath(str(p)))
        if rec is not None and st.st_mtime <= rec[1]:
            digest, reused = rec[0], True
        else:
            digest, reused = sha256_file(p), False
        out[str(p)] = {"size": st.st_size, "sha256": digest, **({"hash_from_record": True} if reused else {})}
    return out


# --------------------------------------------------------------------------------------- snakemake job records
def _record_path(meta_dir: Path, output: str) -> Path:
    try:
        max_len = os.pathconf(meta_dir, "PC_NAME_MAX") or 255
    except (OSError, ValueError):
        max_len = 255
    b64 = base64.urlsafe_b64encode(output.encode()).decode()
    parts = [b64[i:i + max_len - 1] for i in range(0, len(b64), max_len - 1)]
    return meta_dir.joinpath(*(["@" + s for s in parts[:-1]] + [parts[-1]]))


def job_record(meta_dir: Path, output: str) -> dict | None:
    path = _record_path(meta_dir, output)
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("rule") else None


def attach_jobs(files: dict[str, dict], meta_dir: Path, secrets: list[str]) -> dict[str, dict]:
    """Set files[p]["job"] to a job id and return {job id: {rule, params, shellcmd, outputs, inputs}}."""
    records: dict[str, dict | None] = {p: job_record(meta_dir, p) for p in files} if meta_dir.is_dir() else {}
    declared = {p for p, r in records.items() if r is not None}
    by_dir: dict[str, list[str]] = {}
    for p in sorted(declared):
        by_dir.setdefault(os.path.dirname(p), []).append(p)
    jobs: dict[str, dict] = {}
    ids: dict[str, str] = {}
    for p in sorted(declared):
        r = records[p]
        sig = json.dumps([r.get("rule"), r.get("shellcmd"), r.get("input"), r.get("params")], sort_keys=True)
        if sig not in ids:
            ids[sig] = f"{r['rule']}:{p}"
            params = [redact(str(x), secrets) for x in r.get("params") or []]
            jobs[ids[sig]] = {
                "rule": r["rule"], "params": [x for x in params if not _names_secret(x)],
                "shellcmd": redact(str(r.get("shellcmd") or ""), secrets) or None,
                "inputs": {i: (files.get(i) or {}).get("sha256") for i in r.get("input") or []},
                "outputs": [],
            }
        jid = ids[sig]
        jobs[jid]["outputs"].append(p)
        files[p]["job"] = jid
    for p, entry in files.items():
        if "job" in entry:
            continue
        d = os.path.dirname(p)
        entry["job"] = None
        while d and d != os.path.dirname(d):  # nearest declared output in the same or an ancestor directory
            if d in by_dir:
                entry["job"] = files[by_dir[d][0]]["job"]
                break
            d = os.path.dirname(d)
    return jobs


def _names_secret(param: str) -> bool:
    """A param of the form NAME=value or --name value whose name is a secret."""
    m = re.match(r"\W*([A-Za-z_][\w-]*)\s*[=:]", param)
    return bool(m and is_secret(m.group(1)))


# ------------------------------------------------------------------------------------------------- environment
def git_state(path: Path) -> dict:
    try:
        commit = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=30)
        if commit.returncode != 0:
            return {"commit": None, "dirty": None, "note": "not a git checkout"}
        status = subprocess.run(["git", "-C", str(path), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=60)
        return {"commit": commit.stdout.strip(), "dirty": bool(status.stdout.strip())}
    except (OSError, subprocess.TimeoutExpired):
        return {"commit": None, "dirty": None, "note": "git not available"}


def package_versions() -> dict[str, str | None]:
    from importlib import metadata

    out = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def cpu_info(cpuinfo: Path = Path("/proc/cpuinfo")) -> dict:
    """CPU model and instruction-set flags of the first processor in /proc/cpuinfo (Linux; `Features` on ARM).
    Elsewhere, or when the file cannot be read: the model from `platform` and no flags, `cpu_source` saying so."""
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        text = ""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break  # the first processor's block is enough: every core of a machine reports the same
            continue
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip().lower(), value.strip())
    flags = fields.get("flags", fields.get("features"))
    model = fields.get("model name") or fields.get("hardware") or fields.get("cpu model")
    if model is None and flags is None:
        return {"cpu_model": platform.processor() or platform.machine() or None, "cpu_flags": None,
                "cpu_source": f"platform (no readable {cpuinfo}: instruction-set flags not recorded)"}
    return {"cpu_model": model, "cpu_flags": sorted(set(flags.split())) if flags is not None else None,
            "cpu_source": str(cpuinfo)}


def hardware() -> dict:
    """What float results can depend on: CPU model and instruction-set flags, the SIMD level torch's CPU kernels
    dispatch to, CPU count, GPU names. Best effort: an error leaves its entry out and is recorded."""
    info = {"platform": platform.platform(), "machine": platform.machine(), "processor": platform.processor(),
            "cpu_count": os.cpu_count(), **cpu_info(), "gpus": []}
    try:
        import torch

        info["torch_cpu_capability"] = torch.backends.cpu.get_cpu_capability()
        if torch.cuda.is_available():
            info["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        info["cuda"] = torch.version.cuda
    except Exception as err:  # noqa: BLE001 (hardware info is best effort)
        info["gpus_error"] = repr(err)
    return info


def environment() -> dict[str, str]:
    return {k: os.environ[k] for k in ENV_RECORDED if k in os.environ and not is_secret(k)}


def build_manifest(root: Path, out: Path, meta_dir: Path, workflow_dir: Path, config: dict | None) -> dict:
    secrets = secret_values()
    files = hash_files(walk(root, {out}), recorded_hashes(root))
    jobs = attach_jobs(files, meta_dir, secrets)
    config = drop_secrets(config or {})
    seeds = {"seed": config.get("seed"), "toy_world_seed": (config.get("toy_world") or {}).get("seed"),
             "sft_runs": {r: (p or {}).get("seed") for r, p in ((config.get("sft") or {}).get("runs") or {}).items()},
             "sft_default": ((config.get("sft") or {}).get("defaults") or {}).get("seed")}
    manifest = {
        "format": MANIFEST_FORMAT,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "root": str(root),
        "workflow": {"path": str(workflow_dir), **git_state(workflow_dir)},
        "software": {"python": sys.version.split()[0], "implementation": platform.python_implementation(),
                     "packages": package_versions()},
        "hardware": hardware(),
        "seeds": seeds,
        "environment": environment(),
        "config": config,
        "files": files,
        "jobs": jobs,
    }
    text = redact(json.dumps(manifest, indent=1, sort_keys=True), secrets)
    return json.loads(text)


# ------------------------------------------------------------------------------------------------------- audit
def load_manifest(path: Path) -> dict:
    try:
        data = json.loads(Path(path).read_text())
    except OSError as err:
        raise UserError(f"{path}: cannot read manifest ({err.strerror})") from None
    except ValueError as err:
        raise UserError(f"{path}: not a JSON manifest ({err})") from None
    if not isinstance(data, dict) or not isinstance(data.get("files"), dict) or "root" not in data:
        raise UserError(f"{path}: not a layerswap manifest (no 'files'/'root')")
    return data


def drift(manifest: dict, manifest_path: Path) -> list[str]:
    """One line per drift between the manifest and the disk, sorted by path."""
    root = Path(manifest["root"])
    lines = []
    recorded = manifest["files"]
    for p, entry in sorted(recorded.items()):
        path = Path(p)
        if not path.is_file():
            lines.append(f"missing: {p}")
            continue
        size = path.stat().st_size
        digest = sha256_file(path)
        if digest != entry.get("sha256") or size != entry.get("size"):
            lines.append(f"changed: {p} (sha256 {str(entry.get('sha256'))[:12]}… -> {digest[:12]}…, "
                         f"size {entry.get('size')} -> {size})")
    if root.is_dir():
        for path in walk(root, {Path(manifest_path)}):
            if str(path) not in recorded:
                lines.append(f"extra: {path}")
    else:
        lines.append(f"missing: {root}/ (results root)")
    return lines


HARDWARE_COMPARED = (("machine", "machine"), ("cpu_model", "cpu model"), ("cpu_flags", "cpu flags"),
                     ("torch_cpu_capability", "torch CPU kernels"), ("gpus", "gpus"), ("cpu_count", "cpu_count"))
ISA_FLAG = re.compile(r"^(avx|amx|fma|f16c|sse|ssse|vnni|vpclmul|gfni|asimd|sve|sme|bf16|i8mm|fp16|neon)")
FLAGS_SHOWN = 5


def _flag_summary(flags: set[str]) -> str:
    """`N (a, b, ... +k)`: instruction-set extensions named first, base ones (avx512f) before their variants."""
    names = sorted(flags, key=lambda f: (not ISA_FLAG.match(f), len(f), f))
    more = f", ... +{len(names) - FLAGS_SHOWN}" if len(names) > FLAGS_SHOWN else ""
    return f"{len(names)} ({', '.join(names[:FLAGS_SHOWN])}{more})"


def hardware_diff(recorded: dict, here: dict) -> list[str]:
    """One line per hardware property that differs between the manifest's machine and this one, then a line saying
    the difference is informational. Properties the manifest does not record (older manifests) are not compared."""
    lines = []
    for key, label in HARDWARE_COMPARED:
        if key not in recorded or key not in here or recorded[key] == here[key]:
            continue
        was, now = recorded[key], here[key]
        if key == "cpu_flags":
            if not isinstance(was, list) or not isinstance(now, list):
                continue  # a machine without /proc/cpuinfo records none: nothing to compare
            gone, new = set(was) - set(now), set(now) - set(was)
            if not gone and not new:
                continue
            parts = ([f"{_flag_summary(gone)} only in manifest"] if gone else []) + \
                    ([f"{_flag_summary(new)} only here"] if new else [])
            lines.append(f"hardware: {label}: " + "; ".join(parts))
        elif key == "gpus":
            names = [", ".join(map(str, v)) if isinstance(v, list) else str(v) for v in (was, now)]
            lines.append(f"hardware: {label}: manifest {names[0] or 'none'}; here {names[1] or 'none'}")
        else:
            lines.append(f"hardware: {label}: manifest {was}; here {now}")
    if lines:
        lines.append("hardware: the lines above are informational, not drift: trained weights, evaluations and scores "
                     "can differ across CPU/GPU types (docs/AUDITS.md), so changed files may come from it")
    return lines


# ------------------------------------------------------------------------------------------------------- trace
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
        names = {"/".join(str(x) for x in labels), str(labels[0]) if len(labels) == 1 else None,
                 "/".join(str(x) for x in key) if isinstance(key, tuple) else str(key)}
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


def trace(manifest: dict, table_file: str, row: str, column: str) -> dict:
    from layerswap.report import tables

    root = Path(manifest["root"])
    stem = Path(table_file).name.split(".", 1)[0]
    params = tables.Params.from_json(tables_params(manifest))

    class TracingEvals(tables.Evals):
        def score(self, model_id, bench, key):
            return Traced(super().score(model_id, bench, key), {str(self.source(model_id, bench, key))})

        def maybe_score(self, model_id, bench, key):
            value = super().maybe_score(model_id, bench, key)
            return Traced(value, {str(self.source(model_id, bench, key))}) if isinstance(value, float) else value

    built = tables.build_tables(root / "selection", root / "evals", params, evals=TracingEvals(root / "evals"))
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
        status = "not in manifest" if rec is None else "missing" if not on_disk else (
            "ok" if sha256_file(Path(path)) == rec["sha256"] else "changed")
        return {"path": path, "sha256": rec and rec["sha256"], "status": status,
                "job": rec and rec.get("job")}

    out = {"table": stem, "row": "/".join(str(x) for x in (rkey if isinstance(rkey, tuple) else (rkey,))),
           "column": ckey, "value": None if value is None else (float(value) if isinstance(value, float) else value),
           "displayed": table.display(rkey, ckey), "evaluations": [], "samples": [], "recipes": [],
           "checkpoints": []}
    checkpoints: list[str] = []
    evals_root = root / "evals"
    for e in evals:
        out["evaluations"].append(entry(e))
        samples = e[: -len(".json")] + ".samples.jsonl"
        if Path(samples).exists() or samples in files:
            out["samples"].append(entry(samples))
        rel = Path(e).parent.relative_to(evals_root)
        model_id = str(Path(*rel.parts[2:]) if rel.parts[0] == "by_language" else rel)  # by_language/<lang>/<id>
        if model_id.startswith("merge/"):
            recipe = str(root / "merges" / (model_id[len("merge/"):] + ".json"))
            out["recipes"].append(entry(recipe))
            try:
                _recipe_models(json.loads(Path(recipe).read_text()), checkpoints)
            except (OSError, ValueError):
                pass
        elif model_id.startswith("ckpt/"):
            checkpoints.append(str(root / "experts" / model_id[len("ckpt/"):]))
        elif model_id == "base":
            checkpoints.append(str(root / "base"))
    for ck in dict.fromkeys(checkpoints):
        weights = sorted(p for p in files if p.startswith(ck.rstrip("/") + "/") and p.endswith(".safetensors")
                         and "/adapter/" not in p)
        out["checkpoints"].append({"path": ck, "weights": [entry(w) for w in weights]})
    if not evals:
        out["note"] = ("no numeric score behind this cell (a label, 'skipped' or 'n/a' cell); "
                       "see the evaluation files of its column")
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


# --------------------------------------------------------------------------------------------------------- CLI
def add_arguments(parser: argparse.ArgumentParser) -> None:
    prog = parser.prog
    if prog.endswith("manifest"):
        parser.add_argument("--root", default="results", help="results directory to hash")
        parser.add_argument("--out", default="results/manifest.json")
        parser.add_argument("--metadata-dir", default=".snakemake/metadata",
                            help="Snakemake's per-output job records (rule, params, shell command)")
        parser.add_argument("--workflow-dir", default=".", help="the workflow's checkout, for its git commit")
        parser.add_argument("--config-json", default=None, help="the run's config as JSON (secrets are dropped)")
    else:
        parser.add_argument("--manifest", default="results/manifest.json")
        parser.add_argument("--trace", nargs=3, metavar=("TABLE", "ROW", "COLUMN"),
                            help="trace one table cell back to its evaluation files, recipes and checkpoints")
        parser.add_argument("--json", action="store_true", help="print the trace as JSON")


def run(args: argparse.Namespace) -> None:
    if hasattr(args, "out"):
        config = json_object(args.config_json, "--config-json") if args.config_json else None
        root = Path(args.root)
        if not root.is_dir():
            raise UserError(f"--root {root}: not a directory")
        manifest = build_manifest(root, Path(args.out), Path(args.metadata_dir), Path(args.workflow_dir), config)
        write_json_atomic(Path(args.out), manifest)
        print(f"manifest: {len(manifest['files'])} files, {len(manifest['jobs'])} jobs -> {args.out}")
        return
    manifest = load_manifest(Path(args.manifest))
    if args.trace:
        t = trace(manifest, *args.trace)
        print(json.dumps(t, indent=1)) if args.json else print_trace(t)
        return
    recorded = manifest.get("hardware")
    for line in hardware_diff(recorded, hardware()) if isinstance(recorded, dict) else []:
        print(line)
    lines = drift(manifest, Path(args.manifest))
    for line in lines:
        print(line)
    if lines:
        raise UserError(f"{len(lines)} drift(s) against {args.manifest}")
    print(f"audit: {len(manifest['files'])} files match {args.manifest}")
