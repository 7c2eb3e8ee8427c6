"""Nothing lost, everything named (issue 30): `layerswap merge --out` never deletes what it did not write; weights
are checked against the sha256 their run recorded before a merge or an evaluation reads them; operating-system,
encoding and YAML errors are one line naming the file; outputs follow the umask (group-readable)."""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from layerswap.cli import main
from layerswap.errors import UserError

try:
    from test_merge_engine import LANG, TASK, make_ckpt, swap
    from test_robustness import _tensor_offsets, one_line
    from test_tables import PARAMS, make_world
except ImportError:  # tests/ made a package
    from tests.test_merge_engine import LANG, TASK, make_ckpt, swap
    from tests.test_robustness import _tensor_offsets, one_line
    from tests.test_tables import PARAMS, make_world

MARKER = ".layerswap-merge.json"


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under root (hidden ones too) with its bytes (None for a directory)."""
    return {str(p.relative_to(root)): (None if p.is_dir() else p.read_bytes()) for p in sorted(root.rglob("*"))}


def flip_weight_byte(weights: Path) -> None:
    """Change the lowest byte of the first element of the first tensor: a tiny, finite change of one weight."""
    start, header = _tensor_offsets(weights)
    first = min((v["data_offsets"][0], k) for k, v in header.items() if k != "__metadata__")[0]
    data = bytearray(weights.read_bytes())
    data[start + first] ^= 0x01
    weights.write_bytes(bytes(data))


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory with two expert runs (s0000004, s0000008 each), their checkpoints.json (written by
    `layerswap sft`'s own writer), a swap recipe of them, and a folder of someone's notes."""
    from layerswap.train.sft import write_manifest

    monkeypatch.chdir(tmp_path)
    for run, expert in (("math_1", TASK), ("lang_1", LANG)):
        for samples in (4, 8):
            make_ckpt(Path(f"experts/{run}/s{samples:07d}"), 4, expert=expert)
        write_manifest(Path(f"experts/{run}"), {"num_samples": 8, "checkpoint_every": 4})
    recipe = swap("experts/math_1/s0000004", "experts/lang_1/s0000004", bottom=1, top=1)
    Path("r.json").write_text(json.dumps(recipe))
    Path("notes").mkdir()
    Path("notes/todo.txt").write_text("my notes\n")
    return tmp_path


def merge(*args: str) -> int:
    return main(["merge", "--recipe", "r.json", *args])


# ----------------------------------------------------------------------------------- merge --out: never deletes
@pytest.mark.parametrize("force", [False, True])
def test_merge_refuses_a_folder_it_did_not_write(work, capsys, force):
    before = snapshot(work)
    assert merge("--out", "notes", *(["--force"] if force else [])) == 1
    line = one_line(capsys)
    assert "--out notes is not empty and is not a merge output of `layerswap merge`" in line, line
    assert snapshot(work) == before  # nothing changed on disk, no hidden temporary folder either


@pytest.mark.parametrize(
    "out, says",
    [
        ("experts/math_1/s0000004", "--out experts/math_1/s0000004 is an input of this merge"),
        ("experts", "--out experts contains experts/math_1/s0000004, an input of this merge"),
        ("experts/lang_1/s0000004/merged", "is inside experts/lang_1/s0000004, an input of this merge"),
        (".", "--out . is the working directory"),
        ("..", "--out .. is a parent of the working directory"),
        ("/", "--out / is the file system root"),
    ],
)
def test_merge_refuses_its_inputs_and_the_working_directory(work, capsys, out, says):
    before, parent = snapshot(work), sorted(p.name for p in work.parent.iterdir())
    assert merge("--out", out, "--force") == 1
    line = one_line(capsys)
    assert says in line and "nothing was changed" in line, line
    assert snapshot(work) == before
    assert sorted(p.name for p in work.parent.iterdir()) == parent  # no `..old-*` / `.tmp-*` beside it


def test_merge_refuses_the_home_directory_and_the_recipe_folder(work, capsys, monkeypatch):
    home = work / "home"
    home.mkdir()
    (home / ".bashrc").write_text("keep\n")
    monkeypatch.setenv("HOME", str(home))
    before = snapshot(work)
    assert merge("--out", str(home)) == 1
    assert f"--out {home} is the home directory" in one_line(capsys)
    shutil.copy("r.json", "notes/r.json")
    assert main(["merge", "--recipe", "notes/r.json", "--out", "notes", "--force"]) == 1
    assert "--out notes contains notes/r.json, an input of this merge" in one_line(capsys)
    (work / "notes" / "r.json").unlink()
    assert snapshot(work) == before


def test_merge_replaces_a_previous_merge_only_with_force(work, capsys):
    from layerswap.checkpoints import Checkpoint

    assert merge("--out", "m") == 0
    written = json.loads((work / "m" / MARKER).read_text())
    assert written["written_by"] == "layerswap merge" and MARKER not in written["files"]
    assert sorted(written["files"]) == sorted(p.name for p in (work / "m").iterdir() if p.name != MARKER)
    Checkpoint("m").close()  # readers load the directory as before: the marker is a hidden file they never open
    first = snapshot(work / "m")
    assert merge("--out", "m") == 1
    assert f"--out m already holds a merge (recipe {written['recipe_hash']}); add --force" in one_line(capsys)
    assert snapshot(work / "m") == first
    recipe = swap("experts/math_1/s0000008", "experts/lang_1/s0000008", bottom=1, top=1)
    Path("r.json").write_text(json.dumps(recipe))
    assert merge("--out", "m", "--force") == 0
    assert json.loads((work / "m" / MARKER).read_text())["recipe_hash"] != written["recipe_hash"]
    (work / "m" / "README.md").write_text("my model card\n")  # a user's file in a merge output
    second = snapshot(work / "m")
    assert merge("--out", "m", "--force") == 1
    assert "--out m holds README.md, which `layerswap merge` did not write" in one_line(capsys)
    assert snapshot(work / "m") == second


def test_replace_dir_leaves_nothing_when_the_move_fails(tmp_path, monkeypatch):
    """`--out .` on main: the move of the old directory failed after its hidden `.old-*` folder was made."""
    from layerswap import contracts

    out, new = tmp_path / "out", tmp_path / ".out.tmp"
    out.mkdir()
    (out / "old.txt").write_text("old\n")
    new.mkdir()
    real = os.replace
    calls = []

    def failing(src, dst):
        calls.append(src)
        if len(calls) == 2:  # the new directory cannot take the old one's place: the old one goes back
            raise OSError(errno.EXDEV, "Invalid cross-device link", str(src))
        return real(src, dst)

    monkeypatch.setattr(contracts.os, "replace", failing)
    with pytest.raises(OSError):
        contracts.replace_dir(new, out)
    assert (out / "old.txt").read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".out.tmp", "out"]
    calls.clear()
    monkeypatch.setattr(
        contracts.os,
        "replace",
        lambda src, dst: (_ for _ in ()).throw(OSError(errno.EBUSY, "Device or resource busy", str(src))),
    )
    with pytest.raises(OSError):
        contracts.replace_dir(new, out)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".out.tmp", "out"]


# ------------------------------------------------------------------------------ weights checked before use
def test_changed_expert_weights_are_named_before_a_merge(work, capsys):
    weights = work / "experts/lang_1/s0000004/model.safetensors"
    flip_weight_byte(weights)
    assert merge("--out", "m") == 1
    line = one_line(capsys)
    assert line == (
        "layerswap merge: error: experts/lang_1/s0000004/model.safetensors: sha256 differs from "
        "experts/lang_1/checkpoints.json (the file changed after training); rebuild it with: rm -r "
        "experts/lang_1/s0000004 && snakemake --forcerun experts/lang_1/checkpoints.json (with the run's own "
        "options, e.g. --configfile)"
    ), line
    assert not (work / "m").exists()


def test_checkpoint_record_is_checked_against_its_folder(work, capsys):
    """checkpoints.json listing a checkpoint that does not exist, or a checkpoint in the run's folder that it does
    not list: a merge (or evaluation) reading the run refuses it in one line naming both."""
    record = work / "experts/lang_1/checkpoints.json"
    original = record.read_text()
    data = json.loads(original)
    data["checkpoints"].append({**data["checkpoints"][-1], "name": "s0000048", "path": "experts/lang_1/s0000048"})
    record.write_text(json.dumps(data))
    assert merge("--out", "m") == 1
    assert one_line(capsys) == (
        "layerswap merge: error: experts/lang_1/checkpoints.json lists checkpoint s0000048, but "
        "experts/lang_1/s0000048 does not exist; rebuild the run's checkpoints and record with: snakemake "
        "--forcerun experts/lang_1/checkpoints.json (with the run's own options, e.g. --configfile)"
    )
    record.write_text(original)
    shutil.copytree(work / "experts/lang_1/s0000008", work / "experts/lang_1/s0000012")
    assert merge("--out", "m") == 1
    line = one_line(capsys)
    assert line.startswith(
        "layerswap merge: error: experts/lang_1/s0000012: a checkpoint that "
        "experts/lang_1/checkpoints.json does not list"
    ), line
    assert "rm -r experts/lang_1/s0000012" in line and not (work / "m").exists()


def test_each_weight_file_is_hashed_once_per_job(work, monkeypatch):
    from layerswap import fingerprint, hashcache
    from layerswap.checkpoints import Checkpoint
    from layerswap.merge.engine import build_state_dict

    monkeypatch.setattr(hashcache, "_MEMORY", {})  # a job is a fresh process (the fixture's writer hashed them)
    hashed: list[str] = []
    real = fingerprint.file_sha256
    monkeypatch.setattr(fingerprint, "file_sha256", lambda p: (hashed.append(str(p)), real(p))[1])
    recipe = json.loads(Path("r.json").read_text())
    build_state_dict(recipe)
    build_state_dict(recipe)  # a second merge of the same experts (its own cache): nothing hashed again
    Checkpoint("experts/math_1/s0000004").close()
    assert sorted(hashed) == ["experts/lang_1/s0000004/model.safetensors", "experts/math_1/s0000004/model.safetensors"]


def test_a_sharded_checkpoint_is_checked_shard_by_shard(work):
    from layerswap.checkpoints import Checkpoint
    from layerswap.merge.engine import write_merged
    from layerswap.train.sft import write_manifest

    run = work / "experts" / "sharded"
    write_merged(json.loads(Path("r.json").read_text()), str(run / "s0000004"), max_shard_bytes=4000)
    write_manifest(run, {"num_samples": 4, "checkpoint_every": 4})
    entry = json.loads((run / "checkpoints.json").read_text())["checkpoints"][0]
    shards = sorted(n for n in entry["files"] if n.endswith(".safetensors"))
    assert len(shards) > 2
    Checkpoint(str(run / "s0000004")).close()
    flip_weight_byte(run / "s0000004" / shards[1])
    with pytest.raises(UserError, match=f"{shards[1]}: sha256 differs from {run / 'checkpoints.json'}"):
        Checkpoint(str(run / "s0000004"))


@pytest.fixture
def recorded_run(tiny_base, tmp_path) -> Path:
    """The tiny base copied as the one checkpoint of a run, with the run's checkpoints.json."""
    from layerswap.train.sft import write_manifest

    run = tmp_path / "experts" / "run_1"
    shutil.copytree(tiny_base, run / "s0000004")
    write_manifest(run, {"num_samples": 4, "checkpoint_every": 4})
    return run


@pytest.mark.parametrize("command", ["evaluate", "evaluate-merges"])
def test_changed_checkpoint_is_named_before_it_is_evaluated(recorded_run, toy_world, tmp_path, capsys, command):
    """A checkpoint evaluation (`evaluate`) and a merge built in memory (`evaluate-merges`) both refuse it."""
    ckpt = recorded_run / "s0000004"
    model = f"ckpt/run_1/s0000004={ckpt}"
    if command == "evaluate-merges":
        recipe = {
            "method": "soup",
            "base": None,
            "params": {"weighting": "uniform"},
            "inputs": {"models": [str(ckpt), str(ckpt)]},
        }
        (tmp_path / "r.json").write_text(json.dumps(recipe))
        model = f"merge/x={tmp_path / 'r.json'}"
    flip_weight_byte(ckpt / "model.safetensors")
    bench = json.dumps({"mgsm": {"languages": ["en"], "limit": 2, "shots": 0}})
    code = main(
        [
            command,
            "--data-dir",
            str(toy_world / "eval"),
            "--benchmarks-json",
            bench,
            "--model",
            model,
            "--out-dir",
            str(tmp_path / "evals"),
            "--batch-size",
            "4",
            "--threads",
            "1",
        ]
    )
    line = one_line(capsys)
    assert code == 1 and f"{ckpt}/model.safetensors: sha256 differs from {recorded_run}/checkpoints.json" in line
    assert not (tmp_path / "evals").exists()


# --------------------------------------------------------------------------- operating-system errors: one line
@pytest.mark.parametrize(
    "code, says",
    [
        (errno.EACCES, "Permission denied (EACCES); check the owner and mode"),
        (errno.ENOSPC, "No space left on device (ENOSPC); free space there"),
        (errno.EIO, "Input/output error (EIO)"),
    ],
)
def test_os_error_without_a_file_name_names_the_output(work, capsys, monkeypatch, code, says):
    from layerswap import checkpoints

    def failing(file, entries, fill, chunk):
        raise OSError(code, os.strerror(code))  # as a failed write() raises: no file name

    monkeypatch.setattr(checkpoints, "write_shard", failing)
    assert merge("--out", "m") == 1
    line = one_line(capsys)
    assert line.startswith(f"layerswap merge: error: m/model-00001-of-00001.safetensors: {says}"), line
    assert "layerswap --debug merge" in line
    assert sorted(p.name for p in work.iterdir()) == ["experts", "notes", "r.json"]


def test_debug_shows_the_traceback(work, capsys, monkeypatch):
    from layerswap import checkpoints

    monkeypatch.setattr(checkpoints, "write_shard", lambda *a: (_ for _ in ()).throw(OSError(errno.ENOSPC, "No space")))
    assert main(["--debug", "merge", "--recipe", "r.json", "--out", "m"]) == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and err.strip().splitlines()[-1].startswith("layerswap merge:")
    monkeypatch.setenv("LAYERSWAP_DEBUG", "1")
    assert merge("--out", "notes") == 1
    assert "Traceback (most recent call last)" in capsys.readouterr().err


def test_other_exceptions_keep_their_traceback(work, monkeypatch):
    from layerswap import checkpoints

    monkeypatch.setattr(checkpoints, "write_shard", lambda *a: (_ for _ in ()).throw(RuntimeError("a bug")))
    with pytest.raises(RuntimeError, match="a bug"):
        merge("--out", "m")


def test_files_that_are_not_utf8_are_named_with_their_line(work, capsys):
    Path("latin.json").write_bytes(b'{"method": "soup",\n "name": "caf\xe9"}\n')
    assert main(["merge", "--recipe", "latin.json", "--out", "m"]) == 1
    assert one_line(capsys) == (
        "layerswap merge: error: recipe latin.json line 2: not UTF-8 text (byte 0xe9); save it as UTF-8"
    )
    Path("latin.yaml").write_bytes(b"seed: 0\nworld: toy\nname: caf\xe9\n")
    assert main(["check-config", "latin.yaml"]) == 1
    assert one_line(capsys) == (
        "layerswap check-config: error: config file latin.yaml line 3: not UTF-8 text (byte 0xe9); save it as UTF-8"
    )


def test_yaml_errors_and_empty_configs_are_one_line(tmp_path, capsys):
    import yaml

    from layerswap.errors import one_line as describe

    (tmp_path / "bad.yaml").write_text("seed: 0\nlanguages: [toy_swh\nworld: toy\n")
    with pytest.raises(yaml.YAMLError) as err:  # a YAML error no loader turned into a UserError: the handler's line
        yaml.safe_load((tmp_path / "bad.yaml").open())
    assert describe(err.value).startswith(f"{tmp_path / 'bad.yaml'} line 3 column 6: not valid YAML"), describe(
        err.value
    )
    (tmp_path / "empty.yaml").write_text("")
    for name, says in (
        ("bad.yaml", "config file {} line 3 column 6: not valid YAML (did not find expected ',' or ']')"),
        ("empty.yaml", "config file {} is empty; a config is a mapping of keys (see config/config.yaml)"),
    ):
        assert main(["plan", "--configfile", str(tmp_path / name)]) == 1  # before Snakemake's own loader runs
        assert one_line(capsys) == "layerswap plan: error: " + says.format(tmp_path / name)


@pytest.fixture
def tmpfs(tmp_path):
    """Mount a small tmpfs holding someone else's file; yields (mount point, remount read-only). Needs root."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8k", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    (mnt / "theirs.txt").write_text("someone else's file\n")

    def read_only() -> None:
        subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True, capture_output=True)

    try:
        yield mnt, read_only
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def tables_args(tmp_path: Path, out: Path) -> list[str]:
    sel, ev = make_world(tmp_path / "world")
    return [
        "tables",
        "--selection-dir",
        str(sel),
        "--evals-dir",
        str(ev),
        "--params-json",
        json.dumps(PARAMS),
        "--out-dir",
        str(out),
    ]


@pytest.mark.parametrize("fault", ["full", "read-only"])
def test_full_and_read_only_disks_are_one_line_and_lose_nothing(work, capsys, tmpfs, fault):
    mnt, read_only = tmpfs
    (mnt / "tables").mkdir()
    (mnt / "tables" / "notes.md").write_text("theirs\n")
    if fault == "read-only":
        read_only()
    before = snapshot(mnt)
    says = "No space left on device (ENOSPC)" if fault == "full" else "Read-only file system (EROFS)"
    assert merge("--out", str(mnt / "m")) == 1
    line = one_line(capsys)
    assert line.startswith(f"layerswap merge: error: {mnt}/m") and says in line, line
    (work / "world").mkdir()
    assert main(tables_args(work, mnt / "tables")) == 1
    line = one_line(capsys)
    assert line.startswith(f"layerswap tables: error: {mnt}/tables/") and says in line, line
    assert snapshot(mnt) == before  # their files intact, nothing partial or hidden left behind


# ------------------------------------------------------------------------------------ modes follow the umask
@pytest.mark.parametrize("mask, file_mode, dir_mode", [(0o022, 0o644, 0o755), (0o027, 0o640, 0o750)])
def test_exports_and_merges_follow_the_umask(tiny_base, tmp_path, mask, file_mode, dir_mode):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from layerswap.merge.engine import write_merged
    from layerswap.train.training import export_model

    model = AutoModelForCausalLM.from_pretrained(tiny_base)
    tokenizer = AutoTokenizer.from_pretrained(tiny_base)
    old = os.umask(mask)
    try:
        export_model(model, tokenizer, tmp_path / "expert", {"kind": "test"})
        recipe = {
            "method": "soup",
            "base": None,
            "params": {"weighting": "uniform"},
            "inputs": {"models": [str(tmp_path / "expert"), str(tiny_base)]},
        }
        write_merged(recipe, str(tmp_path / "merged"))
    finally:
        os.umask(old)
    for out in (tmp_path / "expert", tmp_path / "merged"):
        assert stat.S_IMODE(out.stat().st_mode) == dir_mode, out
        modes = {p.name: oct(stat.S_IMODE(p.stat().st_mode)) for p in out.iterdir()}
        assert set(modes.values()) == {oct(file_mode)}, modes
    assert "model.safetensors" in os.listdir(tmp_path / "expert")


# ------------------------------------------------------------------------------ what is wrong, said rightly
def test_a_file_as_recipe_input_is_not_called_missing(work, capsys):
    """A recipe input that is a file (e.g. /etc/passwd) is not 'does not exist': it is there, and not a checkpoint."""
    recipe = json.loads(Path("r.json").read_text())
    recipe["inputs"]["lang"] = "/etc/passwd"
    Path("r.json").write_text(json.dumps(recipe))
    assert merge("--out", "m") == 1
    assert one_line(capsys) == (
        "layerswap merge: error: /etc/passwd: exists but is not a directory; a checkpoint is "
        "a Hugging Face model folder (config.json and safetensors weights)"
    )


def test_unknown_command_is_named(capsys):
    assert main(["nonsense"]) == 2
    assert capsys.readouterr().err == (
        "layerswap: error: unknown command 'nonsense'; `layerswap --help` lists the commands\n"
    )
    assert main(["selct"]) == 2
    assert "unknown command 'selct' (did you mean 'select'?)" in capsys.readouterr().err
