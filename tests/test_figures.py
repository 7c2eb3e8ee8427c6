"""Parameter-change heatmaps on tiny synthetic safetensors checkpoints with known deltas."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from safetensors.numpy import save_file

from layerswap.cli import main as cli_main
from layerswap.errors import UserError
from layerswap.report import figures

HIDDEN, INTER, KV, LAYERS = 4, 6, 2, 2
SHAPES = {
    "self_attn.q_proj.weight": (HIDDEN, HIDDEN),
    "self_attn.k_proj.weight": (KV, HIDDEN),
    "self_attn.v_proj.weight": (KV, HIDDEN),
    "self_attn.o_proj.weight": (HIDDEN, HIDDEN),
    "mlp.gate_proj.weight": (INTER, HIDDEN),
    "mlp.up_proj.weight": (INTER, HIDDEN),
    "mlp.down_proj.weight": (HIDDEN, INTER),
}


def base_tensors() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    out = {"model.embed_tokens.weight": rng.normal(size=(10, HIDDEN)).astype(np.float32)}
    for layer in range(LAYERS):
        for suffix, shape in SHAPES.items():
            out[f"model.layers.{layer}.{suffix}"] = rng.normal(size=shape).astype(np.float32)
        out[f"model.layers.{layer}.input_layernorm.weight"] = np.ones(HIDDEN, dtype=np.float32)
    return out


def save(directory: Path, tensors: dict[str, np.ndarray], shards: int = 1) -> Path:
    directory.mkdir(parents=True)
    if shards == 1:
        save_file(tensors, str(directory / "model.safetensors"))
        return directory
    names = sorted(tensors)
    weight_map = {}
    for i in range(shards):
        fname = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: tensors[n] for n in names[i::shards]}
        save_file(part, str(directory / fname))
        weight_map.update({n: fname for n in part})
    (directory / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return directory


@pytest.fixture()
def checkpoints(tmp_path):
    base = base_tensors()
    lang = {k: v.copy() for k, v in base.items()}
    # layer 0 q_proj: +1.0 on input column 0 -> input features: 1 of 4 above 0.1; stored rows: mean 0.25, all 4
    lang["model.layers.0.self_attn.q_proj.weight"][:, 0] += 1.0
    # layer 1 k_proj [2, 4]: +0.5 at [1, 2] -> input: column 2 mean 0.25 (1/4); rows: row 1 mean 0.125 (1/2)
    lang["model.layers.1.self_attn.k_proj.weight"][1, 2] += 0.5
    # layer 1 down_proj [4, 6]: +0.3 on row 0 -> input: each column mean 0.075 (0/6); rows: row 0 mean 0.3 (1/4)
    lang["model.layers.1.mlp.down_proj.weight"][0, :] += 0.3
    math = {k: v.copy() for k, v in base.items()}
    # layer 1 gate_proj: +0.2 everywhere -> all above 0.15 both ways; layer 0 up_proj +0.1 -> below 0.15
    math["model.layers.1.mlp.gate_proj.weight"] += 0.2
    math["model.layers.0.mlp.up_proj.weight"] += 0.1
    return (save(tmp_path / "base", base), save(tmp_path / "lang", lang), save(tmp_path / "math", math, shards=3))


def shares(records, expert):
    return {(r["layer"], r["matrix"]): r["share"] for r in records if r["expert"] == expert}


def fixed(**values):
    return {name: figures.ThresholdSpec(value=v) for name, v in values.items()}


def test_shares_input_rows(checkpoints):
    base, lang, math = checkpoints
    rec, _ = figures.change_records(base, {"lang": lang, "math": math}, fixed(lang=0.1, math=0.15))
    assert len(rec) == 2 * LAYERS * 7
    s = shares(rec, "lang")
    assert s[(0, "q_proj")] == 0.25
    assert s[(1, "k_proj")] == 0.25
    assert s[(1, "down_proj")] == 0.0
    assert sum(s.values()) == 0.5  # nothing else changed
    m = shares(rec, "math")
    assert m[(1, "gate_proj")] == 1.0 and m[(0, "up_proj")] == 0.0 and sum(m.values()) == 1.0
    row = next(r for r in rec if r["expert"] == "lang" and r["layer"] == 1 and r["matrix"] == "down_proj")
    assert row["n_rows"] == INTER and row["n_above"] == 0 and row["threshold"] == 0.1
    assert row["threshold_quantile"] is None


def test_shares_output_rows(checkpoints):
    base, lang, math = checkpoints
    rec, _ = figures.change_records(base, {"lang": lang}, fixed(lang=0.1), rows="output")
    s = shares(rec, "lang")
    assert s[(0, "q_proj")] == 1.0
    assert s[(1, "k_proj")] == 0.5
    assert s[(1, "down_proj")] == 0.25
    assert sum(s.values()) == 1.75


LAYERS_L = 6


def layered_checkpoints(tmp_path, scale_of_layer):
    """A base of LAYERS_L layers (small integers) and an expert whose entry j of matrix k in layer l changed by
    scale_of_layer(l) * (1 + l/128) * (1 + k/16) * (1 + j/16): dyadic numbers, so every difference and row sum is
    exact in float32 (numpy and torch agree to the bit), and (these factors checked) no two rows change alike."""
    rng = np.random.default_rng(1)
    base, expert = {}, {}
    for layer in range(LAYERS_L):
        for k, (suffix, shape) in enumerate(SHAPES.items()):
            name = f"model.layers.{layer}.{suffix}"
            base[name] = rng.integers(-3, 4, size=shape).astype(np.float32)
            ramp = 1 + np.arange(np.prod(shape), dtype=np.float32).reshape(shape) / 16
            expert[name] = base[name] + np.float32(scale_of_layer(layer) * (1 + layer / 128) * (1 + k / 16)) * ramp
    return save(tmp_path / "base_l", base), save(tmp_path / "expert_l", expert), base, expert


def test_quantile_threshold_is_quantile_of_all_row_changes(tmp_path):
    base_dir, expert_dir, base, expert = layered_checkpoints(tmp_path, lambda layer: 2.0**-6)
    # the row changes, computed here from the tensors: one per input feature (column) of every matrix of every layer
    changes = np.concatenate([np.abs(expert[n] - base[n]).mean(axis=0) for n in base])
    assert changes.size == LAYERS_L * (6 * HIDDEN + INTER) and np.unique(changes).size == changes.size
    for q in (0.0, 0.37, 0.5, 0.9, 1.0):
        rec, _ = figures.change_records(base_dir, {"x": expert_dir}, {"x": figures.ThresholdSpec(quantile=q)})
        threshold = rec[0]["threshold"]
        assert {r["threshold"] for r in rec} == {threshold} and {r["threshold_quantile"] for r in rec} == {q}
        assert threshold == np.quantile(changes.astype(np.float64), q)
        assert sum(r["n_above"] for r in rec) == int((changes > threshold).sum())
    # the median of an even number of distinct values: exactly half of all rows count as changed
    rec, _ = figures.change_records(base_dir, {"x": expert_dir}, {"x": figures.ThresholdSpec(quantile=0.5)})
    assert sum(r["n_above"] for r in rec) == changes.size // 2
    rec, _ = figures.change_records(base_dir, {"x": expert_dir}, {"x": figures.ThresholdSpec(quantile=0.0)})
    assert sum(r["n_above"] for r in rec) == changes.size - 1  # all but the smallest


def test_quantile_threshold_separates_layers(tmp_path):
    """An expert that changed layers 2 and 3 five times as much as the others: at its 0.5 quantile every row of
    those layers counts as changed (shares 1) and only some of the others', where a fixed threshold below every
    change paints every cell 1."""
    base_dir, expert_dir, *_ = layered_checkpoints(tmp_path, lambda layer: 5 * 2.0**-6 if layer in (2, 3) else 2.0**-6)
    rec, _ = figures.change_records(base_dir, {"x": expert_dir}, {"x": figures.ThresholdSpec(quantile=0.5)})
    by_layer = {}
    for r in rec:
        by_layer.setdefault(r["layer"], []).append(r["share"])
    values = {s for v in by_layer.values() for s in v}
    assert values != {1.0} and values != {0.0}
    # 2 of 6 layers hold a third of the rows; the median falls among the unchanged layers' rows
    assert all(s == 1.0 for layer in (2, 3) for s in by_layer[layer])
    assert all(s < 1.0 for layer in (0, 1, 4, 5) for s in by_layer[layer])
    flat, _ = figures.change_records(base_dir, {"x": expert_dir}, {"x": figures.ThresholdSpec(value=1e-3)})
    assert {r["share"] for r in flat} == {1.0}


def test_mean_change_records(checkpoints):
    base, lang, math = checkpoints
    _, means = figures.change_records(base, {"lang": lang, "math": math}, fixed(lang=0.1, math=0.15))
    assert len(means) == 2 * LAYERS * 7
    assert len({(r["expert"], r["layer"], r["matrix"]) for r in means}) == len(means)
    got = {(r["expert"], r["layer"], r["matrix"]): r["mean_abs_change"] for r in means}
    # lang layer 0 q_proj [4, 4]: +1.0 on a column -> 4 of 16 entries changed by 1.0
    assert got[("lang", 0, "q_proj")] == pytest.approx(4 / 16)
    assert got[("lang", 1, "k_proj")] == pytest.approx(0.5 / (KV * HIDDEN))
    assert got[("lang", 1, "down_proj")] == pytest.approx(0.3 * INTER / (HIDDEN * INTER))
    assert got[("math", 1, "gate_proj")] == pytest.approx(0.2, rel=1e-5)
    assert got[("math", 0, "up_proj")] == pytest.approx(0.1, rel=1e-5)
    assert got[("math", 0, "q_proj")] == 0.0 and got[("lang", 0, "up_proj")] == 0.0
    row = next(r for r in means if r["expert"] == "lang" and r["matrix"] == "down_proj")
    assert row["n_rows"] == INTER


def test_cli_writes_svg_png_csv(checkpoints, tmp_path):
    base, lang, math = checkpoints
    prefix = tmp_path / "figs" / "param_change"
    parser = argparse.ArgumentParser()
    figures.add_arguments(parser)
    figures.run(
        parser.parse_args(
            [
                "--base",
                str(base),
                "--expert",
                f"lang={lang}",
                "--expert",
                f"math={math}",
                "--threshold-json",
                json.dumps({"lang": 0.1, "*": {"quantile": 0.75}}),
                "--out-prefix",
                str(prefix),
            ]
        )
    )
    svg = (tmp_path / "figs" / "param_change.svg").read_text()
    assert svg.lstrip().startswith("<svg") and "threshold 1.0e-01" in svg and "(quantile 0.75 of its rows)" in svg
    assert (tmp_path / "figs" / "param_change.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    frame = pd.read_csv(tmp_path / "figs" / "param_change.csv")
    assert list(frame.columns) == [
        "expert",
        "layer",
        "matrix",
        "share",
        "n_above",
        "n_rows",
        "threshold",
        "threshold_quantile",
    ]
    got = frame.set_index(["expert", "layer", "matrix"])["share"]
    assert got[("lang", 0, "q_proj")] == 0.25 and got[("math", 1, "gate_proj")] == 1.0
    m = frame[frame["expert"] == "math"]
    assert (
        set(m["threshold_quantile"]) == {0.75}
        and frame.loc[frame["expert"] == "lang", "threshold_quantile"].isna().all()
    )
    assert len(set(m["threshold"])) == 1 and f"threshold {m['threshold'].iloc[0]:.1e}" in svg
    mean = pd.read_csv(tmp_path / "figs" / "param_change_mean.csv")
    assert list(mean.columns) == ["expert", "layer", "matrix", "mean_abs_change", "n_rows"]
    assert len(mean) == 2 * LAYERS * 7
    assert mean.set_index(["expert", "layer", "matrix"])["mean_abs_change"][("lang", 0, "q_proj")] == pytest.approx(
        0.25
    )
    mean_svg = (tmp_path / "figs" / "param_change_mean.svg").read_text()
    assert mean_svg.lstrip().startswith("<svg") and "Mean |W_ft - W_pre| per layer and matrix" in mean_svg
    assert (tmp_path / "figs" / "param_change_mean.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in (tmp_path / "figs").iterdir()) == sorted(
        f"param_change{s}.{e}" for s in ("", "_mean") for e in ("csv", "png", "svg")
    )  # no temporary files left


def test_chart_layer0_at_bottom_and_matrix_order(checkpoints):
    base, lang, _ = checkpoints
    shares_, means = figures.change_records(base, {"lang": lang}, fixed(lang=0.1))
    spec = figures.heatmap_chart(pd.DataFrame.from_records(shares_), ["lang"]).to_dict()
    enc = spec["spec"]["encoding"]
    assert enc["y"]["sort"] == "descending" and enc["y"]["field"] == "layer"
    assert enc["x"]["sort"] == figures.MATRIX_NAMES
    assert spec["facet"]["column"]["field"] == "panel"
    spec = figures.mean_chart(pd.DataFrame.from_records(means), ["lang"]).to_dict()
    enc = spec["spec"]["encoding"]
    assert enc["x"]["field"] == "layer" and enc["y"]["field"] == "mean_abs_change"
    assert enc["color"]["field"] == "matrix" and enc["color"]["sort"] == figures.MATRIX_NAMES
    assert spec["facet"]["column"]["field"] == "expert" and spec["resolve"]["scale"]["y"] == "independent"


@pytest.mark.parametrize(
    "spec,message",
    [
        ('{"math": 0.1}', "no threshold for expert 'lang' (nor a '*' default)"),
        ('{"lang": {"quantile": 1.5}}', "--threshold-json: quantile of 'lang' must be a number in [0, 1], not 1.5"),
        ('{"*": {"quantile": -0.1}}', "--threshold-json: quantile of '*' must be a number in [0, 1], not -0.1"),
        ('{"lang": {"quantile": "0.5"}}', "quantile of 'lang' must be a number in [0, 1], not '0.5'"),
        (
            '{"lang": {"quantlie": 0.5}}',
            "--threshold-json: threshold of 'lang': unknown key 'quantlie'; allowed: a number or {\"quantile\": q}",
        ),
        ('{"lang": {}}', "threshold of 'lang': no key 'quantile'"),
        ('{"lang": -1}', "threshold of 'lang' must be a non-negative number or {\"quantile\": q}, not -1"),
        ('{"lang": true}', "threshold of 'lang' must be a non-negative number"),
    ],
)
def test_bad_threshold_spec_one_line(spec, message):
    with pytest.raises(UserError) as info:
        figures.parse_thresholds(spec, {"lang": "dir"})
    assert message in str(info.value) and "\n" not in str(info.value)


def test_threshold_specs_parsed(checkpoints):
    got = figures.parse_thresholds('{"lang": 1.9e-5, "*": {"quantile": 0.9}}', {"lang": "a", "math": "b"})
    assert got == {"lang": figures.ThresholdSpec(value=1.9e-5), "math": figures.ThresholdSpec(quantile=0.9)}


def test_errors(checkpoints, tmp_path):
    base, lang, math = checkpoints
    with pytest.raises(UserError, match="NAME=DIR"):
        figures.parse_experts(["lang"])
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UserError, match="no model.safetensors"):
        figures.change_records(base, {"x": empty}, fixed(x=0.1))
    partial = base_tensors()
    del partial["model.layers.1.mlp.up_proj.weight"]
    broken = save(tmp_path / "broken", partial)
    with pytest.raises(UserError, match="no tensor model.layers.1.mlp.up_proj.weight"):
        figures.change_records(base, {"x": broken}, fixed(x=0.1))
    (math / "model-00002-of-00003.safetensors").unlink()
    with pytest.raises(UserError, match="missing checkpoint shard .*model-00002-of-00003"):
        figures.change_records(base, {"math": math}, fixed(math=0.1))


def test_expert_from_selection_takes_rank_one(checkpoints, tmp_path):
    base, lang, math = checkpoints
    selection = tmp_path / "math.json"
    selection.write_text(json.dumps({"selected": [{"rank": 2, "path": str(lang)}, {"rank": 1, "path": str(math)}]}))
    assert figures.experts_from_selections([f"math={selection}"]) == {"math": str(math)}
    with pytest.raises(UserError, match="missing selection file .*missing.json"):
        figures.experts_from_selections([f"math={tmp_path / 'missing.json'}"])


# ----------------------------------------------------------------------------------------------------------------
# swap-grid and Table 1 bars (layerswap.report.charts) on synthetic evaluation files with known numbers

from layerswap.command_params import parse  # noqa: E402
from layerswap.report import charts  # noqa: E402

LANGS = ["toy_swh", "toy_tel"]
GRID_PAIRS = ["l1m1", "l1m2", "l2m1", "l2m2"]
# MGSM in the target language per config, language and pair; the other language always 0.05
GRID_SCORES = {
    "swap_a": {"toy_swh": [0.30, 0.40, 0.20, 0.30], "toy_tel": [0.10, 0.10, 0.10, 0.30]},
    "swap_b": {"toy_swh": [0.50, 0.50, 0.25, 0.25], "toy_tel": [0.20, 0.20, 0.20, 0.20]},
    "swap_c": {"toy_swh": [0.125, 0.125, 0.125, 0.125], "toy_tel": [0.0, 0.0, 0.0, 0.4]},
    "swap_ll": {"toy_swh": [0.35, 0.35, 0.35, 0.35], "toy_tel": [0.15, 0.15, 0.15, 0.15]},
    "swap_dup": {"toy_swh": [0.01, 0.01, 0.01, 0.01], "toy_tel": [0.01, 0.01, 0.01, 0.01]},
}
GRID_CONFIGS = {
    "swap_a": {"method": "layer_swap", "bottom": 2, "top": 1, "transition_bottom": 0, "transition_top": 0},
    "swap_b": {"method": "layer_swap", "bottom": 3, "top": 1, "transition_bottom": 1, "transition_top": 0},
    "swap_c": {"method": "layer_swap", "bottom": 2, "top": 2},  # transitions default to 0
    "swap_ll": {"method": "layer_swap", "lang_layers": [0, 1, 7]},
    "swap_dup": {
        "method": "layer_swap",
        "bottom": 2,
        "top": 1,
        "transition_bottom": 0,
        "transition_top": 0,
        "w_task": 2.0,
    },
}


def write_mgsm(root: Path, model_id: str, scores: dict) -> None:
    path = root / model_id / "mgsm.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(
            {"model_id": model_id, "benchmark": "mgsm", "metric": "exact_match", "scores": scores, "skipped": None}
        )
    )


@pytest.fixture()
def grid_evals(tmp_path):
    root = tmp_path / "evals"
    for cfg, per_lang in GRID_SCORES.items():
        for lang, values in per_lang.items():
            other = [x for x in LANGS if x != lang][0]
            for pair, value in zip(GRID_PAIRS, values):
                write_mgsm(root, f"merge/{cfg}/{lang}/{pair}", {lang: value, other: 0.05, "en": 0.5})
    return root


def grid_params(**over):
    return {
        "configs": GRID_CONFIGS,
        "languages": LANGS,
        "top_k": 2,
        "default_swap": "swap_a",
        "world": "toy",
        "language_names": {"toy_swh": "toy-Swahili (synthetic)"},
        **over,
    }


def grid(**over) -> charts.SwapGridParams:
    """The swap-grid params as `layerswap charts swap-grid` parses them from --params-json."""
    return parse(charts.SwapGridParams, json.dumps(grid_params(**over)))


def test_swap_grid_csv_numbers(grid_evals, tmp_path):
    prefix = tmp_path / "figs" / "swap_grid"
    assert (
        cli_main(
            [
                "charts",
                "swap-grid",
                "--evals-dir",
                str(grid_evals),
                "--params-json",
                json.dumps(grid_params()),
                "--out-prefix",
                str(prefix),
            ]
        )
        == 0
    )
    frame = pd.read_csv(tmp_path / "figs" / "swap_grid.csv")
    assert list(frame.columns) == charts.GRID_COLUMNS
    frame[["lang_layers", "note"]] = frame[["lang_layers", "note"]].fillna("")
    got = {(r["language"], r["config"]): r for r in frame.to_dict("records")}
    assert len(got) == 10
    a = got[("toy_swh", "swap_a")]
    assert (a["bottom"], a["top"], a["transition_bottom"], a["transition_top"]) == (2, 1, 0, 0)
    assert a["mgsm_mean"] == 30.0 and a["mgsm_min"] == 20.0 and a["mgsm_max"] == 40.0 and a["n_pairs"] == 4
    assert a["is_default"] is True and a["in_grid"] is True and a["note"] == ""
    assert got[("toy_swh", "swap_b")]["mgsm_mean"] == 37.5
    assert got[("toy_tel", "swap_a")]["mgsm_mean"] == 15.0
    assert got[("toy_tel", "swap_b")]["mgsm_mean"] == 20.0
    c = got[("toy_tel", "swap_c")]
    assert (c["transition_bottom"], c["transition_top"]) == (0, 0) and c["mgsm_mean"] == 10.0
    assert got[("toy_swh", "swap_c")]["mgsm_mean"] == 12.5
    ll = got[("toy_swh", "swap_ll")]
    assert ll["in_grid"] is False and ll["lang_layers"] == "0 1 7" and "lang_layers" in ll["note"]
    assert pd.isna(ll["bottom"]) and pd.isna(ll["transition_top"]) and ll["mgsm_mean"] == 35.0
    dup = got[("toy_tel", "swap_dup")]
    assert dup["in_grid"] is False and dup["note"].startswith("same bottom/top/transitions as swap_a")
    assert got[("toy_tel", "swap_b")]["language_name"] == "toy_tel"  # no display name given
    assert got[("toy_swh", "swap_b")]["language_name"] == "toy-Swahili (synthetic)"
    svg = (tmp_path / "figs" / "swap_grid.svg").read_text()
    assert svg.lstrip().startswith("<svg") and "tb=1, tu=0" in svg and "30.0*" in svg and "37.5" in svg
    assert "TOY WORLD" in svg
    assert (tmp_path / "figs" / "swap_grid.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_swap_grid_chart_facets(grid_evals):
    frame = pd.DataFrame.from_records(charts.swap_grid_records(grid_evals, grid()))
    spec = charts.swap_grid_chart(frame).to_dict()
    assert spec["facet"]["column"]["field"] == "transitions"
    assert spec["facet"]["column"]["sort"] == ["tb=0, tu=0", "tb=1, tu=0"]
    assert spec["facet"]["row"]["field"] == "language_name"
    enc = spec["spec"]["layer"][0]["encoding"]
    assert enc["x"]["field"] == "bottom" and enc["y"]["field"] == "top" and enc["color"]["field"] == "mgsm_mean"
    # lang_layers and duplicate configs are in the CSV, not in the plotted data
    plotted = {(r["language"], r["config"]) for r in spec["datasets"][spec["data"]["name"]]}
    assert ("toy_swh", "swap_ll") not in plotted and ("toy_swh", "swap_dup") not in plotted
    assert len(plotted) == 6


def test_swap_grid_errors(grid_evals):
    (grid_evals / "merge" / "swap_b" / "toy_tel" / "l2m1" / "mgsm.json").unlink()
    with pytest.raises(UserError, match=r"missing evaluation file .*swap_b/toy_tel/l2m1/mgsm.json"):
        charts.swap_grid_records(grid_evals, grid())
    with pytest.raises(UserError, match="only layer_swap configs"):
        charts.swap_grid_records(grid_evals, grid(configs={"s": {"method": "soup"}}))
    with pytest.raises(UserError, match="missing key 'top_k'"):
        parse(charts.SwapGridParams, json.dumps({k: v for k, v in grid_params().items() if k != "top_k"}))
    with pytest.raises(UserError, match="'top_k' must be an integer >= 1, got True"):
        grid(top_k=True)
    frame = pd.DataFrame.from_records(
        charts.swap_grid_records(grid_evals, grid(configs={"swap_ll": GRID_CONFIGS["swap_ll"]}))
    )
    with pytest.raises(UserError, match="all use lang_layers"):
        charts.swap_grid_chart(frame)


# Table 1 bars: the synthetic world of test_tables (hand-checked Table 1 numbers)


def test_table1_bars_csv_numbers(tmp_path):
    from test_tables import ITEMS, PARAMS, make_world

    sel, ev = make_world(tmp_path)
    prefix = tmp_path / "figs" / "table1_bars"
    assert (
        cli_main(
            [
                "charts",
                "table1-bars",
                "--selection-dir",
                str(sel),
                "--evals-dir",
                str(ev),
                "--params-json",
                json.dumps(PARAMS),
                "--out-prefix",
                str(prefix),
            ]
        )
        == 0
    )
    frame = pd.read_csv(tmp_path / "figs" / "table1_bars.csv", keep_default_na=False)
    assert list(frame.columns) == charts.BAR_COLUMNS
    swh = frame[frame["language"] == "toy_swh"]

    def values(setting, kind):
        rows = swh[(swh["setting"] == setting) & (swh["kind"] == kind)]
        return [(r["member"], r["config"], r["mgsm"]) for r in rows.to_dict("records")]

    assert values("base", "avg") == [("", "", 20.0)] and values("base", "point") == [("base", "", 20.0)]
    assert values("language_expert", "point") == [("rank 1", "", 24.0), ("rank 2", "", 22.0)]
    assert values("language_expert", "avg") == [("", "", 23.0)]
    assert values("math_expert", "point") == [("rank 1", "", 30.0), ("rank 2", "", 26.0)]
    # soup best per pair: .26 (m), .29 (u), .22 (m), .23 (u) -> avg 25
    assert values("soup_best", "point") == [
        ("l1m1", "soup_m", 26.0),
        ("l1m2", "soup_u", 29.0),
        ("l2m1", "soup_m", 22.0),
        ("l2m2", "soup_u", 23.0),
    ]
    assert values("soup_best", "avg") == [("", "", 25.0)]
    assert [v for _, _, v in values("swap_default", "point")] == [31.0, 33.0, 29.0, 35.0]
    assert {c for _, c, _ in values("swap_default", "point")} == {"swap_def"}
    assert values("swap_best", "point") == [
        ("l1m1", "swap_def", 31.0),
        ("l1m2", "swap_alt", 36.0),
        ("l2m1", "swap_def", 29.0),
        ("l2m2", "swap_alt", 38.0),
    ]
    assert values("swap_best", "avg") == [("", "", 33.5)]
    model = swh[(swh["setting"] == "swap_best") & (swh["member"] == "l1m2")]["model_id"].item()
    assert model == "merge/swap_alt/toy_swh/l1m2"
    assert swh["setting_label"].iloc[0] == "base model"
    assert set(swh["language_name"]) == {"toy-Swahili (synthetic)"}
    # every bar is the Table 1 avg cell
    from layerswap.report import tables

    t1 = tables.build_tables(sel, ev, tables.Params.from_json(json.dumps(PARAMS)))["table1"]
    for r in frame[frame["kind"] == "avg"].to_dict("records"):
        key = ((r["language"], "avg"), r["setting"])
        assert r["mgsm"] == pytest.approx(t1.cells[key], abs=1e-6)
        # the error bar is Table 1's interval, with its item count
        lo, hi = float(r["mgsm_lo"]), float(r["mgsm_hi"])  # strings: the points' cells are empty
        assert (lo, hi) == pytest.approx(t1.intervals[key], abs=1e-6)
        assert lo <= r["mgsm"] <= hi and int(r["n_items"]) == ITEMS
    assert set(frame[frame["kind"] == "point"]["mgsm_lo"]) == {""}
    assert len(frame) == 2 * (6 + 1 + 2 + 2 + 4 * 3)  # per language: 6 bars, 1 + 2 + 2 + 3 x 4 points
    svg = (tmp_path / "figs" / "table1_bars.svg").read_text()
    assert svg.lstrip().startswith("<svg") and "toy-Telugu (synthetic)" in svg and "TOY WORLD" in svg
    assert (tmp_path / "figs" / "table1_bars.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_language_scored_on_a_translation_of_mgsm_is_named_under_the_figures(tmp_path):
    """Paper world, Yoruba a target (MGSM lacks it; AfriMGSM is scored in its place): the Table 1 bars and the swap
    grid say so in a subtitle line, as the tables do under their numbers; Swahili's MGSM is its own; the toy world's
    languages stand for none."""
    from test_tables import _paper_params, make_world

    from layerswap.report.table_params import Params

    sel, ev = make_world(tmp_path, langs=("swh", "yor"))
    params = Params.from_json(json.dumps(_paper_params("swh", "yor", {"swh": "Swahili", "yor": "Yoruba"})), False)
    bars = pd.DataFrame.from_records(charts.table1_bar_records(sel, ev, params), columns=charts.BAR_COLUMNS)
    grid_frame = pd.DataFrame({**{k: [1, 2] for k in charts.SWAP_KEYS}, "language": ["swh", "yor"], "in_grid": True})
    grid_frame = grid_frame.assign(language_name=["Swahili", "Yoruba"], is_default=False, mgsm_mean=[10.0, 20.0])
    note = "yor: AfriMGSM (masakhane/afrimgsm, lm-eval afrimgsm_cot_yor_prompt_1), the human translation of MGSM's"
    for chart in (charts.table1_bars_chart(bars, "paper"), charts.swap_grid_chart(grid_frame, "paper")):
        subtitle = chart.to_dict()["title"]["subtitle"]
        assert len(subtitle) == 2 and subtitle[1].startswith(note) and subtitle[1].endswith("in MGSM's place.")
    toy = charts.swap_grid_chart(grid_frame.assign(language=["toy_swh", "toy_yor"]), "toy").to_dict()["title"]
    assert isinstance(toy["subtitle"], str) and "AfriMGSM" not in json.dumps(toy)


def test_table1_bars_missing_eval_names_it(tmp_path):
    from test_tables import PARAMS, make_world

    from layerswap.report import tables

    sel, ev = make_world(tmp_path)
    (ev / "merge" / "soup_m" / "toy_tel" / "l2m2" / "mgsm.json").unlink()
    with pytest.raises(UserError, match=r"missing evaluation file .*soup_m/toy_tel/l2m2/mgsm.json"):
        charts.table1_bar_records(sel, ev, tables.Params.from_json(json.dumps(PARAMS)))


def test_table_html_page(tmp_path):
    md = tmp_path / "table9.md"
    md.write_text(
        "# Table 9: a <test> — TOY WORLD\n\nCells: ours (paper).\n\n"
        "| Setting   |   base model |   swap |\n|:----------|-------------:|-------:|\n"
        "| toy-Swahili avg | 20.0 | 33.5 (41.2) |\n| toy-Swahili max | 20.0 | 38.0 |\n\n"
        "- MGSM exact match (%).\n- second & last note\n"
    )
    assert cli_main(["charts", "table-html", "--markdown", str(md), "--out-dir", str(tmp_path / "html")]) == 0
    page = (tmp_path / "html" / "table9.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "<h2>Table 9: a &lt;test&gt; — TOY WORLD</h2>" in page
    assert '<th class="r">base model</th>' in page and "<td>toy-Swahili avg</td>" in page
    assert '<td class="r">33.5 (41.2)</td>' in page and "<li>second &amp; last note</li>" in page
    assert "<p>Cells: ours (paper).</p>" in page
    bad = tmp_path / "bad.md"
    bad.write_text("# no table here\n")
    assert cli_main(["charts", "table-html", "--markdown", str(bad), "--out-dir", str(tmp_path)]) == 1


def test_config_html(tmp_path):
    config = {"world": "toy", "languages": ["toy_swh"], "prompt_template": "Q: {prompt}\nA:", "z_first": 1, "a": 2}
    assert (
        cli_main(
            [
                "charts",
                "config-html",
                "--config-json",
                json.dumps(config),
                "--out-prefix",
                str(tmp_path / "config_used"),
            ]
        )
        == 0
    )
    import yaml

    text = (tmp_path / "config_used.yaml").read_text()
    assert yaml.safe_load(text) == config
    assert text.index("z_first") < text.index("\na:")  # the config's own key order
    page = (tmp_path / "config_used.html").read_text()
    assert "Toy world" in page and "prompt_template" in page and "{prompt}" in page
