"""The vLLM backend through a real vLLM engine: vllm-cpu in its own environment (`make vllm-cpu-venv`,
scripts/vllm_cpu_env.py), each vLLM run a `layerswap` subprocess of that environment, the HF runs in this one.

The world: Llama-shaped random models (hidden 128, 4 heads: head_dim 32, the smallest vLLM's CPU attention takes;
2 layers) with a word-level tokenizer, two task and two language experts, their 2x2 layer swaps, MGSM-format
(generation, greedy) and Belebele-format (loglikelihood) items, float32. Checked: one engine evaluates the checkpoint
it was built from, four merges and a further checkpoint by switching weights in place (vLLM's reload_weights), and
its per-item results equal the HF backend's, up to the differences explained in `test_in_engine_switches_match_hf`;
the one-engine-per-model path (several engines in one process); a weight update that fails half way; a head size or
dtype the device's vLLM does not run, refused before any model is loaded.

Skipped where the environment is absent, unless LAYERSWAP_REQUIRE_VLLM=1 (set by .ci/run) makes that a failure.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_evaluate import make_args, make_data, make_model  # noqa: E402

from layerswap.evaluation import evaluate_merges  # noqa: E402
from scripts import vllm_cpu_env  # noqa: E402

pytestmark = pytest.mark.vllm
BENCH = {"mgsm": {"shots": 1, "languages": ["en", "toy_swh"]}, "belebele": {"shots": 0}}
SWAPS = ["m/r00", "m/r01", "m/r10", "m/r11"]


@pytest.fixture(scope="module", autouse=True)
def environment():
    why = vllm_cpu_env.unavailable()
    if why:
        if os.environ.get("LAYERSWAP_REQUIRE_VLLM") == "1":
            pytest.fail(f"LAYERSWAP_REQUIRE_VLLM=1 but {why}")
        pytest.skip(why)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("vworld")
    vocab = make_data(root / "data")
    for name, seed in [("task0", 0), ("task1", 1), ("lang0", 2), ("lang1", 3)]:
        make_model(root / name, vocab, seed=seed, hidden=128, layers=2)
    make_model(root / "head16", vocab, seed=4, hidden=64, layers=2)
    models = [("base", root / "task0")]
    for i in range(2):
        for j in range(2):
            recipe = root / f"r{i}{j}.json"
            recipe.write_text(
                json.dumps(
                    {
                        "method": "layer_swap",
                        "params": {"bottom": 1, "top": 0},
                        "inputs": {"task": str(root / f"task{j}"), "lang": str(root / f"lang{i}")},
                    }
                )
            )
            models.append((f"m/r{i}{j}", recipe))
    models.append(("lang1", root / "lang1"))
    return root, models


def vllm_run(world, out: Path, models, driver: str = "", dtype: str = "float32", bench=BENCH, extra=()):
    """`layerswap evaluate-merges --backend vllm` in the CPU-vLLM environment; `driver`: Python run first in the
    same process (a patch), then the command through layerswap.cli.main; `extra`: more arguments."""
    root, _ = world
    argv = [
        "evaluate-merges",
        "--backend",
        "vllm",
        "--device",
        "cpu",
        "--dtype",
        dtype,
        "--data-dir",
        str(root / "data"),
        "--out-dir",
        str(out),
        "--benchmarks-json",
        json.dumps(bench),
        "--batch-size",
        "16",
        "--seed",
        "0",
        "--threads",
        "1",
        *[a for m, src in models for a in ("--model", f"{m}={src}")],
        *extra,
    ]
    code = f"{driver}\nimport sys\nfrom layerswap.cli import main\nsys.exit(main({argv!r}))"
    return vllm_cpu_env.run(
        ["python", "-c", code],
        capture_output=True,
        text=True,
        timeout=1800,
        env_extra={"PYTHONPATH": str(vllm_cpu_env.REPO)},
    )


@pytest.fixture(scope="module")
def runs(world, tmp_path_factory):
    _, models = world
    hf, vl = tmp_path_factory.mktemp("hf"), tmp_path_factory.mktemp("vllm")
    evaluate_merges.run(make_args(world[0] / "data", hf, models, BENCH))
    proc = vllm_run(world, vl, models)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return hf, vl, proc.stderr


def samples(out: Path, model: str, bench: str) -> list[dict]:
    return [json.loads(line) for line in (out / model / f"{bench}.samples.jsonl").read_text().splitlines()]


def test_in_engine_switches_match_hf(world, runs) -> None:
    """Generations equal HF's text for text: the host decodes vLLM's generated token ids as HFLM does
    (`vllm_weights.hf_decoding`; vLLM's own text keeps special tokens and, detokenised after the prompt with this
    word-level tokenizer, starts with a space). One difference, explained: loglikelihoods: vLLM's CPU kernels sum in
    another order than torch's, so they agree to ~1e-6 (fp32), not bit for bit. Scores, extracted answers and chosen
    options are equal; each file records the backend that scored it."""
    hf, vl, log = runs
    _, models = world
    assert log.count("loaded into the running engine: switch") == len(models) - 1, log[-3000:]
    assert "falling back" not in log
    loaded = [(int(n), int(total)) for n, total in re.findall(r"(\d+) of (\d+) tensors", log)]
    assert loaded[0][0] == loaded[0][1] and any(n < total for n, total in loaded), "merges sharing layers: a part"
    for model, _ in models:
        for bench in BENCH:
            got, want = (json.loads((d / model / f"{bench}.json").read_text()) for d in (vl, hf))
            assert (got.pop("backend"), want.pop("backend")) == ("vllm", "hf"), (model, bench)  # which engine scored
            assert got == want, (model, bench)
        for a, b in zip(samples(hf, model, "mgsm"), samples(vl, model, "mgsm"), strict=True):
            assert a["generation"] == b["generation"] and a["extracted"] == b["extracted"], model
        for a, b in zip(samples(hf, model, "belebele"), samples(vl, model, "belebele"), strict=True):
            assert a["extracted"] == b["extracted"], model
            assert max(abs(x - y) for x, y in zip(a["choice_loglikelihoods"], b["choice_loglikelihoods"])) < 1e-5
    # the switches changed the engine's output: the models do not all generate alike
    assert len({json.dumps(samples(vl, m, "mgsm")) for m, _ in models}) == len(models)


def test_engine_context_is_the_longest_request(runs) -> None:
    """No --context-tokens: vLLM's max_model_len is the longest the job's requests need (prompt + generation budget;
    a choice's context + continuation + the one token vLLM generates), not a fixed cap."""
    _, _, log = runs
    longest = [int(n) for n in re.findall(r"vllm requests counted in [0-9.]+ s; the longest needs (\d+) tokens", log)]
    engines = [int(n) for n in re.findall(r"vLLM engine: enforce_eager=True, max_model_len=(\d+),", log)]
    assert len(longest) == 1 and engines == longest and 0 < longest[0] < 256, log[-3000:]


def test_two_backends_in_one_job_give_each_benchmark_its_own_backends_bytes(world, runs, tmp_path) -> None:
    """A job whose benchmarks name two backends (--backend vllm, Belebele's own backend hf): one host of each in the
    process; MGSM's files are the vLLM job's byte for byte, Belebele's the HF job's (not merely equal scores)."""
    hf, vl, _ = runs
    _, models = world
    picked = models[:3]  # a checkpoint, then two merges: both hosts switch weights
    mixed = {**BENCH, "belebele": {**BENCH["belebele"], "backend": "hf"}}
    proc = vllm_run(world, tmp_path, picked, bench=mixed)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "evaluate: hf backend: belebele" in proc.stderr and "evaluate: vllm backend: mgsm" in proc.stderr
    for model, _ in picked:
        for bench, want in (("mgsm", vl), ("belebele", hf)):
            for f in (f"{bench}.json", f"{bench}.samples.jsonl"):
                assert (tmp_path / model / f).read_bytes() == (want / model / f).read_bytes(), (model, f)


@pytest.mark.parametrize("case", ["context_tokens", "max_position_embeddings"])
def test_a_request_longer_than_the_engines_context_is_refused_before_the_engine(world, tmp_path, case) -> None:
    """--context-tokens shorter than a request (the plan's figure too small), or a model whose context is: one line
    naming benchmark, language key, item and lengths, before vLLM builds an engine; nothing written."""
    root, models = world
    if case == "context_tokens":
        proc = vllm_run(world, tmp_path / "out", models[:1], extra=["--context-tokens", "20"])
        want = "over the context of 20 tokens (--context-tokens)"
    else:
        import shutil

        short = tmp_path / "short"
        shutil.copytree(root / "task0", short)
        cfg = json.loads((short / "config.json").read_text())
        (short / "config.json").write_text(json.dumps({**cfg, "max_position_embeddings": 20}))
        proc = vllm_run(world, tmp_path / "out", [("short", short)])
        want = "over the context of 20 tokens (the model's max_position_embeddings)"
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert re.search(r"error: (mgsm (en|toy_swh)|belebele \S+) item \d+: ", last) and want in last, proc.stderr[-2000:]
    assert "lm-eval would cut the prompt from the left, so it is refused" in last
    assert "Initializing" not in proc.stderr and not (tmp_path / "out").exists(), "no engine, nothing written"


def test_one_engine_per_model_when_the_vllm_cannot_reload(world, runs, tmp_path) -> None:
    """The fallback: each model its own engine in one process (merges written to a temp dir), results equal the
    in-place run's byte for byte."""
    _, vl, _ = runs
    _, models = world
    picked = [models[4], models[5]]  # a merge, then a checkpoint: two engines in one process
    driver = (
        "from layerswap.evaluation import vllm_weights\n"
        "vllm_weights.cannot_reload = lambda llm: 'a vLLM without reload_weights (test)'"
    )
    proc = vllm_run(world, tmp_path, picked, driver)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr.count("falling back to one engine per model") == 1
    assert "loaded into the running engine: switch" not in proc.stderr
    for model, _ in picked:
        for f in ("mgsm.json", "mgsm.samples.jsonl", "belebele.json", "belebele.samples.jsonl"):
            assert (tmp_path / model / f).read_bytes() == (vl / model / f).read_bytes(), (model, f)


def test_update_failing_half_way_is_refused(world, tmp_path) -> None:
    """vLLM raises after part of a merge's tensors went in: the engine is shut down, the job stops with one line,
    and nothing is written for that model."""
    _, models = world
    driver = (
        "from layerswap.evaluation import vllm_weights\n"
        "real = vllm_weights.update_weights\n"
        "def half(items):\n"
        "    for i, item in enumerate(items):\n"
        "        if i == 3:\n"
        "            raise OSError('read error (test)')\n"
        "        yield item\n"
        "vllm_weights.update_weights = lambda llm, items: real(llm, half(items))"
    )
    proc = vllm_run(world, tmp_path, models[:3], driver)
    assert proc.returncode == 1, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert "r00.json: vLLM failed to load the weights" in last and "read error (test)" in last
    assert "engine was shut down" in last
    assert (tmp_path / "base" / "mgsm.json").is_file()
    assert not (tmp_path / "m" / "r00").exists() and not (tmp_path / "m" / "r01").exists()


@pytest.mark.parametrize("case", ["head_size", "dtype", "architecture"])
def test_unsupported_model_refused_before_loading(world, tmp_path, case) -> None:
    root, models = world
    if case == "architecture":
        import shutil

        other = tmp_path.parent / f"{tmp_path.name}-arch" / "noarch"
        shutil.copytree(root / "task0", other)
        cfg = json.loads((other / "config.json").read_text())
        (other / "config.json").write_text(json.dumps({**cfg, "architectures": ["NoSuchForCausalLM"]}))
        proc = vllm_run(world, tmp_path, [("base", models[0][1]), ("x", other)])
        want = "noarch: architecture NoSuchForCausalLM is not one the installed vLLM runs"
    elif case == "head_size":
        proc = vllm_run(world, tmp_path, [("base", models[0][1]), ("h16", root / "head16")])
        want = "head16: head size 16 is not supported by CPU_ATTN attention"
    else:
        proc = vllm_run(world, tmp_path, models[:2], dtype="float64")
        want = "task0: dtype float64 is not supported on vLLM's cpu platform"
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert want in last and "evaluation.backend (--backend) vllm" in last, proc.stderr[-2000:]
    assert "use evaluation.backend: hf" in last
    assert "Initializing" not in proc.stderr and not list(tmp_path.iterdir()), "nothing loaded, nothing written"


def test_static_cpu_shape_lists_match_the_installed_vllm() -> None:
    """`layerswap check-config` refuses without importing vLLM, from vllm_check's lists: they must be vLLM's."""
    from layerswap.evaluation import vllm_check

    code = (
        "import json\nfrom vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend as B\n"
        "print(json.dumps([B.get_supported_head_sizes(), [str(d).removeprefix('torch.') for d in B.supported_dtypes]]))"
    )
    proc = vllm_cpu_env.run(["python", "-c", code], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    heads, dtypes = json.loads(proc.stdout.strip().splitlines()[-1])
    assert tuple(heads) == vllm_check.CPU_HEAD_SIZES and set(dtypes) == set(vllm_check.CPU_DTYPES)
