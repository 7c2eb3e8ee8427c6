"""The vLLM host's in-place weight path, without vLLM: vLLM needs a GPU and is not installed on CPU test machines, so
a minimal stand-in for lm-eval's VLLM wrapper and its `vllm.LLM` (`collective_rpc`, `reset_prefix_cache`) records
what the host hands to the engine. What is checked is the host's own behaviour: which path it takes, that the tensors
loaded are exactly `layerswap.merge.build_state_dict`'s output (HF names, shapes, dtypes), that the prefix cache is
reset after every load, and that a vLLM which cannot update falls back with one log line. Nothing here shows that
vLLM's own `load_weights` accepts these names; that needs a GPU run (scripts/benchmark_costs.py --backends vllm)."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest
import torch

from layerswap import merge
from layerswap.evaluation import vllm_weights
from layerswap.evaluation.hosts import VLLMHost

sys.path.insert(0, str(Path(__file__).parent))
from test_merge_engine import random_ckpt, swap  # noqa: E402

LAYERS = 3


class FakeLLM:
    """Stand-in for vllm.LLM: runs the worker extension's method on a worker holding a recording model."""

    def __init__(self, fail: bool = False):
        self.fail = fail
        self.events: list[tuple] = []
        self.worker = type("Worker", (vllm_weights.WeightsExtension,), {})()
        self.worker.model_runner = type("Runner", (), {})()
        self.worker.model_runner.model = self

    def load_weights(self, weights):  # the vLLM model's loader, called by the extension
        self.events.append(("load", dict(weights)))

    def collective_rpc(self, method, timeout=None, args=(), kwargs=None):
        if self.fail:
            raise AttributeError(f"'Worker' object has no attribute '{method}'")
        return [getattr(self.worker, method)(*args, **(kwargs or {}))]

    def reset_prefix_cache(self):
        self.events.append(("reset",))


class OldLLM:
    """A vLLM whose LLM has no collective_rpc."""


def factory(built: list, engine=FakeLLM, **engine_kw):
    def make_lm(**kwargs):
        lm = type("LM", (), {})()
        lm.model = engine(**engine_kw)
        lm.kwargs = kwargs
        built.append(lm)
        return lm
    return make_lm


@pytest.fixture()
def world(tmp_path: Path):
    base, base_t = random_ckpt(tmp_path / "base", LAYERS, seed=0)
    experts = {}
    for kind in ("task", "lang"):
        for j in range(2):
            d, _ = random_ckpt(tmp_path / f"{kind}{j}", LAYERS, seed=10 * (kind == "lang") + j + 1, like=base_t)
            (Path(d) / "tokenizer.json").write_text("{}")
            experts[kind, j] = d
    recipes = []
    for i in range(2):
        for j in range(2):
            p = tmp_path / f"r{i}{j}.json"
            p.write_text(json.dumps(swap(experts["task", j], experts["lang", i], bottom=1, top=1)))
            recipes.append(p)
    return tmp_path, recipes


def test_one_engine_merged_tensors_loaded_then_prefix_cache_reset(world, caplog) -> None:
    tmp, recipes = world
    built: list = []
    host = VLLMHost(4, "auto", "float32", tmp / "models", merges=merge, make_lm=factory(built))
    caplog.set_level(logging.INFO, logger="layerswap.evaluate")
    for r in recipes:
        lm = host.load(r)
        assert lm is built[0]
        assert host.phase["switch"] >= 0
        host.release()
    host.close()
    assert len(built) == 1, "one engine for the whole job"
    assert built[0].kwargs["worker_extension_cls"] == vllm_weights.EXTENSION
    assert built[0].kwargs["pretrained"] == merge.model_dir_of(merge.load_recipe(str(recipes[0])))
    events = built[0].model.events
    assert [e[0] for e in events] == ["load", "reset"] * len(recipes)
    for r, (_, loaded) in zip(recipes, events[0::2]):
        want = merge.build_state_dict(merge.load_recipe(str(r)))
        assert sorted(loaded) == sorted(want) and all(k.startswith(("model.", "lm_head.")) for k in loaded)
        for name, t in want.items():
            assert loaded[name].dtype == t.dtype and loaded[name].shape == t.shape
            assert torch.equal(loaded[name], t)
    assert not (tmp / "models").exists(), "nothing written to disk on the in-place path"
    assert sum("switch" in m for m in caplog.messages) == len(recipes)


def test_failed_update_falls_back_once_with_a_log_line(world, caplog, monkeypatch) -> None:
    tmp, recipes = world
    built: list = []
    written: list = []
    real_write = merge.write_merged
    monkeypatch.setattr(merge, "write_merged", lambda recipe, out: (written.append(out), real_write(recipe, out)))
    host = VLLMHost(4, "auto", "float32", tmp / "models", merges=merge, make_lm=factory(built, fail=True))
    caplog.set_level(logging.INFO, logger="layerswap.evaluate")
    for r in recipes:
        host.load(r)
        assert list(Path(host.written).glob("*.safetensors"))
        host.release()
        assert host.written is None
    host.close()
    fallbacks = [m for m in caplog.messages if "falling back" in m]
    assert len(fallbacks) == 1 and "AttributeError" in fallbacks[0]
    assert host.in_place is False
    # the probe engine, then one engine per model from the written merge, without the worker extension
    assert len(built) == 1 + len(recipes)
    assert [b.kwargs["pretrained"] for b in built[1:]] == written
    assert all("worker_extension_cls" not in b.kwargs for b in built[1:])


def test_vllm_without_collective_rpc_falls_back(world, caplog) -> None:
    tmp, recipes = world
    built: list = []
    host = VLLMHost(4, "auto", "float32", tmp / "models", merges=merge, make_lm=factory(built, engine=OldLLM))
    caplog.set_level(logging.INFO, logger="layerswap.evaluate")
    host.load(recipes[0])
    host.close()
    assert host.fallback_reason == "the installed vLLM's LLM has no collective_rpc, reset_prefix_cache"
    assert any("falling back" in m and "collective_rpc" in m for m in caplog.messages)


def test_checkpoint_dirs_in_place(world) -> None:
    """A checkpoint dir: the engine is built from the first; a second of the same architecture is read and loaded."""
    tmp, _ = world
    built: list = []
    host = VLLMHost(4, "auto", "float32", tmp / "models", make_lm=factory(built))
    host.load(tmp / "task0")
    assert built[0].model.events == []
    host.release()
    host.load(tmp / "task1")
    host.close()
    assert len(built) == 1
    from safetensors.torch import load_file

    loaded = built[0].model.events[0][1]
    want = load_file(str(tmp / "task1" / "model.safetensors"))
    assert all(torch.equal(loaded[k], v) for k, v in want.items()) and sorted(loaded) == sorted(want)


def test_hf_path_does_not_import_vllm() -> None:
    import subprocess

    code = ("import sys, layerswap.evaluation.evaluate, layerswap.evaluation.hosts, layerswap.evaluation.vllm_weights; "
            "print('vllm' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_vllm_without_worker_extensions_falls_back(world, caplog) -> None:
    tmp, recipes = world
    built: list = []
    make = factory(built)

    def old_vllm(**kwargs):
        if "worker_extension_cls" in kwargs:  # as EngineArgs before the field existed
            raise TypeError("EngineArgs.__init__() got an unexpected keyword argument 'worker_extension_cls'")
        return make(**kwargs)

    host = VLLMHost(4, "auto", "float32", tmp / "models", merges=merge, make_lm=old_vllm)
    caplog.set_level(logging.INFO, logger="layerswap.evaluate")
    host.load(recipes[0])
    assert host.in_place is False and len(built) == 1 and host.written is not None
    host.close()
    assert sum("falling back" in m and "worker_extension_cls" in m for m in caplog.messages) == 1
