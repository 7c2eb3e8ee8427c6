"""`layerswap manifest`: `results/manifest.json`, the last job of the DAG.

- `files`: every reproducible result under the results root (`layerswap.audit.files`) with its size and the sha256
  of its bytes on disk (never a recorded or cached hash);
  `run_logs`: the training logs (wall-clock timings), the same way, apart: an audit compares them only when asked.
- `jobs`: what made each file: Snakemake's own per-output record (`.snakemake/metadata/`, written by Snakemake after
  each job, so it holds the params *as evaluated*, lambdas included, and the exact shell command), reduced to rule,
  params, shell command, and its inputs with their sha256. A file inside a job's output directory that is not a
  declared output (checkpoint weights, evaluation files an index lists, sample logs) points to the job of the record
  that lists it (`checkpoints.json`, `index*.json`) or of the evaluation file beside it (a `.samples.jsonl`), else to
  the job of the nearest declared output in the same or an ancestor directory. A file no Snakemake record covers
  has `"job": null`.
- `workflow` (git commit + dirty flag of the checkout the running package lives in, or `--workflow-dir`; null
  without git), `software` (Python, packages), `hardware` (`layerswap.machine`), `seeds`, the run's `config`
  and a few reproducibility-relevant environment variables.
- Never laundered (issue 43): a file whose sha256 differs from the previous manifest's (`--previous`: the copy the
  check before the run keeps, `layerswap.audit.kept.PREVIOUS`) although no job rewrote it since (the
  records' `endtime`s of its job's outputs are the previous manifest's) is refused with one line naming it and the
  repair; nothing is written (`refuse_laundering`).
- `store` and `store_entries`: the results the evaluation store fed and the entries that fed them
  (`layerswap.audit.store_check`), kept from the previous manifest while the result is unchanged and its job did not
  rerun, so deleting the store never erases the fact.
- After it is written, a copy is kept beside Snakemake's records (`layerswap.audit.kept`): the check before the next
  run puts it back if `results/manifest.json` is deleted or damaged.
- Secrets never go in: any config key, environment variable or param whose name contains TOKEN, KEY, SECRET or
  PASSWORD is dropped, and the values of such environment variables are redacted wherever they would appear.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import re
import sys
from pathlib import Path

from layerswap.audit.files import hash_files, is_run_log, recorded_hashes, walk
from layerswap.audit.kept import keep_copy, previous_manifest, read_json_manifest
from layerswap.audit.provenance import declared, job_run_options, ownership, read_record, record_fields, spec_of
from layerswap.contracts import write_json_atomic
from layerswap.errors import UserError
from layerswap.jsonl import json_object
from layerswap.layout import Layout
from layerswap.machine import checkout, git_state, hardware, package_versions

MANIFEST_FORMAT = 3  # 2: run logs apart from the files (`run_logs`); 3: `foreign`, jobs' `snakemake` records
SECRET_WORDS = ("TOKEN", "KEY", "SECRET", "PASSWORD")
ENV_RECORDED = (
    "CUDA_VISIBLE_DEVICES",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "PYTHONHASHSEED",
    "HF_HOME",
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "TOKENIZERS_PARALLELISM",
    "CUBLAS_WORKSPACE_CONFIG",
)


# ------------------------------------------------------------------------------------------------------- secrets
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


# --------------------------------------------------------------------------------------- snakemake job records
def attach_jobs(
    files: dict[str, dict],
    meta_dir: Path,
    secrets: list[str],
    listed: dict[str, str] | None = None,
    outputs: set[str] | None = None,
) -> dict[str, dict]:
    """Set files[p]["job"] to a job id and return {job id: {rule, params, shellcmd, outputs, inputs, snakemake}}.
    `listed`: {undeclared file: the declared record that lists it} (its writer's job); `outputs`: the files the
    config's jobs declare (others' records, left by another config, are not used)."""
    records: dict[str, dict | None] = (
        {p: read_record(meta_dir, p) for p in files if outputs is None or p in outputs} if meta_dir.is_dir() else {}
    )
    folders = [o for o in sorted(outputs or ()) if Path(o).is_dir()]  # directory outputs (a merged model)
    records.update({o: read_record(meta_dir, o) for o in folders} if meta_dir.is_dir() else {})
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
                "rule": r["rule"],
                "params": [x for x in params if not _names_secret(x)],
                "shellcmd": redact(str(r.get("shellcmd") or ""), secrets) or None,
                "inputs": {i: (files.get(i) or {}).get("sha256") for i in r.get("input") or []},
                "outputs": [],
                "snakemake": {**record_fields(r), "endtime": {}},  # to put the record back (audit.provenance)
            }
        jid = ids[sig]
        jobs[jid]["outputs"].append(p)
        jobs[jid]["snakemake"]["endtime"][p] = r.get("endtime")
        if p in files:
            files[p]["job"] = jid
    for p, entry in files.items():
        inside = next((o for o in folders if p.startswith(o + "/") and o in declared), None)
        if inside is not None:  # a file of a directory output: that output's job
            entry["job"] = next(j for j, job in jobs.items() if inside in job["outputs"])
        if "job" in entry:
            continue
        # the record that names this file (an index, checkpoints.json), or the evaluation file of a sample log
        record = files.get((listed or {}).get(p) or p.removesuffix(".samples.jsonl") + ".json")
        if record and record.get("job"):
            entry["job"] = record["job"]
            continue
        d = os.path.dirname(p)
        entry["job"] = None
        while d and d != os.path.dirname(d):  # nearest declared output in the same or an ancestor directory
            if d in by_dir and by_dir[d][0] in files:
                entry["job"] = files[by_dir[d][0]]["job"]
                break
            d = os.path.dirname(d)
    return jobs


def _names_secret(param: str) -> bool:
    """A param of the form NAME=value or --name value whose name is a secret."""
    m = re.match(r"\W*([A-Za-z_][\w-]*)\s*[=:]", param)
    return bool(m and is_secret(m.group(1)))


def environment() -> dict[str, str]:
    return {k: os.environ[k] for k in ENV_RECORDED if k in os.environ and not is_secret(k)}


def build_manifest(
    root: Path,
    out: Path,
    meta_dir: Path,
    workflow_dir: Path,
    config: dict | None,
    outputs: set[str] | None = None,
    previous: dict | None = None,
    states: dict | None = None,
) -> dict:
    """`outputs`: the files the config's jobs declare (`audit.provenance.declared`); files under the root that are
    not the config's (`audit.provenance.ownership`) go to `foreign`, not `files`. None: every file is the run's.
    `previous`: the manifest as the run started (its store records are kept, `store_check.carried_forward`);
    `states`: the files' states when this job last hashed them (`files.hash_files`), updated."""
    secrets = secret_values()
    known = recorded_hashes(root)
    ours, foreign = (
        ownership(root, outputs, {out}) if outputs is not None else ([str(p) for p in walk(root, {out})], [])
    )
    hashed = hash_files([Path(p) for p in ours], states)
    jobs = attach_jobs(hashed, meta_dir, secrets, {p: rec.record for p, rec in known.items()}, outputs)
    files = {p: e for p, e in hashed.items() if not is_run_log(p)}
    run_logs = {p: e for p, e in hashed.items() if is_run_log(p)}
    config = drop_secrets(config or {})
    seeds = {
        "seed": config.get("seed"),
        "toy_world_seed": (config.get("toy_world") or {}).get("seed"),
        "sft_runs": {r: (p or {}).get("seed") for r, p in ((config.get("sft") or {}).get("runs") or {}).items()},
        "sft_default": ((config.get("sft") or {}).get("defaults") or {}).get("seed"),
    }
    manifest = {
        "format": MANIFEST_FORMAT,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "root": str(root),
        "workflow": {"path": str(workflow_dir), **git_state(workflow_dir)},
        "software": {
            "python": sys.version.split()[0],
            "implementation": platform.python_implementation(),
            "packages": package_versions(),
        },
        "hardware": hardware(),
        "seeds": seeds,
        "environment": environment(),
        "config": config,
        "files": files,
        "run_logs": run_logs,
        "jobs": jobs,
        "foreign": {
            p: {k: e[k] for k in ("size", "sha256")} for p, e in hash_files([Path(p) for p in foreign], states).items()
        },
        **verified_inputs(root, files, jobs, previous or {}),
    }
    text = redact(json.dumps(manifest, indent=1, sort_keys=True), secrets)
    return json.loads(text)


# ------------------------------------------------------------------------------------------------- laundering
def laundered(manifest: dict, previous: dict) -> list[str]:
    """The files of `manifest` whose sha256 differs from `previous`'s although their job did not rerun in between:
    every output of that job has the `endtime` it had in `previous` (or the file has no job at all)."""
    before = previous.get("files") if isinstance(previous.get("files"), dict) else {}
    ended: dict[str, object] = {}
    for job in (previous.get("jobs") or {}).values():
        if isinstance(job, dict) and isinstance((job.get("snakemake") or {}).get("endtime"), dict):
            ended.update(job["snakemake"]["endtime"])
    out = []
    for p, entry in sorted(manifest["files"].items()):
        old = before.get(p)
        if not isinstance(old, dict) or old.get("sha256") == entry["sha256"]:
            continue
        job = (manifest.get("jobs") or {}).get(entry.get("job") or "")
        ends = (job or {}).get("snakemake", {}).get("endtime") or {}
        if not ends or all(o in ended and ended[o] == end for o, end in ends.items()):
            out.append(p)
    return out


def refuse_laundering(manifest: dict, previous_path: Path, previous: dict | None = None) -> None:
    """One-line UserError when `laundered` finds a file (see the module's docstring); nothing is written.
    `previous`: the manifest at `previous_path`, already read (else read here; none: a first run)."""
    previous = read_json_manifest(previous_path) if previous is None else previous
    if not previous:
        return  # no previous manifest (a first run): nothing recorded to compare with
    found = laundered(manifest, previous)
    if found:
        old, new = previous["files"][found[0]]["sha256"], manifest["files"][found[0]]["sha256"]
        more = f" and {len(found) - 1} more" if len(found) > 1 else ""
        raise UserError(
            f"{found[0]}{more}: sha256 {str(old)[:12]}… in the previous manifest, {new[:12]}… now, but the job that "
            "wrote it did not rerun: not recorded (a manifest vouches only for what its jobs wrote); rebuild it: "
            f"`layerswap audit --manifest {previous_path} --repair --run -- {job_run_options()}`"
        )


# ------------------------------------------------------------------------------- store and outside inputs
def verified_inputs(root: Path, files: dict[str, dict], jobs: dict, previous: dict) -> dict:
    """Sections present only where they have entries: `store`, {result file: {entry, sha256}} for each listed file
    a job copied from the evaluation store (its record in `<root>/store/fed/`, still matching the file's bytes, or
    the previous manifest's record while the file and its job are unchanged), which `layerswap audit` checks
    against the entry, and `store_entries`, {entry key: {job, model, args}} of those entries (from their key.json,
    else the previous manifest), which evaluate their models again where the store is gone
    (layerswap.audit.store_check); and `outside_inputs`, the checkpoints a recipe reads outside the run's folders
    under LAYERSWAP_ALLOW_OUTSIDE_INPUTS=1, with the sha256 of their files (layerswap.inputs)."""
    from layerswap.audit.store_check import carried_forward, entry_docs, fed_records, outside_inputs

    out: dict = {}
    fed = fed_records(root, files)
    fed.update(carried_forward(files, jobs, fed, previous))
    if fed:
        out["store"] = dict(sorted(fed.items()))
        keys = {rec["entry"] for rec in fed.values()}
        kept = previous.get("store_entries") if isinstance(previous.get("store_entries"), dict) else {}
        docs = {k: kept[k] for k in keys if isinstance(kept.get(k), dict)}
        docs.update(entry_docs(root, keys))
        out["store_entries"] = dict(sorted(docs.items()))
    outside = outside_inputs(root)
    if outside:
        out["outside_inputs"] = outside
    return out


# --------------------------------------------------------------------------------------------------------- CLI
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--root", default=Layout().root, help="results directory to hash")
    parser.add_argument("--out", default=Layout().manifest())
    parser.add_argument(
        "--metadata-dir",
        default=".snakemake/metadata",
        help="Snakemake's per-output job records (rule, params, shell command)",
    )
    parser.add_argument(
        "--workflow-dir",
        default=None,
        help="the workflow's checkout, for its git commit (default: the one this package runs from)",
    )
    parser.add_argument("--config-json", default=None, help="the run's config as JSON (secrets are dropped)")
    parser.add_argument(
        "--previous",
        default=None,
        help="the manifest as the run started, to refuse a changed file whose job did not rerun (default: the copy "
        "the check before the run keeps, .snakemake/layerswap/manifest.previous.json beside --metadata-dir)",
    )


def run(args: argparse.Namespace) -> None:
    config = json_object(args.config_json, "--config-json") if args.config_json else None
    root = Path(args.root)
    if not root.is_dir():
        raise UserError(f"--root {root}: not a directory")
    workflow_dir = Path(args.workflow_dir) if args.workflow_dir else checkout()
    outputs = config_outputs(config, workflow_dir) if config is not None else None
    previous_path = Path(args.previous) if args.previous else previous_manifest(Path(args.metadata_dir))
    previous = read_json_manifest(previous_path)
    states_path = previous_manifest(Path(args.metadata_dir)).with_name(STATES)
    states = _read_states(states_path) if not args.previous else None  # the workflow's own manifest job's
    manifest = build_manifest(
        root, Path(args.out), Path(args.metadata_dir), workflow_dir, config, outputs, previous, states
    )
    refuse_laundering(manifest, previous_path, previous)
    write_json_atomic(Path(args.out), manifest)
    if states is not None:  # the workflow's own manifest: its copy for the check before the next run, its states
        keep_copy(Path(args.out), previous_path)
        listed = {**manifest["files"], **manifest["run_logs"], **manifest["foreign"]}
        write_json_atomic(states_path, {"format": 1, "states": {p: s for p, s in states.items() if p in listed}})
    print(
        f"manifest: {len(manifest['files'])} files, {len(manifest['run_logs'])} run logs, "
        f"{len(manifest['jobs'])} jobs -> {args.out}"
        + (f"; {len(manifest['foreign'])} files not from this config (foreign)" if manifest["foreign"] else "")
        + (
            "; not a workflow config: no file is told apart as foreign"
            if config is not None and outputs is None
            else ""
        )
    )


STATES = "manifest.hashes.json"  # the manifest job's file states, beside the kept copy (layerswap.audit.files)


def _read_states(path: Path) -> dict:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    states = doc.get("states") if isinstance(doc, dict) and doc.get("format") == 1 else None
    return dict(states) if isinstance(states, dict) else {}


def config_outputs(config: dict, workflow_dir: Path) -> set[str] | None:
    """The files the jobs of a workflow config declare (`audit.provenance.declared`); None when `config` is not a
    complete workflow config (a partial one given by hand)."""
    import copy

    from layerswap.config import validate_config

    try:
        full = validate_config(copy.deepcopy(config))
        return set(declared(spec_of(full, workflow_dir)))
    except (UserError, KeyError):
        return None
