"""The toy base's pretraining resumes like SFT: a run killed mid-training resumes from its last Trainer checkpoint
and ends byte-identical to an uninterrupted run; its state is deleted on completion; a changed run starts over."""

from __future__ import annotations

import json

import pytest

import layerswap.train.pretrain as pretrain_module
from layerswap.train.pretrain import pretrain
from layerswap.train.training import JsonlLogger

MODEL = {
    "hidden_size": 16,
    "intermediate_size": 32,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "max_position_embeddings": 128,
}
TRAIN = {"steps": 8, "batch_size": 4, "seq_len": 32, "lr": 1e-3, "warmup_steps": 1, "threads": 1}


class Killed(Exception):
    """What a kill -9 leaves: the Trainer state saved so far, no export."""


def kill_after(step: int):
    class Logger(JsonlLogger):
        def on_save(self, args, state, control, **kwargs):
            if state.global_step == step:
                raise Killed

    return Logger


def run(toy_world, out, train=TRAIN):
    pretrain(toy_world / "raw" / "pretrain.jsonl", toy_world / "raw" / "vocab.json", out, MODEL, train, 2, 0)


@pytest.fixture(scope="module")
def uninterrupted(toy_world, tmp_path_factory):
    out = tmp_path_factory.mktemp("pretrain") / "base"
    run(toy_world, out)
    return out


def test_uninterrupted_run_deletes_its_trainer_state(uninterrupted):
    assert (uninterrupted / "model.safetensors").is_file()
    assert not list(uninterrupted.with_name("base.work").glob("trainer-*"))


def test_killed_pretraining_resumes_to_the_same_bytes(toy_world, uninterrupted, tmp_path, monkeypatch, capsys):
    out = tmp_path / "base"
    with monkeypatch.context() as patch:
        patch.setattr(pretrain_module, "JsonlLogger", kill_after(5))
        with pytest.raises(Killed):
            run(toy_world, out)
    state = next(tmp_path.joinpath("base.work").glob("trainer-*"))
    assert (state / "checkpoint-5" / "trainer_state.json").is_file() and not out.exists()
    capsys.readouterr()
    run(toy_world, out)
    assert f"resuming {out} from {state / 'checkpoint-5'}" in capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in uninterrupted.iterdir())
    for f in out.iterdir():
        assert f.read_bytes() == (uninterrupted / f.name).read_bytes(), f.name
    assert not state.exists()
    rows = [json.loads(line) for line in (tmp_path / "base.work" / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [8] and "train_loss" in rows[0]  # one summary line, no repeated step


def test_killed_after_its_last_checkpoint_ends_the_same(toy_world, uninterrupted, tmp_path, monkeypatch):
    """The final step's state is saved but the export is not: the rerun resumes there and exports the same
    weights."""
    out = tmp_path / "base"
    with monkeypatch.context() as patch:
        patch.setattr(pretrain_module, "JsonlLogger", kill_after(TRAIN["steps"]))
        with pytest.raises(Killed):
            run(toy_world, out)
    run(toy_world, out)
    assert (out / "model.safetensors").read_bytes() == (uninterrupted / "model.safetensors").read_bytes()


def test_a_changed_run_never_resumes_from_another_runs_state(toy_world, uninterrupted, tmp_path, monkeypatch):
    out = tmp_path / "base"
    with monkeypatch.context() as patch:
        patch.setattr(pretrain_module, "JsonlLogger", kill_after(5))
        with pytest.raises(Killed):
            run(toy_world, out, {**TRAIN, "lr": 2e-3})
    (tmp_path / "base.work" / "log.jsonl").write_text('{"step": 9, "stale": true}\n')
    run(toy_world, out)
    assert (out / "model.safetensors").read_bytes() == (uninterrupted / "model.safetensors").read_bytes()
    assert not list((tmp_path / "base.work").glob("trainer-*"))
    assert "stale" not in (tmp_path / "base.work" / "log.jsonl").read_text()  # a fresh start: a new log
