import json
import shutil

import pytest
from safetensors.torch import load_file

from layerswap.data import build_mix
from layerswap.errors import UserError
from layerswap.sft import train_expert, training_arguments

PARAMS = {"lr": 1e-3, "batch_size": 4, "seq_len": 48, "weight_decay": 0.01, "max_grad_norm": 1.0,
          "scheduler": "wsd", "warmup_steps": 1, "adam_beta2": 0.99, "num_samples": 16, "checkpoint_every": 8,
          "seed": 0, "threads": 1}


@pytest.fixture(scope="module")
def mix(toy_world, tmp_path_factory):
    out = tmp_path_factory.mktemp("mix") / "math.jsonl"
    build_mix([{"name": "m", "schema": "orca_math", "path": str(toy_world / "raw" / "orca_math.jsonl"),
                "n": 16}], 0, out)
    return out


def test_checkpoints_every_n_samples_with_manifest(tiny_base, mix, tmp_path):
    train_expert(tiny_base, mix, tmp_path / "run", PARAMS, "Q: {prompt}\nA:")
    manifest = json.loads((tmp_path / "run" / "checkpoints.json").read_text())
    assert [c["name"] for c in manifest["checkpoints"]] == ["s0000008", "s0000016"]
    meta = json.loads((tmp_path / "run" / "s0000008" / "layerswap_meta.json").read_text())
    assert meta["samples"] == 8 and len(meta["base_sha256"]) == 64
    base = json.loads((tmp_path / "run" / "s0000008" / "layerswap_base.json").read_text())
    assert base == {"base_sha256": meta["base_sha256"]}  # what the merge engine compares across experts
    assert (tmp_path / "run" / "s0000016" / "tokenizer.json").is_file()


def test_resume_after_kill_gives_the_same_weights(tiny_base, mix, tmp_path):
    train_expert(tiny_base, mix, tmp_path / "full", PARAMS, "Q: {prompt}\nA:")
    expected = load_file(tmp_path / "full" / "s0000016" / "model.safetensors")
    # Simulate a kill after the first checkpoint: the last checkpoint and the manifest never got written.
    shutil.copytree(tmp_path / "full", tmp_path / "killed")
    shutil.rmtree(tmp_path / "killed" / "s0000016")
    (tmp_path / "killed" / "checkpoints.json").unlink()
    trainer_dir = next((tmp_path / "killed").glob("trainer-*"))
    shutil.rmtree(trainer_dir / "checkpoint-4")
    train_expert(tiny_base, mix, tmp_path / "killed", PARAMS, "Q: {prompt}\nA:")
    resumed = load_file(tmp_path / "killed" / "s0000016" / "model.safetensors")
    assert expected.keys() == resumed.keys()
    assert all(expected[k].equal(resumed[k]) for k in expected)  # bitwise on CPU


def test_bad_params_name_the_key(tmp_path):
    with pytest.raises(UserError, match="'scheduler': unknown 'cosine'"):
        training_arguments({**PARAMS, "scheduler": "cosine"}, tmp_path)
    with pytest.raises(UserError, match="'checkpoint_every' \\(6\\) must be a multiple of batch_size"):
        training_arguments({**PARAMS, "checkpoint_every": 6}, tmp_path)
