import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from safetensors.torch import load_file

from layerswap.config import SCHEMA_PATH, check, effective_runs, validate_config
from layerswap.config_schema import load_yaml, schema_defaults
from layerswap.data.mixes import build_mix
from layerswap.errors import UserError
from layerswap.train.sft import train_expert, training_arguments

PARAMS = {
    "lr": 1e-3,
    "batch_size": 4,
    "seq_len": 48,
    "weight_decay": 0.01,
    "max_grad_norm": 1.0,
    "scheduler": "wsd",
    "warmup_steps": 1,
    "adam_beta2": 0.99,
    "num_samples": 16,
    "checkpoint_every": 8,
    "seed": 0,
    "threads": 1,
}
LORA = {
    **PARAMS,
    "lr": 1e-2,
    "peft_method": "lora",
    "lora": {"r": 4, "alpha": 8, "dropout": 0.1, "target_modules": ["q_proj", "v_proj", "down_proj"]},
}
TEMPLATE = "Q: {prompt}\nA:"
FULL_SET = {"model.safetensors", "config.json", "tokenizer.json", "layerswap_meta.json", "layerswap_base.json"}


@pytest.fixture(scope="module")
def mix(toy_world, tmp_path_factory):
    out = tmp_path_factory.mktemp("mix") / "math.jsonl"
    build_mix(
        [{"name": "m", "schema": "orca_math", "path": str(toy_world / "raw" / "orca_math.jsonl"), "n": 16}], 0, out
    )
    return out


@pytest.fixture(scope="module")
def full_run(tiny_base, mix, tmp_path_factory):
    """One uninterrupted full fine-tune (the reference of the resume tests), with its console output."""
    out = tmp_path_factory.mktemp("full") / "run"
    capture = out.with_name("console.txt")
    import contextlib
    import io

    console = io.StringIO()  # stdout and stderr together, as the rule's `> {log} 2>&1`
    with contextlib.redirect_stderr(console), contextlib.redirect_stdout(console):
        train_expert(tiny_base, mix, out, PARAMS, TEMPLATE)
    capture.write_text(console.getvalue())
    return out


@pytest.fixture(scope="module")
def kept_run(tiny_base, mix, tmp_path_factory):
    """The same run killed after its manifest, before its Trainer state was deleted: what the resume tests start
    from (each copies it and takes away what a kill at another moment would not have written)."""
    import layerswap.train.sft as sft

    out = tmp_path_factory.mktemp("kept") / "run"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sft, "_finish", lambda out_dir, params, key, work: sft.write_manifest(out_dir, params, key))
        train_expert(tiny_base, mix, out, PARAMS, TEMPLATE)
    assert len(list(out.glob("trainer-*/checkpoint-*"))) == 2
    return out


def weights(path):
    return load_file(path / "model.safetensors")


def read_log(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def same(a, b):
    return a.keys() == b.keys() and all(a[k].equal(b[k]) for k in a)


def test_checkpoints_every_n_samples_with_manifest(full_run):
    manifest = json.loads((full_run / "checkpoints.json").read_text())
    assert [c["name"] for c in manifest["checkpoints"]] == ["s0000008", "s0000016"]
    meta = json.loads((full_run / "s0000008" / "layerswap_meta.json").read_text())
    assert meta["samples"] == 8 and len(meta["base_sha256"]) == 64
    base = json.loads((full_run / "s0000008" / "layerswap_base.json").read_text())
    assert base == {"base_sha256": meta["base_sha256"]}  # what the merge engine compares across experts
    for name in ("s0000008", "s0000016"):
        assert FULL_SET <= {p.name for p in (full_run / name).iterdir()}
    assert not list(full_run.glob(".tmp-*"))


def test_progress_log_with_tokens_per_second(full_run):
    rows = [json.loads(line) for line in (full_run / "log.jsonl").read_text().splitlines()]
    assert any("loss" in r for r in rows)
    assert all(r["tokens/s"] > 0 for r in rows if "loss" in r)
    assert "train_runtime" in rows[-1] and rows[-1]["tokens/s"] > 0 and rows[-1]["num_input_tokens_seen"] > 0
    console = full_run.with_name("console.txt").read_text()  # Trainer's tqdm bar: what the rule's log captures
    assert "4/4" in console and "'loss'" in console


def test_complete_run_deletes_its_trainer_state(full_run, kept_run):
    """The Trainer state (optimizer moments: the bulk of an SFT run's disk) goes once the manifest is written."""
    assert (full_run / "checkpoints.json").is_file() and not list(full_run.glob("trainer-*"))
    assert same(weights(full_run / "s0000016"), weights(kept_run / "s0000016"))


def test_resume_after_kill_gives_the_same_weights(tiny_base, mix, full_run, kept_run, tmp_path):
    # Simulate a kill after the first checkpoint: the last checkpoint and the manifest never got written.
    shutil.copytree(kept_run, tmp_path / "killed")
    shutil.rmtree(tmp_path / "killed" / "s0000016")
    (tmp_path / "killed" / "checkpoints.json").unlink()
    trainer_dir = next((tmp_path / "killed").glob("trainer-*"))
    shutil.rmtree(trainer_dir / "checkpoint-4")
    train_expert(tiny_base, mix, tmp_path / "killed", PARAMS, TEMPLATE)
    assert same(weights(full_run / "s0000016"), weights(tmp_path / "killed" / "s0000016"))  # bitwise on CPU
    # the progress log keeps one line per step: the killed session's lines after the resumed step are dropped
    resumed, uninterrupted = (read_log(run / "log.jsonl") for run in (tmp_path / "killed", full_run))
    assert [r["step"] for r in resumed] == [r["step"] for r in uninterrupted] == [1, 2, 3, 4, 4]
    assert [r.get("loss") for r in resumed] == [r.get("loss") for r in uninterrupted]
    assert "train_loss" in resumed[-1] and not any("train_loss" in r for r in resumed[:-1])  # one summary, last


@pytest.mark.parametrize("state", ["kept", "deleted"])
def test_rerun_after_the_last_step_trains_no_more(tiny_base, mix, full_run, kept_run, tmp_path, state, capsys):
    # Killed after the final export, before the manifest (Trainer state kept), or the manifest lost after the run
    # completed (state deleted): the rerun only writes the manifest, and the Trainer state goes.
    done = tmp_path / "done"
    shutil.copytree(kept_run if state == "kept" else full_run, done)
    (done / "checkpoints.json").unlink()
    log = (done / "log.jsonl").read_text()
    train_expert(tiny_base, mix, done, PARAMS, TEMPLATE)
    names = sorted(p.name for p in done.glob("s*"))
    assert names == ["s0000008", "s0000016"]  # no extra step, no checkpoint past the schedule
    assert same(weights(full_run / "s0000016"), weights(done / "s0000016"))
    assert (done / "checkpoints.json").is_file() and not list(done.glob("trainer-*"))
    assert (done / "log.jsonl").read_text() == log  # the progress log of the run is kept, nothing appended
    assert "the run is complete" in capsys.readouterr().out


def test_lost_earlier_export_restarts_the_run(tiny_base, mix, full_run, kept_run, tmp_path):
    # An earlier export is gone and its Trainer state too: the run starts over and ends identical.
    shutil.copytree(kept_run, tmp_path / "lost")
    shutil.rmtree(tmp_path / "lost" / "s0000008")
    (tmp_path / "lost" / "checkpoints.json").unlink()
    train_expert(tiny_base, mix, tmp_path / "lost", PARAMS, TEMPLATE)
    assert same(weights(full_run / "s0000008"), weights(tmp_path / "lost" / "s0000008"))
    assert same(weights(full_run / "s0000016"), weights(tmp_path / "lost" / "s0000016"))


def test_crash_during_export_leaves_no_partial_checkpoint(tiny_base, mix, full_run, tmp_path, monkeypatch):
    from transformers import PreTrainedModel

    original = PreTrainedModel.save_pretrained

    def flaky(self, save_directory, *args, **kwargs):  # the second export dies half-way (weights already written)
        original(self, save_directory, *args, **kwargs)
        if str(save_directory).endswith(".tmp-s0000016"):
            assert (Path(save_directory) / "model.safetensors").is_file()
            raise OSError("disk full")

    monkeypatch.setattr(PreTrainedModel, "save_pretrained", flaky)
    out = tmp_path / "run"
    with pytest.raises(OSError, match="disk full"):
        train_expert(tiny_base, mix, out, PARAMS, TEMPLATE)
    assert sorted(p.name for p in out.glob("s*")) == ["s0000008"]  # no s0000016 without its full file set
    assert FULL_SET <= {p.name for p in (out / "s0000008").iterdir()}
    assert not list(out.glob(".tmp-*")) and not (out / "checkpoints.json").exists()
    monkeypatch.setattr(PreTrainedModel, "save_pretrained", original)
    # The Trainer state of the final step was saved before its export died: the rerun starts over (resuming at the
    # final step would take one step too many) and ends identical.
    train_expert(tiny_base, mix, out, PARAMS, TEMPLATE)
    assert (out / "checkpoints.json").is_file()
    assert same(weights(full_run / "s0000016"), weights(out / "s0000016"))


def test_changed_run_drops_stale_checkpoints(tiny_base, mix, full_run, kept_run, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(kept_run, out)
    (out / "checkpoints.json").unlink()
    params = {**PARAMS, "num_samples": 8, "lr": 2e-3}  # another configuration of the same run
    train_expert(tiny_base, mix, out, params, TEMPLATE)
    assert sorted(p.name for p in out.glob("s*")) == ["s0000008"]
    assert not list(out.glob("trainer-*"))  # the other configuration's state, and (complete) its own
    assert json.loads((out / "s0000008" / "layerswap_meta.json").read_text())["params"]["lr"] == 2e-3
    assert not same(weights(full_run / "s0000008"), weights(out / "s0000008"))


def test_lora_adapter_and_merged_weights_and_resume(tiny_base, mix, tmp_path, monkeypatch):
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    import layerswap.train.sft as sft

    # keep the Trainer state (as a kill before its deletion would) for the resume below
    monkeypatch.setattr(sft, "_finish", lambda out_dir, params, key, work: sft.write_manifest(out_dir, params, key))
    train_expert(tiny_base, mix, tmp_path / "lora", LORA, TEMPLATE)
    ckpt = tmp_path / "lora" / "s0000016"
    assert FULL_SET <= {p.name for p in ckpt.iterdir()}
    adapter = ckpt / "adapter"
    assert {"adapter_config.json", "adapter_model.safetensors"} <= {p.name for p in adapter.iterdir()}
    assert json.loads((adapter / "adapter_config.json").read_text())["r"] == 4
    manifest = json.loads((tmp_path / "lora" / "checkpoints.json").read_text())
    assert all(c["adapter"].endswith("/adapter") for c in manifest["checkpoints"])
    # The merged checkpoint is a plain model (no LoRA keys) equal to base + adapter merged by peft.
    merged = weights(ckpt)
    assert not any("lora" in k for k in merged)
    base = AutoModelForCausalLM.from_pretrained(tiny_base, dtype=torch.float32)
    reference = PeftModel.from_pretrained(base, adapter).merge_and_unload().state_dict()
    assert merged.keys() <= reference.keys()
    assert all(torch.allclose(merged[k], reference[k], atol=1e-6) for k in merged)
    base_weights = load_file(next(tiny_base.glob("*.safetensors")))
    changed = [k for k in merged if not merged[k].equal(base_weights[k])]
    assert changed and all(any(m in k for m in ("q_proj", "v_proj", "down_proj")) for k in changed)
    # Resume with LoRA: bitwise the same final merged weights and adapter.
    killed = tmp_path / "killed"
    shutil.copytree(tmp_path / "lora", killed)
    shutil.rmtree(killed / "s0000016")
    (killed / "checkpoints.json").unlink()
    shutil.rmtree(next(killed.glob("trainer-*")) / "checkpoint-4")
    train_expert(tiny_base, mix, killed, LORA, TEMPLATE)
    assert same(merged, weights(killed / "s0000016"))
    assert same(
        load_file(adapter / "adapter_model.safetensors"),
        load_file(killed / "s0000016" / "adapter" / "adapter_model.safetensors"),
    )


def test_dataset_with_missing_field_names_file_and_line(tmp_path):
    bad = tmp_path / "math.jsonl"
    bad.write_text('{"prompt": "1+1", "response": "2"}\n{"prompt": "2+2"}\n')
    with pytest.raises(UserError) as err:
        train_expert(tmp_path / "nobase", bad, tmp_path / "run", PARAMS, TEMPLATE)
    assert str(err.value) == f"{bad}:2: missing field 'response'"


def test_empty_mix_file_is_refused(tmp_path):
    empty = tmp_path / "math.jsonl"
    empty.write_text("\n")
    with pytest.raises(UserError, match="math.jsonl: no rows"):
        train_expert(tmp_path / "nobase", empty, tmp_path / "run", PARAMS, TEMPLATE)
    assert not (tmp_path / "run").exists()


def test_module_entry_point_gives_one_line(tmp_path):
    """`python -m layerswap.train.sft` (what accelerate launch runs) dispatches through layerswap.cli."""
    bad = tmp_path / "d.jsonl"
    bad.write_text('{"response": "2"}\n')
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "layerswap.train.sft",
            "--base",
            str(tmp_path),
            "--data",
            str(bad),
            "--out-dir",
            str(tmp_path / "o"),
            "--params-json",
            json.dumps(PARAMS),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"layerswap sft: error: {bad}:1: missing field 'prompt'"


def test_bad_params_name_the_key(tmp_path):
    with pytest.raises(UserError, match="'scheduler': unknown 'cosine'"):
        training_arguments({**PARAMS, "scheduler": "cosine"}, tmp_path)
    with pytest.raises(UserError, match="'checkpoint_every' \\(6\\) must be a multiple of batch_size"):
        training_arguments({**PARAMS, "checkpoint_every": 6}, tmp_path)
    with pytest.raises(UserError, match="'peft_method': 'prefix' is not supported .*allowed: full, lora"):
        training_arguments({**PARAMS, "peft_method": "prefix"}, tmp_path)


def test_batch_split_across_processes(tmp_path, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "3")
    with pytest.raises(UserError, match="'batch_size' \\(4\\) must be a multiple of the number of processes \\(3\\)"):
        training_arguments(PARAMS, tmp_path)


# ---- config keys of the sft section (peft_method, lora, launcher) -------------------------------------------------


def config_error(config):
    with pytest.raises(UserError) as err:
        validate_config(config, SCHEMA_PATH)
        check(config)
    assert "\n" not in str(err.value)
    return str(err.value)


@pytest.fixture
def toy_config():
    return load_yaml(SCHEMA_PATH.parent / "config.yaml", "config")


@pytest.mark.parametrize(
    "method,reason",
    [("prefix", "no per-layer weights to swap"), ("adapterfusion", "needs a fusion layer"), ("ia3", None)],
)
def test_config_refuses_unmergeable_peft_methods(toy_config, method, reason):
    toy_config["sft"]["runs"]["math_1"]["peft_method"] = method
    text = config_error(toy_config)
    assert text.startswith(f"config key 'sft.runs.math_1.peft_method': '{method}' is not supported")
    assert text.endswith("; allowed: full, lora")
    assert reason is None or reason in text


def test_config_lora_defaults_and_effective_runs(toy_config):
    toy_config["sft"]["runs"]["math_2"].update(peft_method="lora", lora={"r": 8})
    validate_config(toy_config, SCHEMA_PATH)
    check(toy_config)
    runs = effective_runs(toy_config)
    assert runs["math_2"]["lora"] == {**schema_defaults("lora"), "r": 8}
    assert "lora" not in runs["math_1"]  # unused LoRA settings of a full fine-tune are not its params
    assert toy_config["sft"]["defaults"]["lora"] == schema_defaults("lora")
    assert toy_config["sft"]["launcher"] == "python"


def test_config_lora_on_a_full_run_and_bad_launcher(toy_config):
    bad = json.loads(json.dumps(toy_config))
    bad["sft"]["runs"]["math_1"]["lora"] = {"r": 4}
    assert "config key 'sft.runs.math_1.lora': is set but the run's peft_method is full" in config_error(bad)
    toy_config["sft"]["launcher"] = "torchrun"
    assert "config key 'sft.launcher': 'torchrun' is not allowed; allowed: python, accelerate" in config_error(
        toy_config
    )


def test_manifest_of_sharded_checkpoints(full_run, tmp_path):
    """transformers 4.x shards a large export (5 GB shards): checkpoints.json then hashes the index and every shard,
    and the audit reads which files it lists; a missing shard is named."""
    from safetensors.torch import save_file

    from layerswap.audit.files import recorded_hashes
    from layerswap.train.sft import write_manifest

    run = tmp_path / "experts" / "run"  # a results root: recorded_hashes reads experts/*/checkpoints.json
    shutil.copytree(full_run, run)
    for ckpt in ("s0000008", "s0000016"):
        tensors = load_file(run / ckpt / "model.safetensors")
        names = sorted(tensors)
        half = len(names) // 2
        shards = {"model-00001-of-00002.safetensors": names[:half], "model-00002-of-00002.safetensors": names[half:]}
        for fname, keys in shards.items():
            save_file({k: tensors[k] for k in keys}, str(run / ckpt / fname))
        (run / ckpt / "model.safetensors.index.json").write_text(
            json.dumps({"metadata": {}, "weight_map": {k: f for f, keys in shards.items() for k in keys}})
        )
        (run / ckpt / "model.safetensors").unlink()
    write_manifest(run, PARAMS)
    entry = json.loads((run / "checkpoints.json").read_text())["checkpoints"][0]
    assert sorted(entry["files"]) == [
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
        "model.safetensors.index.json",
    ]
    assert len(entry["sha256"]) == 64
    known = recorded_hashes(tmp_path)
    shard = str(run / "s0000008" / "model-00002-of-00002.safetensors")
    assert known[shard][0] == entry["files"]["model-00002-of-00002.safetensors"]
    (run / "s0000016" / "model-00001-of-00002.safetensors").unlink()
    with pytest.raises(UserError, match="shard model-00001-of-00002.safetensors is missing"):
        write_manifest(run, PARAMS)


def test_config_chat_template_default_is_not_a_param(toy_config):
    """chat_template: true (the default) is how runs trained before the key existed: left out of a run's params, so
    they do not rerun; false reaches the run (config/smollm2.yaml)."""
    toy_config["sft"]["runs"]["math_2"]["chat_template"] = False
    toy_config["sft"]["runs"]["toy_swh_1"]["chat_template"] = True
    validate_config(toy_config, SCHEMA_PATH)
    check(toy_config)
    runs = effective_runs(toy_config)
    assert toy_config["sft"]["defaults"]["chat_template"] is True
    assert "chat_template" not in runs["math_1"] and "chat_template" not in runs["toy_swh_1"]
    assert runs["math_2"]["chat_template"] is False


def test_sft_examples_chat_template_or_raw_template():
    """A tokenizer with a chat template: SFT prompts through it by default, with the raw template (the toy tasks'
    evaluation format) when chat_template is false; the loss is on the response (+ EOS) either way."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from layerswap.train.training import sft_examples

    words = ["<unk>", "<pad>", "<s>", "</s>", "<|user|>", "<|assistant|>", "Q:", "A:", "two", "plus", "is", "4"]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="<unk>", pad_token="<pad>", bos_token="<s>", eos_token="</s>"
    )
    fast.chat_template = (
        "{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} {% endfor %}"
        "{% if add_generation_prompt %}<|assistant|> {% endif %}"
    )
    rows = [{"prompt": "two plus two", "response": "is 4"}]

    def prompt_and_response(example):
        n = sum(1 for label in example["labels"] if label == -100)
        ids = example["input_ids"]
        return fast.decode(ids[:n]), fast.decode(ids[n:])

    chat = sft_examples(rows, fast, TEMPLATE, 32)[0]
    raw = sft_examples(rows, fast, TEMPLATE, 32, chat_template=False)[0]
    assert prompt_and_response(chat) == ("<|user|> two plus two <|assistant|>", "is 4 </s>")
    assert prompt_and_response(raw) == ("Q: two plus two A:", "is 4 </s>")


def test_layer_restricted_lora_changes_only_its_layers(tiny_base, mix, tmp_path):
    """`lora.layers` (peft's layers_to_transform): the exported expert differs from the base in those layers only."""
    import re

    params = {**LORA, "num_samples": 8, "checkpoint_every": 8, "lora": {**LORA["lora"], "layers": [1]}}
    train_expert(tiny_base, mix, tmp_path / "lora1", params, TEMPLATE)
    merged = weights(tmp_path / "lora1" / "s0000008")
    base_weights = load_file(next(tiny_base.glob("*.safetensors")))
    changed = {k for k in merged if not merged[k].equal(base_weights[k])}
    assert changed and {re.search(r"layers\.(\d+)\.", k).group(1) for k in changed} == {"1"}


def test_config_lora_layers_must_exist(toy_config):
    toy_config["sft"]["runs"]["math_2"].update(peft_method="lora", lora={"layers": [0, 8]})
    assert (
        "config key 'sft.runs.math_2.lora.layers': layer 8 does not exist (the base has 8 layers, 0-based)"
        in config_error(toy_config)
    )


def test_checkpoint_files_do_not_depend_on_offline_mode(tiny_base, mix, full_run, tmp_path):
    """A job with HF_HUB_OFFLINE=1 (a cluster node) writes the same checkpoint bytes as one without: transformers
    records its load options (offline mode forces local_files_only) in tokenizer_config.json unless they are dropped."""
    out = tmp_path / "offline"
    code = (
        "import sys, json; from pathlib import Path; from layerswap.train.sft import train_expert; "
        "train_expert(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), json.loads(sys.argv[4]), sys.argv[5])"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tiny_base), str(mix), str(out), json.dumps(PARAMS), TEMPLATE],
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    for ckpt in ("s0000008", "s0000016"):
        names = sorted(p.name for p in (full_run / ckpt).iterdir())
        assert names == sorted(p.name for p in (out / ckpt).iterdir())
        for name in names:
            assert (full_run / ckpt / name).read_bytes() == (out / ckpt / name).read_bytes(), f"{ckpt}/{name}"


def test_changed_weights_are_never_re_recorded(tiny_base, mix, full_run, tmp_path, capsys):
    """A byte of an export flipped after training, its run's checkpoints.json deleted: the rerun does not record the
    changed file (the export's own record says what it wrote); one line names the file and the repair."""
    done = tmp_path / "done"
    shutil.copytree(full_run, done)
    (done / "checkpoints.json").unlink()
    weights_file = done / "s0000016" / "model.safetensors"
    data = bytearray(weights_file.read_bytes())
    data[-64] ^= 0x01
    weights_file.write_bytes(bytes(data))
    with pytest.raises(UserError) as err:
        train_expert(tiny_base, mix, done, PARAMS, TEMPLATE)
    line = str(err.value)
    assert "\n" not in line and line.startswith(f"{weights_file}: sha256 differs from the one recorded at export")
    assert f"rm -r {done / 's0000016'}" in line
    assert not (done / "checkpoints.json").exists() and "the run is complete" not in capsys.readouterr().out


def test_deleted_weights_are_trained_again(tiny_base, mix, full_run, tmp_path):
    """An export's weight file and the run's checkpoints.json deleted (nothing else): the run trains again and
    rebuilds it, rather than calling the run complete and failing on the missing file."""
    done = tmp_path / "done"
    shutil.copytree(full_run, done)
    (done / "checkpoints.json").unlink()
    (done / "s0000016" / "model.safetensors").unlink()
    train_expert(tiny_base, mix, done, PARAMS, TEMPLATE)
    assert same(weights(full_run / "s0000016"), weights(done / "s0000016"))
    record = json.loads((done / "checkpoints.json").read_text())
    assert [c["name"] for c in record["checkpoints"]] == ["s0000008", "s0000016"]


def test_each_export_is_hashed_once(tiny_base, mix, tmp_path, monkeypatch):
    """Recording the weights' sha256 at export costs no second pass: checkpoints.json reuses the export's hash (the
    file renamed into place is the same file), so a run hashes each weight file once, as before."""
    from layerswap import fingerprint, hashcache

    monkeypatch.setattr(hashcache, "_MEMORY", {})
    hashed: list[str] = []
    real = fingerprint.file_sha256
    monkeypatch.setattr(fingerprint, "file_sha256", lambda p: (hashed.append(str(p)), real(p))[1])
    train_expert(tiny_base, mix, tmp_path / "run", PARAMS, TEMPLATE)
    exports = [p for p in hashed if p.startswith(str(tmp_path / "run")) and p.endswith("model.safetensors")]
    assert len(exports) == 2  # s0000008 and s0000016, each once
    assert hashed.count(str(Path(tiny_base) / "model.safetensors")) == 1  # the base, checked against its record once
    meta = json.loads((tmp_path / "run" / "s0000016" / "layerswap_meta.json").read_text())
    record = json.loads((tmp_path / "run" / "checkpoints.json").read_text())["checkpoints"][1]
    assert meta["weights_sha256"] == {"model.safetensors": record["sha256"]}
