"""What the audit guarantees against a careless user, a damaged folder and a hostile manifest (issue 43,
docs/SECURITY.md): manifest paths confined, results edited after their job never laundered, records put back
cross-checked, and the config values that would break jobs later refused by `check-config`."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import yaml

from layerswap.audit import manifest as manifest_mod
from layerswap.audit.check import Drift
from layerswap.audit.confine import confine
from layerswap.audit.provenance import edited
from layerswap.audit.records import mismatch
from layerswap.audit.repair import plan
from layerswap.cli import main
from layerswap.errors import UserError
from layerswap.fingerprint import file_sha256

try:
    from tests.test_switch import grid  # noqa: F401 (fixture)
except ImportError:  # lm_eval or torch missing: the store test is skipped
    pass

try:
    from conftest import MICRO
except ImportError:  # tests/ made a package
    from tests.conftest import MICRO


# ------------------------------------------------------------------------------------ a hostile manifest (item 5)
def _sha(path: Path) -> dict:
    return {"size": path.stat().st_size, "sha256": file_sha256(path)}


@pytest.fixture
def folder(tmp_path, monkeypatch) -> Path:
    """A results folder with one result and a manifest of it, beside a victim file and folder; cwd: the work dir."""
    work = tmp_path / "work"
    (work / "results" / "tables").mkdir(parents=True)
    table = work / "results" / "tables" / "t.csv"
    table.write_text("a,b\n1,2\n")
    (tmp_path / "victim.txt").write_text("precious\n")
    (tmp_path / "victimdir").mkdir()
    (tmp_path / "victimdir" / "data.bin").write_text("precious too\n")
    monkeypatch.chdir(work)
    return work


def _write(work: Path, **extra) -> Path:
    table = Path("results/tables/t.csv")
    m = {
        "format": 3,
        "root": "results",
        "files": {str(table): {**_sha(table), "job": "tables:results/tables/t.csv"}},
        "jobs": {
            "tables:results/tables/t.csv": {
                "rule": "tables",
                "params": [],
                "outputs": [str(table)],
                "snakemake": {"endtime": {str(table): table.stat().st_mtime}},
            }
        },
        "foreign": {},
    }
    for key, value in extra.items():
        m[key] = {**m[key], **value} if isinstance(m.get(key), dict) else value
    path = work / "results" / "manifest.json"
    path.write_text(json.dumps(m))
    return path


def _one_line_refusal(capsys, argv) -> str:
    assert main(argv) == 1
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and "refused" in err[0], captured
    return err[0]


def test_remove_foreign_refuses_a_path_outside_the_results_root(folder, capsys):
    victim = folder.parent / "victim.txt"
    _write(folder, foreign={"../victim.txt": _sha(victim)})
    line = _one_line_refusal(capsys, ["audit", "--remove-foreign"])
    assert "'../victim.txt'" in line and "outside its results root" in line
    assert victim.read_text() == "precious\n"


def test_repair_refuses_files_under_a_folder_outside_the_root(folder, capsys):
    victim = folder.parent / "victimdir" / "data.bin"
    job = {
        "rule": "sft",
        "params": [],
        "outputs": ["../victimdir/checkpoints.json"],
        "snakemake": {"endtime": {}},
    }
    _write(
        folder,
        files={
            "../victimdir/data.bin": {"size": 1, "sha256": "0" * 64, "job": "sft:x"},
            "../victimdir/layerswap_meta.json": {"size": 1, "sha256": "0" * 64, "job": "sft:x"},
        },
        jobs={"sft:x": job},
    )
    line = _one_line_refusal(capsys, ["audit", "--repair", "--run"])
    assert "../victimdir/" in line
    assert victim.read_text() == "precious too\n"
    # and the repair plan itself never removes outside the root, whoever calls it: the layout names no job's output
    # there, so the file is named and left, and nothing runs
    from layerswap.audit.confine import Roots

    roots = Roots(Path("results"), (Path.cwd() / "results",), ((Path.cwd() / "results").resolve(),))
    from layerswap.audit.repair import repair

    assert not repair(
        json.loads(Path("results/manifest.json").read_text()),
        [Drift("changed", "../victimdir/data.bin")],
        [],
        True,
        roots,
    )
    assert "../victimdir/data.bin: the results layout names no job's output there" in capsys.readouterr().out
    assert victim.exists()


@pytest.mark.parametrize(
    "path", ["../../../../etc/passwd", "/etc/passwd", "results/../../victim.txt", "results/../results/../x"]
)
def test_audit_never_reads_a_path_outside_the_root(folder, capsys, path, monkeypatch):
    read = []
    monkeypatch.setattr("layerswap.audit.check.file_sha256", lambda p: read.append(p) or "0" * 64)
    _write(folder, files={path: {"size": 1, "sha256": "0" * 64, "job": None}})
    line = _one_line_refusal(capsys, ["audit"])
    assert repr(path) in line and not read


def test_a_symlink_out_of_the_root_is_outside(folder, capsys):
    os.symlink(folder.parent / "victimdir", folder / "results" / "link")
    _write(folder, foreign={"results/link/data.bin": {"size": 13, "sha256": "0" * 64}})
    _one_line_refusal(capsys, ["audit", "--remove-foreign"])
    assert (folder.parent / "victimdir" / "data.bin").exists()


@pytest.mark.parametrize("root", ["..", "../work/results/..", "/"])
def test_a_root_outside_the_working_directory_is_refused(folder, capsys, root):
    _write(folder, root=root)
    _one_line_refusal(capsys, ["audit"])


# ----------------------------------------------- the results root is the command's, not the manifest's (issue 49)
def _sha_of(path: str) -> dict:
    return _sha(Path(path))


def test_a_hostile_root_never_reaches_the_working_directory(folder, capsys):
    """`"root": "."`: `--remove-foreign` deleted a file of the working directory, and `--repair --run` ran `rm -r .`
    (a `files` entry with a `layerswap_meta.json` beside it). Now the manifest's root must be the command's."""
    Path("victim.txt").write_text("precious\n")
    Path("layerswap_meta.json").write_text("{}\n")
    _write(folder, root=".", foreign={"victim.txt": _sha_of("victim.txt")})
    line = _one_line_refusal(capsys, ["audit", "--remove-foreign"])
    assert "its results root '.' is not the results folder this command works on (results)" in line
    _write(
        folder,
        root=".",
        files={
            "victim.txt": {"size": 1, "sha256": "0" * 64, "job": "tables:results/tables/t.csv"},
            "layerswap_meta.json": {**_sha_of("layerswap_meta.json"), "job": "tables:results/tables/t.csv"},
        },
    )
    _one_line_refusal(capsys, ["audit", "--repair", "--run"])
    for root in (".", "results/.."):  # nor may the command itself be pointed at the working directory
        assert "the working directory or a folder above it" in _one_line_refusal(capsys, ["audit", "--root", root])
    assert Path("victim.txt").read_text() == "precious\n" and Path("results/tables/t.csv").is_file()


def test_a_root_reached_through_a_symlink_inside_results_is_refused(folder, tmp_path, capsys):
    """`results/evil -> elsewhere` and `"root": "results/evil"`: the link's target became an allowed root and
    `--remove-foreign` deleted the file there."""
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "tables").mkdir(parents=True)
    victim = elsewhere / "tables" / "t.csv"  # named as a layout would name a table
    victim.write_text("precious\n")
    os.symlink(elsewhere, "results/evil")
    _write(folder, root="results/evil", foreign={"results/evil/tables/t.csv": _sha(victim)})
    line = _one_line_refusal(capsys, ["audit", "--remove-foreign"])
    assert "its results root 'results/evil' is not the results folder" in line
    _write(folder, foreign={"results/evil/tables/t.csv": _sha(victim)})  # the right root, a path through the link
    assert "outside its results root" in _one_line_refusal(capsys, ["audit", "--remove-foreign"])
    assert victim.read_text() == "precious\n"


def test_the_root_is_never_taken_for_an_export_folder(folder, capsys):
    """`files` naming `results/layerswap_meta.json` (root `results`): `--repair --run` took the root for an export
    and ran `rm -r results`. An export folder is one the layout names; a file the layout names as no job's output
    is named and left."""
    Path("results/layerswap_meta.json").write_text("{}\n")
    job = "tables:results/tables/t.csv"
    _write(folder, files={"results/layerswap_meta.json": {"size": 1, "sha256": "0" * 64, "job": job}})
    assert main(["audit", "--repair", "--run"]) == 1
    out = capsys.readouterr()
    assert "repair: changed results/layerswap_meta.json: the results layout names no job's output there" in out.out
    assert "rm " not in out.out and "repair: nothing to rebuild" in out.out
    assert Path("results/layerswap_meta.json").is_file() and Path("results/tables/t.csv").is_file()
    # a checkpoint export the layout names is still removed first, and only it
    from layerswap.audit.confine import Roots

    ckpt = Path("results/experts/r/s0000016")
    ckpt.mkdir(parents=True)
    for name in ("model.safetensors", "layerswap_meta.json"):
        (ckpt / name).write_text("w\n")
    m = json.loads(_write(folder).read_text())
    m["files"].update(
        {
            str(ckpt / n): {"size": 2, "sha256": "0" * 64, "job": "sft:x"}
            for n in ("model.safetensors", "layerswap_meta.json")
        }
    )
    m["jobs"]["sft:x"] = {"rule": "sft", "params": [], "outputs": ["results/experts/r/checkpoints.json"]}
    p = plan(m, [Drift("changed", str(ckpt / "model.safetensors"))])
    assert p.remove == [str(ckpt)] and p.targets == ["results/experts/r/checkpoints.json"]
    roots = Roots(Path("results"), (Path.cwd() / "results",), ((Path.cwd() / "results").resolve(),))
    assert roots.removable(ckpt, folder=True) is None
    assert roots.removable("results", folder=True) and roots.removable("results/experts/r", folder=True)
    assert roots.removable("results/layerswap_meta.json") and roots.removable("results/manifest.json")
    assert roots.removable("results/tables/t.csv") is None


def test_a_confined_manifest_audits_as_before(folder, capsys):
    _write(folder)
    assert main(["audit"]) == 0
    assert "1 files match" in capsys.readouterr().out
    roots = confine(json.loads(Path("results/manifest.json").read_text()), Path("results/manifest.json"), extra=[])
    assert roots.inside("results/tables/t.csv") and not roots.inside("results/../x")


def test_a_storage_root_is_allowed(folder, tmp_path):
    scratch = tmp_path / "scratch"
    (scratch / "ckpt").mkdir(parents=True)
    (scratch / "ckpt" / "w.bin").write_text("w")
    path = _write(folder, files={str(scratch / "ckpt" / "w.bin"): {"size": 1, "sha256": "0" * 64, "job": None}})
    m = json.loads(path.read_text())
    confine(m, path, extra=[scratch])
    with pytest.raises(UserError, match="outside its results root"):
        confine(m, path, extra=[])


# ------------------------------------------------------------------------ an edited result is never laundered (1)
def test_an_edited_result_is_found_before_the_run_by_time_then_bytes(folder):
    path = _write(folder)
    m = json.loads(path.read_text())
    meta = folder / ".snakemake" / "metadata"
    assert edited(m, path, meta, Path("results")) == []
    table = Path("results/tables/t.csv")
    later = path.stat().st_mtime + 10
    os.utime(table, (later, later))  # touched, same bytes: not edited
    assert edited(m, path, meta, Path("results")) == []
    table.write_text("a,b\n1,3\n")
    os.utime(table, (later, later))
    assert edited(m, path, meta, Path("results")) == [str(table)]
    # its job is marked incomplete (interrupted): Snakemake reruns it, nothing to stop
    from layerswap.audit.provenance import record_path

    marker = record_path(folder / ".snakemake" / "incomplete", str(table))
    marker.parent.mkdir(parents=True)
    marker.write_text("")
    assert edited(m, path, meta, Path("results"), marker.parent) == []
    marker.unlink()
    # Snakemake's own record written after the file (its job wrote it): not an edit
    record = record_path(meta, str(table))
    record.parent.mkdir(parents=True)
    record.write_text(json.dumps({"rule": "tables", "endtime": later - 5, "job_hash": 1}))
    os.utime(record, (later + 1, later + 1))
    assert edited(m, path, meta, Path("results")) == []
    record.unlink()
    # its job rewrote it since (the record's endtime): not an edit
    m["jobs"]["tables:results/tables/t.csv"]["snakemake"]["endtime"][str(table)] = later
    assert edited(m, path, meta, Path("results")) == []


def test_the_repair_of_an_edited_result_removes_it_first(folder):
    path = _write(folder)
    m = json.loads(path.read_text())
    p = plan(m, [Drift("changed", "results/tables/t.csv")])
    assert p.remove == ["results/tables/t.csv"] and p.targets == ["results/tables/t.csv"]
    assert p.shell(["--cores", "1"]).startswith("rm results/tables/t.csv && ")


def test_the_manifest_job_refuses_to_launder(folder, tmp_path, monkeypatch):
    path = _write(folder)
    previous = json.loads(path.read_text())
    table = "results/tables/t.csv"
    new = json.loads(json.dumps(previous))
    new["files"][table]["sha256"] = "f" * 64
    assert manifest_mod.laundered(new, previous) == [table]
    keep = tmp_path / "previous.json"
    keep.write_text(json.dumps(previous))
    with pytest.raises(UserError) as err:
        manifest_mod.refuse_laundering(new, keep)
    assert table in str(err.value) and "--repair --run" in str(err.value) and "\n" not in str(err.value)
    # inside a run, the line names that run's own Snakemake options (set by rules/common.smk, inherited by the job),
    # less a dry run's flags, so the command works as printed
    monkeypatch.setenv("LAYERSWAP_RUN_OPTIONS", "--configfile 'my config.yaml' --cores 4 -n")
    with pytest.raises(UserError) as err:
        manifest_mod.refuse_laundering(new, keep)
    assert str(err.value).endswith("--repair --run -- --configfile 'my config.yaml' --cores 4`")
    # the job reran (a new endtime): its new bytes are recorded
    new["jobs"]["tables:results/tables/t.csv"]["snakemake"]["endtime"][table] += 5
    assert manifest_mod.laundered(new, previous) == []
    manifest_mod.refuse_laundering(new, keep)
    manifest_mod.refuse_laundering(new, tmp_path / "none.json")  # a first run: nothing to compare with


def test_the_manifest_hashes_what_is_on_disk(tmp_path, monkeypatch):
    """Issue 49: the manifest took a sha256 from the verify-once cache, keyed by (device, inode, size, mtime), so an
    edit in place with the time set back was recorded with a hash the file does not have. Its own states include
    the ctime, which no edit can set back: an untouched file is not read again, an edited one always is."""
    from layerswap.audit import files

    monkeypatch.setattr(files, "RACY_SECONDS", -1.0)  # no timestamp tick to wait for here
    read = []
    monkeypatch.setattr(files, "file_sha256", lambda p: read.append(p) or file_sha256(p))
    table = tmp_path / "t.csv"
    table.write_text("a,b\n1,2\n")
    states: dict = {}
    first = files.hash_files([table], states)
    assert first[str(table)]["sha256"] == file_sha256(table) and len(read) == 1
    assert files.hash_files([table], states) == first and len(read) == 1  # the same state: not read again
    st = table.stat()
    table.write_text("a,b\n1,3\n")  # the same size
    os.utime(table, ns=(st.st_atime_ns, st.st_mtime_ns))  # and the time set back: the verify-once cache's key
    from layerswap.hashcache import state

    assert state(table, table.stat()) == state(table, st)
    assert files.hash_files([table], states)[str(table)]["sha256"] == file_sha256(table) != first[str(table)]["sha256"]
    assert len(read) == 2
    assert files.hash_files([table])[str(table)]["sha256"] == file_sha256(table)  # no states: always read


# ---------------------------------------------------------------------- records put back are cross-checked (4)
def test_a_recipe_record_is_checked_against_the_recipe(tmp_path):
    recipe = tmp_path / "l1m1.json"
    recipe.write_text(json.dumps({"method": "layer_swap", "base": "b", "inputs": {}, "params": {"bottom": 1}}))
    word = "'" + json.dumps({"method": "layer_swap", "bottom": 1}) + "'"
    params = [repr("0123456789abcdef"), repr(word)]
    assert mismatch("merge_recipes", params, str(recipe)) is None
    forged = [repr("0123456789abcdef"), repr(word.replace('"bottom": 1', '"bottom": 2'))]
    assert "params" in mismatch("merge_recipes", forged, str(recipe))
    assert mismatch("tables", forged, str(recipe)) is None  # outputs that carry no params: not compared here


@pytest.mark.parametrize(
    "rule, name, content, honest, forged",
    [
        ("sft", "checkpoints.json", {"params": {"lr": 0.001}, "checkpoints": []}, {"lr": 0.001}, {"lr": 0.003}),
        ("select", "math.json", {"top_k": 2, "kind": "math", "candidates": []}, {"top_k": 2}, {"top_k": 1}),
        ("config_used", "config_used.yaml", {"seed": 1, "world": "toy"}, {"seed": 1, "world": "toy"}, {"seed": 2}),
    ],
)
def test_records_of_experts_selections_and_the_config_are_checked(tmp_path, rule, name, content, honest, forged):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(content) if name.endswith(".yaml") else json.dumps(content))

    def params(obj):
        return [repr("0123456789abcdef"), repr("'" + json.dumps(obj) + "'")]

    assert mismatch(rule, params(honest), str(path)) is None
    assert mismatch(rule, params(forged), str(path)) is not None


def _evaluation_record(benchmarks: dict, seed: int = 0, index: str | None = None) -> tuple[list, str]:
    """(params, shell command) of an evaluation job's record, as Snakemake keeps them (sorted reprs)."""
    word = "'" + json.dumps(benchmarks) + "'"
    params = sorted([repr(""), repr("87bf81aaa502dd5c"), repr(word), repr("hf"), repr("toy"), str(seed), "16"])
    shell = (
        f"layerswap evaluate --data-dir results/data/eval --benchmarks-json {word} --model base=results/base "
        f"--out-dir results/evals --batch-size 16 --seed {seed} --task-set toy --backend hf --threads 1 "
        + (f"--index {index} " if index else "")
        + "--store results/store/evals > results/logs/evaluate/base.log 2>&1"
    )
    return params, shell


def test_an_evaluation_record_is_checked_against_its_files(tmp_path):
    """Issue 49: what an evaluation file records of its job (shots, limit, task keys, seed, budget, code off, backend)
    must be the record's, for a declared file and for each file an index lists; a record whose params and shell
    command disagree is refused too."""
    doc = {
        "model_id": "base",
        "benchmark": "mgsm",
        "scores": {"en": 0.5, "toy_swh": 0.25},
        "shots": 1,
        "lm_eval_tasks": {"en": "toy_mgsm_en", "toy_swh": "toy_mgsm_toy_swh"},
        "seed": 0,
        "limit": None,
    }
    path = tmp_path / "mgsm.json"
    path.write_text(json.dumps(doc))
    honest = {"mgsm": {"languages": ["en", "toy_swh"], "limit": None, "shots": 1}}
    assert (
        mismatch("evaluate_base_select", *_evaluation_record(honest)[:1], str(path), _evaluation_record(honest)[1])
        is None
    )
    for forged, why in [
        ({"mgsm": {**honest["mgsm"], "shots": 0}}, "its shots is not the record's"),
        ({"mgsm": {**honest["mgsm"], "limit": 4}}, "its limit is not the record's"),
        ({"mgsm": {**honest["mgsm"], "languages": ["toy_swh"]}}, "its languages is not the record's"),
        ({"mgsm": {**honest["mgsm"], "max_new_tokens": 8}}, "its max_new_tokens is not the record's"),
        ({"belebele": {"shots": 0}}, "its benchmark 'mgsm' is not one the record evaluates"),
    ]:
        params, shell = _evaluation_record(forged)
        assert mismatch("evaluate_base_select", params, str(path), shell) == why
    params, shell = _evaluation_record(honest, seed=1)
    assert mismatch("evaluate_base_select", params, str(path), shell) == "its seed is not the record's"
    params, _ = _evaluation_record({"mgsm": {**honest["mgsm"], "shots": 0}})  # params forged, shell command not
    assert "not its params'" in mismatch("evaluate_base_select", params, str(path), _evaluation_record(honest)[1])
    # an index (checkpoint evaluations, Table 2's): each file it lists
    index = tmp_path / "index.json"
    index.write_text(json.dumps({"run": "r", "files": {"ckpt/r/s1": {"mgsm": str(path)}}}))
    params, shell = _evaluation_record({"mgsm": {**honest["mgsm"], "shots": 0}}, index=str(index))
    assert mismatch("evaluate_checkpoints", params, str(index), shell) == f"{path}: its shots is not the record's"
    # the leaders' index: a job with another JSON param (its selection params) beside --benchmarks-json
    select = "'" + json.dumps({"top_k": 3, "on_no_pass": "best"}) + "'"
    for benchmarks, why in (
        (honest, None),
        ({"mgsm": {**honest["mgsm"], "shots": 0}}, "its shots is not the record's"),
    ):
        params, shell = _evaluation_record(benchmarks, index=str(index))
        shell = shell.replace("layerswap evaluate ", "layerswap evaluate-leaders ") + f" --params-json {select}"
        got = mismatch("evaluate_checkpoint_leaders", sorted([*params, repr(select)]), str(index), shell)
        assert got == (why and f"{path}: {why}")
    # code off: MBPP says it did not run model-written code; a record saying execute_code true does not describe it
    mbpp = tmp_path / "mbpp.json"
    mbpp.write_text(
        json.dumps(
            {
                **doc,
                "benchmark": "mbpp",
                "shots": 0,
                "skipped": "mbpp not run: it executes model-written code, which is off",
            }
        )
    )
    code = {"mbpp": {"languages": ["en", "toy_swh"], "limit": None, "shots": 0, "execute_code": True}}
    assert mismatch("evaluate_base", *_evaluation_record(code)[:1], str(mbpp), _evaluation_record(code)[1]) == (
        "its execute_code is not the record's"
    )
    # the backend that scored it: the job's --backend, or the benchmark's own backend in --benchmarks-json
    path.write_text(json.dumps({**doc, "backend": "vllm"}))
    params, shell = _evaluation_record(honest)  # --backend hf, MGSM names none
    assert mismatch("evaluate_base_select", params, str(path), shell) == "its backend is not the record's"
    params, shell = _evaluation_record({"mgsm": {**honest["mgsm"], "backend": "vllm"}})
    assert mismatch("evaluate_base_select", params, str(path), shell) is None


def test_records_of_mixes_and_the_toy_base_are_checked(tmp_path):
    """An SFT mix's manifest and the toy base's config and meta carry what made them: a forged record is named."""
    manifest = tmp_path / "math.manifest.json"
    src = {"name": "toy_orca_math", "lang": "en", "schema": "orca_math", "path": "results/data/raw/orca_math.jsonl"}
    manifest.write_text(json.dumps({"seed": 0, "sources": [{**src, "available": 298, "taken": 64}]}))

    def mix(n, seed):
        word = "'" + json.dumps([{**src, "n": n}]) + "'"
        shell = f"layerswap mix --sources-json {word} --seed {seed} --out results/data/sft/math.jsonl"
        return sorted([repr("55cabf371308bb26"), repr(word), str(seed)]), shell

    assert mismatch("sft_mix", *mix(64, 0)[:1], str(manifest), mix(64, 0)[1]) is None
    assert mismatch("sft_mix", *mix(32, 0)[:1], str(manifest), mix(32, 0)[1]) == "its sources is not the record's"
    assert mismatch("sft_mix", *mix(64, 1)[:1], str(manifest), mix(64, 1)[1]) == "its seed is not the record's"
    base = tmp_path / "base"
    base.mkdir()
    (base / "config.json").write_text(json.dumps({"hidden_size": 32, "num_hidden_layers": 4}))
    (base / "layerswap_meta.json").write_text(json.dumps({"seed": 0, "tokens_seen": 10240}))

    def toy(layers, steps):
        model, train = json.dumps({"hidden_size": 32}), json.dumps({"steps": steps, "batch_size": 8, "seq_len": 64})
        shell = f"layerswap toy-base --out results/base --model-json '{model}' --train-json '{train}' " + (
            f"--num-layers {layers} --seed 0"
        )
        return sorted([repr("34ae2953c59df62d"), repr(f"'{model}'"), repr(f"'{train}'"), "0", str(layers)]), shell

    out = str(base / "config.json")
    assert mismatch("toy_base", *toy(4, 20)[:1], out, toy(4, 20)[1]) is None
    assert mismatch("toy_base", *toy(8, 20)[:1], out, toy(8, 20)[1]) == "its num_layers is not the record's"
    assert mismatch("ablation_toy_base", *toy(4, 40)[:1], out, toy(4, 40)[1]) == "its tokens seen is not the record's"


# ------------------------------------------------------------------------------------------- config checks (6)
#: a hang guard, not a speed claim (a check that listed 1e15 checkpoints would never end; one that counts them ends in
#: well under a second on an idle machine): a bound the machine's load cannot reach, so the outcome is not a race
HANG_GUARD_S = 60.0


def _check(tmp_path, edit) -> tuple[int, str, float]:
    config = yaml.safe_load(MICRO.read_text())
    edit(config)
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config))
    main(["check-config", str(MICRO)])  # imports and the schema loaded: what is timed is the check
    start = time.monotonic()
    code = main(["check-config", str(path)])
    return code, time.monotonic() - start


@pytest.mark.parametrize(
    "edit, key",
    [
        (lambda c: c["sft"]["defaults"].update(lr=float("nan")), "sft.defaults.lr"),
        (lambda c: c["sft"]["runs"]["math_1"].update(lr=float("inf")), "sft.runs.math_1.lr"),
        (lambda c: c["selection"]["weights"]["math"].update(mgsm_avg=float("nan")), "selection.weights.math"),
        (
            lambda c: c["merges"]["configs"]["ties_d05"].update(density=float("nan")),
            "merges.configs.ties_d05.density",
        ),
        (lambda c: c["sft"]["defaults"].update(num_samples=1e15), "sft.defaults.num_samples"),
        (lambda c: c["data_sources"]["toy_orca_math"].update(file="/etc/passwd"), "data_sources.toy_orca_math.file"),
        (lambda c: c["data_sources"]["toy_aya"].update(file="../../aya_{lang}.jsonl"), "data_sources.toy_aya.file"),
    ],
)
def test_check_config_refuses_values_that_break_jobs_later(tmp_path, capsys, edit, key):
    code, seconds = _check(tmp_path, edit)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1 and f"config key '{key}" in err[0], err
    assert seconds < HANG_GUARD_S


def test_check_config_counts_checkpoints_without_listing_them(tmp_path, capsys):
    """1000 checkpoints per run is allowed and answered at once; the count is arithmetic."""
    code, seconds = _check(tmp_path, lambda c: c["sft"]["defaults"].update(num_samples=16 * 1000))
    assert code == 0 and seconds < HANG_GUARD_S, capsys.readouterr()


# ----------------------------------------------------------------------------------------------------- cosmetic
def test_a_store_path_blocked_by_a_file_keeps_the_evaluation(request, tmp_path, caplog):
    """`results/store` a file: the store is a cache, so the finished evaluation is kept, and one warning names the
    file that blocks it (issue 43: it named the entry and threw the evaluation away)."""
    pytest.importorskip("lm_eval")
    from tests.test_eval_store import evaluate, files

    grid = request.getfixturevalue("grid")
    blocked = tmp_path / "store"
    blocked.write_text("not a folder\n")
    models = list(grid["recipes"].items())[:1]
    assert evaluate(grid, tmp_path / "a", blocked / "evals", caplog, models) == (0, 1)
    assert f"{blocked} is a file, not a folder" in caplog.text
    assert len(files(tmp_path / "a")) == 2 * 2  # its evaluation files and sample logs
