"""Fault drills on the micro config (issue 30): what a user does after a hard kill, a deleted result and a corrupted
file, each checked against an uninterrupted run of the same config. One line per drill, `passed` or `failed`, with
what it compared:

- kill-and-resume: kill -9 of Snakemake and its jobs while an SFT run trains (a Trainer checkpoint written, the run
  not finished); the rerun is refused until `snakemake --unlock`; then it resumes SFT from that checkpoint and every
  result equals the uninterrupted run's (`layerswap audit` against its manifest), the progress log one row per step;
- delete-and-rebuild: a selection, a merge recipe, a folder of merge evaluations, a checkpoint index and an evaluation
  set deleted from a copy of the finished run; a plain `snakemake` rebuilds them with the same bytes;
- corrupt-and-repair: a flipped byte in an expert's weights; a merge reading them refuses with one line, `layerswap
  audit` names the file, `layerswap audit --repair --run` rebuilds it and what depends on it, and the audit against
  the uninterrupted run's manifest passes;
- re-bless: a flipped byte in an expert's weights and its run's `checkpoints.json` deleted; the SFT job that rewrites
  the record refuses the changed file in one line (each export records its weights' sha256 beside them) and writes
  no record; the repair it names (`rm -r` the checkpoint, `snakemake`) restores the uninterrupted run's results;
- relocate-then-edit: results/ alone copied with its modification times (`cp -a`) into a new folder, no
  `.snakemake/`: the same config plans nothing, `bottom: 2` for swap_default plans the jobs it plans in the original
  folder, and the run rebuilds the recipes with bottom 2 (the manifest's records put back: docs/RERUNS.md);
- second-config: the finished folder rerun with ties_d05 renamed and toy_swh_1's lr changed: the old name's recipes
  and evaluations are named before the run and by `layerswap audit` as not from this config, are not in the new
  manifest's files, and `layerswap audit --remove-foreign` removes them (docs/AUDITS.md).


Issue 43 (docs/SECURITY.md): an edited result, a forged record, a hostile manifest and bad config values, each
ending with the clean run's result or one line naming the file and the repair:

- edit-and-launder: one score of a merge evaluation changed by hand (valid JSON); the run stops before building on
  it with one line naming it and the repair, the manifest job (run by hand) refuses to record it, and the repair
  (`layerswap audit --repair --run`) restores the uninterrupted run's results;
- forged-record: results/ moved alone, the manifest's record of swap_default's recipes edited to say `bottom: 2`,
  the config set to bottom 2: the run stops naming the recipes whose record does not describe them, and the repair
  it names (`rm` them, `snakemake`) rebuilds them with bottom 2;
- hostile-manifest: a manifest naming `../victim.txt` as foreign, files under `../victimdir/` (a checkpoint export),
  or `../../../../etc/passwd`: `layerswap audit --remove-foreign`, `--repair --run` and `layerswap audit` each
  refuse in one line; the victims are untouched;
- bad-config: `lr: .nan`, `num_samples: 1e15`, a data source `file: /etc/passwd`: `layerswap check-config` refuses
  each in one line naming the key, in under a second.

    python scripts/fault_drill.py WORKDIR      # a new or empty directory; the six drills: 6 min 42 s on 2 shared cores
    python scripts/fault_drill.py WORKDIR --only edit-and-launder forged-record hostile-manifest bad-config \
        --reference FINISHED_MICRO_WORKDIR    # these four against an existing run: 2 min 40 s on 2 shared cores

Each Snakemake run (and the repair) relays its progress lines (`N of M steps`, `repair:`) prefixed `|`; its whole
log is `WORKDIR/<drill>/snakemake.log`.
Exit status 1 if a drill failed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from layerswap.contracts import merge_model_id
from layerswap.workflow.layout import LOGS, Layout

REPO = Path(__file__).resolve().parents[1]
LAYOUT = Layout()
CONFIG = REPO / "config" / "micro.yaml"
BIN = str(Path(sys.executable).parent)
ENV = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
SNAKEMAKE = [
    sys.executable,
    "-m",
    "snakemake",
    "-s",
    str(REPO / "Snakefile"),
    "--configfile",
    str(CONFIG),
    "--cores",
    "2",
]
PROGRESS = re.compile(
    r"^repair:|\d+ of \d+ steps|Nothing to be done|LockException|Directory cannot be locked|Error in rule"
)
START = time.monotonic()


def say(text: str) -> None:
    print(f"[{time.monotonic() - START:6.0f} s] {text}", flush=True)


def snakemake(work: Path, *args: str, kill_when=None) -> tuple[int, str]:
    """Run Snakemake in `work`, relaying its progress lines; `kill_when()` true: kill -9 its process group (Snakemake
    and every job it started). Returns the exit status (-9 when killed) and the log."""
    return logged(work, [*SNAKEMAKE, "--directory", str(work), *args], kill_when)


def logged(work: Path, cmd: list[str], kill_when=None) -> tuple[int, str]:
    """`cmd` in `work`, its output appended to `work/snakemake.log` and its progress lines relayed."""
    log = work / "snakemake.log"
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(cmd)}\n")
        out.flush()
        start = out.tell()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=ENV, cwd=work, start_new_session=True)
        seen = start
        while proc.poll() is None:
            time.sleep(0.01)
            seen = relay(log, seen)
            if kill_when is not None and kill_when():
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                return -9, log.read_text()[start:]
    relay(log, seen)
    return proc.returncode, log.read_text()[start:]


def relay(log: Path, offset: int) -> int:
    with log.open() as f:
        f.seek(offset)
        text = f.read()
    complete = text[: text.rfind("\n") + 1]
    for line in complete.splitlines():
        if PROGRESS.search(line):
            say(f"  | {line.strip()}")
    return offset + len(complete)


def layerswap(work: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "layerswap.cli", *args], cwd=work, env=ENV, capture_output=True, text=True
    )


def audit_against(reference: Path, work: Path) -> tuple[bool, str]:
    """`layerswap audit` of work's results against the reference run's manifest: (passed, its last line)."""
    proc = layerswap(work, "audit", "--manifest", str(reference / LAYOUT.manifest()))
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    return proc.returncode == 0, "; ".join(lines[-3:])


def survivors(work: Path) -> list[int]:
    """Processes still running in `work` (Linux: their working directory)."""
    pids = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if Path(os.readlink(proc / "cwd")) == work:
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids


def copy_run(reference: Path, dest: Path) -> Path:
    shutil.copytree(reference, dest, symlinks=True, ignore=shutil.ignore_patterns("locks", "snakemake.log"))
    return dest


def steps_of(log: Path) -> list[int]:
    return [json.loads(line)["step"] for line in log.read_text().splitlines()]


# ---------------------------------------------------------------------------------------------------------- drills
def kill_and_resume(reference: Path, work: Path) -> tuple[bool, str]:
    experts = work / LAYOUT.experts()
    mid_sft: list[Path] = []

    def training_with_a_checkpoint() -> bool:
        for state in experts.glob("*/trainer-*/checkpoint-*/trainer_state.json"):
            run = state.parents[2]
            if not (work / LAYOUT.checkpoints_record(run.name)).exists():
                mid_sft.append(run)
                return True
        return False

    say("kill-and-resume: the micro run, killed (-9) once an SFT run has saved a Trainer checkpoint")
    code, _ = snakemake(work, kill_when=training_with_a_checkpoint)
    if code != -9:
        return False, f"the run ended (status {code}) before any SFT run saved a Trainer checkpoint"
    run = mid_sft[0]
    left = sorted(p.name for p in run.glob("trainer-*/checkpoint-*"))
    time.sleep(1)
    alive = survivors(work)
    if alive:
        return False, f"processes of the killed run still run: {alive}"
    say(f"kill-and-resume: killed with {run.name} mid-training (Trainer state {', '.join(left)}); rerunning")
    code, text = snakemake(work)
    refused = code != 0 and "--unlock" in text
    say(f"kill-and-resume: the rerun {'is refused (lock)' if refused else f'exited {code}'}; snakemake --unlock")
    code, _ = snakemake(work, "--unlock")
    if code:
        return False, f"snakemake --unlock exited {code}"
    code, _ = snakemake(work)
    if code:
        return False, f"the run after --unlock exited {code} (see {work / 'snakemake.log'})"
    sft_log = (work / LAYOUT.log("sft", run.name)).read_text()
    resumed = "resuming" in sft_log and "checkpoint-" in sft_log
    same, line = audit_against(reference, work)
    rows = steps_of(run / "log.jsonl") == steps_of(reference / LAYOUT.run_dir(run.name) / "log.jsonl")
    ok = refused and resumed and same and rows
    return ok, (
        f"kill -9 of snakemake and its jobs mid-SFT ({run.name}, state {left[-1]}, none left running); "
        f"rerun refused until --unlock: {refused}; "
        f"SFT resumed from its Trainer checkpoint: {resumed}; every result vs the uninterrupted run: {line}; "
        f"log.jsonl one row per step as uninterrupted: {rows}"
    )


#: A selection, a recipe, the folder of soup_uniform's toy_swh evaluations, a checkpoint index, an evaluation set.
DELETED = [
    LAYOUT.selection("toy_swh"),
    LAYOUT.recipe("ties_d05", "toy_swh", "l2m1"),
    str(Path(LAYOUT.eval_file(merge_model_id("soup_uniform", "toy_swh", "l1m1"), "mgsm")).parents[1]),
    LAYOUT.checkpoint_index("math_1", "other"),
    LAYOUT.eval_data("mmlu", "en"),
]


def delete_and_rebuild(reference: Path, work: Path) -> tuple[bool, str]:
    say(f"delete-and-rebuild: deleting {len(DELETED)} results from a copy of the finished run")
    for rel in DELETED:
        path = work / rel
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    code, text = snakemake(work, "--dry-run")
    planned = sorted(set(re.findall(r"^(?:local)?rule (\w+):", text, re.M)) - {"all", "manifest"})
    code, _ = snakemake(work)
    if code:
        return False, f"the rebuild exited {code}"
    back = all((work / rel).exists() for rel in DELETED)
    same, line = audit_against(reference, work)
    return back and same, (
        f"deleted {len(DELETED)} (selection, recipe, merge evaluation folder, checkpoint index, "
        f"evaluation set); plain snakemake planned {', '.join(planned)}; all back: {back}; "
        f"every result vs the uninterrupted run: {line}"
    )


def corrupt_and_repair(reference: Path, work: Path) -> tuple[bool, str]:
    selection = json.loads((work / LAYOUT.selection("toy_swh")).read_text())
    ckpt = selection["selected"][0]["path"]
    weights = work / ckpt / "model.safetensors"
    say(f"corrupt-and-repair: flipping one byte of {ckpt}/model.safetensors")
    data = bytearray(weights.read_bytes())
    data[-64] ^= 0x01
    weights.write_bytes(bytes(data))
    recipe = LAYOUT.recipe("swap_default", "toy_swh", "l1m1")
    merge = layerswap(work, "merge", "--recipe", recipe, "--out", str(work / "merged_l1m1"))
    refused = merge.returncode == 1 and "sha256 differs" in merge.stderr and len(merge.stderr.splitlines()) == 1
    named = f"changed: {ckpt}/model.safetensors" in layerswap(work, "audit").stdout
    say("corrupt-and-repair: layerswap audit --repair --run")
    code, text = logged(
        work, [sys.executable, "-m", "layerswap.cli", "audit", "--repair", "--run", "--", *SNAKEMAKE[3:]]
    )
    command = next((line for line in text.splitlines() if "--forcerun" in line), "")
    if code:
        return False, f"the repair exited {code} (see {work / 'snakemake.log'})"
    same, line = audit_against(reference, work)
    targets = command.split("--forcerun", 1)[-1].strip()
    return refused and named and same, (
        f"flipped a byte of {ckpt}/model.safetensors; merge refused it in one line: "
        f"{refused}; audit named it: {named}; repair ran `rm -r {ckpt} && snakemake "
        f"... --forcerun {targets}`; every result vs the uninterrupted run: {line}"
    )


REBLESS_RUN = "toy_swh_1"


def flip_and_rerecord(reference: Path, work: Path) -> tuple[bool, str]:
    """A byte of an expert's weights flipped and its run's checkpoints.json deleted: the SFT job that rewrites the
    record must refuse the changed file (checked against the sha256 its export recorded beside it) in one line, write
    no record, and the repair that line names must restore the uninterrupted run's results."""
    ckpt, record = LAYOUT.checkpoint(REBLESS_RUN, "s0000032"), LAYOUT.checkpoints_record(REBLESS_RUN)
    say(f"re-bless: flipping one byte of {ckpt}/model.safetensors, deleting {record}")
    weights = work / ckpt / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-64] ^= 0x01
    weights.write_bytes(bytes(data))
    (work / record).unlink()
    code, text = snakemake(work)
    log = (work / LAYOUT.log("sft", REBLESS_RUN)).read_text().strip().splitlines()
    line = log[-1] if log else ""
    stop = _last_line(text)  # since issue 43 the check before the run finds the changed weights first
    refused = (
        code != 0
        and (
            ("sha256 differs from the one recorded at export" in line and f"rm -r {ckpt}" in line)
            or ("changed after the job that wrote them" in stop and f"{ckpt}/model.safetensors" in stop)
        )
        and not (work / record).exists()
    )
    line = stop if "changed after the job" in stop else line
    say(f"re-bless: the run exited {code}: {line}")
    say(f"re-bless: the repair it names: rm -r {ckpt} && snakemake")
    shutil.rmtree(work / ckpt)
    code, _ = snakemake(work)
    if code:
        return False, f"the run after the repair exited {code} (see {work / 'snakemake.log'})"
    same, audit = audit_against(reference, work)
    return refused and same, (
        f"flipped a byte of {ckpt}/model.safetensors and deleted its checkpoints.json; the run (the check "
        f"before it, or the SFT job) refused it in one line naming the file and the repair, and wrote no "
        f"record: {refused}; after `rm -r {ckpt} && snakemake`, every result vs the "
        f"uninterrupted run: {audit}"
    )


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True)
    return path


def edited_config(dest: Path, edit) -> Path:
    """micro.yaml with `edit(config)` applied, written to `dest`."""
    import yaml

    config = yaml.safe_load(CONFIG.read_text())
    edit(config)
    dest.write_text(yaml.safe_dump(config, sort_keys=False))
    return dest


def with_config(config: Path) -> list[str]:
    """The drills' Snakemake command line with another config file."""
    return [*SNAKEMAKE[:6], str(config), *SNAKEMAKE[7:]]


def planned_jobs(work: Path, config: Path) -> tuple[int, list[str]]:
    """A dry run of `config` in `work`: its exit status and the jobs it plans (`rule[wildcards]`, all aside)."""
    from layerswap.workflow.plan import parse_dry_run

    code, text = logged(work, [*with_config(config), "--directory", str(work), "--dry-run"])
    return code, sorted(j.name for j in parse_dry_run(text) if j.rule != "all")


def relocate_then_edit(reference: Path, work: Path) -> tuple[bool, str]:
    """results/ alone copied with its modification times (`cp -a`) into a new folder, no `.snakemake/`: the same
    config plans nothing; `bottom: 2` for swap_default plans what it plans in the original folder, and the run
    rebuilds those recipes with bottom 2."""
    say("relocate-then-edit: results/ copied alone (modification times kept) into a new folder")
    shutil.copytree(reference / LAYOUT.root, work / LAYOUT.root, symlinks=True)
    code, same = planned_jobs(work, CONFIG)
    edit = edited_config(work / "bottom2.yaml", lambda c: c["merges"]["configs"]["swap_default"].update(bottom=2))
    code2, moved = planned_jobs(work, edit)
    original = copy_run(reference, work.parent / "relocated_original")
    code3, there = planned_jobs(original, edit)
    if code or code2 or code3:
        return False, f"a dry run failed (see {work / 'snakemake.log'})"
    say(f"relocate-then-edit: the edit plans {len(moved)} jobs (the original folder: {len(there)}); running it")
    code, text = logged(work, [*with_config(edit), "--directory", str(work)])
    if code:
        return False, f"the run of the edited config exited {code} (see {work / 'snakemake.log'})"
    recipe = json.loads((work / LAYOUT.recipe("swap_default", "toy_swh", "l1m1")).read_text())
    bottom2 = '"bottom": 2' in json.dumps(recipe)
    code, after = planned_jobs(work, edit)
    ok = not same and moved == there and bool(moved) and bottom2 and not after
    return ok, (
        f"cp -a of results/ alone, same config: {len(same)} jobs planned; bottom: 2 for swap_default: "
        f"{len(moved)} jobs planned, the same as in the original folder: {moved == there} "
        f"({', '.join(sorted({j.split('[')[0] for j in moved}))}); the run rebuilt the recipes with "
        f"bottom 2: {bottom2}; then {len(after)} jobs planned"
    )


def second_config(reference: Path, work: Path) -> tuple[bool, str]:
    """The finished run's folder rerun with ties_d05 renamed and toy_swh_1's lr changed: the old name's recipes and
    evaluations are named as not from this config, kept out of the manifest's files, and removed by
    `layerswap audit --remove-foreign`."""

    def edit(config):
        configs = config["merges"]["configs"]
        configs["ties_half"] = configs.pop("ties_d05")
        config["merges"]["best_of"]["ties"] = ["ties_half"]
        config["sft"]["runs"]["toy_swh_1"]["lr"] = 3.0e-3

    second = edited_config(work / "second.yaml", edit)
    old = sorted(
        str(p.relative_to(work))
        for p in (work / LAYOUT.root).rglob("*")
        if p.is_file() and "ties_d05" in p.parts and LOGS not in p.parts
    )
    say(f"second-config: ties_d05 renamed ties_half, toy_swh_1's lr changed; {len(old)} ties_d05 files there")
    code, text = logged(work, [*with_config(second), "--directory", str(work)])
    if code:
        return False, f"the second config's run exited {code} (see {work / 'snakemake.log'})"
    named_before = next((l for l in text.splitlines() if "not from this config" in l), "")
    manifest = json.loads((work / LAYOUT.manifest()).read_text())
    vouched = [p for p in manifest["files"] if "ties_d05" in p]
    audit = layerswap(work, "audit")
    foreign = [l.split(" ")[1] for l in audit.stdout.splitlines() if l.startswith("foreign: ")]
    removed = layerswap(work, "audit", "--remove-foreign")
    left = [p for p in (work / LAYOUT.root).rglob("*") if "ties_d05" in p.parts and LOGS not in p.parts]
    clean = layerswap(work, "audit")
    ok = (
        bool(old)
        and bool(named_before)
        and not vouched
        and foreign == old
        and audit.returncode == 0
        and removed.returncode == 0
        and not left
        and clean.returncode == 0
        and "foreign" not in clean.stdout
    )
    return ok, (
        f"{len(old)} ties_d05 files before; named before the run: {bool(named_before)}; in the new "
        f"manifest's files: {len(vouched)}; audit named {len(foreign)} as not from this config (exit "
        f"{audit.returncode}); audit --remove-foreign left {len(left)}; then: "
        f"{clean.stdout.strip().splitlines()[-1] if clean.stdout.strip() else clean.stderr.strip()}"
    )


# ------------------------------------------------------------------------------------------------- issue 43
EDITED = LAYOUT.eval_file(merge_model_id("swap_default", "toy_swh", "l1m1"), "mgsm")


def _first_score(value, path=()):
    """The key path of the first float (a score) in a JSON value."""
    if isinstance(value, float):
        return path
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        found = _first_score(item, (*path, key))
        if found is not None:
            return found
    return None


def _last_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1] if lines else ""


def edit_and_launder(reference: Path, work: Path) -> tuple[bool, str]:
    """One score of a merge evaluation changed by hand: the run stops naming it, the manifest job refuses to record
    it, the repair restores the uninterrupted run's results."""
    path = work / EDITED
    data = json.loads(path.read_text())
    where = _first_score(data)
    node = data
    for key in where[:-1]:
        node = node[key]
    old = node[where[-1]]
    node[where[-1]] = 0.75 if old != 0.75 else 0.25
    time.sleep(0.05)
    path.write_text(json.dumps(data, indent=1))
    say(f"edit-and-launder: {EDITED} {'/'.join(map(str, where))}: {old} -> {node[where[-1]]}; plain snakemake")
    code, text = snakemake(work)
    line = _last_line(text)
    stopped = code != 0 and "changed after the job that wrote them" in line and EDITED in line and "--repair" in line
    table = (work / LAYOUT.table("table1", "csv")).read_bytes() == (
        reference / LAYOUT.table("table1", "csv")
    ).read_bytes()
    say(f"edit-and-launder: the run exited {code}: {line}")
    manifest = layerswap(
        work,
        "manifest",
        "--root",
        LAYOUT.root,
        "--out",
        str(work / "relaundered.json"),
        "--metadata-dir",
        ".snakemake/metadata",
        "--previous",
        LAYOUT.manifest(),
    )
    mline = _last_line(manifest.stderr)
    refused = manifest.returncode == 1 and EDITED in mline and not (work / "relaundered.json").exists()
    say(f"edit-and-launder: the manifest job by hand exited {manifest.returncode}: {mline}")
    code, _ = logged(work, [sys.executable, "-m", "layerswap.cli", "audit", "--repair", "--run", "--", *SNAKEMAKE[3:]])
    if code:
        return False, f"the repair exited {code} (see {work / 'snakemake.log'})"
    same, audit = audit_against(reference, work)
    return stopped and table and refused and same, (
        f"a score of {EDITED} edited; the run stopped in one line naming it and the repair: {stopped}; Table 1 "
        f"untouched meanwhile: {table}; the manifest job refused to record it: {refused}; after `layerswap audit "
        f"--repair --run`, every result vs the uninterrupted run: {audit}"
    )


def forged_record(reference: Path, work: Path) -> tuple[bool, str]:
    """results/ moved alone, the manifest's record of swap_default's recipes edited to the bottom-2 config's params:
    the run stops naming those recipes; the repair it names rebuilds them with bottom 2."""
    shutil.copytree(reference / LAYOUT.root, work / LAYOUT.root, symlinks=True)
    mpath = work / LAYOUT.manifest()
    manifest = json.loads(mpath.read_text())
    forged = []
    for job in manifest["jobs"].values():
        if job["rule"] == "merge_recipes" and any("/swap_default/" in o for o in job["outputs"]):
            for key in ("params", "shellcmd"):
                text = json.dumps(job[key])
                job[key] = json.loads(re.sub(r'(\\*"bottom\\*": )1\b', r"\g<1>2", text))
            forged += job["outputs"]
    mpath.write_text(json.dumps(manifest, indent=1, sort_keys=True))
    edit = edited_config(work / "bottom2.yaml", lambda c: c["merges"]["configs"]["swap_default"].update(bottom=2))
    say(f"forged-record: {len(forged)} recipes' record forged to bottom 2 in the moved manifest; running bottom 2")
    code, text = logged(work, [*with_config(edit), "--directory", str(work)])
    line = _last_line(text)
    named = code != 0 and "does not describe it" in line and all(f in line for f in forged) and bool(forged)
    say(f"forged-record: the run exited {code}: {line}")
    for f in forged:
        (work / f).unlink()
    code, _ = logged(work, [*with_config(edit), "--directory", str(work)])
    if code:
        return False, f"the run after the repair exited {code} (see {work / 'snakemake.log'})"
    bottom2 = all('"bottom": 2' in json.dumps(json.loads((work / f).read_text())) for f in forged)
    own = layerswap(work, "audit")
    return named and bottom2 and own.returncode == 0, (
        f"the forged record of {len(forged)} recipes named, not put back: {named}; after `rm` of them and "
        f"snakemake, every recipe has bottom 2: {bottom2}; the run's own audit: {_last_line(own.stdout)}"
    )


def hostile_manifest(reference: Path, work: Path) -> tuple[bool, str]:
    """Three hostile manifests, one case each: every audit command refuses in one line; the victims stay."""
    victim, victims = work.parent / "victim.txt", work.parent / "victimdir"
    victim.write_text("precious\n")
    victims.mkdir(exist_ok=True)
    (victims / "model.safetensors").write_text("precious too\n")
    clean = json.loads((work / LAYOUT.manifest()).read_text())
    sha = {"size": 9, "sha256": "0" * 64}
    sft = next(j for j, job in clean["jobs"].items() if job["rule"] == "sft")

    def hostile(edit) -> dict:
        m = json.loads(json.dumps(clean))
        edit(m)
        return m

    cases = {
        "foreign ../victim.txt": (
            hostile(lambda m: m["foreign"].update({"../victim.txt": sha})),
            ["--remove-foreign"],
        ),
        "files under ../victimdir/": (
            hostile(
                lambda m: m["files"].update(
                    {f"../victimdir/{n}": {**sha, "job": sft} for n in ("model.safetensors", "layerswap_meta.json")}
                )
            ),
            ["--repair", "--run", "--", *SNAKEMAKE[3:]],
        ),
        "../../../../etc/passwd in files": (
            hostile(lambda m: m["files"].update({"../../../../etc/passwd": {**sha, "job": None}})),
            [],
        ),
    }
    outcomes = []
    for name, (m, args) in cases.items():
        (work / LAYOUT.manifest()).write_text(json.dumps(m))
        proc = layerswap(work, "audit", *args)
        err = proc.stderr.strip().splitlines()
        ok = proc.returncode == 1 and len(err) == 1 and "refused" in err[0] and not proc.stdout.strip()
        say(f"hostile-manifest: {name}: audit {' '.join(args[:2])} exited {proc.returncode}: {_last_line(proc.stderr)}")
        outcomes.append((name, ok))
    intact = victim.read_text() == "precious\n" and (victims / "model.safetensors").read_text() == "precious too\n"
    (work / LAYOUT.manifest()).write_text(json.dumps(clean))
    return all(ok for _, ok in outcomes) and intact, (
        "; ".join(f"{n}: refused in one line: {ok}" for n, ok in outcomes) + f"; the victims untouched: {intact}"
    )


def bad_config(reference: Path, work: Path) -> tuple[bool, str]:
    """Config values that broke jobs later: each refused by check-config in one line naming its key, < 1 s."""
    cases = {
        "lr: .nan": (lambda c: c["sft"]["defaults"].update(lr=float("nan")), "sft.defaults.lr"),
        "num_samples: 1e15": (lambda c: c["sft"]["defaults"].update(num_samples=1e15), "sft.defaults.num_samples"),
        "file: /etc/passwd": (
            lambda c: c["data_sources"]["toy_orca_math"].update(file="/etc/passwd"),
            "data_sources.toy_orca_math.file",
        ),
    }
    work.mkdir(parents=True, exist_ok=True)
    outcomes = []
    for name, (edit, key) in cases.items():
        path = edited_config(work / "bad.yaml", edit)
        start = time.monotonic()
        proc = layerswap(work, "check-config", str(path))
        seconds = time.monotonic() - start
        err = proc.stderr.strip().splitlines()
        ok = proc.returncode == 1 and len(err) == 1 and f"config key '{key}'" in err[0]
        outcomes.append((name, ok, seconds))
        say(f"bad-config: {name}: exit {proc.returncode} in {seconds:.2f} s: {_last_line(proc.stderr)}")
    return all(ok for _, ok, _ in outcomes), "; ".join(
        f"{n}: refused naming its key: {ok} ({s:.2f} s with the interpreter's start)" for n, ok, s in outcomes
    )


DRILLS = (
    "kill-and-resume",
    "delete-and-rebuild",
    "corrupt-and-repair",
    "re-bless",
    "relocate-then-edit",
    "second-config",
    "edit-and-launder",
    "forged-record",
    "hostile-manifest",
    "bad-config",
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workdir", type=Path, help="a new or empty directory for the runs")
    parser.add_argument("--only", nargs="+", choices=DRILLS, default=list(DRILLS), help="the drills to run")
    parser.add_argument(
        "--reference",
        type=Path,
        default=None,
        help="a finished micro run's work directory to use as the uninterrupted run (default: run one in WORKDIR)",
    )
    args = parser.parse_args()
    root = args.workdir.resolve()
    if root.exists() and any(root.iterdir()):
        print(f"fault_drill: {root} is not empty: name a new or empty directory", file=sys.stderr)
        return 1
    reference = args.reference.resolve() if args.reference else root / "uninterrupted"
    root.mkdir(parents=True, exist_ok=True)
    code = 0
    if args.reference is None:
        reference.mkdir(parents=True)
        say("the uninterrupted micro run (the reference)")
        code, _ = snakemake(reference)
    if code:
        print(f"fault_drill: the uninterrupted run failed (status {code}): {reference / 'snakemake.log'}")
        return 1
    drills = {
        "kill-and-resume": lambda: kill_and_resume(reference, _mkdir(root / "killed")),
        "delete-and-rebuild": lambda: delete_and_rebuild(reference, copy_run(reference, root / "deleted")),
        "corrupt-and-repair": lambda: corrupt_and_repair(reference, copy_run(reference, root / "corrupted")),
        "re-bless": lambda: flip_and_rerecord(reference, copy_run(reference, root / "rebless")),
        "relocate-then-edit": lambda: relocate_then_edit(reference, root / "relocated"),
        "second-config": lambda: second_config(reference, copy_run(reference, root / "second")),
        "edit-and-launder": lambda: edit_and_launder(reference, copy_run(reference, root / "edited")),
        "forged-record": lambda: forged_record(reference, _mkdir(root / "forged")),
        "hostile-manifest": lambda: hostile_manifest(reference, copy_run(reference, root / "hostile" / "work")),
        "bad-config": lambda: bad_config(reference, root / "config"),
    }
    results = {name: drills[name]() for name in args.only}
    for name, (ok, what) in results.items():
        print(f"{name}: {'passed' if ok else 'FAILED'}: {what}")
    return 0 if all(ok for ok, _ in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
