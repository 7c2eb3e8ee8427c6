"""Runs never share a writable folder by name (issue 41 item 5, layerswap/scratch.py): two results folders
with one `storage.scratch` each keep their big files in a namespace of their own; a namespace another results
folder owns is refused in one line whose command works as printed; and the provenance stop line's commands work as
printed (layerswap/audit/provenance.py `repair_commands`)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import HANG_GUARD, MICRO, REPO
from test_staleness import run_snakemake, set_in, write_config

from layerswap.audit.provenance import repair_commands
from layerswap.errors import UserError
from layerswap.layout import Layout, R
from layerswap.scratch import MARKER, OWNER, check_owner, claim, read_id

SNAKEFILE = REPO / "Snakefile"
ENV = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
TABLES = "tables"


def with_scratch(scratch: Path, **runs_lr: float):
    """A micro config edit: storage.scratch, and the named SFT runs' learning rates."""

    def edit(config):
        config["storage"] = {**config.get("storage", {}), "scratch": str(scratch)}
        for run, lr in runs_lr.items():
            config["sft"]["runs"][run]["lr"] = lr

    return edit


def _backticked(line: str) -> list[str]:
    return re.findall(r"`([^`]+)`", line)


# ------------------------------------------------------------------------------------------------- the namespace
def test_each_results_folder_claims_its_own_namespace(tmp_path):
    scratch = tmp_path / "scratch"
    a, b = tmp_path / "a" / R, tmp_path / "b" / R
    ns_a, lines_a = claim(str(scratch), a)
    ns_b, _ = claim(str(scratch), b)
    assert ns_a != ns_b and Path(ns_a).parent == Path(ns_b).parent == scratch and not lines_a
    for results, ns in ((a, ns_a), (b, ns_b)):
        owner = json.loads((Path(ns) / OWNER).read_text())
        assert owner == {"id": read_id(results), "results": str(results.resolve())}
        assert Path(ns).name == read_id(results)
    assert claim(str(scratch), a) == (ns_a, [])  # the same folder again: its namespace, nothing to say


def test_a_copied_results_folder_is_refused_in_one_line_and_its_command_works(tmp_path):
    """`cp -r` of a results folder carries its id: the copy is refused (its owner still holds the id) with one
    line whose `rm` command, run as printed, gives the copy a namespace of its own."""
    scratch = tmp_path / "scratch"
    a = tmp_path / "a" / R
    ns_a, _ = claim(str(scratch), a)
    copy = tmp_path / "copy" / R
    shutil.copytree(a, copy)
    with pytest.raises(UserError) as err:
        claim(str(scratch), copy)
    line = str(err.value)
    assert "\n" not in line and f"belongs to the results folder {a.resolve()}" in line
    (command,) = [c for c in _backticked(line) if c.startswith("rm ")]
    subprocess.run(command, shell=True, check=True, cwd=tmp_path / "copy")
    ns_copy, _ = claim(str(scratch), copy)
    assert ns_copy != ns_a and json.loads((Path(ns_a) / OWNER).read_text())["results"] == str(a.resolve())


def test_a_moved_results_folder_keeps_its_namespace(tmp_path):
    scratch = tmp_path / "scratch"
    a = tmp_path / "a" / R
    ns, _ = claim(str(scratch), a)
    moved = tmp_path / "moved" / R
    moved.parent.mkdir()
    a.rename(moved)
    ns2, lines = claim(str(scratch), moved)
    assert ns2 == ns and len(lines) == 1 and "the results folder was moved" in lines[0]
    assert json.loads((Path(ns) / OWNER).read_text())["results"] == str(moved.resolve())


def test_a_job_never_writes_into_another_folders_namespace(tmp_path):
    scratch = tmp_path / "scratch"
    a, b = tmp_path / "a" / R, tmp_path / "b" / R
    ns_a, _ = claim(str(scratch), a)
    claim(str(scratch), b)
    check_owner(Path(ns_a) / "experts" / "math_1", a)  # its own: fine
    check_owner(tmp_path / "elsewhere", b)  # outside any namespace: not this check's business
    with pytest.raises(UserError, match=r"lies in the scratch namespace of the results folder .*/a/results"):
        check_owner(Path(ns_a) / "experts" / "math_1", b)


def test_a_hand_edited_marker_is_one_line(tmp_path):
    results = tmp_path / R
    results.mkdir()
    (results / MARKER).write_text('{"id": "../../etc"}')
    with pytest.raises(UserError, match=r"scratch.json: not a scratch marker \(no 16-hex-digit 'id'\)"):
        claim(str(tmp_path / "scratch"), results)


def test_the_workflow_uses_the_namespace_and_refuses_a_copy(tmp_path):
    """Dry runs: the SFT jobs write under <scratch>/<id>/experts; a copy of the working folder is refused with
    one line before anything runs, and after its command, run as printed, it plans its own namespace."""
    scratch = tmp_path / "scratch"
    config = write_config(tmp_path / "c.yaml", with_scratch(scratch))
    a = tmp_path / "a"
    proc = run_snakemake(SNAKEFILE, a, config, "--dry-run", "-p")
    assert proc.returncode == 0, proc.stderr[-3000:]
    ident = read_id(a / R)
    record = Layout(big=f"{scratch}/{ident}").checkpoints_record("math_1")
    assert f'--out-dir "$(dirname {record})"' in proc.stdout
    assert f"{scratch}/experts" not in proc.stdout
    copy = tmp_path / "copy"
    shutil.copytree(a, copy, symlinks=True, ignore=shutil.ignore_patterns("locks"))
    proc = run_snakemake(SNAKEFILE, copy, config, "--dry-run")
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert proc.returncode == 1 and lines[-1].startswith("scratch: ") and "belongs to the results folder" in lines[-1]
    (command,) = [c for c in _backticked(lines[-1]) if c.startswith("rm ")]
    subprocess.run(command, shell=True, check=True, cwd=copy)
    proc = run_snakemake(SNAKEFILE, copy, config, "--dry-run", "-p")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert read_id(copy / R) != ident and f"{scratch}/{read_id(copy / R)}/experts/math_1" in proc.stdout


# --------------------------------------------------------------------------------- the stop line's commands
def test_repair_commands_keep_the_runs_options_and_drop_the_dry_run():
    rebuild, record = repair_commands(
        ["-s", "Snakefile", "-np", "--configfile", "c.yaml", "--forcerun", "results/x", "--cores", "2", "-n"],
        ["results/a b", "results/x"],
    )
    assert rebuild == "snakemake -s Snakefile -p --configfile c.yaml --cores 2 --forcerun results/x 'results/a b'"
    assert (
        record == "snakemake -s Snakefile -p --configfile c.yaml --cores 2 --touch --forcerun results/x 'results/a b'"
    )
    assert repair_commands(None, ["f"])[0] == "snakemake <this run's options> --forcerun f"


@pytest.mark.workflow
def test_the_provenance_stop_lines_rebuild_command_works_as_printed(micro_run, tmp_path):
    """Results moved without `.snakemake/`, a table edited by hand: the run stops with one line; its rebuild
    command, run exactly as printed (from the working folder), rebuilds the table and the next dry run has nothing
    to do (before, the same check refused `--forcerun` itself)."""
    work = tmp_path / "moved"
    shutil.copytree(micro_run, work / R, symlinks=True)
    summary = work / Layout().table("summary", "md")
    clean = summary.read_text()
    summary.write_text(clean + "\nmy note\n")
    proc = run_snakemake(SNAKEFILE, work, MICRO, "--dry-run", "--cores", "2")
    last = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 1 and last.startswith("provenance: 1 result(s) have no record"), proc.stderr[-2000:]
    rebuild = _backticked(last)[0]
    assert "--forcerun results/tables/summary.md" in rebuild and "--dry-run" not in rebuild
    proc = subprocess.run(rebuild, shell=True, cwd=work, env=ENV, capture_output=True, text=True, timeout=HANG_GUARD)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert summary.read_text() == clean
    proc = run_snakemake(SNAKEFILE, work, MICRO, "--dry-run", "--cores", "2")
    assert proc.returncode == 0 and "Nothing to be done" in proc.stdout + proc.stderr, proc.stderr[-3000:]


# --------------------------------------------------------------------------- two results folders, one scratch
def _tables(results: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((results / TABLES).iterdir())}


@pytest.mark.workflow
def test_two_results_folders_sharing_a_scratch_run_at_once_and_keep_their_own(micro_run, tmp_path):
    """The issue's repro: A (micro) and B (micro, toy_swh_1 at lr 3e-3) with one scratch, two Snakemake processes
    at once. Before: B's SFT removed A's checkpoints.json and A's rerun adopted B's expert. Now both finish, each
    with the tables of its own clean run (A: the micro run's; B: the micro run rerun with B's config), and the
    scratch holds one namespace per folder with each one's own experts."""
    scratch = tmp_path / "scratch"
    conf_a = write_config(tmp_path / "a.yaml", with_scratch(scratch))
    conf_b = write_config(tmp_path / "b.yaml", with_scratch(scratch, toy_swh_1=3.0e-3))
    a, b = tmp_path / "a", tmp_path / "b"
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "snakemake", "-s", str(SNAKEFILE), "--directory", str(work)]
            + ["--configfile", str(conf), "--cores", "1"],
            env=ENV,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for work, conf in ((a, conf_a), (b, conf_b))
    ]
    outs = [p.communicate(timeout=HANG_GUARD)[0] for p in procs]
    for p, out in zip(procs, outs):
        assert p.returncode == 0, out[-3000:]

    # B's clean run: the micro run's folder (no scratch) rerun with B's lr (reruns are exact: docs/RERUNS.md)
    clean_b = tmp_path / "clean_b"
    shutil.copytree(micro_run.parent, clean_b, symlinks=True, ignore=shutil.ignore_patterns("locks"))
    plain_b = write_config(tmp_path / "plain_b.yaml", set_in(["sft", "runs", "toy_swh_1", "lr"], 3.0e-3))
    proc = run_snakemake(SNAKEFILE, clean_b, plain_b, "--cores", "2")
    assert proc.returncode == 0, proc.stderr[-3000:]

    assert _tables(a / R) == _tables(micro_run)
    assert _tables(b / R) == _tables(clean_b / R)
    assert _tables(a / R) != _tables(b / R)  # B's lr changes what the tables read: the comparison can tell
    namespaces = sorted(p.name for p in scratch.iterdir())
    assert namespaces == sorted([read_id(a / R), read_id(b / R)])
    for work, lr in ((a, 1.0e-3), (b, 3.0e-3)):
        big = Layout(big=f"{scratch}/{read_id(work / R)}")
        meta = json.loads(Path(big.checkpoints_record("toy_swh_1")).read_text())
        assert meta["params"]["lr"] == lr, meta["params"]


def test_a_namespace_recorded_for_another_id_is_refused_and_its_command_works(tmp_path):
    scratch = tmp_path / "scratch"
    a = tmp_path / "a" / R
    ns, _ = claim(str(scratch), a)
    (Path(ns) / OWNER).write_text(json.dumps({"id": "0" * 16, "results": str(a.resolve())}))
    with pytest.raises(UserError, match=r"owner.json: names id 0{16}, not") as err:
        claim(str(scratch), a)
    (command,) = [c for c in _backticked(str(err.value)) if c.startswith("mv ")]
    subprocess.run(command, shell=True, check=True, cwd=tmp_path)
    assert claim(str(scratch), a)[0] == ns and json.loads((Path(ns) / OWNER).read_text())["id"] == read_id(a)


def test_an_owner_record_edited_to_name_a_copy_never_tells_the_owner_to_give_its_namespace_away(tmp_path):
    """The namespace's record edited to name a later copy of the folder (both carry the id): the folder that made
    the namespace is told to keep it and the copy to take its own id; the command works as printed."""
    scratch = tmp_path / "scratch"
    a = tmp_path / "a" / R
    ns_a, _ = claim(str(scratch), a)
    copy = tmp_path / "copy" / R
    shutil.copytree(a, copy)  # its marker is a new file: a later inode change time
    owner = Path(ns_a) / OWNER
    owner.write_text(json.dumps({"id": read_id(a), "results": str(copy.resolve())}))  # the forged record
    with pytest.raises(UserError) as err:
        claim(str(scratch), a)
    line = str(err.value)
    assert "\n" not in line and "this folder keeps its namespace" in line and str(a / MARKER) not in line, line
    (command,) = [c for c in _backticked(line) if c.startswith("rm ")]
    assert str(copy.resolve() / MARKER) in command
    subprocess.run(command, shell=True, check=True)
    assert claim(str(scratch), a)[0] == ns_a  # the owner runs on, in its namespace, and the record names it again
    assert json.loads(owner.read_text())["results"] == str(a.resolve())
