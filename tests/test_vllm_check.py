"""The vLLM backend's checks that need no vLLM (the test environment has none): a model its CPU attention cannot run
refused by `layerswap check-config` and at DAG build, naming `evaluation.backend` and the model, before any job; a
Snakemake environment without vLLM refused at DAG build with the environment to use; the jobs' `layerswap` is the
running Snakemake's; the engine memory the host asks of vLLM, sized from the model, batch and context; generations
decoded as HFLM decodes them. The real engine: tests/test_vllm_engine.py, tests/test_vllm_dag.py."""

from __future__ import annotations

import json
import os
import shlex
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
    "backend, line",
    [
        ({"mgsm": "cuda"}, "config key 'evaluation.backend.mgsm': 'cuda' is not allowed; allowed: hf, vllm"),
        (
            {"mgsm": "vllm", "MGSM": "hf"},
            "config key 'evaluation.backend': unknown key 'MGSM'; allowed: mgsm, belebele",
        ),
        ({"mbpp": "vllm"}, "config key 'evaluation.backend.mbpp': task 'mbpp' has no entry in evaluation.tasks"),
        ({}, "config key 'evaluation.backend': {} is not valid; expected hf or vllm (every benchmark), or a mapping"),
        ("cuda", "config key 'evaluation.backend': 'cuda' is not valid; expected hf or vllm (every benchmark)"),
    ],
)
def test_check_config_refuses_a_bad_backend_mapping_in_one_line(tmp_path, backend, line):
    config = yaml.safe_load(micro(tmp_path, **VLLM_MICRO).read_text())
    config["evaluation"]["backend"] = backend
    if "mbpp" in backend:  # a benchmark the config does not evaluate
        del config["evaluation"]["tasks"]["mbpp"]
        config["evaluation"]["checkpoint_tasks"].remove("mbpp")
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(config))
    proc = subprocess.run(
        [sys.executable, "-m", "layerswap.cli", "check-config", str(path)], capture_output=True, text=True
    )
    assert proc.returncode == 1 and proc.stdout == "", proc.stderr
    (got,) = proc.stderr.splitlines()
    assert line in got


def test_check_config_accepts_a_backend_per_benchmark(tmp_path):
    config = yaml.safe_load(micro(tmp_path, **VLLM_MICRO).read_text())
    config["evaluation"]["backend"] = {"mgsm": "vllm", "flores": "vllm", "belebele": "hf"}
    path = tmp_path / "mapped.yaml"
    path.write_text(yaml.safe_dump(config))
    proc = subprocess.run(
        [sys.executable, "-m", "layerswap.cli", "check-config", str(path)], capture_output=True, text=True
    )
    assert proc.returncode == 0 and proc.stdout == "ok\n", proc.stderr


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


@pytest.mark.parametrize("backend", ["vllm", {"mgsm": "vllm"}])
def test_dag_build_in_an_environment_without_vllm_names_the_one_to_use(tmp_path, backend):
    """The test environment has no vLLM: a config the backend could run (every benchmark on vLLM, or one) stops at
    DAG build, one line, before any job; a dry run (no job runs) lists the jobs under the same line as a warning."""
    config = micro(tmp_path, **VLLM_MICRO)
    c = yaml.safe_load(config.read_text())
    config.write_text(yaml.safe_dump({**c, "evaluation": {**c["evaluation"], "backend": backend}}))
    proc = snakemake(tmp_path, configfile=config)
    assert proc.returncode != 0
    errors = [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("config error:")]
    assert len(errors) == 1, proc.stderr[-2000:]
    assert "has no vLLM" in errors[0] and ".venv-vllm-cpu/bin/snakemake" in errors[0] and "make gpu-venv" in errors[0]
    assert not (tmp_path / R).exists()
    dry = snakemake(tmp_path, "-n", configfile=config)
    assert dry.returncode == 0, dry.stderr[-2000:]
    warnings = [line for line in (dry.stdout + dry.stderr).splitlines() if line.startswith("config warning:")]
    assert (
        len(warnings) == 1
        and "has no vLLM" in warnings[0]
        and "a run from this environment stops before its first job" in warnings[0]
    )
    assert "evaluate_merges" in dry.stdout and not (tmp_path / R).exists()


def test_a_mapping_that_gives_vllm_no_benchmark_needs_no_vllm(tmp_path):
    config = yaml.safe_load(micro(tmp_path, backend="hf").read_text())
    config["evaluation"]["backend"] = {"mgsm": "hf", "belebele": "hf"}
    assert not vllm_check.uses_vllm(config) and vllm_check.environment_refusal(config) is None
    assert vllm_check.refusal(config, on_gpu=False) is None  # micro's head size 16: no vLLM job to refuse
    config["evaluation"]["backend"] = {"flores": "vllm"}
    assert vllm_check.uses_vllm(config) and "head size 16" in vllm_check.refusal(config, on_gpu=False)


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


def test_engine_memory_takes_the_jobs_context_rounded_to_blocks(tmp_path):
    """The job's context (its longest request, or its plan's context_tokens): a Telugu 8-shot MGSM prompt of ~10k
    tokens + 512 new ones is not cut to a fixed 8192; the KV cache holds each sequence's context in whole blocks."""
    d = model_dir(tmp_path, max_position_embeddings=131072, head_dim=128)
    got = vllm_weights.engine_memory(d, "bfloat16", 2, 10_624)
    assert got["max_model_len"] == 10_624
    assert got["kv_cache_memory_bytes"] == 2 * 4 * 2 * 128 * 2 * 10_752 * 2  # 42 blocks of 256 tokens
    assert vllm_weights.engine_memory(d, "bfloat16", 2)["max_model_len"] == 131072  # no context: the model's own


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


@pytest.mark.parametrize(
    "backend, job_backend, own",
    [
        ("hf", "hf", {}),  # the params a string backend always gave: no benchmark names one
        ("vllm", "vllm", {}),
        ({"mgsm": "vllm", "belebele": "hf"}, "hf", {"mgsm": "vllm"}),
        ({"flores": "vllm", "mgsm": "vllm"}, "hf", {"mgsm": "vllm", "flores": "vllm"}),
    ],
)
def test_jobs_name_the_backend_of_each_of_their_benchmarks(tmp_path, backend, job_backend, own):
    """Every job's --backend, and in its --benchmarks-json the backend of each of its benchmarks that the mapping
    gives another one: a job's params name only its own benchmarks' backends."""
    from layerswap.config import backend_for, check, validate_config
    from layerswap.workflow.spec import Spec

    config = validate_config(yaml.safe_load(micro(tmp_path, **VLLM_MICRO).read_text()))
    config["evaluation"]["backend"] = backend
    check(config)
    evals = Spec(config).evals
    assert evals.evaluation_params("evaluate")["backend"] == job_backend
    for bench in ("mgsm", "belebele", "flores", "mmlu"):
        (settings,) = json.loads(shlex.split(evals.benchmark_params([bench]))[0]).values()
        assert settings.get("backend") == own.get(bench), bench
        assert settings.get("backend", job_backend) == backend_for(config["evaluation"], bench)
