"""A switch between two merges of one evaluation job loads only the tensors whose sources differ (issue 34, item 2),
and the results equal a full rebuild's, byte for byte."""

from __future__ import annotations

import json
import logging
import re

import pytest

pytest.importorskip("lm_eval")
torch = pytest.importorskip("torch")

from layerswap.evaluation import evaluate_merges  # noqa: E402
from layerswap.merge import engine, recipes  # noqa: E402
from tests.test_evaluate import make_args, make_data, make_model  # noqa: E402

LAYERS = 4
PER_LAYER = 9  # q, k, v, o, gate, up, down, two norms
NON_LAYER = 3  # embedding, final norm, untied head
real_read, real_check = recipes.read_text, recipes.validate_recipe
BENCHMARKS = {"mgsm": {"shots": 2, "languages": ["en", "toy_swh"]}, "belebele": {"shots": 1}}


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    """Two task experts x two language experts, the 2x2 layer swaps (bottom 1, top 1) as recipe files."""
    root = tmp_path_factory.mktemp("switch")
    vocab = make_data(root / "data")
    experts = {n: make_model(root / n, vocab, seed=s, layers=LAYERS) for s, n in enumerate(["t0", "t1", "l0", "l1"])}
    recipes = {}
    for t in ("t0", "t1"):
        for lang in ("l0", "l1"):
            recipe = {
                "method": "layer_swap",
                "inputs": {"task": str(experts[t]), "lang": str(experts[lang])},
                "params": {"bottom": 1, "top": 1},
            }
            path = root / f"{t}x{lang}.json"
            path.write_text(json.dumps(recipe))
            recipes[f"{t}x{lang}"] = path
    return {"root": root, "data": root / "data", "experts": experts, "recipes": recipes}


def _recipe(grid, name):
    return json.loads(grid["recipes"][name].read_text())


def test_switch_builds_only_the_changed_tensors(grid):
    """Same task expert, other language expert: only the language layers (0 and 3) and the averaged non-layer
    tensors change; their values equal a full build's, and the rest of a full build equals the held merge's."""
    cache = engine.ExpertCache()
    try:
        held, first = engine.build_changes(_recipe(grid, "t0xl0"), cache, None)
        keys, changed = engine.build_changes(_recipe(grid, "t0xl1"), cache, held)
    finally:
        cache.close()
    assert len(first) == len(held) == LAYERS * PER_LAYER + NON_LAYER
    assert len(changed) == 2 * PER_LAYER + NON_LAYER
    assert all(re.match(r"model\.layers\.[03]\.", n) or "layers" not in n for n in changed)
    full = engine.build_state_dict(_recipe(grid, "t0xl1"))
    assert set(keys) == set(full)
    for name, tensor in full.items():
        assert torch.equal(tensor, changed[name] if name in changed else first[name]), name
    # a switch to the other task expert keeps the language layers and changes the rest
    cache = engine.ExpertCache()
    try:
        _, other = engine.build_changes(_recipe(grid, "t1xl1"), cache, keys)
    finally:
        cache.close()
    assert len(other) == 2 * PER_LAYER + NON_LAYER


def test_switch_order_puts_merges_sharing_the_most_together(grid):
    cache = engine.ExpertCache()
    try:
        names = ["t0xl0", "t1xl1", "t0xl1", "t1xl0"]
        keys = [engine.tensor_keys(_recipe(grid, n), cache) for n in names]
    finally:
        cache.close()
    order = [names[i] for i in engine.switch_order(keys)]
    # bottom 1 + top 1 of 4 layers: two layers each way, so the greedy order keeps one expert per step
    assert order[0] == "t0xl0" and len(set(order)) == 4
    for a, b in zip(order, order[1:]):
        assert a.split("x")[0] == b.split("x")[0] or a.split("x")[1] == b.split("x")[1], order
    assert engine.switch_order(keys) == engine.switch_order(keys)


def test_job_with_switches_equals_one_job_per_merge(grid, tmp_path, caplog, monkeypatch):
    """One job evaluating the 2x2 grid (in-place switches, merges reordered) writes the same bytes as one job per
    merge (each merge a full build), and its log counts the tensors each switch loaded. Each recipe file is read and
    validated once (`Recipe.load`), whatever the store, the host and the engine need of it."""
    models = [(n, p) for n, p in grid["recipes"].items()]
    together = tmp_path / "together"
    reads, validated = [], []
    monkeypatch.setattr(recipes, "read_text", lambda path, what: reads.append(path) or real_read(path, what))
    monkeypatch.setattr(
        recipes, "validate_recipe", lambda r, where="recipe": validated.append(where) or real_check(r, where)
    )
    args = make_args(grid["data"], together, models, BENCHMARKS)
    args.store = tmp_path / "store"
    with caplog.at_level(logging.INFO, logger="layerswap.evaluate"):
        evaluate_merges.run(args)
    assert sorted(map(str, reads)) == sorted(map(str, grid["recipes"].values()))
    assert sorted(validated) == sorted(map(str, reads))
    monkeypatch.undo()
    loaded = re.findall(r"evaluate: (\S+)\.json: (\d+) of (\d+) tensors loaded", caplog.text)
    total = LAYERS * PER_LAYER + NON_LAYER
    assert len(loaded) == 4 and all(int(t) == total for _, _, t in loaded)
    assert [int(n) for _, n, _ in loaded] == [total] + [2 * PER_LAYER + NON_LAYER] * 3
    alone = tmp_path / "alone"
    for model in models:
        evaluate_merges.run(make_args(grid["data"], alone, [model], BENCHMARKS))
    files = sorted(p.relative_to(together) for p in together.rglob("*") if p.is_file())
    assert len(files) == 4 * 2 * 2
    for rel in files:
        assert (together / rel).read_bytes() == (alone / rel).read_bytes(), rel
