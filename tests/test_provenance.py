"""Provenance that travels with results/ (issue 35, layerswap/audit/provenance.py): a finished micro run's results
moved without `.snakemake/` rerun what a config edit changes, as in the folder they came from, and nothing when the
config is the same; a result with no provenance stops the run with one line; files of a previous config are named
as not from this config, kept out of the manifest's files and removed by `layerswap audit --remove-foreign`."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import MICRO, REPO
from test_staleness import planned, run_snakemake, set_in, write_config

from layerswap.layout import LOGS, Layout, R

pytestmark = pytest.mark.workflow

SNAKEFILE = REPO / "Snakefile"
L = Layout()
ENV = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}


def moved(micro_run: Path, dest: Path) -> Path:
    """The results folder alone, copied with its files' modification times (`cp -a`), into a new folder."""
    shutil.copytree(micro_run, dest / R, symlinks=True)
    return dest


def layerswap(work: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "layerswap.cli", *args], cwd=work, env=ENV, capture_output=True, text=True, timeout=600
    )


def plan_jobs(work: Path, configfile: Path) -> tuple[set[str], str]:
    """`layerswap plan --list-jobs`: the jobs it lists (all and manifest aside) and its output."""
    proc = layerswap(work, "plan", "--list-jobs", "-s", str(SNAKEFILE), "--configfile", str(configfile))
    assert proc.returncode == 0, proc.stderr[-3000:]
    jobs = {m.group(1) for m in re.finditer(r"^  (\S+): ", proc.stdout, re.M)}
    return {j for j in jobs if not j.startswith("manifest")}, proc.stdout


def test_moved_results_rerun_what_a_config_edit_changed(micro_run, tmp_path):
    """The issue's repro: `cp -a` of results/ into a fresh folder, `bottom: 2` for swap_default: the same jobs as
    in the original folder (its recipes, their evaluations, what reads them), and `layerswap plan` agrees."""
    edited = write_config(tmp_path / "bottom2.yaml", set_in(["merges", "configs", "swap_default", "bottom"], 2))
    original = planned(SNAKEFILE, micro_run.parent, edited)
    work = moved(micro_run, tmp_path / "moved")
    from_plan, text = plan_jobs(work, edited)
    assert "provenance: " in text and "put back into .snakemake/metadata" in text
    assert "merge_recipes[cfg=swap_default,lang=toy_swh]" in original
    assert from_plan == original
    assert planned(SNAKEFILE, work, edited) == original
    # and the real run rebuilds them: the recipes have bottom 2
    proc = run_snakemake(SNAKEFILE, work, edited, "--cores", "2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    recipe = json.loads((work / L.recipe("swap_default", "toy_swh", "l1m1")).read_text())
    assert '"bottom": 2' in json.dumps(recipe)
    assert planned(SNAKEFILE, work, edited) == set()


def test_moved_results_with_the_same_config_rerun_nothing(micro_run, tmp_path):
    work = moved(micro_run, tmp_path / "moved")
    proc = run_snakemake(SNAKEFILE, work, MICRO, "--dry-run")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Nothing to be done" in proc.stdout + proc.stderr
    jobs, text = plan_jobs(work, MICRO)
    assert jobs == set() and "Nothing to do" in text


def test_a_result_without_provenance_stops_the_run_with_one_line(micro_run, tmp_path):
    """Moved, then a result rewritten by hand: neither .snakemake/ nor the manifest says what made it. Snakemake
    would call it up to date; the run stops with one line naming it and the commands; plan says the same;
    `--touch --forcerun` records it as this config's, after which nothing reruns."""
    work = moved(micro_run, tmp_path / "moved")
    summary = work / L.table("summary", "md")
    summary.write_text(summary.read_text() + "\nmy note\n")
    proc = run_snakemake(SNAKEFILE, work, MICRO, "--dry-run")
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(
        "provenance: 1 result(s) have no record of the job that made them (results/tables/summary.md)"
    )
    # the commands are this run's own (less its --dry-run): tests/test_scratch_sharing.py runs one as printed
    forced = f"--forcerun {L.table('summary', 'md')}`"
    assert f"--configfile {MICRO} --cores 1 {forced}" in last and f"--cores 1 --touch {forced}" in last
    plan = layerswap(work, "plan", "-s", str(SNAKEFILE), "--configfile", str(MICRO))
    said = plan.stderr.strip()
    assert plan.returncode == 1 and said.startswith("layerswap plan: error: provenance: "), said
    assert said.split("; rebuild them: ")[0] == f"layerswap plan: error: {last.split('; rebuild them: ')[0]}"
    assert f"snakemake -s {SNAKEFILE} --configfile {MICRO} {forced}" in said  # plan's own options
    proc = run_snakemake(SNAKEFILE, work, MICRO, "--touch", "--forcerun", L.table("summary", "md"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert planned(SNAKEFILE, work, MICRO) == set()


def test_a_previous_configs_files_are_foreign(micro_run, tmp_path):
    """Micro, then micro with ties_d05 renamed in the same folder: the old name's recipes and evaluations are
    named before the run (those its records no longer list), are not the new manifest's files, are named by the
    audit and removed by `layerswap audit --remove-foreign`; the tables name only the new config."""
    work = tmp_path / "work"
    shutil.copytree(micro_run.parent, work, symlinks=True, ignore=shutil.ignore_patterns("locks"))
    renamed = tmp_path / "renamed.yaml"
    renamed.write_text(MICRO.read_text().replace("ties_d05", "ties_half"))
    old = sorted(
        str(p.relative_to(work))
        for p in (work / R).rglob("*")
        if p.is_file() and "ties_d05" in str(p) and f"/{LOGS}/" not in str(p)
    )
    assert len(old) == 20  # 4 recipes, 4 evaluations + sample logs, 4 Table 2 evaluations + sample logs
    proc = run_snakemake(SNAKEFILE, work, renamed, "--cores", "2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    # before the run all 20 are named, the Table 2 evaluations too, though Table 2's record (rebuilt by the run)
    # still lists them (issue 43: it named 12)
    assert "provenance: 20 file(s) under results/ are not from this config (results/evals/" in proc.stderr
    manifest = json.loads((work / L.manifest()).read_text())
    assert sorted(manifest["foreign"]) == old
    assert not [p for p in manifest["files"] if "ties_d05" in p]
    assert not [j for j in manifest["jobs"] if "ties_d05" in json.dumps(manifest["jobs"][j])]
    assert "ties_d05" not in (work / L.table("table1", "csv")).read_text()
    audit = layerswap(work, "audit")
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert [l.split(" ")[1] for l in audit.stdout.splitlines() if l.startswith("foreign: ")] == old
    assert "20 files not from this config" in audit.stdout.splitlines()[-1]
    removed = layerswap(work, "audit", "--remove-foreign")
    assert removed.returncode == 0 and "20 files not from this config removed" in removed.stdout
    assert not [p for p in (work / R).rglob("*ties_d05*") if LOGS not in p.parts]
    again = layerswap(work, "audit")
    assert again.returncode == 0 and "foreign" not in again.stdout


def test_remove_foreign_deletes_only_what_the_manifest_named_with_those_bytes(tmp_path, monkeypatch, capsys):
    """`layerswap audit --remove-foreign`: the foreign files with the recorded bytes go, and the folders they leave
    empty; a foreign file changed since is named and left; the run's own files are untouched."""
    from layerswap.cli import main
    from layerswap.fingerprint import file_sha256

    monkeypatch.chdir(tmp_path)
    table, mine = L.table("table1", "csv"), "results/merges/mine.json"  # mine: no kind of file of the layout
    files = {table: "a\n", L.recipe("old", "x", "l1m1"): "{}\n", L.recipe("old", "x", "l1m2"): "{}\n", mine: "[]\n"}
    for rel, text in files.items():
        Path(rel).parent.mkdir(parents=True, exist_ok=True)
        Path(rel).write_text(text)
    entry = lambda rel: {"size": Path(rel).stat().st_size, "sha256": file_sha256(Path(rel))}  # noqa: E731
    manifest = {"root": L.root, "files": {table: entry(table)}, "foreign": {p: entry(p) for p in list(files)[1:]}}
    Path(L.manifest()).write_text(json.dumps(manifest))
    Path(mine).write_text("[1]\n")  # changed after the manifest named it
    assert main(["audit", "--remove-foreign"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:3] == [
        "foreign: results/merges/old/x/l1m1.json (not from this config: no job of it makes this file; removed)",
        "foreign: results/merges/old/x/l1m2.json (not from this config: no job of it makes this file; removed)",
        "foreign: results/merges/mine.json (not from this config; changed since the manifest named it: left, "
        "remove it by hand)",
    ]
    assert not Path(L.recipe_dir("old", "x")).parent.exists() and Path(mine).exists()
    assert Path(table).read_text() == "a\n"
