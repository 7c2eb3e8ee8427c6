"""Provenance that travels with `results/`: which files the config's jobs make, and Snakemake's records of how each
was made, kept in `results/manifest.json` and put back when `.snakemake/` lacks them.

Snakemake decides what reruns from its per-output records in `.snakemake/metadata/` (rule, params, code, inputs):
an output without a record is never rerun for a params or code change. A results folder moved without
`.snakemake/` (or next to another run's `.snakemake/`) would report "up to date" for outputs made under other
params. So the manifest keeps, per job, the record fields Snakemake compares (`record_fields`), and before every run
and dry run (`rules/common.smk`, the main Snakemake process) `check` goes through the outputs of the config's DAG
that exist:

- a record whose `endtime` is the file's modification time describes that file: kept;
- else, when the manifest lists the file with these bytes (same size and modification time as its record, or the
  same sha256) and a record that differs from the one in `.snakemake/`: that record is written back, so Snakemake's
  own triggers (params, code, input set, software env) fire as in the folder the results came from;
- an output with no record at all that the manifest does not vouch for either (moved after an unfinished run, or
  a manifest from before this record, written by hand): the run stops with one line naming the files, the
  `--forcerun` command that rebuilds them and the `--touch --forcerun` one that records them as this config's
  (Snakemake records the current params of the jobs it touches). An output marked incomplete is left to Snakemake:
  it says what to do.
`results/manifest.json` itself holds no record of its own job: it is rebuilt whenever a job before it reruns (a
config edit always reruns `config_used`).

Files under `results/` that no job of the config makes (`foreign`: a renamed merge config's recipes and evaluations,
files added by hand) are named before the run, kept apart in the manifest (`foreign`, not `files`), named by
`layerswap audit` and removed by `layerswap audit --remove-foreign`.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

from layerswap.audit.files import RECORDS, recorded_hashes, walk
from layerswap.errors import UserError
from layerswap.fingerprint import file_sha256
from layerswap.workflow.layout import Layout, R

#: The fields of a Snakemake metadata record the manifest keeps (besides rule, params and shell command, which it
#: lists for readers): what Snakemake's rerun triggers compare, and the inputs' checksums it uses for mtime ties.
RECORD_FIELDS = (
    "code",
    "input",
    "log",
    "conda_env",
    "container_img_url",
    "software_stack_hash",
    "record_format_version",
    "input_checksums",
)
SHOWN = 3  # files named in a one-line message


def record_path(meta_dir: Path, output: str) -> Path:
    """Where Snakemake's file backend keeps the record of `output` (snakemake/persistence/file.py)."""
    import base64

    try:
        max_len = os.pathconf(meta_dir if meta_dir.exists() else ".", "PC_NAME_MAX") or 255
    except (OSError, ValueError):
        max_len = 255
    b64 = base64.urlsafe_b64encode(output.encode()).decode()
    parts = [b64[i : i + max_len - 1] for i in range(0, len(b64), max_len - 1)]
    return meta_dir.joinpath(*(["@" + s for s in parts[:-1]] + [parts[-1]]))


def read_record(meta_dir: Path, output: str) -> dict | None:
    try:
        data = json.loads(record_path(meta_dir, output).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("rule") else None


def record_fields(record: dict) -> dict:
    """What the manifest keeps of a record for `restore` (the job's rule, params and shell command aside)."""
    return {k: record.get(k) for k in RECORD_FIELDS}


def mtime(path: Path) -> float:
    """The modification time Snakemake records as an output's `endtime` (a directory: its `.snakemake_timestamp`)."""
    stamp = path / ".snakemake_timestamp"
    return (stamp if path.is_dir() and stamp.exists() else path).stat().st_mtime


def _same_time(a, b) -> bool:
    return isinstance(a, (int, float)) and isinstance(b, (int, float)) and abs(a - b) < 1e-6


def _compared(record: dict) -> dict:
    return {k: record.get(k) for k in ("rule", "params", *RECORD_FIELDS) if k != "input_checksums"}


# ----------------------------------------------------------------------------------------------- this config's files
def declared(spec) -> list[str]:
    """Every file a job of the config declares: the default DAG's, the manifest, and every ablation's."""
    files = [*spec.results(), Layout().manifest()]
    for name in spec.ablations.planned:
        files += spec.ablations.results(name)
    return list(dict.fromkeys(files))


def ownership(root: Path, outputs: set[str], exclude: set[Path] = frozenset()) -> tuple[list[str], list[str]]:
    """(the files under `root` that the config's jobs make, those they do not), each sorted. A file is the config's
    when a job declares it or a declared directory holds it; when a declared record (`checkpoints.json`, an
    evaluation index, Table 2's record) lists it or a file beside it (a checkpoint's other files, sample logs); when
    it is the sample log of such an evaluation file; or when it lies below a directory (not the root) holding a
    declared output, or its `<dir>.work/` (the base's files, a run's log), and, where that directory holds a
    declared record, directly in it: what lies deeper there is the record's to list (a renamed config's Table 2
    evaluations are not)."""
    listed = {os.path.normpath(p): rec.record for p, rec in recorded_hashes(root).items()}
    listed_dirs = {os.path.dirname(p) for p, rec in listed.items() if rec in outputs}
    dirs = {os.path.dirname(p) for p in outputs} - {str(root), ""}
    record_dirs = {os.path.dirname(p) for p in outputs if any(Path(p).match(g) for g in RECORDS)}
    ours, foreign = [], []
    for path in walk(root, exclude):
        p = str(path)
        base = p.removesuffix(".samples.jsonl") + ".json" if p.endswith(".samples.jsonl") else p
        is_ours = (
            p in outputs
            or base in outputs
            or listed.get(base) in outputs
            or os.path.dirname(p) in listed_dirs
            or any(True for _ in _parents_in(p, outputs))
        )
        d = os.path.dirname(p)
        while not is_ours and d and d != str(root) and d != os.path.dirname(d):
            if d in dirs or (d.endswith(".work") and d.removesuffix(".work") in dirs):  # base.work/: its log
                is_ours = d not in record_dirs or os.path.dirname(p) == d
                break
            d = os.path.dirname(d)
        (ours if is_ours else foreign).append(p)
    return ours, foreign


def _parents_in(path: str, outputs: set[str]):
    d = os.path.dirname(path)
    while d and d != os.path.dirname(d):
        if d in outputs:
            yield d
        d = os.path.dirname(d)


# ------------------------------------------------------------------------------------------ records put back
def _manifest(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) and isinstance(data.get("files"), dict) else {}


def _vouched(manifest: dict, output: str) -> tuple[dict, dict] | None:
    """(the manifest's file entry, the job's) when the manifest can put back the record of `output`: a job of it
    declares `output` (a file, or a directory such as a merged model) and keeps its record fields."""
    entry = manifest["files"].get(output) or {}
    jobs = manifest.get("jobs") or {}
    job = jobs.get(entry.get("job") or "") or next(
        (j for j in jobs.values() if isinstance(j, dict) and output in (j.get("outputs") or [])), None
    )
    if not job or output not in job.get("outputs", []) or not isinstance(job.get("snakemake"), dict):
        return None
    return entry, job


def _same_bytes(path: Path, entry: dict, recorded_end) -> bool:
    if path.is_dir():
        return _same_time(mtime(path), recorded_end)
    size = path.stat().st_size
    if size != entry.get("size"):
        return False
    return _same_time(mtime(path), recorded_end) or file_sha256(path) == entry.get("sha256")


def restore(outputs: list[str], meta_dir: Path, incomplete_dir: Path, manifest_path: Path) -> tuple[list, list]:
    """Put back the records the manifest vouches for (see the module's docstring). Returns (outputs whose record
    was written, outputs that exist with no record and none to put back)."""
    manifest = _manifest(manifest_path)
    restored, unknown = [], []
    for out in outputs:
        path = Path(out)
        if out == str(manifest_path) or not path.exists():
            continue
        current = read_record(meta_dir, out)
        if current is not None and _same_time(current.get("endtime"), mtime(path)):
            continue  # Snakemake's record of this very file
        if record_path(incomplete_dir, out).exists():
            continue  # Snakemake reports it incomplete itself
        vouched = _vouched(manifest, out) if manifest else None
        if vouched is not None:
            entry, job = vouched
            fields = job["snakemake"]
            record = {
                **{k: fields.get(k) for k in RECORD_FIELDS},
                "rule": job["rule"],
                "params": job["params"],
                "shellcmd": job.get("shellcmd"),
                "incomplete": False,
                "job_hash": None,
                "external_jobid": None,
            }
            if current is not None and _compared(current) == _compared(record):
                continue  # the same provenance (the file was touched or copied without its time)
            if _same_bytes(path, entry, (fields.get("endtime") or {}).get(out)):
                record["starttime"] = record["endtime"] = mtime(path)
                target = record_path(meta_dir, out)
                target.parent.mkdir(parents=True, exist_ok=True)
                incomplete_dir.mkdir(parents=True, exist_ok=True)  # else Snakemake takes the folder for an old one
                target.write_text(json.dumps(record))
                restored.append(out)
                continue
        if current is None:
            unknown.append(out)
    return restored, unknown


# -------------------------------------------------------------------------------------------- before a run
def check(
    spec,
    meta_dir: Path = Path(".snakemake/metadata"),
    incomplete_dir: Path = Path(".snakemake/incomplete"),
    root: Path = Path(R),
    forced: set[str] | None = frozenset(),
    argv: list[str] | None = None,
) -> list[str]:
    """Before the DAG is built: put back the records the manifest vouches for, refuse outputs with no provenance
    (UserError, one line) unless this run rebuilds them (`forced`: the `--forcerun` files; None: every job, e.g.
    `--forceall`), and return the lines to print (records put back, files not from this config). `argv`: this
    run's Snakemake options, spelled into the commands the stop line prints."""
    outputs, manifest = declared(spec), Path(Layout.at(root).manifest())
    restored, unknown = restore(outputs, meta_dir, incomplete_dir, manifest)
    unknown = [] if forced is None else [u for u in unknown if u not in forced]
    if unknown:
        shown = ", ".join(unknown[:SHOWN]) + (f" and {len(unknown) - SHOWN} more" if len(unknown) > SHOWN else "")
        rebuild, record = repair_commands(argv, unknown)
        raise UserError(
            f"{len(unknown)} result(s) have no record of the job that made them ({shown}): neither "
            f".snakemake/metadata nor {manifest} (with these bytes) says which params made them; rebuild "
            f"them: `{rebuild}`, or record them as this config's results: `{record}`"
        )
    lines = []
    if restored:
        lines.append(
            f"provenance: {len(restored)} record(s) put back into .snakemake/metadata from "
            f"{manifest} (results moved without .snakemake/ or beside another run's)"
        )
    if root.is_dir():
        _, foreign = ownership(root, set(outputs), {manifest})
        if foreign:
            shown = ", ".join(foreign[:SHOWN]) + (f" and {len(foreign) - SHOWN} more" if len(foreign) > SHOWN else "")
            lines.append(
                f"provenance: {len(foreign)} file(s) under {root}/ are not from this config ({shown}); "
                "kept, never read; `layerswap audit --remove-foreign` after the run removes them"
            )
    return lines


def forced_outputs(argv: list[str]) -> set[str] | None:
    """The files a run's options (`argv`, Snakemake's command line: read at parse time, before Snakemake has built
    its DAG settings) force to be rebuilt (`--forcerun FILES`, relative to the working directory as Snakemake takes
    them), None where it rebuilds everything (`--forceall`)."""
    if {"--forceall", "-F"} & set(argv):
        return None
    return {os.path.normpath(f) for f in _split_forcerun(argv)[1]}


def _split_forcerun(argv: list[str]) -> tuple[list[str], list[str]]:
    """(the options but `--forcerun`/`-R` and their files, those files)."""
    opts, files, i = [], [], 0
    while i < len(argv):
        a = argv[i]
        if a in ("--forcerun", "-R"):
            i += 1
            while i < len(argv) and not argv[i].startswith("-"):
                files.append(argv[i])
                i += 1
            continue
        if a.startswith("--forcerun="):
            files.append(a.split("=", 1)[1])
        else:
            opts.append(a)
        i += 1
    return opts, files


def repair_commands(argv: list[str] | None, files: list[str]) -> tuple[str, str]:
    """(the command that rebuilds `files`, the one that records them as this config's): this run's own Snakemake
    options (`argv`, without `snakemake` itself; None: a placeholder) with `--forcerun` naming `files` (and any
    files this run already forced; less a dry run's `-n`), so each works as printed."""
    if argv is None:
        opts, old = ["<this run's options>"], []
    else:
        given, old = _split_forcerun(argv)
        dry = {"--touch", "-t", "-n", "--dry-run", "--dryrun"}
        opts = ["-p" if a in ("-np", "-pn") else a for a in given if a not in dry]  # a dry run's, less the dry run
    targets = shlex.join(dict.fromkeys([*old, *files]))
    head = "snakemake " + (opts[0] if argv is None else shlex.join(opts))
    return f"{head.rstrip()} --forcerun {targets}", f"{head.rstrip()} --touch --forcerun {targets}"


def spec_of(config: dict, workflow_dir: Path):
    """The workflow's view of a validated config (as `rules/common.smk` builds it): for commands that are given the
    config, e.g. the manifest's (which files the config's jobs make)."""
    from layerswap.workflow.ablations import enabled, plan
    from layerswap.workflow.site import Site
    from layerswap.workflow.spec import Spec

    ablations, merge_configs = plan(config, Path(workflow_dir) / config["ablations_dir"])
    return Spec(config, ablations, merge_configs, enabled(config.get("ablations"), list(ablations)), Site.from_env())
