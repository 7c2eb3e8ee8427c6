"""What jobs ask of SLURM (layerswap/workflow/resources.py): the model's size, the job's work, the site's caps; and
the site file's paths (layerswap/workflow/site.py). The dry runs with the cluster profile are in
tests/test_paper_config.py, the loopback SLURM in tests/test_slurm.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import MICRO, REPO

from layerswap.config import load_config
from layerswap.errors import UserError
from layerswap.workflow import resources
from layerswap.workflow.batch_fit import TOY_VOCAB, count_parameters, parameters
from layerswap.workflow.resources import Requests
from layerswap.workflow.site import Site, _minutes, check_storage
from layerswap.workflow.spec import Spec

PAPER = REPO / "config" / "paper.yaml"


def site(tmp_path: Path, limits: dict | None = None, **kw) -> Site:
    class Fixed(Site):
        def limits(self):
            return limits or {}

    return Fixed(tmp_path / "site.yaml", "acc", "cpu", "gpu", None, 8, **kw)


def test_parameters_from_the_shape():
    # Llama 3.1 8B's config.json: hidden 4096, MLP 14336, 32 layers, 32 heads, 8 key-value heads, vocab 128256
    assert count_parameters(4096, 14336, 32, 32, 8, 128256) == 8_030_261_248
    assert parameters(load_config(PAPER)) == 8_030_261_248  # base.parameters
    micro = load_config(MICRO)
    m = micro["base"]["toy_model"]
    assert parameters(micro) == count_parameters(
        m["hidden_size"],
        m["intermediate_size"],
        micro["base"]["num_layers"],
        m["num_attention_heads"],
        m["num_key_value_heads"],
        TOY_VOCAB,
    )
    assert parameters(micro) < 1e6


def test_parameters_of_a_local_base_directory(tmp_path):
    # SmolLM2-135M's shape (tied embeddings): 134,515,008 parameters
    (tmp_path / "config.json").write_text(
        json.dumps(
            {
                "hidden_size": 576,
                "intermediate_size": 1536,
                "num_hidden_layers": 30,
                "num_attention_heads": 9,
                "num_key_value_heads": 3,
                "vocab_size": 49152,
                "tie_word_embeddings": True,
            }
        )
    )
    config = load_config(PAPER)
    config["base"] = {**config["base"], "source": str(tmp_path), "parameters": None}
    assert parameters(config) == 134_515_008


def test_a_hub_base_without_a_size_is_one_line_under_a_site(tmp_path):
    config = load_config(PAPER)
    config["base"] = {**config["base"], "parameters": None}
    with pytest.raises(UserError, match=r"^base.parameters: not set, and the size of base.source 'meta-llama/Llama"):
        Requests(config, Spec(config), site(tmp_path))
    assert Requests(config, Spec(config)).params is None  # no cluster: nothing to size


def test_paper_requests_grow_with_the_model_and_the_work(tmp_path):
    config = load_config(PAPER)
    spec = Spec(config, site=site(tmp_path))
    req = Requests(config, spec, spec.site)
    sft8, sft4 = req.job("sft", 8, 1, "jpn_1"), req.job("sft", 4, 1, "math_1")
    # 8B: base in bf16 + an fp32 export on rank 0 (48 GB) x1.5, + 4 GB per process
    assert sft8 == {"mem_mb": 105000, "runtime": 135, "cpus_per_gpu": 8, "nodes": 1, "slurm_partition": "gpu"}
    assert sft4["runtime"] == 255  # the rule's 8 GPU-hours on 4 GPUs, x2, + 15 min
    half = load_config(PAPER)
    half["base"]["parameters"] = 4_015_130_624
    small = Requests(half, Spec(half, site=spec.site), spec.site)
    assert small.job("sft", 8, 1, "jpn_1")["mem_mb"] < sft8["mem_mb"]
    assert small.job("evaluate_merges", 1, 8)["mem_mb"] < req.job("evaluate_merges", 1, 8)["mem_mb"]
    # without estimates the SFT time follows the run's tokens: 40,000 samples x 1024 tokens at the GPU rate
    half["estimates"] = {}
    hours = 4_015_130_624 * 40_000 * 1024 / (resources.TRAIN_RATE["gpu"] * 8) / 3600
    assert small.job("sft", 8, 1, "jpn_1")["runtime"] > 15
    assert (
        Requests(half, Spec(half, site=spec.site), spec.site).job("sft", 8, 1, "jpn_1")["runtime"]
        == int(-(-2 * hours * 60 // 1)) + 15
    )


def test_the_site_limits_cap_the_requests(tmp_path):
    config = load_config(PAPER)
    limits = {"gpu": {"mem_mb": 64000, "cpus": 32, "runtime": 120}, "cpu": {"mem_mb": 16000}}
    spec = Spec(config, site=site(tmp_path, limits))
    req = Requests(config, spec, spec.site)
    assert req.job("sft", 8, 1, "jpn_1") == {
        "mem_mb": 64000,
        "runtime": 120,
        "cpus_per_gpu": 4,
        "nodes": 1,
        "slurm_partition": "gpu",
    }
    assert req.job("heatmap", 0, 1)["mem_mb"] == 16000
    assert req.job("hub_data", 0, 1)["mem_mb"] == 16000


def test_toy_jobs_are_small_and_gpu_free(tmp_path):
    config = load_config(MICRO)
    spec = Spec(config, site=site(tmp_path))
    req = Requests(config, spec, spec.site)
    for rule in ("sft", "evaluate_merges", "evaluate_checkpoints", "heatmap"):
        job = req.job(rule, 0, 1, "math_1")
        assert job["mem_mb"] <= 8000 and job["runtime"] <= 60 and "slurm_partition" not in job, (rule, job)


@pytest.mark.parametrize(
    "limit, minutes",
    [
        ("infinite", None),
        ("UNLIMITED", None),
        ("30", 30),
        ("45:00", 45),
        ("2:00:00", 120),
        ("1-00:00:00", 1440),
        ("1-12", 2160),
        ("2-03:30", 3090),
    ],
)
def test_sinfo_time_limits(limit, minutes):
    assert _minutes(limit) == minutes


def test_storage_checks(tmp_path):
    s = site(tmp_path)
    (tmp_path / "cache").mkdir()
    check_storage({"hf_home": str(tmp_path / "cache"), "scratch": str(tmp_path / "new" / "scratch")}, {}, s)
    with pytest.raises(UserError, match=r"'hf_home' '.*/none' is not a directory"):
        check_storage({"hf_home": str(tmp_path / "none")}, {}, s)
    with pytest.raises(UserError, match=r"^config storage.scratch '/scratch/<user>/x': a path variable"):
        check_storage({"scratch": "/scratch/<user>/x"}, {"scratch": "/scratch/<user>/x"}, s)
    with pytest.raises(UserError, match=r"^config storage.hf_home '~/hf': a path variable"):
        check_storage({"hf_home": "~/hf"}, {"hf_home": "~/hf"}, s)


def test_the_docs_site_example_is_valid(tmp_path, monkeypatch):
    """docs/CLUSTER.md's example site file parses, its `$USER` expanded (a `<user>` there was a Snakemake path
    variable: UndefinedPathvarException from the rules)."""
    from layerswap.workflow.site import parse

    text = (REPO / "docs" / "CLUSTER.md").read_text()
    block = text.split("cp cluster/site.example.yaml cluster/site.yaml", 1)[1].split("```yaml\n", 1)[1].split("```")[0]
    (tmp_path / "site.yaml").write_text(block)
    monkeypatch.setenv("USER", "alice")
    site_ = parse(tmp_path / "site.yaml")
    assert (site_.account, site_.gpu_partition, site_.gpus_per_node) == ("my_lab", "gpu_h100", 8)
    assert site_.scratch == "/scratch/alice/layerswap" and site_.hf_home == "/shared/hf_cache/layerswap"


def test_a_kept_merge_is_written_on_the_cpu_partition(tmp_path):
    """merged_model (storage.keep_merged) sizes its memory like a merge evaluation but asks for no GPU."""
    config = load_config(PAPER)
    spec = Spec(config, site=site(tmp_path))
    req = Requests(config, spec, spec.site)
    assert req.of("merged_model") == {"mem_mb": req.job("evaluate_merges", 1, 8)["mem_mb"], "runtime": 15}
    assert req.of("evaluate_merges")["slurm_partition"] == "gpu"
