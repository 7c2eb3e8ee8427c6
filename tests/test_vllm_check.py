"""The vLLM backend's checks that need no vLLM (the test environment has none): a model its CPU attention cannot run
refused by `layerswap check-config` and at DAG build, naming `evaluation.backend` and the model, before any job; a
Snakemake environment without vLLM refused at DAG build with the environment to use; the jobs' `layerswap` is the
running Snakemake's; the engine memory the host asks of vLLM, sized from the model, batch and context; generations
decoded as HFLM decodes them. The real engine: tests/test_vllm_engine.py, tests/test_vllm_dag.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).parent))
from conftest import MICRO, R, snakemake  # noqa: E402

from layerswap.evaluation import vllm_check, vllm_weights  # noqa: E402

VLLM_MICRO = {"hidden_size": 64, "intermediate_size": 64}  # 2 heads: head_dim 32, which vLLM's CPU attention takes


def micro(tmp_path: Path, backend: str = "vllm", **toy_model) -> Path:
    config = yaml.safe_load(MICRO.read_text())
    config["evaluation"]["backend"] = backend
    config["base"]["toy_model"].update(toy_model)
    path = tmp_path / f"{backend}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_check_config_refuses_a_head_size_the_cpu_attention_cannot_run(tmp_path):
    """micro's toy base: hidden 32 / 2 heads = head_dim 16; on a CPU vLLM's attention refuses it."""
    proc = subprocess.run(
        [sys.executable, "-m", "layerswap.cli", "check-config", str(micro(tmp_path))],
        capture_output=True,
        text=True,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
    )
    assert proc.returncode == 1 and proc.stdout == "", proc.stderr
    (line,) = proc.stderr.splitlines()
    assert "evaluation.backend: vllm cannot run base.toy_model" in line
    assert "head size 16 (hidden_size 32 / num_attention_heads 2)" in line
    assert "32, 64, 80" in line and "hidden_size 64 with 2 heads" in line and "evaluation.backend: hf" in line


@pytest.mark.parametrize(
    "toy_model, on_gpu, refused",
    [
        ({}, False, True),
        ({"head_dim": 16, "hidden_size": 64}, False, True),  # an explicit head_dim wins over hidden / heads
        (VLLM_MICRO, False, False),
        ({}, True, False),  # on a GPU the attention vLLM picks depends on the device: the job checks it
    ],
)
def test_refusal_by_shape_and_device(tmp_path, toy_model, on_gpu, refused):
    config = yaml.safe_load(micro(tmp_path, **toy_model).read_text())
    assert (vllm_check.refusal(config, on_gpu=on_gpu) is not None) == refused
    config["evaluation"]["backend"] = "hf"
    assert vllm_check.refusal(config, on_gpu=on_gpu) is None


def test_dag_build_refuses_the_shape_before_any_job(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    proc = snakemake(tmp_path, "-n", configfile=micro(tmp_path))
    assert proc.returncode != 0
    errors = [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("config error:")]
    assert len(errors) == 1 and "evaluation.backend: vllm cannot run base.toy_model" in errors[0], proc.stderr[-2000:]
    assert not (tmp_path / R).exists()


def test_dag_build_in_an_environment_without_vllm_names_the_one_to_use(tmp_path):
    """The test environment has no vLLM: a config the backend could run stops at DAG build, one line."""
    proc = snakemake(tmp_path, "-n", configfile=micro(tmp_path, **VLLM_MICRO))
    assert proc.returncode != 0
    errors = [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("config error:")]
    assert len(errors) == 1, proc.stderr[-2000:]
    assert "has no vLLM" in errors[0] and ".venv-vllm-cpu/bin/snakemake" in errors[0] and "make gpu-venv" in errors[0]
    assert not (tmp_path / R).exists()


def test_the_jobs_run_the_layerswap_of_snakemakes_environment(tmp_path, monkeypatch):
    """Another environment's bin/ first on PATH: use_own_bin puts this one's first, so the rules' `layerswap` is
    this environment's."""
    other = tmp_path / "other-venv" / "bin"
    other.mkdir(parents=True)
    (other / "layerswap").write_text("#!/bin/sh\nexit 3\n")
    (other / "layerswap").chmod(0o755)
    monkeypatch.setenv("PATH", f"{other}{os.pathsep}{os.environ['PATH']}")
    config = {"evaluation": {"backend": "vllm"}}
    assert "not from this Snakemake's environment" in vllm_check.environment_refusal(config)
    vllm_check.use_own_bin()
    assert os.environ["PATH"].split(os.pathsep)[0] == str(Path(sys.executable).parent)
    assert "has no vLLM" in vllm_check.environment_refusal(config)  # this (test) environment's layerswap, no vLLM
    assert vllm_check.environment_refusal({"evaluation": {"backend": "hf"}}) is None


def model_dir(tmp_path: Path, **cfg) -> Path:
    import torch
    from safetensors.torch import save_file

    d = tmp_path / "m"
    d.mkdir()
    shape = {"num_hidden_layers": 4, "num_attention_heads": 2, "num_key_value_heads": 2, "hidden_size": 64}
    (d / "config.json").write_text(json.dumps({**shape, "max_position_embeddings": 256, **cfg}))
    save_file({"w": torch.zeros(1000, 1000)}, str(d / "model.safetensors"))
    return d


def test_engine_memory_is_sized_from_model_batch_and_context(tmp_path):
    d = model_dir(tmp_path)
    # 2 (K, V) x 4 layers x 2 KV heads x 32 head size x 4 bytes x 256 tokens x 16 sequences
    assert vllm_weights.engine_memory(d, "float32", 16) == {
        "max_model_len": 256,
        "kv_cache_memory_bytes": 2 * 4 * 2 * 32 * 4 * 256 * 16,
    }
    bf16 = vllm_weights.engine_memory(d, "bfloat16", 1)
    assert bf16["kv_cache_memory_bytes"] == 2 * 4 * 2 * 32 * 2 * 256


def test_engine_memory_context_capped_and_rounded_to_blocks(tmp_path):
    d = model_dir(tmp_path, max_position_embeddings=131072, head_dim=128)
    got = vllm_weights.engine_memory(d, "bfloat16", 2)
    assert got["max_model_len"] == vllm_weights.MAX_MODEL_LEN
    assert got["kv_cache_memory_bytes"] == 2 * 4 * 2 * 128 * 2 * vllm_weights.MAX_MODEL_LEN * 2


def test_engine_memory_on_a_gpu_asks_for_its_share_of_the_device_only(tmp_path):
    d = model_dir(tmp_path)
    GiB = 2**30
    got = vllm_weights.engine_memory(d, "float32", 16, gpu_memory=(70 * GiB, 80 * GiB))
    need = 10**6 * 4 + got["kv_cache_memory_bytes"] + vllm_weights.GPU_HEADROOM
    assert got["kv_cache_memory_bytes"] == 2 * 4 * 2 * 32 * 4 * 256 * 16
    assert need / (80 * GiB) <= got["gpu_memory_utilization"] < need / (80 * GiB) + 0.01
    # a device with little free memory: the KV cache cut to what it holds, never below one sequence
    tight = vllm_weights.engine_memory(d, "float32", 10**6, gpu_memory=(5 * GiB, 80 * GiB))
    assert 2 * 4 * 2 * 32 * 4 * 256 <= tight["kv_cache_memory_bytes"] <= 5 * GiB
    assert tight["gpu_memory_utilization"] <= vllm_weights.GPU_MAX_FRACTION


def test_engine_error_is_one_line():
    err = ValueError("Available memory on node 0 (1/2 GiB) is less than desired\nsecond line")
    assert vllm_weights.engine_error(err) == "ValueError: Available memory on node 0 (1/2 GiB) is less than desired"


def test_generations_are_decoded_as_hflm_decodes_them():
    class Completion:
        def __init__(self):
            self.text, self.token_ids = " a b</s>", [5, 6, 2]

    class Wrapper:  # stand-in for lm-eval's VLLM
        def __init__(self):
            self.tokenizer = type(
                "T", (), {"decode": lambda self, ids, skip_special_tokens: f"{ids}{skip_special_tokens}"}
            )()

        def _model_generate(self, requests, generate=False, sampling_params=None):
            return [type("Out", (), {"outputs": [Completion()]})() for _ in requests]

    lm = vllm_weights.hf_decoding(Wrapper)()
    assert [o.outputs[0].text for o in lm._model_generate([[1]], generate=True)] == ["[5, 6, 2]True"]
    assert [o.outputs[0].text for o in lm._model_generate([[1]])] == [" a b</s>"]  # loglikelihood: untouched
