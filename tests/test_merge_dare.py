"""DARE and DARE-TIES (layerswap/merge/methods/dare.py), added through the method registry: the arithmetic, the seeded
draws, the checks, and a DARE config shown as a rival in Tables 1 and 2 and planned by the workflow."""

from __future__ import annotations

import json
import shlex

import pytest
import torch
import yaml
from conftest import MICRO, snakemake
from safetensors.torch import load_file
from test_merge_engine import random_ckpt
from test_tables import PAIRS, PARAMS, SWH, TEL, make_world, write_eval

from layerswap.config import check, validate_config
from layerswap.contracts import merge_model_id
from layerswap.errors import UserError
from layerswap.layout import Layout
from layerswap.merge.engine import build_state_dict, write_merged
from layerswap.merge.methods.dare import BLOCK, keep_mask
from layerswap.merge.recipes import validate_recipe
from layerswap.report import tables
from layerswap.workflow.spec import Spec


def dare(models: list, base: str | None, method: str = "dare", **params: object) -> dict:
    return {"method": method, "base": base, "inputs": {"models": models}, "params": params}


@pytest.fixture
def experts(tmp_path):
    """A base and two experts of 2 layers, float32, each expert = base + N(0, 0.1^2) per element."""
    base_path, base = random_ckpt(tmp_path / "base", 2, 0)
    a_path, a = random_ckpt(tmp_path / "a", 2, 1, like=base)
    b_path, b = random_ckpt(tmp_path / "b", 2, 2, like=base)
    return (base_path, base), (a_path, a), (b_path, b)


def test_density_one_is_task_arithmetic(experts):
    (bp, base), (ap, a), (cp, c) = experts
    out = build_state_dict(dare([ap, cp], bp, density=1.0, lam=0.7))
    for name, w in base.items():
        expected = w + 0.7 * ((a[name] - w) + (c[name] - w))
        assert torch.allclose(out[name], expected, atol=1e-6), name


def test_task_arithmetic_is_the_shared_core_unconfigured(experts, monkeypatch):
    """A task-arithmetic method is `TaskArithmetic` as it is (no sparsification, no consensus: one declaration, no
    computation of its own): registered here, its merge is DARE's at density 1, bit for bit, and TIES' and DARE's
    computations are configurations of that core (layerswap/merge/task_arithmetic.py)."""
    from layerswap.merge import registry
    from layerswap.merge.methods import dare as dare_module
    from layerswap.merge.methods import ties
    from layerswap.merge.params import Method, Param
    from layerswap.merge.task_arithmetic import TaskArithmetic

    params = {"lam": Param(1.0, "number", "scale of the summed task vectors")}
    method = Method("task_arithmetic", "task arithmetic", "TA", params, ("models",), TaskArithmetic)
    monkeypatch.setitem(registry.METHODS, "task_arithmetic", method)
    (bp, _), (ap, _), (cp, _) = experts
    ours = build_state_dict(dare([ap, cp], bp, method="task_arithmetic", lam=0.7))
    theirs = build_state_dict(dare([ap, cp], bp, density=1.0, lam=0.7))
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[n], theirs[n]) for n in ours)
    assert issubclass(ties.Compute, TaskArithmetic) and issubclass(dare_module.Compute, TaskArithmetic)
    assert (ties.Compute.consensus, ties.Compute.normalize) == (True, True)


def test_each_delta_element_is_dropped_or_divided_by_the_density(experts):
    (bp, base), (ap, a), _ = experts
    out = build_state_dict(dare([ap], bp, density=0.3))
    kept = total = 0
    for name, w in base.items():
        delta, merged = a[name] - w, out[name] - w
        dropped = merged.abs() < 1e-6
        assert torch.allclose(merged[~dropped], delta[~dropped] / 0.3, atol=1e-5), name
        kept, total = kept + int((~dropped).sum()), total + delta.numel()
    assert total > 1500 and abs(kept / total - 0.3) < 0.05  # > 4 standard deviations of a Binomial(n, 0.3) share


def test_dare_ties_sums_the_deltas_that_agree_with_the_elected_sign(experts):
    (bp, base), (ap, a), (cp, c) = experts
    out = build_state_dict(dare([ap, cp], bp, method="dare_ties", density=1.0, lam=1.0))
    for name, w in base.items():
        deltas = torch.stack([a[name] - w, c[name] - w])
        sign = torch.where(deltas.sum(0) >= 0, 1.0, -1.0)
        agree = torch.sign(deltas) == sign
        assert torch.allclose(out[name], w + (deltas * agree).sum(0), atol=1e-6), name
    plain = build_state_dict(dare([ap, cp], bp, density=1.0))
    assert any(not torch.equal(out[n], plain[n]) for n in out)  # the election drops disagreeing deltas


def test_a_merge_is_bit_identical_on_rerun_on_disk_and_for_any_chunk_size(experts, tmp_path, monkeypatch):
    (bp, _), (ap, _), (cp, _) = experts
    recipe = dare([ap, cp], bp, method="dare_ties", density=0.4, seed=3)
    first = build_state_dict(recipe)
    assert all(torch.equal(first[n], t) for n, t in build_state_dict(recipe).items())
    write_merged(recipe, str(tmp_path / "out"))
    on_disk = load_file(str(tmp_path / "out" / "model-00001-of-00001.safetensors"))
    assert all(torch.equal(first[n], on_disk[n]) for n in first)
    from layerswap.merge import engine

    monkeypatch.setattr(engine, "CHUNK", 24)  # tensors filled in many small row-aligned chunks
    assert all(torch.equal(first[n], t) for n, t in build_state_dict(recipe).items())
    other_seed = build_state_dict({**recipe, "params": {**recipe["params"], "seed": 4}})
    assert any(not torch.equal(first[n], other_seed[n]) for n in first)


def test_the_mask_of_a_slice_is_that_slice_of_the_tensor_mask():
    n = 3 * BLOCK + 5
    whole = keep_mask(7, "model.layers.0.mlp.up_proj.weight", 1, 0, n, 0.25, torch.empty(n))
    for start, stop in [(0, 10), (1000, BLOCK + 17), (BLOCK, 2 * BLOCK), (2 * BLOCK - 3, n)]:
        part = keep_mask(7, "model.layers.0.mlp.up_proj.weight", 1, start, stop, 0.25, torch.empty(stop - start))
        assert torch.equal(part, whole[start:stop]), (start, stop)
    assert abs(float(whole.mean()) - 0.25) < 0.01
    other = keep_mask(7, "model.layers.0.mlp.up_proj.weight", 0, 0, n, 0.25, torch.empty(n))  # another input
    assert not torch.equal(other, whole)


@pytest.mark.parametrize(
    "params, base, message",
    [
        ({"density": 0.0}, "b", "params.density: 0.0 is not in"),
        ({"density": 1.5}, "b", "params.density: 1.5"),
        ({}, "b", "params.density: missing"),
        ({"density": 0.5, "seed": -1}, "b", "params.seed"),
        ({"density": 0.5}, None, "base: required for dare"),
        ({"density": 0.5, "bottom": 1}, "b", "unknown param 'bottom'"),
    ],
)
def test_bad_dare_recipes_are_refused(params, base, message):
    with pytest.raises(UserError, match=message):
        validate_recipe(dare(["x", "y"], base, **params))


def dare_config() -> dict:
    """micro.yaml with a DARE and a DARE-TIES merge config, DARE among the best_of rivals."""
    config = yaml.safe_load(MICRO.read_text())
    config["merges"]["configs"]["dare_d03"] = {"method": "dare", "density": 0.3}
    config["merges"]["configs"]["dare_ties_d05"] = {"method": "dare_ties", "density": 0.5, "seed": 1}
    config["merges"]["best_of"]["dare"] = ["dare_d03"]
    return config


def test_a_dare_config_is_a_rival_the_workflow_evaluates_for_tables_1_and_2(tmp_path):
    config = validate_config(dare_config())
    check(config)
    assert config["merges"]["configs"]["dare_d03"] == {
        "method": "dare",
        "density": 0.3,
        "lam": 1.0,
        "seed": 0,
        "allow_different_base": False,
    }
    spec = Spec(config)
    assert "dare_d03" in spec.merges.pair_configs and "dare_ties_d05" in spec.merges.pair_configs
    assert "dare_d03" in spec.evals.t2_configs  # Table 2's column
    lang = config["languages"][0]
    assert (
        Layout().eval_file(merge_model_id("dare_d03", lang, "l1m1"), "mgsm") in spec.report.table1_bars_inputs()
    )  # Table 1
    assert json.loads(shlex.split(spec.report.table_params())[0])["best_of"]["dare"] == ["dare_d03"]
    bad = dare_config()
    bad["merges"]["best_of"]["dare"] = ["dare_ties_d05"]
    with pytest.raises(UserError, match=r"merges.best_of.dare\[0\]'.*has method dare_ties"):
        check(validate_config(bad))
    bad["merges"]["configs"]["dare_ties_d05"]["density"] = 2
    with pytest.raises(UserError, match="merges.configs.dare_ties_d05.density"):
        validate_config(bad)


@pytest.mark.workflow
def test_the_workflow_plans_the_dare_merges(tmp_path):
    path = tmp_path / "dare.yaml"
    path.write_text(yaml.safe_dump(dare_config()))
    proc = snakemake(tmp_path / "work", "-n", "--quiet", "rules", configfile=path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    base = snakemake(tmp_path / "work0", "-n", "--quiet", "rules")  # micro.yaml
    counts = {}
    for out in (base.stdout, proc.stdout):
        counts[len(counts)] = {
            line.split()[0]: int(line.split()[1])
            for line in out.splitlines()
            if len(line.split()) == 2 and line.split()[1].isdigit()
        }
    before, after = counts[0], counts[1]
    # two configs more: their recipes per language; evaluations only of the one a table reads (dare_d03, Table 1's
    # best-of DARE: dare_ties_d05 is in no best_of list, so no output reads its scores), nothing else added
    assert after["merge_recipes"] == before["merge_recipes"] + 2 * len(dare_config()["languages"])
    assert after["evaluate_merges"] == before["evaluate_merges"] + 1 * len(dare_config()["languages"])
    assert {k: v for k, v in after.items() if k not in ("merge_recipes", "evaluate_merges", "total")} == {
        k: v for k, v in before.items() if k not in ("merge_recipes", "evaluate_merges", "total")
    }


def test_tables_1_and_2_show_dare_as_a_rival_and_leave_out_a_method_best_of_omits(tmp_path):
    sel, ev = make_world(tmp_path)
    for lang, other, values in ((SWH, TEL, [0.27, 0.28, 0.26, 0.30]), (TEL, SWH, [0.16, 0.16, 0.18, 0.17])):
        for pair, value in zip(PAIRS, values):
            write_eval(ev, f"merge/dare_a/{lang}/{pair}", "mgsm", {"en": 0.60, lang: value, other: 0.10})
    best_of = {**PARAMS["best_of"], "dare": ["dare_a"]}
    built = tables.build_tables(sel, ev, tables.Params.from_json(json.dumps({**PARAMS, "best_of": best_of})))
    labels = {name: [label for _, label in built[name].columns] for name in ("table1", "table2")}
    assert labels["table1"][3:] == [
        "model soup (best config, 4 pairs)",
        "DARE (best config, 4 pairs)",
        "layer swap (default config, 4 pairs)",
        "layer swap (best config, 4 pairs)",
    ]
    assert labels["table2"][4:] == [
        "model soup (best config, 4 pairs)",
        "TIES-merging (best config, 4 pairs)",
        "DARE (best config, 4 pairs)",
        "layer swap (default config, 4 pairs)",
        "layer swap (best config, 4 pairs)",
    ]
    assert built["table1"].cells[((SWH, "avg"), "dare_best")] == pytest.approx(27.75)
    assert "DARE ['dare_a']" in " ".join(built["table2"].notes)
    assert {key[1] for key, _ in built["table1_best_configs"].rows} == {"soup", "dare", "layer_swap"}
    # a method left out of best_of has no column (here: TIES, and the soup that Table 6 would compare with)
    fewer = {k: v for k, v in best_of.items() if k not in ("ties", "soup")}
    built = tables.build_tables(sel, ev, tables.Params.from_json(json.dumps({**PARAMS, "best_of": fewer})))
    assert "ties_best" not in {c for c, _ in built["table2"].columns}
    assert "soup_pairwise" not in {c for c, _ in built["table6"].columns}
