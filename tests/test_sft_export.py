"""SFT exports write and hash their weights on a background thread (layerswap/train/export.py): training goes on while
an export is written and hashed (issue 48, item 6: no rank waits for the main one's write), the export holds the
weights of its save although training changes them meanwhile, the Trainer never saves its state past an unfinished
export, and a failed export stops training with its error and leaves no checkpoint folder."""

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


def held_writing(monkeypatch, model) -> threading.Event:
    """Make the export's weight write wait for the returned event (as a 32 GB fp32 write takes ~107 s)."""
    release = threading.Event()
    real = model.save_pretrained

    def slow(*args, **kwargs):
        assert release.wait(30), "the test never released the write"
        return real(*args, **kwargs)

    monkeypatch.setattr(model, "save_pretrained", slow)
    return release


def test_export_returns_before_its_weights_are_written_and_hashed(tiny, tmp_path, monkeypatch):
    model, tokenizer = tiny
    release = held_writing(monkeypatch, model)
    background = Background()
    out = tmp_path / "s0000016"
    export_model(model, tokenizer, out, {"run_key": "k"}, state_dict=model.state_dict(), background=background)
    # only the tokenizer is written in the caller's thread; the export is not in place until its hash is recorded
    assert background.pending and not out.exists()
    assert (tmp_path / ".tmp-s0000016" / "tokenizer.json").is_file()
    assert not (tmp_path / ".tmp-s0000016" / "model.safetensors").exists()
    release.set()
    background.wait()
    assert not background.pending and not (tmp_path / ".tmp-s0000016").exists()
    recorded = json.loads((out / EXPORT_META).read_text())[WEIGHTS_RECORD]
    assert recorded == export_record(out) and export_key(out) == "k"


class _Accelerator:
    """What export_checkpoint uses of accelerate's Accelerator, for one process without FSDP (the toy world's SFT):
    the state dict is the model's own tensors. A barrier would fail the test: no process waits for the write."""

    is_main_process = True

    def __init__(self, model):
        self.model = model

    def get_state_dict(self, model):
        return model.state_dict()

    def unwrap_model(self, model):
        return model

    def wait_for_everyone(self):
        raise AssertionError("an export made the processes wait for each other")


def test_an_export_holds_the_weights_of_its_save_while_training_changes_them(tiny, tmp_path, monkeypatch):
    """export_checkpoint returns before the weights are written; the optimizer then changes the weights in place
    (what the next steps do); the export written afterwards holds the weights of the step it was made at, in the
    export dtype, byte for byte as an export written at once."""
    import copy

    import torch
    from safetensors.torch import load_file

    from layerswap.train.export import export_checkpoint

    model, tokenizer = tiny
    model = copy.deepcopy(model)
    trainer = SimpleNamespace(model=model, accelerator=_Accelerator(model))
    meta = {"run_key": "k", "params": {"peft_method": "full"}}
    export_checkpoint(trainer, tokenizer, tmp_path / "now" / "s0000016", meta, torch.bfloat16, None)
    release = held_writing(monkeypatch, model)
    background = Background()
    export_checkpoint(trainer, tokenizer, tmp_path / "later" / "s0000016", meta, torch.bfloat16, background)
    assert background.pending
    with torch.no_grad():
        for param in model.parameters():
            param.add_(1.0)  # training goes on
    release.set()
    background.wait()
    written = load_file(str(tmp_path / "later" / "s0000016" / "model.safetensors"))
    now = load_file(str(tmp_path / "now" / "s0000016" / "model.safetensors"))
    assert written.keys() == now.keys() and all(torch.equal(written[k], now[k]) for k in now)
    assert all(t.dtype == torch.bfloat16 for t in written.values())
    assert not any(torch.equal(written[k].float(), v.float()) for k, v in model.state_dict().items() if k in written)
    assert (tmp_path / "later/s0000016/model.safetensors").read_bytes() == (
        tmp_path / "now/s0000016/model.safetensors"
    ).read_bytes()


def test_the_trainer_never_saves_past_an_unfinished_export(tiny, tmp_path, monkeypatch):
    """The callback waits for the export in flight before a step whose state the Trainer saves, and only then."""
    release = held_hashing(monkeypatch)
    model, tokenizer = tiny
    params = {"num_samples": 32, "checkpoint_every": 16, "batch_size": 8}
    callback = make_export_callback(tmp_path, tokenizer, params, {"run_key": "k"}, None)
    state = model.state_dict()
    export_model(
        model, tokenizer, tmp_path / "s0000016", {"run_key": "k"}, state_dict=state, background=callback.background
    )

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
    export_model(model, tokenizer, out, {"run_key": "k"}, state_dict=model.state_dict(), background=background)
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


# ---- two processes (torch.distributed over gloo on the CPU) ---------------------------------------------------------
# Each process runs `layerswap sft`, as `accelerate launch -m layerswap.train.sft` does on a GPU node (there with FSDP,
# which the Trainer refuses without an accelerator: DDP here). Rank 0's first weight write (the export of step 4) is
# held until both ranks have ended step 7 (as a 32 GB fp32 write takes ~107 s): released by that condition, not by a
# time, so the outcome does not depend on the machine's load. Were an export call to hold a rank (a barrier after the
# write, as before), step 5 would never come, and the write would be released only by the hang guard, which it
# records. Both ranks log each step's end and each export call; rank 0 logs when the held write is done.
HANG_GUARD_S = 300
HARNESS = """
import json, os, sys, time
from layerswap.train import export, sft

rank, log = int(os.environ["RANK"]), os.environ["STEPLOG"]


def note(**row):
    with open(log, "a") as f:
        f.write(json.dumps({"rank": rank, "t": time.time(), **row}) + "\\n")


def steps_ended():
    with open(log) as f:
        return {(r["rank"], r["step"]) for r in map(json.loads, f) if "step" in r}


real_make = export.make_export_callback


def make(*args, **kwargs):
    callback = real_make(*args, **kwargs)

    class Logged(type(callback)):
        def on_step_end(self, args, state, control, **kw):
            super().on_step_end(args, state, control, **kw)
            note(step=state.global_step, save=bool(control.should_save))

        def on_save(self, args, state, control, **kw):
            model = self.trainer.accelerator.unwrap_model(self.trainer.model)
            if rank == 0 and state.global_step == 4:
                real = model.save_pretrained

                def held(*a, **k):
                    deadline = time.monotonic() + float(os.environ["HANG_GUARD_S"])
                    while not {(0, 7), (1, 7)} <= steps_ended() and time.monotonic() < deadline:
                        time.sleep(0.05)
                    released = "steps" if {(0, 7), (1, 7)} <= steps_ended() else "guard"
                    out = real(*a, **k)
                    note(written=4, released=released)
                    return out

                model.save_pretrained = held
            super().on_save(args, state, control, **kw)
            model.__dict__.pop("save_pretrained", None)
            note(export=state.global_step)

    callback.__class__ = Logged
    return callback


sft.make_export_callback = make
from layerswap.cli import main

sys.exit(main(["sft", *sys.argv[1:]]))
"""


def test_no_process_waits_for_the_main_ones_export_write(tiny_base, toy_world, tmp_path):
    """Two processes train one run; rank 0's first export write is held until both ranks have ended step 7. No
    export call holds either rank (the write is on rank 0's background thread, and no barrier follows it): the write
    is released by the steps after it, not by the hang guard; rank 0 waits for it before the Trainer's next save; every
    export is complete and recorded. Ordered by the log's lines, never by times."""
    import os
    import socket
    import subprocess
    import sys

    from layerswap.data.mixes import build_mix
    from layerswap.layout import RUN_RECORD

    data = tmp_path / "math.jsonl"
    build_mix(
        [{"name": "m", "schema": "orca_math", "path": str(toy_world / "raw" / "orca_math.jsonl"), "n": 48}], 0, data
    )
    params = {"lr": 1e-3, "batch_size": 4, "seq_len": 32, "weight_decay": 0.0, "max_grad_norm": 1.0,
              "scheduler": "linear", "warmup_steps": 1, "adam_beta2": 0.99, "num_samples": 48,
              "checkpoint_every": 16, "seed": 0, "threads": 1}  # fmt: skip
    (tmp_path / "harness.py").write_text(HARNESS)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    steplog = tmp_path / "steps.jsonl"
    steplog.touch()
    env = {**os.environ, "STEPLOG": str(steplog), "HANG_GUARD_S": str(HANG_GUARD_S)}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(port)]
    cmd += [str(tmp_path / "harness.py"), "--base", str(tiny_base), "--data", str(data)]
    cmd += ["--out-dir", str(tmp_path / "run"), "--params-json", json.dumps(params)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=2 * HANG_GUARD_S, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "2 training process(es)" in proc.stdout + proc.stderr
    rows = [json.loads(line) for line in steplog.read_text().splitlines()]
    exports = [r for r in rows if "export" in r]
    assert sorted((r["rank"], r["export"]) for r in exports) == [(0, 4), (0, 8), (0, 12), (1, 4), (1, 8), (1, 12)]
    (written,) = [i for i, r in enumerate(rows) if "written" in r]
    assert rows[written]["released"] == "steps", rows  # steps 5-7 of both ranks ran while step 4's was written
    step8 = next(i for i, r in enumerate(rows) if (r["rank"], r.get("step")) == (0, 8))
    assert written < step8  # rank 0 waited for it before the Trainer's save at step 8
    record = json.loads((tmp_path / "run" / RUN_RECORD).read_text())["checkpoints"]
    assert [c["samples"] for c in record] == [16, 32, 48]
    for c in record:
        ckpt = tmp_path / "run" / f"s{c['samples']:07d}"
        assert json.loads((ckpt / EXPORT_META).read_text())[WEIGHTS_RECORD] == export_record(ckpt)
