"""Verify once (issue 41, item 4) and every input verified wherever it lives (issue 43, item 2): a file's sha256 is
computed once per file state and shared by the run's jobs (layerswap.hashcache), never trusted after a change; the
base is checked against the record of the job that wrote it; a recipe input outside the run's folders is refused,
or recorded in the manifest under the documented switch."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from layerswap import fingerprint, hashcache
from layerswap.errors import UserError


@pytest.fixture
def counted(monkeypatch):
    """Every file hashed (a fresh process: nothing in memory)."""
    monkeypatch.setattr(hashcache, "_MEMORY", {})
    hashed: list[str] = []
    real = fingerprint.file_sha256
    monkeypatch.setattr(fingerprint, "file_sha256", lambda p: (hashed.append(Path(p).name), real(p))[1])
    return hashed


def _old(path: Path, seconds: float = 60) -> None:
    """Give a file an mtime in the past (a file written well before it is read: not racy)."""
    t = time.time() - seconds
    os.utime(path, (t, t))


def test_a_file_is_hashed_once_across_jobs_and_again_after_any_change(tmp_path, monkeypatch, counted):
    monkeypatch.setenv(hashcache.ENV, str(tmp_path / "cache"))
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"a" * 4096)
    _old(weights)
    first = hashcache.sha256(weights)
    monkeypatch.setattr(hashcache, "_MEMORY", {})  # the next job: another process
    assert hashcache.sha256(weights) == first and counted == ["model.safetensors"]
    # overwritten in place, same size (as issue 43's base): the write moves mtime, so the old verdict is not used
    with open(weights, "r+b") as f:
        f.seek(1024)
        f.write(b"b" * 16)
    monkeypatch.setattr(hashcache, "_MEMORY", {})
    changed = hashcache.sha256(weights)
    assert changed != first and changed == hashlib.sha256(weights.read_bytes()).hexdigest()
    assert counted == ["model.safetensors", "model.safetensors"]


def _on_another_node(real_stat):
    """`os.stat` as another node of a cluster sees a file of the shared file system: the same inode, size and mtime,
    another device number (NFS numbers the mount per client)."""

    def stat(path, *args, **kwargs):
        st = real_stat(path, *args, **kwargs)
        names = ("st_mode", "st_ino", "st_size", "st_mtime", "st_mtime_ns", "st_ctime_ns")
        return SimpleNamespace(st_dev=st.st_dev + 7, **{n: getattr(st, n) for n in names})

    return stat


def test_a_hash_cached_on_one_node_answers_on_another_and_a_changed_file_is_hashed_again(
    tmp_path, monkeypatch, counted
):
    """A cluster: the cache written by a job on one node answers a job on another node, whose device number for the
    same file differs (and the file was renamed into place after it was hashed, as an export is); there too a file
    replaced with other bytes (same size, same mtime: a new inode) or grown is hashed again, never given the old
    verdict."""
    monkeypatch.setenv(hashcache.ENV, str(tmp_path / "cache"))
    (tmp_path / ".tmp-s1").mkdir()
    hidden = tmp_path / ".tmp-s1" / "model.safetensors"
    hidden.write_bytes(b"a" * 4096)
    _old(hidden)
    first = hashcache.sha256(hidden)  # node A, as an export hashes its weights before renaming them into place
    os.rename(tmp_path / ".tmp-s1", tmp_path / "s1")
    weights = tmp_path / "s1" / "model.safetensors"
    monkeypatch.setattr(hashcache, "_MEMORY", {})
    assert hashcache.sha256(weights) == first and counted == ["model.safetensors"]  # a rename keeps the verdict
    monkeypatch.setattr(hashcache, "_MEMORY", {})  # a job on node B
    here = os.stat(weights)
    monkeypatch.setattr(hashcache.os, "stat", _on_another_node(os.stat))
    assert os.stat(weights).st_dev != here.st_dev and os.stat(weights).st_ino == here.st_ino  # the other node's view
    assert hashcache.sha256(weights) == first and counted == ["model.safetensors"]  # answered by the cache
    # replaced by another file of the same size whose mtime is set to the old one's to the nanosecond
    mtime = weights.stat().st_mtime_ns
    other = tmp_path / "other.tmp"
    other.write_bytes(b"b" * 4096)
    os.utime(other, ns=(mtime, mtime))
    os.replace(other, weights)
    assert weights.stat().st_mtime_ns == mtime and weights.stat().st_size == 4096
    monkeypatch.setattr(hashcache, "_MEMORY", {})
    assert hashcache.sha256(weights) == hashlib.sha256(b"b" * 4096).hexdigest()
    # grown in place (its mtime set back): the size differs
    with open(weights, "ab") as f:
        f.write(b"c")
    os.utime(weights, ns=(mtime, mtime))
    monkeypatch.setattr(hashcache, "_MEMORY", {})
    assert hashcache.sha256(weights) == hashlib.sha256(b"b" * 4096 + b"c").hexdigest()
    assert counted == ["model.safetensors"] * 3


def test_a_racy_state_or_no_cache_folder_is_never_shared(tmp_path, monkeypatch, counted):
    fresh = tmp_path / "fresh.safetensors"
    fresh.write_bytes(b"x" * 100)  # written just now: its timestamp could repeat for another content
    monkeypatch.setenv(hashcache.ENV, str(tmp_path / "cache"))
    hashcache.sha256(fresh)
    assert not list((tmp_path / "cache").rglob("*.json"))
    monkeypatch.setenv(hashcache.ENV, "")  # a command run by hand, the audit: no cache
    old = tmp_path / "old.safetensors"
    old.write_bytes(b"y" * 100)
    _old(old)
    hashcache.sha256(old)
    monkeypatch.setattr(hashcache, "_MEMORY", {})
    hashcache.sha256(old)
    assert counted == ["fresh.safetensors", "old.safetensors", "old.safetensors"]


def test_a_forged_cache_entry_for_another_state_is_ignored(tmp_path, monkeypatch, counted):
    """An entry answers only for the state it records: a hand-made entry under another name is never read, and an
    entry whose recorded state is not the file's is ignored."""
    monkeypatch.setenv(hashcache.ENV, str(tmp_path / "cache"))
    f = tmp_path / "w.safetensors"
    f.write_bytes(b"z" * 64)
    _old(f)
    key = hashcache.state(f, f.stat())
    entry = hashcache._entry(tmp_path / "cache", key)
    entry.parent.mkdir(parents=True)
    entry.write_text(json.dumps({"format": 1, "state": [0, 0, 0, 0], "sha256": "0" * 64}))
    assert hashcache.sha256(f) == hashlib.sha256(b"z" * 64).hexdigest()
    assert counted == ["w.safetensors"]


# ------------------------------------------------------------------------------------------------ the base
def test_a_base_overwritten_in_place_is_refused_where_it_is_read(tiny_base, tmp_path):
    """Issue 43: 16 KB overwritten inside the base's weights (size unchanged). Its `layerswap_meta.json` records the
    sha256 the job wrote: every reader (merges, figures, evaluation, SFT) refuses it with the rebuild command."""
    import shutil

    from layerswap.checkpoints import Checkpoint
    from layerswap.train.sft import base_fingerprint

    base = tmp_path / "results" / "base"
    shutil.copytree(tiny_base, base)
    Checkpoint(str(base)).close()  # as written: accepted
    weights = base / "model.safetensors"
    size = weights.stat().st_size
    with open(weights, "r+b") as f:
        f.seek(size // 2)
        f.write(os.urandom(min(16384, size // 4)))
    assert weights.stat().st_size == size
    for read in (lambda: Checkpoint(str(base)), lambda: base_fingerprint(base)):
        with pytest.raises(UserError) as err:
            read()
        line = str(err.value)
        assert line.startswith(f"{weights}: sha256 differs from {base / 'layerswap_meta.json'}"), line
        assert f"rm -r {base} && snakemake --forcerun {base / 'config.json'}" in line


# ---------------------------------------------------------------------------------------- recipe inputs
def _outside_recipe(tmp_path, ckpt: Path) -> Path:
    recipe = tmp_path / "results" / "merges" / "swap" / "toy_swh" / "1x1.json"
    recipe.parent.mkdir(parents=True)
    recipe.write_text(
        json.dumps(
            {
                "method": "layer_swap",
                "inputs": {"task": str(ckpt), "lang": str(ckpt)},
                "params": {"bottom": 1, "top": 0},
            }
        )
    )
    return recipe


def test_a_recipe_input_outside_the_runs_folders_is_refused_or_recorded(tiny_base, tmp_path, monkeypatch):
    """Issue 43: a copy of a checkpoint at ../outside_ckpt named in a recipe's inputs."""
    import shutil

    from layerswap.audit.manifest import verified_inputs
    from layerswap.inputs import ALLOW_ENV, ROOTS_ENV, roots_value
    from layerswap.merge.recipes import Recipe

    outside = tmp_path / "outside_ckpt"
    shutil.copytree(tiny_base, outside)
    recipe = _outside_recipe(tmp_path, outside)
    Recipe.load(recipe)  # outside the workflow (no roots): a recipe may name any checkpoint
    monkeypatch.setenv(ROOTS_ENV, roots_value(str(tmp_path / "results"), str(tmp_path / "scratch")))
    with pytest.raises(UserError) as err:
        Recipe.load(recipe)
    line = str(err.value)
    assert line.startswith(f"{recipe}: input {outside} lies outside the results folder and the configured storage")
    assert f"set {ALLOW_ENV}=1" in line
    monkeypatch.setenv(ALLOW_ENV, "1")
    Recipe.load(recipe)
    recorded = verified_inputs(tmp_path / "results", {}, {}, {})["outside_inputs"]
    assert list(recorded) == [str(outside)]
    assert recorded[str(outside)]["recipes"] == [str(recipe)]
    assert recorded[str(outside)]["files"]["model.safetensors"] == fingerprint.file_sha256(
        outside / "model.safetensors"
    )
    # inside the run's folders: accepted without the switch
    monkeypatch.delenv(ALLOW_ENV)
    inside = tmp_path / "scratch" / "experts" / "x"
    shutil.copytree(tiny_base, inside)
    recipe.write_text(
        json.dumps(
            {
                "method": "layer_swap",
                "inputs": {"task": str(inside), "lang": str(inside)},
                "params": {"bottom": 1, "top": 0},
            }
        )
    )
    Recipe.load(recipe)


def test_a_linked_hub_base_is_checked_against_what_prepare_base_recorded(tiny_base, tmp_path):
    """The paper's base is linked from the pre-staged cache (`layerswap prepare-base`), which records the weights'
    sha256 as linked: a blob changed in the cache afterwards is refused where the base is read."""
    import shutil

    from layerswap.checkpoints import Checkpoint
    from layerswap.data.prepare_base import prepare_base

    src = tmp_path / "cache" / "llama"
    shutil.copytree(tiny_base, src)
    (src / "layerswap_meta.json").unlink()  # a hub snapshot holds no record of ours
    base = tmp_path / "results" / "base"
    prepare_base(str(src), base)
    recorded = json.loads((base / "layerswap_source.json").read_text())["weights_sha256"]
    assert recorded == {"model.safetensors": hashlib.sha256((src / "model.safetensors").read_bytes()).hexdigest()}
    Checkpoint(str(base)).close()
    with open(src / "model.safetensors", "r+b") as f:
        f.seek(-64, os.SEEK_END)
        f.write(b"\0" * 64)
    with pytest.raises(UserError, match=r"model.safetensors: sha256 differs from .*layerswap_source.json"):
        Checkpoint(str(base))
