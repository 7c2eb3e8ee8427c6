"""`sft.*.export_dtype`: the dtype expert checkpoints are exported in reaches the export, the rule's params and
`layerswap cost`; a bad value is one line (docs/EXPORT_PRECISION.md)."""

from __future__ import annotations

import copy
import json
import shlex
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file
from test_sft import mix  # noqa: F401 (the fixture: 16 toy math rows)

from layerswap.config import effective_runs, load_config
from layerswap.errors import UserError
from layerswap.train.sft import train_expert
from layerswap.workflow import cost as cost_mod

REPO = Path(__file__).resolve().parents[1]
PARAMS = {
    "lr": 1e-3,
    "batch_size": 4,
    "seq_len": 48,
    "weight_decay": 0.01,
    "max_grad_norm": 1.0,
    "scheduler": "linear",
    "warmup_steps": 1,
    "adam_beta2": 0.99,
    "num_samples": 8,
    "checkpoint_every": 8,
    "seed": 0,
    "threads": 1,
}
TEMPLATE = "Q: {prompt}\nA:"


@pytest.fixture(scope="module")
def bf16_base(tiny_base, tmp_path_factory):
    """The tiny base stored in bf16 (config.json dtype bfloat16), as the paper's Llama 3.1 8B."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = tmp_path_factory.mktemp("bf16") / "base"
    AutoModelForCausalLM.from_pretrained(tiny_base, dtype=torch.bfloat16).save_pretrained(out)
    AutoTokenizer.from_pretrained(tiny_base).save_pretrained(out)
    return out


def exported(base: Path, mix: Path, out: Path, **params) -> dict[str, torch.Tensor]:
    train_expert(base, mix, out, {**PARAMS, **params}, TEMPLATE)
    return load_file(out / "s0000008" / "model.safetensors")


def dtypes(weights: dict[str, torch.Tensor]) -> set[torch.dtype]:
    return {w.dtype for w in weights.values()}


def test_export_dtype_reaches_the_export(tiny_base, bf16_base, mix, tmp_path):
    # a float32 base (the toy world's): the default exports float32, bf16 exports the same weights rounded to bf16
    default = exported(tiny_base, mix, tmp_path / "f32_default")
    bf16 = exported(tiny_base, mix, tmp_path / "f32_bf16", export_dtype="bf16")
    assert dtypes(default) == {torch.float32} and dtypes(bf16) == {torch.bfloat16}
    assert all(bf16[k].equal(default[k].to(torch.bfloat16)) for k in default)  # the key changes no training
    # a bf16 base (the paper's): the default exports bf16, fp32 the fp32 master weights
    base = exported(bf16_base, mix, tmp_path / "b16_default")
    fp32 = exported(bf16_base, mix, tmp_path / "b16_fp32", export_dtype="fp32")
    assert dtypes(base) == {torch.bfloat16} and dtypes(fp32) == {torch.float32}
    assert all(base[k].equal(fp32[k].to(torch.bfloat16)) for k in fp32)
    assert any(not fp32[k].equal(fp32[k].to(torch.bfloat16).float()) for k in fp32)  # fp32 keeps what bf16 drops
    meta = json.loads((tmp_path / "b16_fp32" / "checkpoints.json").read_text())
    assert meta["params"]["export_dtype"] == "fp32"


def test_a_bad_export_dtype_is_one_line_before_training(tiny_base, mix, tmp_path):
    with pytest.raises(UserError) as err:
        train_expert(tiny_base, mix, tmp_path / "run", {**PARAMS, "export_dtype": "fp16"}, TEMPLATE)
    assert str(err.value) == "sft param 'export_dtype': unknown 'fp16'; allowed: base, bf16, fp32"
    assert not (tmp_path / "run").exists()


def test_the_default_adds_nothing_to_a_runs_params():
    """`base` is how runs exported before the key existed: it stays out of the params (no rerun of finished runs),
    another value goes in (so a change reruns the SFT runs and what follows)."""
    config = load_config(REPO / "config" / "config.yaml")
    assert config["sft"]["defaults"]["export_dtype"] == "base"
    assert all("export_dtype" not in run for run in effective_runs(config).values())
    config["sft"]["defaults"]["export_dtype"] = "fp32"
    config["sft"]["runs"]["math_1"]["export_dtype"] = "base"
    runs = effective_runs(config)
    assert runs["math_2"]["export_dtype"] == "fp32" and "export_dtype" not in runs["math_1"]


def test_the_paper_config_exports_fp32_into_the_sft_params():
    from layerswap.workflow.spec import Spec

    config = load_config(REPO / "config" / "paper.yaml")
    assert config["sft"]["defaults"]["export_dtype"] == "fp32"
    (word,) = shlex.split(Spec(config).runs.sft_params("swh_1"))
    assert json.loads(word)["export_dtype"] == "fp32"


def test_config_refuses_an_unknown_export_dtype_in_one_line(tmp_path):
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config["sft"]["runs"]["math_1"]["export_dtype"] = "float32"
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(UserError) as err:
        load_config(path)
    assert "\n" not in str(err.value)
    assert "config key 'sft.runs.math_1.export_dtype': 'float32' is not allowed; allowed: base, bf16, fp32" in str(
        err.value
    )


def test_cost_counts_every_kept_checkpoint_in_its_export_dtype():
    """Issue 48: the sft disk is every checkpoint each run keeps (the joint runs 16, the others 8) x the parameters x
    its export dtype's bytes; without a parameter count, the config's estimate scaled from the base's dtype."""
    paper = load_config(REPO / "config" / "paper.yaml")
    counts = {"sft": 18, "select": 3}

    def sft_disk(config: dict) -> tuple[float, str | None]:
        estimates, note = cost_mod.export_scaled(config["estimates"], config)
        return cost_mod.plan_cost(counts, estimates)["rules"]["sft"]["disk_gb"], note

    params = paper["base"]["parameters"]
    disk, note = sft_disk(paper)
    assert disk == pytest.approx((15 * 8 + 3 * 16) * params * 4 / 1e9)  # fp32 exports
    assert "8 checkpoints: 15 runs, 16 checkpoints: 3 runs" in note
    mixed = copy.deepcopy(paper)  # the joint runs in bf16: half their bytes
    for name in ("joint_swh_1", "joint_swh_2", "joint_swh_3"):
        mixed["sft"]["runs"][name]["export_dtype"] = "bf16"
    assert sft_disk(mixed)[0] == pytest.approx((15 * 8 * 4 + 3 * 16 * 2) * params / 1e9)
    unknown = copy.deepcopy(paper)  # no parameter count: the estimate, scaled to the export dtype
    unknown["base"]["parameters"] = None
    per_job = paper["estimates"]["sft"]["disk_gb"]
    assert sft_disk(unknown) == (
        18 * per_job * 2,
        "sft disk: checkpoints exported in fp32 (export_dtype), the "
        "estimate is per job in the base's bfloat16 (base.dtype): x2",
    )
    unknown["sft"]["defaults"]["export_dtype"] = "bf16"
    assert sft_disk(unknown) == (18 * per_job, None)


def test_cost_command_prints_the_scaled_disk_and_says_why(capsys):
    from layerswap.cli import main

    assert main(["cost", "--configfile", str(REPO / "config" / "paper.yaml"), "--counts-json", '{"sft": 2}']) == 0
    out = capsys.readouterr().out
    paper = load_config(REPO / "config" / "paper.yaml")
    per_job = cost_mod.export_scaled(paper["estimates"], paper)[0]["sft"]["disk_gb"]
    sft_row = next(line for line in out.splitlines() if line.startswith("sft "))
    assert f"{2 * per_job:,.1f}" in sft_row.split()
    assert "sft disk: every kept checkpoint (8 checkpoints: 15 runs, 16 checkpoints: 3 runs)" in out
