"""Issue 49's drills on copies of a finished micro run (docs/SECURITY.md): no result outlives its record (a deleted or
damaged manifest, forged evaluation records), the store's provenance travels with the result, the manifest hashes
what is on disk, and a refused manifest job leaves the folder as auditable as it found it. Each ends in one line or
an exact result. The hostile, symlinked and export-taken roots are unit tests (tests/test_audit_security.py)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import MICRO, REPO, snakemake
from test_staleness import set_in, write_config

from layerswap.contracts import merge_model_id
from layerswap.layout import Layout, R

pytestmark = pytest.mark.workflow

L = Layout()
EVAL = L.eval_file(merge_model_id("swap_default", "toy_swh", "l1m1"), "mgsm")
TABLE = L.table("table1", "csv")
KEPT = Path(".snakemake/layerswap/manifest.previous.json")
ENV = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}


@pytest.fixture
def work(micro_run, tmp_path) -> Path:
    """A copy of the finished micro run's work directory (results/ and .snakemake/, times kept)."""
    dest = tmp_path / "work"
    shutil.copytree(micro_run.parent, dest, symlinks=True, ignore=shutil.ignore_patterns("locks"))
    return dest


def layerswap(work: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "layerswap.cli", *args], cwd=work, env=ENV, capture_output=True, text=True, timeout=900
    )


def last_line(text: str) -> str:
    return text.strip().splitlines()[-1]


def edit_score(path: Path, value: float, keep_state: bool = False) -> None:
    """One score of an evaluation file changed by hand; `keep_state`: the same size and modification time after."""
    st = path.stat()
    doc = json.loads(path.read_text())
    doc["scores"][next(iter(doc["scores"]))] = value
    path.write_text(json.dumps(doc, indent=2) + "\n")
    if keep_state:
        assert path.stat().st_size == st.st_size
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def table_only_edit(tmp_path: Path) -> Path:
    """micro.yaml with fewer bootstrap draws: the tables (and the manifest) rerun, nothing before them."""
    return write_config(tmp_path / "draws.yaml", set_in(["analysis", "bootstrap_draws"], 1000))


@pytest.mark.parametrize("damage", ["deleted", "truncated"])
def test_a_missing_or_damaged_manifest_is_no_clean_slate(work, micro_run, damage):
    """A hand-edited evaluation, then the manifest deleted or truncated: the run read it as empty and rebuilt the
    tables from the edit. Now the manifest's kept copy is put back and the edit stops the run, naming it."""
    manifest = work / L.manifest()
    original = manifest.read_bytes()
    assert (work / KEPT).read_bytes() == original  # the manifest job kept its copy
    edit_score(work / EVAL, 0.75)
    manifest.unlink() if damage == "deleted" else manifest.write_bytes(original[:100])
    proc = snakemake(work)
    assert proc.returncode == 1
    assert f"provenance: {L.manifest()} was " in proc.stderr and "put back from its copy" in proc.stderr
    line = last_line(proc.stderr)
    assert line.startswith(f"provenance: 1 result(s) changed after the job that wrote them ({EVAL})"), line
    assert manifest.read_bytes() == original
    assert (work / TABLE).read_bytes() == (micro_run.parent / TABLE).read_bytes()
    # no copy kept either, where a run finished: one line, nothing runs
    manifest.unlink()
    shutil.rmtree(work / KEPT.parent)
    proc = snakemake(work)
    line = last_line(proc.stderr)
    assert proc.returncode == 1 and line.startswith(f"provenance: {L.manifest()} is missing, though a run finished")
    assert "result(s) here" in line and line.endswith("--forceall`")
    assert (work / TABLE).read_bytes() == (micro_run.parent / TABLE).read_bytes()


def test_a_forged_evaluation_record_is_not_put_back(work, tmp_path):
    """`shots` 1 -> 0 in the params and shell command of every MGSM evaluation job, `.snakemake/` deleted, a config
    saying `shots: 0`: the records were put back and every MGSM file (1-shot) kept. Now each record is checked
    against what its evaluation files record."""
    manifest = work / L.manifest()
    doc = json.loads(manifest.read_text())
    forged = []
    for job in doc["jobs"].values():
        if job["rule"].startswith("evaluate") and '"shots": 1' in (job["shellcmd"] or ""):
            job["params"] = [p.replace('"shots": 1', '"shots": 0') for p in job["params"]]
            job["shellcmd"] = job["shellcmd"].replace('"shots": 1', '"shots": 0')
            forged += job["outputs"]
    assert len(forged) > 10  # every MGSM evaluation job: the base's, the checkpoints', the merges', Table 2's
    manifest.write_text(json.dumps(doc, indent=1, sort_keys=True))
    shutil.rmtree(work / ".snakemake")
    zero = write_config(tmp_path / "shots0.yaml", set_in(["evaluation", "tasks", "mgsm", "shots"], 0))
    proc = snakemake(work, configfile=zero)
    line = last_line(proc.stderr)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert (
        line.startswith("provenance: ") and "does not describe it" in line and "its shots is not the record's" in line
    )
    assert f"and {len(forged) - 1} more" in line and "--forcerun" in line
    assert all(json.loads(p.read_text())["shots"] == 1 for p in (work / L.evals()).rglob("mgsm.json"))


def _poison(work: Path) -> Path:
    """The store entry of EVAL with another score, its key.json's sha256 made to match (a consistent forgery)."""
    digest = hashlib.sha256((work / EVAL).read_bytes()).hexdigest()
    for key_file in (work / L.store()).rglob("key.json"):
        key = json.loads(key_file.read_text())
        if key["files"].get("mgsm.json") == digest and key["model"]["model_id"].endswith("swap_default/toy_swh/l1m1"):
            edit_score(key_file.parent / "mgsm.json", 0.75)
            key["files"]["mgsm.json"] = hashlib.sha256((key_file.parent / "mgsm.json").read_bytes()).hexdigest()
            key_file.write_text(json.dumps(key, indent=1, sort_keys=True) + "\n")
            return key_file.parent
    raise AssertionError("no store entry for " + EVAL)


def test_the_store_provenance_outlives_the_store(work, tmp_path):
    """A poisoned store entry copied into results, then `rm -r results/store` and a table-only edit: the manifest
    lost its `store` section and `--reevaluate-store` passed. Now the fact stays in the manifest, with what
    evaluates the model again."""
    entry = _poison(work)
    (work / EVAL).unlink()  # its job reruns and copies the poisoned entry
    proc = snakemake(work)
    assert proc.returncode == 0, proc.stderr[-3000:]
    before = json.loads((work / L.manifest()).read_text())
    assert before["store"][EVAL]["entry"] == entry.name and entry.name in before["store_entries"]
    shutil.rmtree(work / R / "store")
    proc = snakemake(work, configfile=table_only_edit(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    after = json.loads((work / L.manifest()).read_text())
    assert after["store"][EVAL] == before["store"][EVAL]
    assert after["store_entries"][entry.name] == before["store_entries"][entry.name]
    audit = layerswap(work, "audit")
    assert (
        audit.returncode == 1 and f"store: {EVAL}: copied from entry {entry.name[:16]}…, which is gone" in audit.stdout
    )
    again = layerswap(work, "audit", "--reevaluate-store")
    assert again.returncode == 1
    assert f"store: {EVAL}: differs from a fresh evaluation of merge/swap_default/toy_swh/l1m1" in again.stdout


def test_the_manifest_hashes_what_is_on_disk_and_a_refusal_keeps_it(work, micro_run, tmp_path):
    """An in-place edit with the modification time set back (the verify-once cache knows the file's state): the
    manifest job took the cached sha256 and recorded a hash the file does not have. Now it hashes the bytes, refuses
    to record an edit whose job did not rerun, and the manifest the run started with is put back."""
    draws = table_only_edit(tmp_path)
    proc = snakemake(work, configfile=draws)  # this folder's file states are now in the verify-once cache
    assert proc.returncode == 0, proc.stderr[-3000:]
    started = (work / L.manifest()).read_bytes()
    edit_score(work / EVAL, 1.0, keep_state=True)
    proc = snakemake(work)  # the tables rerun (draws back to 2000), then the manifest job
    assert proc.returncode == 1
    assert "manifest.json was missing after the failed run; the manifest it started with is put back" in proc.stderr
    log = (work / L.log("manifest")).read_text()
    assert f"{EVAL}: sha256 " in last_line(log) and "did not rerun: not recorded" in last_line(log)
    assert (work / L.manifest()).read_bytes() == started
    audit = layerswap(work, "audit")
    assert audit.returncode == 1 and f"changed: {EVAL} " in audit.stdout
    # the repair the job's line names restores the clean run's results
    repair = layerswap(
        work,
        "audit",
        "--repair",
        "--run",
        "--",
        "-s",
        str(REPO / "Snakefile"),
        "--configfile",
        str(MICRO),
        "--cores",
        "2",
    )
    assert repair.returncode == 0, repair.stdout[-2000:] + repair.stderr[-2000:]
    assert (work / EVAL).read_bytes() == (micro_run.parent / EVAL).read_bytes()
    assert (work / TABLE).read_bytes() == (micro_run.parent / TABLE).read_bytes()
