"""SFT exports hash their weights on a background thread (layerswap/train/export.py): training goes on while an export
is hashed, the Trainer never saves its state past an unfinished export, and a failed export stops training with its
error and leaves no checkpoint folder."""

from __future__ import annotations

import json
import threading
import time
from types import SimpleNamespace

import pytest

from layerswap.checkpoints import export_record
from layerswap.contracts import EXPORT_META, WEIGHTS_RECORD
from layerswap.errors import UserError
from layerswap.train import training
from layerswap.train.export import export_key, make_export_callback
from layerswap.train.training import Background, export_model


@pytest.fixture(scope="module")
def tiny(tiny_base):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(tiny_base), AutoTokenizer.from_pretrained(tiny_base)


def held_hashing(monkeypatch) -> threading.Event:
    """Make export hashing wait for the returned event (as a 32 GB export takes ~50 s to hash)."""
    release = threading.Event()
    real = training.export_record

    def slow(folder):
        assert release.wait(30), "the test never released the hashing"
        return real(folder)

    monkeypatch.setattr(training, "export_record", slow)
    return release


def test_export_returns_while_its_weights_are_hashed(tiny, tmp_path, monkeypatch):
    model, tokenizer = tiny
    release = held_hashing(monkeypatch)
    background = Background()
    out = tmp_path / "s0000016"
    export_model(model, tokenizer, out, {"run_key": "k"}, background=background)
    # the weights are written, the export is not in place until its hash is recorded
    assert background.pending and not out.exists()
    assert (tmp_path / ".tmp-s0000016" / "model.safetensors").is_file()
    release.set()
    background.wait()
    assert not background.pending and not (tmp_path / ".tmp-s0000016").exists()
    recorded = json.loads((out / EXPORT_META).read_text())[WEIGHTS_RECORD]
    assert recorded == export_record(out) and export_key(out) == "k"


def test_the_trainer_never_saves_past_an_unfinished_export(tiny, tmp_path, monkeypatch):
    """The callback waits for the export in flight before a step whose state the Trainer saves, and only then."""
    release = held_hashing(monkeypatch)
    model, tokenizer = tiny
    params = {"num_samples": 32, "checkpoint_every": 16, "batch_size": 8}
    callback = make_export_callback(tmp_path, tokenizer, params, {"run_key": "k"}, None)
    export_model(model, tokenizer, tmp_path / "s0000016", {"run_key": "k"}, background=callback.background)

    callback.on_step_end(None, None, SimpleNamespace(should_save=False))  # an ordinary step: no wait
    assert callback.background.pending

    timer = threading.Timer(0.5, release.set)
    timer.start()
    started = time.monotonic()
    callback.on_step_end(None, None, SimpleNamespace(should_save=True))  # the Trainer saves next: wait
    assert time.monotonic() - started >= 0.4
    assert export_key(tmp_path / "s0000016") == "k"


def test_a_failed_export_stops_training_at_the_next_save(tiny, tmp_path, monkeypatch):
    model, tokenizer = tiny

    def full_disk(folder):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(training, "export_record", full_disk)
    background = Background()
    out = tmp_path / "s0000016"
    export_model(model, tokenizer, out, {"run_key": "k"}, background=background)
    with pytest.raises(OSError, match="No space left on device") as err:
        background.wait()
    assert str(out) in str(err.value)  # named: the one-line report names the export, not its hidden folder
    assert not out.exists() and not (tmp_path / ".tmp-s0000016").exists()
    background.wait()  # the error is reported once


def test_a_file_in_the_way_of_the_export_folder_is_named(tiny, tmp_path):
    """A file (not a folder an export made) where the export's hidden temporary folder goes: one line naming that
    file, nothing written through it, the file left as it was. (It used to surface as
    `.../layerswap_meta.json: Not a directory`, naming a file that does not exist.)"""
    model, tokenizer = tiny
    blocker = tmp_path / ".tmp-s0000016"
    blocker.write_text("someone's notes\n")
    with pytest.raises(UserError) as err:
        export_model(model, tokenizer, tmp_path / "s0000016", {"run_key": "k"})
    line = str(err.value)
    assert "\n" not in line and line.startswith(f"{blocker}: a file is in the way of the export"), line
    assert blocker.read_text() == "someone's notes\n" and not (tmp_path / "s0000016").exists()
