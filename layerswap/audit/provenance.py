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
A result's bytes are vouched for only by the job that wrote them (issue 43): a file the manifest lists whose
modification time is later than both its job's end (the record's `endtime`) and the manifest, and whose sha256
differs from the manifest's, was changed after its job wrote it (edited by hand, damaged): the run stops with one
line naming it and the repair (`layerswap audit --repair --run`: the file removed, its job rerun), before Snakemake
would rebuild the tables from it and the manifest re-hash it. Only files newer than their job and the manifest are
hashed, so a no-op rerun hashes nothing. A copy of the manifest is kept for the manifest job
(`layerswap.audit.kept`), which refuses to record a changed sha256 whose job did not rerun
(`layerswap.audit.manifest`); the same copy stands in for a manifest that is missing or damaged (issue 49: a folder
with results is no clean slate), and the records put back are cross-checked against what each file records of the
job that made it, evaluations included (`layerswap.audit.records`).

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
import sys
from pathlib import Path

from layerswap.audit.files import RECORDS, recorded_hashes, walk
from layerswap.audit.kept import keep_copy, previous_manifest, read_json_manifest, recover
from layerswap.audit.records import mismatch
from layerswap.errors import UserError
from layerswap.fingerprint import file_sha256
from layerswap.layout import Layout, R

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
    by_language = Layout.at(str(root)).language_evals("")  # `<evals>/by_language/`: Table 2's evaluations
    evals = Layout.at(str(root)).evals()
    evaluated = _evaluated(outputs, evals)
    listed = {  # a Table 2 evaluation of a model no job of this config evaluates (a renamed merge config's) is not
        p: rec  # the config's, though the record that the run rewrites still lists it
        for p, rec in listed.items()
        if not p.startswith(by_language) or _is_evaluated(_model_dir(p, by_language), evaluated, evals)
    }
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


def _is_evaluated(model_dir: str, evaluated: set[str], evals: str) -> bool:
    """A job of the config writes `model_dir`'s evaluations: it holds a declared output, or a folder between it
    and `<evals>/<kind>/` does (a run's checkpoint index)."""
    if model_dir in evaluated:
        return True
    d = os.path.dirname(model_dir)
    while d.startswith(evals + "/") and os.path.dirname(d) != evals:
        if _BELOW + d in evaluated:
            return True
        d = os.path.dirname(d)
    return False


def _model_dir(path: str, by_language: str) -> str:
    """`<evals>/<model id>` of a Table 2 evaluation `<evals>/by_language/<lang>/<model id>/<file>`."""
    rest = Path(path[len(by_language) :]).parts[1:-1]
    return os.path.join(os.path.dirname(by_language.rstrip("/").rstrip(os.sep)), *rest)


def _evaluated(outputs: set[str], evals: str) -> set[str]:
    """The model folders `<evals>/<model id>` this config's jobs write: each folder under `evals` that holds a
    declared output (a merge's evaluations) or lies below one that does (a checkpoint's, below its run's index)."""
    holding = {os.path.dirname(o) for o in outputs if o.startswith(evals + "/")}
    out = set()
    for d in holding:
        while d.startswith(evals + "/"):
            out.add(d)
            d = os.path.dirname(d)
    return out | {_BELOW + d for d in holding}


_BELOW = "below:"  # a folder whose subfolders are model folders too (a run's index beside its checkpoints')


def _parents_in(path: str, outputs: set[str]):
    d = os.path.dirname(path)
    while d and d != os.path.dirname(d):
        if d in outputs:
            yield d
        d = os.path.dirname(d)


# ------------------------------------------------------------------------------------------ records put back
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


def restore(
    outputs: list[str], meta_dir: Path, incomplete_dir: Path, manifest_path: Path, manifest: dict | None = None
) -> tuple[list, list, dict]:
    """Put back the records the manifest vouches for (see the module's docstring), each once cross-checked against
    the file it describes (`layerswap.audit.records`). `manifest`: the one at `manifest_path`, already read (its kept
    copy where it is missing: `layerswap.audit.kept`). Returns (outputs whose record was written, outputs that exist
    with no record and none to put back, {output: why its record in the manifest does not describe it})."""
    manifest = read_json_manifest(manifest_path) if manifest is None else manifest
    restored, unknown, forged = [], [], {}
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
            why = mismatch(job["rule"], job["params"], out, job.get("shellcmd"))
            if why is not None:
                forged[out] = why  # not put back: the file has no record, and the run stops naming it
            elif _same_bytes(path, entry, (fields.get("endtime") or {}).get(out)):
                record["starttime"] = record["endtime"] = mtime(path)
                target = record_path(meta_dir, out)
                target.parent.mkdir(parents=True, exist_ok=True)
                incomplete_dir.mkdir(parents=True, exist_ok=True)  # else Snakemake takes the folder for an old one
                target.write_text(json.dumps(record))
                restored.append(out)
                continue
        if current is None:
            unknown.append(out)
    return restored, unknown, forged


# ------------------------------------------------------------------------------------- results edited after their job
def _job_end(job: dict, meta_dir: Path, incomplete_dir: Path) -> float | None:
    """When the job last finished writing: for each output, when Snakemake wrote its record (after the job, so later
    than every file the job wrote, declared or not) or, for a record put back from the manifest (`job_hash` null),
    its `endtime`, else the manifest's copy of it; the latest of them. None while an output is marked incomplete (a
    job interrupted: Snakemake reruns it)."""
    ends = []
    recorded = (job.get("snakemake") or {}).get("endtime") or {}
    for out in job.get("outputs") or []:
        if record_path(incomplete_dir, out).exists():
            return None
        current = read_record(meta_dir, out) if meta_dir.is_dir() else None
        end = (current or {}).get("endtime", recorded.get(out) if isinstance(recorded, dict) else None)
        if current is not None and current.get("job_hash") is not None:
            try:
                end = max(float(end or 0), record_path(meta_dir, out).stat().st_mtime)
            except OSError:
                pass
        if isinstance(end, (int, float)):
            ends.append(float(end))
    return max(ends) if ends else None


def edited(
    manifest: dict,
    manifest_path: Path,
    meta_dir: Path,
    root: Path,
    incomplete_dir: Path | None = None,
    declared: set[str] | None = None,
) -> list[str]:
    """The files the manifest lists (under `root`) that changed after their job wrote them and the manifest hashed
    them: newer than both, with another sha256 (see the module's docstring). With `declared` (the outputs of this
    config's jobs), only files of a manifest job that is still one of this config's: a file whose recorded job this
    config no longer has (e.g. the grouped evaluation job of a run switched to one job per task, whose new job
    rewrote the file) is not that job's to vouch for."""
    from layerswap.audit.confine import Roots

    try:
        since = manifest_path.stat().st_mtime
    except OSError:
        return []
    roots = Roots(root, (Path(os.path.normpath(Path.cwd() / root)),), (root.resolve(),))
    prefix = os.path.normpath(root) + os.sep
    jobs, ends, out = manifest.get("jobs") or {}, {}, []
    for p, entry in sorted(manifest["files"].items()):
        job = jobs.get((entry or {}).get("job") or "") if isinstance(entry, dict) else None
        if not isinstance(job, dict) or not os.path.normpath(p).startswith(prefix):
            continue  # only the results' own files (a hostile manifest's other paths are never looked at)
        if declared is not None and not declared.intersection(job.get("outputs") or []):
            continue
        try:
            st = os.stat(p)
        except OSError:
            continue  # missing: Snakemake rebuilds a declared output
        if st.st_mtime <= since:
            continue
        jid = entry["job"]
        if jid not in ends:
            ends[jid] = _job_end(job, meta_dir, incomplete_dir or meta_dir.parent / "incomplete")
        if ends[jid] is None or st.st_mtime <= ends[jid] + 1e-6 or not Path(p).is_file() or not roots.inside(p):
            continue
        if st.st_size != entry.get("size") or file_sha256(Path(p)) != entry.get("sha256"):
            out.append(p)
    return out


# -------------------------------------------------------------------------------------------- before a run
def _listed(paths: list[str]) -> str:
    """The first SHOWN of `paths` for a stop line, and how many more."""
    return ", ".join(paths[:SHOWN]) + (f" and {len(paths) - SHOWN} more" if len(paths) > SHOWN else "")


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
    # a missing or damaged manifest is no clean slate: its kept copy is put back, or the run stops (audit.kept)
    opts = UNKNOWN_OPTIONS if argv is None else shlex.join(run_options(argv)[0])
    vouching, said = recover(
        manifest,
        meta_dir,
        outputs,
        incomplete=record_path(incomplete_dir, str(manifest)).exists(),
        finished=read_record(meta_dir, str(manifest)) is not None,
        rebuild_all=None if forced is None else f"snakemake {opts} --forceall".replace("  ", " "),
    )
    for line in said:  # now: a stop line below must not hide that the manifest was put back
        print(line, file=sys.stderr)
    if vouching and manifest.is_file():  # the manifest as the run starts, for the manifest job's check
        keep_copy(manifest, previous_manifest(meta_dir))
    restored, unknown, forged = restore(outputs, meta_dir, incomplete_dir, manifest, vouching)
    unknown = [] if forced is None else [u for u in unknown if u not in forced]
    if forged:
        out, why = next(iter(forged.items()))
        more = f" and {len(forged) - 1} more" if len(forged) > 1 else ""
        raise UserError(
            f"{out}{more}: the record {manifest} holds of the job that made it does not describe it ({why}): a "
            "forged or damaged record, not put back; rebuild it by its job: "
            f"`rm {shlex.join(list(forged))} && {repair_commands(argv, list(forged))[0]}`"
        )
    if unknown:
        shown = _listed(unknown)
        rebuild, record = repair_commands(argv, unknown)
        raise UserError(
            f"{len(unknown)} result(s) have no record of the job that made them ({shown}): neither "
            f".snakemake/metadata nor {manifest} (with these bytes) says which params made them; rebuild "
            f"them: `{rebuild}`, or record them as this config's results: `{record}`"
        )
    changed = edited(vouching, manifest, meta_dir, root, incomplete_dir, set(outputs)) if vouching else []
    changed = [] if forced is None else [c for c in changed if c not in forced]
    if changed:
        shown = _listed(changed)
        rebuild, _ = repair_commands(argv, changed)
        raise UserError(
            f"{len(changed)} result(s) changed after the job that wrote them ({shown}): their sha256 differs from "
            f"{manifest}'s and no job rewrote them; a run would build on them and record them as its own: rebuild "
            f"them by their jobs: `{rebuild}` (or `layerswap audit --repair --run`, which also reruns what depends "
            "on them), or put their bytes back"
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
            shown = _listed(foreign)
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


#: The Snakemake options of the run a job belongs to (rules/common.smk sets it at parse time; the jobs inherit the
#: environment, under SLURM too): so a job's own stop line (the manifest's) prints a repair command that works as
#: printed. Not a param: the same results made by other options are the same results.
RUN_OPTIONS_ENV = "LAYERSWAP_RUN_OPTIONS"
#: What a stop line prints where the run's options are unknown (a command run by hand, outside Snakemake).
UNKNOWN_OPTIONS = "<this run's options>"


def run_options(argv: list[str]) -> tuple[list[str], list[str]]:
    """(this run's Snakemake options less a dry run's and less `--forcerun`, the files it forced)."""
    given, forced = _split_forcerun(argv)
    dry = {"--touch", "-t", "-n", "--dry-run", "--dryrun"}
    return ["-p" if a in ("-np", "-pn") else a for a in given if a not in dry], forced


def job_run_options() -> str:
    """The options of the run that started this job (`RUN_OPTIONS_ENV`), ready to print; `UNKNOWN_OPTIONS` outside a
    run."""
    value = os.environ.get(RUN_OPTIONS_ENV)
    return UNKNOWN_OPTIONS if value is None else shlex.join(run_options(shlex.split(value))[0])


def repair_commands(argv: list[str] | None, files: list[str]) -> tuple[str, str]:
    """(the command that rebuilds `files`, the one that records them as this config's): this run's own Snakemake
    options (`argv`, without `snakemake` itself; None: a placeholder) with `--forcerun` naming `files` (and any
    files this run already forced; less a dry run's `-n`), so each works as printed."""
    opts, old = ([UNKNOWN_OPTIONS], []) if argv is None else run_options(argv)
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
