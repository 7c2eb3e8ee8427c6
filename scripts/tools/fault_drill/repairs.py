"""The drills of issue 30: a hard kill, a deleted result, a corrupted file, a moved or renamed run, each checked
against the uninterrupted run."""

from __future__ import annotations

import json
import re
import shutil
import sys
import time
from pathlib import Path

from layerswap.contracts import merge_model_id
from layerswap.layout import LOGS
from scripts.tools.fault_drill.runs import (
    CONFIG,
    LAYOUT,
    SNAKEMAKE,
    audit_against,
    copy_run,
    edited_config,
    last_line,
    layerswap,
    logged,
    planned_jobs,
    say,
    snakemake,
    steps_of,
    survivors,
    with_config,
)


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
    stop = last_line(text)  # since issue 43 the check before the run finds the changed weights first
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
