"""The vLLM host's in-place weight path against a stand-in engine, in the test environment (no vLLM in it): a minimal
stand-in for lm-eval's VLLM wrapper and its `vllm.LLM` (`collective_rpc`, `reset_prefix_cache`) records what the
host hands to the engine. What is checked is the host's own behaviour: which path it takes, that the tensors loaded
are exactly `merge.engine.build_state_dict`'s output (HF names, shapes, dtypes), that the prefix cache is reset
after every load, that input the engine cannot take is refused before the engine is touched, and that a vLLM which
cannot update falls back with one log line. That vLLM itself takes these weights: tests/test_vllm_engine.py (a real
vLLM on the CPU)."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from layerswap.errors import UserError
from layerswap.evaluation.hosts import VLLMHost
from layerswap.merge import engine as merge
from layerswap.merge import merger as merger_module
from layerswap.merge.merger import Merger
from layerswap.merge.recipes import Recipe

sys.path.insert(0, str(Path(__file__).parent))
from test_merge_engine import random_ckpt, swap  # noqa: E402

LAYERS = 3


class FakeLLM:
    """Stand-in for vllm.LLM: records the weights its workers' `reload_weights` receives."""

    def __init__(self, fail: bool = False):
        self.fail = fail
        self.events: list[tuple] = []

    def collective_rpc(self, method, timeout=None, args=(), kwargs=None):
        assert method == "reload_weights" and not args
        loaded = {}
        for name, tensor in kwargs["weights_iterator"]:
            if self.fail and len(loaded) == 2:
                raise RuntimeError("worker died (stand-in)")
            loaded[name] = tensor
        self.events.append(("load", loaded))
        return [None]

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
            recipes.append(Recipe.load(p))
    return tmp_path, recipes


def test_one_engine_merged_tensors_loaded_then_prefix_cache_reset(world, caplog) -> None:
    tmp, recipes = world
    built: list = []
    host = VLLMHost(4, "auto", "float32", tmp / "models", merger=Merger(), make_lm=factory(built))
    caplog.set_level(logging.INFO, logger="layerswap.evaluate")
    for r in recipes:
        lm = host.load(r)
        assert lm is built[0]
        assert host.phase["switch"] >= 0
        host.release()
    host.close()
    assert len(built) == 1, "one engine for the whole job"
    assert built[0].kwargs["pretrained"] == recipes[0].model_dir
    events = built[0].model.events
    assert [e[0] for e in events] == ["load", "reset"] * len(recipes)
    held: dict = {}  # what the engine holds after each switch: the first loads every tensor, the next what changed
    sizes = []
    for r, (_, loaded) in zip(recipes, events[0::2]):
        want = merge.build_state_dict(r)
        assert set(loaded) <= set(want) and all(k.startswith(("model.", "lm_head.")) for k in loaded)
        held.update(loaded)
        assert sorted(held) == sorted(want)
        for name, t in want.items():
            assert held[name].dtype == t.dtype and held[name].shape == t.shape
            assert torch.equal(held[name], t)
        sizes.append(len(loaded))
    # r00 -> r01 and r10 -> r11 share their language expert's layers: only the rest is loaded
    assert sizes[0] == sizes[2] == len(held) and sizes[1] == sizes[3] < len(held)
    assert not (tmp / "models").exists(), "nothing written to disk on the in-place path"
    assert sum("switch" in m for m in caplog.messages) == len(recipes)


def test_failed_update_stops_with_one_line_and_drops_the_engine(world) -> None:
    """An update that fails half way: the engine (part old, part new weights) is never used again."""
    tmp, recipes = world
    built: list = []
    host = VLLMHost(4, "auto", "float32", tmp / "models", merger=Merger(), make_lm=factory(built, fail=True))
    with pytest.raises(
        UserError, match=r"r00.json: vLLM failed to load the weights .*RuntimeError: worker died"
    ) as err:
        host.load(recipes[0])
    assert "\n" not in str(err.value) and "engine was shut down" in str(err.value)
    assert host.lm is None and host.key is None
    assert built[0].model.events == [], "no prefix-cache reset, nothing recorded as loaded"
    host.close()


def test_state_that_does_not_fit_the_engine_is_refused_before_loading(world) -> None:
    """A tensor missing, of another shape, or non-finite: refused while the engine still holds the previous model."""
    tmp, recipes = world
    built: list = []
    host = VLLMHost(4, "auto", "float32", tmp / "models", merger=Merger(), make_lm=factory(built))
    host.load(tmp / "task0")
    for edit, message in [
        (lambda s: s.pop("model.norm.weight"), r"tensors differ .*missing: \['model.norm.weight'\]"),
        (lambda s: s.__setitem__("model.norm.weight", torch.ones(3)), r"tensor model.norm.weight has shape \(3,\)"),
        (lambda s: s["model.norm.weight"].fill_(float("nan")), "model.norm.weight contains NaN"),
    ]:
        ckpt = tmp / "edited"
        state = load_file(str(tmp / "task1" / "model.safetensors"))
        edit(state)
        ckpt.mkdir(exist_ok=True)
        save_file(state, str(ckpt / "model.safetensors"))
        for f in (tmp / "task1").glob("*.json"):  # config and tokenizer: the architecture of the engine held
            (ckpt / f.name).write_bytes(f.read_bytes())
        with pytest.raises(UserError, match=message):
            host.load(ckpt)
        assert host.lm is built[0] and built[0].model.events == [], "the engine untouched, still in use"
    host.close()


def test_vllm_without_collective_rpc_falls_back(world, caplog) -> None:
    tmp, recipes = world
    built: list = []
    host = VLLMHost(4, "auto", "float32", tmp / "models", merger=Merger(), make_lm=factory(built, engine=OldLLM))
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
    loaded = built[0].model.events[0][1]
    want = load_file(str(tmp / "task1" / "model.safetensors"))
    assert all(torch.equal(loaded[k], v) for k, v in want.items()) and sorted(loaded) == sorted(want)


def test_hf_path_does_not_import_vllm() -> None:
    import subprocess

    code = (
        "import sys, layerswap.evaluation.evaluate, layerswap.evaluation.hosts, layerswap.evaluation.vllm_weights; "
        "print('vllm' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_decoder_layer_changed_in_part_loads_every_tensor(world, monkeypatch) -> None:
    """vLLM reloads a decoder layer's fused weights together (q/k/v, gate/up): where only part of a layer's tensors
    changed, the switch loads the whole merge instead of a layer with some weights missing."""
    tmp, recipes = world
    real = merge.build_changes

    def build_changes(recipe, cache, held):  # as if only layer 1's q_proj had changed
        keys, state = real(recipe, cache, held)
        if held is not None:
            state = {k: v for k, v in state.items() if k == "model.layers.1.self_attn.q_proj.weight"}
        return keys, state

    monkeypatch.setattr(merger_module, "build_changes", build_changes)
    built: list = []
    host = VLLMHost(4, "auto", "float32", tmp / "models", merger=Merger(), make_lm=factory(built))
    host.load(recipes[0])
    host.load(recipes[1])
    host.close()
    loads = [e[1] for e in built[0].model.events if e[0] == "load"]
    want = merge.build_state_dict(recipes[1])
    assert sorted(loads[1]) == sorted(want) and all(torch.equal(loads[1][k], v) for k, v in want.items())
