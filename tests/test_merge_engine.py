"""Merge engine semantics: where every layer of a swap comes from, soups, TIES, on-disk == in-memory."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from layerswap.merge.engine import ExpertCache, build_state_dict, write_merged
from layerswap.merge.methods.layer_swap import layer_plan
from layerswap.merge.recipes import Recipe, model_dir_of, recipe_hash

H, I, V, HEADS, KV = 8, 16, 32, 2, 1
TASK, LANG, BASE = 1, 2, 0


def llama_shapes(n_layers: int) -> dict[str, tuple[int, ...]]:
    hd = H // HEADS
    shapes: dict[str, tuple[int, ...]] = {
        "model.embed_tokens.weight": (V, H),
        "model.norm.weight": (H,),
        "lm_head.weight": (V, H),
    }
    for l in range(n_layers):
        p = f"model.layers.{l}."
        shapes |= {
            p + "self_attn.q_proj.weight": (H, H),
            p + "self_attn.k_proj.weight": (KV * hd, H),
            p + "self_attn.v_proj.weight": (KV * hd, H),
            p + "self_attn.o_proj.weight": (H, H),
            p + "mlp.gate_proj.weight": (I, H),
            p + "mlp.up_proj.weight": (I, H),
            p + "mlp.down_proj.weight": (H, I),
            p + "input_layernorm.weight": (H,),
            p + "post_attention_layernorm.weight": (H,),
        }
    return shapes


def config(n_layers: int, **extra: object) -> dict:
    cfg = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": V,
        "hidden_size": H,
        "intermediate_size": I,
        "num_hidden_layers": n_layers,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV,
        "max_position_embeddings": 64,
        "tie_word_embeddings": False,
        "rms_norm_eps": 1e-5,
    }
    return cfg | extra


def make_ckpt(
    path: Path,
    n_layers: int,
    tensors: dict[str, torch.Tensor] | None = None,
    expert: int = TASK,
    dtype: torch.dtype = torch.float32,
    fingerprint: str | None = "b0",
    **cfg: object,
) -> str:
    """A checkpoint whose every tensor of layer l holds 100*expert + l (non-layer tensors: 100*expert + 99)."""
    path.mkdir(parents=True, exist_ok=True)
    if tensors is None:
        tensors = {}
        for name, shape in llama_shapes(n_layers).items():
            parts = name.split(".")
            value = 100 * expert + (int(parts[2]) if parts[1] == "layers" else 99)
            tensors[name] = torch.full(shape, float(value), dtype=dtype)
    save_file(tensors, str(path / "model.safetensors"), metadata={"format": "pt"})
    (path / "config.json").write_text(json.dumps(config(n_layers, **cfg)))
    (path / "tokenizer_config.json").write_text(json.dumps({"expert": expert}))
    (path / "generation_config.json").write_text(json.dumps({"max_new_tokens": 4}))
    if fingerprint is not None:
        (path / "layerswap_base.json").write_text(json.dumps({"base_sha256": fingerprint}))
    return str(path)


def random_ckpt(
    path: Path,
    n_layers: int,
    seed: int,
    like: dict[str, torch.Tensor] | None = None,
    scale: float = 0.1,
    dtype: torch.dtype = torch.float32,
) -> tuple[str, dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    tensors = {}
    for name, shape in llama_shapes(n_layers).items():
        t = torch.randn(shape, generator=g) * scale
        tensors[name] = ((like[name] + t) if like is not None else t).to(dtype)
    return make_ckpt(path, n_layers, tensors), tensors


def swap(task: str, lang: str, **params: object) -> dict:
    return {"method": "layer_swap", "base": None, "inputs": {"task": task, "lang": lang}, "params": params}


def expected_source(l: int, L: int, b: int, u: int, tb: int, tu: int) -> str:
    if l < b or l >= L - u:
        return "lang"
    if b <= l < b + tb or L - u - tu <= l < L - u:
        return "mix"
    return "task"


@pytest.mark.parametrize(
    "L,b,u,tb,tu",
    [
        (8, 2, 1, 0, 0),
        (8, 3, 0, 1, 2),
        (8, 0, 0, 0, 0),
        (8, 2, 2, 2, 2),
        (6, 6, 0, 0, 0),
        (6, 1, 1, 2, 2),
        (6, 0, 6, 0, 0),
        (5, 2, 0, 0, 3),
    ],
)
def test_swap_layers_come_from_where_algorithm_1_says(tmp_path: Path, L: int, b: int, u: int, tb: int, tu: int) -> None:
    task = make_ckpt(tmp_path / "task", L, expert=TASK)
    lang = make_ckpt(tmp_path / "lang", L, expert=LANG)
    sd = build_state_dict(swap(task, lang, bottom=b, top=u, transition_bottom=tb, transition_top=tu))
    for name, t in sd.items():
        parts = name.split(".")
        if parts[1] == "layers":
            l = int(parts[2])
            want = {"lang": 200 + l, "task": 100 + l, "mix": 150 + l}[expected_source(l, L, b, u, tb, tu)]
        else:
            want = 150 + 99
        assert bool((t == want).all()), (name, t.flatten()[0].item(), want)


def test_layer_plan_matches_definition_exhaustively() -> None:
    for L in range(1, 9):
        for b in range(L + 1):
            for u in range(L + 1 - b):
                for tb in range(L + 1 - b - u):
                    for tu in range(L + 1 - b - u - tb):
                        plan = layer_plan({"bottom": b, "top": u, "transition_bottom": tb, "transition_top": tu}, L)
                        assert plan == [expected_source(l, L, b, u, tb, tu) for l in range(L)]


@pytest.mark.parametrize("mode,want", [("average", 249.0), ("lang", 299.0), ("task", 199.0)])
def test_non_layer_modes(tmp_path: Path, mode: str, want: float) -> None:
    task = make_ckpt(tmp_path / "task", 4, expert=TASK)
    lang = make_ckpt(tmp_path / "lang", 4, expert=LANG)
    sd = build_state_dict(swap(task, lang, bottom=1, top=1, non_layer=mode))
    for name in ("model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"):
        assert bool((sd[name] == want).all())


def test_explicit_lang_layers_and_transition_layers(tmp_path: Path) -> None:
    task = make_ckpt(tmp_path / "task", 8, expert=TASK)
    lang = make_ckpt(tmp_path / "lang", 8, expert=LANG)
    sd = build_state_dict(swap(task, lang, lang_layers=[1, 3, 5, 7], transition_layers=[0], non_layer="task"))
    for l in range(8):
        want = 200 + l if l in (1, 3, 5, 7) else 150 + l if l == 0 else 100 + l
        assert bool((sd[f"model.layers.{l}.mlp.up_proj.weight"] == want).all())
    assert bool((sd["lm_head.weight"] == 199).all())


def test_weighted_transition(tmp_path: Path) -> None:
    task = make_ckpt(tmp_path / "task", 4, expert=TASK)
    lang = make_ckpt(tmp_path / "lang", 4, expert=LANG)
    sd = build_state_dict(swap(task, lang, bottom=1, top=0, transition_bottom=1, w_task=3.0, w_lang=1.0))
    assert torch.equal(sd["model.layers.1.mlp.up_proj.weight"], torch.full((I, H), (3 * 101.0 + 201.0) / 4))
    assert bool((sd["lm_head.weight"] == (3 * 199.0 + 299.0) / 4).all())


def magnitude_by_hand(ft: dict[str, torch.Tensor], pre: dict[str, torch.Tensor]) -> float:
    rows = []
    for name in ft:
        d = (ft[name].double() - pre[name].double()).abs()
        rows += d.mean(dim=1).tolist() if d.dim() == 2 else [float(d.mean())]
    return 1.0 / (sum(rows) / len(rows))


@pytest.mark.parametrize("weighting", ["uniform", "magnitude"])
def test_soup_against_hand_computation(tmp_path: Path, weighting: str) -> None:
    base, pre = random_ckpt(tmp_path / "base", 3, 0)
    experts = [random_ckpt(tmp_path / f"e{i}", 3, 10 + i, like=pre, scale=0.01 * (i + 1)) for i in range(3)]
    recipe = {
        "method": "soup",
        "base": base,
        "inputs": {"models": [p for p, _ in experts]},
        "params": {"weighting": weighting},
    }
    sd = build_state_dict(recipe)
    ws = [1.0] * 3 if weighting == "uniform" else [magnitude_by_hand(t, pre) for _, t in experts]
    for name in pre:
        want = sum(w * t[name].double() for w, (_, t) in zip(ws, experts)) / sum(ws)
        assert torch.allclose(sd[name].double(), want, rtol=1e-5, atol=1e-6), name
    if weighting == "magnitude":
        assert ws[0] > ws[1] > ws[2]  # smaller change -> larger weight


def test_magnitude_weighted_swap_transition(tmp_path: Path) -> None:
    base, pre = random_ckpt(tmp_path / "base", 4, 0)
    (task, tt), (lang, lt) = (
        random_ckpt(tmp_path / "t", 4, 1, like=pre, scale=0.01),
        random_ckpt(tmp_path / "l", 4, 2, like=pre, scale=0.03),
    )
    recipe = swap(task, lang, bottom=1, top=1, transition_bottom=1, weighting="magnitude") | {"base": base}
    sd = build_state_dict(recipe)
    wt, wl = magnitude_by_hand(tt, pre), magnitude_by_hand(lt, pre)
    name = "model.layers.1.self_attn.q_proj.weight"
    assert torch.allclose(sd[name], (wt * tt[name] + wl * lt[name]) / (wt + wl), atol=1e-6)
    assert torch.equal(sd["model.layers.2.self_attn.q_proj.weight"], tt["model.layers.2.self_attn.q_proj.weight"])


def ties_reference(base: dict, experts: list[dict], density: float, lam: float) -> dict[str, torch.Tensor]:
    out = {}
    for name, b in base.items():
        trimmed = []
        for e in experts:
            d = (e[name] - b).flatten()
            k = max(1, int(density * d.numel()))
            keep = torch.zeros_like(d, dtype=torch.bool)
            keep[torch.argsort(d.abs(), descending=True)[:k]] = True
            trimmed.append(torch.where(keep, d, torch.zeros_like(d)))
        stack = torch.stack(trimmed)
        sign = torch.where(stack.sum(0) >= 0, 1.0, -1.0)
        agree = (torch.sign(stack) == sign) & (stack != 0)
        mean = (stack * agree).sum(0) / agree.sum(0).clamp(min=1)
        out[name] = b + lam * mean.view(b.shape)
    return out


@pytest.mark.parametrize("density,lam", [(0.2, 1.0), (0.5, 0.7), (1.0, 1.0)])
def test_ties_against_reference(tmp_path: Path, density: float, lam: float) -> None:
    base, pre = random_ckpt(tmp_path / "base", 2, 0)
    experts = [random_ckpt(tmp_path / f"e{i}", 2, 5 + i, like=pre) for i in range(3)]
    recipe = {
        "method": "ties",
        "base": base,
        "inputs": {"models": [p for p, _ in experts]},
        "params": {"density": density, "lam": lam},
    }
    sd = build_state_dict(recipe)
    ref = ties_reference(pre, [t for _, t in experts], density, lam)
    for name in pre:
        assert torch.allclose(sd[name], ref[name], rtol=1e-6, atol=1e-6), name


def test_ties_threshold_on_large_tensor_uses_exact_selection(tmp_path: Path) -> None:
    from layerswap.merge import engine

    g = torch.Generator().manual_seed(3)
    pre = {"model.embed_tokens.weight": torch.randn(600, 256, generator=g)}
    experts = [{k: v + torch.randn(v.shape, generator=g) * 0.1 for k, v in pre.items()} for _ in range(2)]
    base = make_ckpt(tmp_path / "base", 1, pre)
    paths = [make_ckpt(tmp_path / f"e{i}", 1, t) for i, t in enumerate(experts)]
    recipe = {"method": "ties", "base": base, "inputs": {"models": paths}, "params": {"density": 0.2}}
    old = engine.CHUNK
    engine.CHUNK = 10_000  # several chunks per tensor
    try:
        sd = build_state_dict(recipe)
    finally:
        engine.CHUNK = old
    ref = ties_reference(pre, experts, 0.2, 1.0)
    assert torch.allclose(sd["model.embed_tokens.weight"], ref["model.embed_tokens.weight"], atol=1e-6)


def test_soup_then_swap_nested(tmp_path: Path) -> None:
    t1, t2 = make_ckpt(tmp_path / "t1", 4, expert=1), make_ckpt(tmp_path / "t2", 4, expert=3)
    l1, l2 = make_ckpt(tmp_path / "l1", 4, expert=2), make_ckpt(tmp_path / "l2", 4, expert=4)
    soup = lambda ps: {"method": "soup", "base": None, "inputs": {"models": ps}, "params": {"weighting": "uniform"}}  # noqa: E731
    recipe = swap(soup([t1, t2]), soup([l1, l2]), bottom=1, top=1, non_layer="lang")
    sd = build_state_dict(recipe)
    assert bool((sd["model.layers.0.mlp.up_proj.weight"] == 300).all())  # (200 + 400) / 2 + 0
    assert bool((sd["model.layers.1.mlp.up_proj.weight"] == 201).all())  # (100 + 300) / 2 + 1
    assert bool((sd["lm_head.weight"] == 399).all())
    assert model_dir_of(recipe) == t1


def test_written_dir_equals_in_memory_loads_and_is_deterministic(tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    base, pre = random_ckpt(tmp_path / "base", 4, 0, dtype=torch.bfloat16)
    (task, _), (lang, _) = (
        random_ckpt(tmp_path / n, 4, s, like=pre, dtype=torch.bfloat16) for n, s in (("t", 1), ("l", 2))
    )
    for recipe in (
        swap(task, lang, bottom=1, top=1, transition_top=1) | {"base": base},
        {"method": "ties", "base": base, "inputs": {"models": [task, lang]}, "params": {"density": 0.3}},
        {"method": "soup", "base": base, "inputs": {"models": [task, lang]}, "params": {"weighting": "magnitude"}},
    ):
        mem = build_state_dict(recipe)
        out1, out2 = tmp_path / "out1", tmp_path / "out2"
        write_merged(recipe, str(out1), max_shard_bytes=2000, force=True)  # the loop's earlier merge is replaced
        write_merged(recipe, str(out2), max_shard_bytes=2000, force=True)
        index = json.loads((out1 / "model.safetensors.index.json").read_text())
        shards = sorted(set(index["weight_map"].values()))
        assert len(shards) > 1
        disk: dict[str, torch.Tensor] = {}
        for shard in shards:
            disk |= load_file(str(out1 / shard))
            assert (out1 / shard).read_bytes() == (out2 / shard).read_bytes()
        assert disk.keys() == mem.keys()
        for name in mem:
            assert mem[name].dtype == torch.bfloat16 and torch.equal(
                disk[name].view(torch.int16), mem[name].view(torch.int16)
            )
        assert json.loads((out1 / "tokenizer_config.json").read_text()) == {"expert": 1}
        assert (out1 / "generation_config.json").is_file() and (out1 / "config.json").is_file()
        model = AutoModelForCausalLM.from_pretrained(str(out1))
        got = model.state_dict()["model.layers.1.mlp.up_proj.weight"]
        assert torch.equal(
            got.to(torch.bfloat16).view(torch.int16), mem["model.layers.1.mlp.up_proj.weight"].view(torch.int16)
        )
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_sharded_inputs_and_cache(tmp_path: Path) -> None:
    task = make_ckpt(tmp_path / "task", 4, expert=TASK)
    lang = make_ckpt(tmp_path / "lang", 4, expert=LANG)
    write_merged(swap(task, lang, bottom=0, top=0, non_layer="task"), str(tmp_path / "sharded"), max_shard_bytes=500)
    cache = ExpertCache()
    a = build_state_dict(swap(str(tmp_path / "sharded"), lang, bottom=2, top=1), cache)
    b = build_state_dict(swap(task, lang, bottom=2, top=1), cache)
    cache.close()
    assert all(torch.equal(a[n], b[n]) for n in a)


def test_recipe_hash_and_yaml(tmp_path: Path) -> None:
    r1 = {"method": "soup", "base": "b", "inputs": {"models": ["x", "y"]}, "params": {"weighting": "uniform"}}
    r2 = json.loads(json.dumps(r1, sort_keys=False))
    r2 = {k: r2[k] for k in reversed(list(r2))}
    assert recipe_hash(r1) == recipe_hash(r2) and len(recipe_hash(r1)) == 16
    assert recipe_hash(r1) != recipe_hash(r1 | {"base": "c"})
    (tmp_path / "r.yaml").write_text("method: ties\nbase: b\ninputs: {models: [x]}\nparams: {density: 0.5}\n")
    assert Recipe.load(tmp_path / "r.yaml").written["params"] == {"density": 0.5}
    assert math.isclose(Recipe.load(tmp_path / "r.yaml").full["params"]["density"], 0.5)
