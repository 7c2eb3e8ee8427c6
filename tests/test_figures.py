"""Parameter-change heatmaps on tiny synthetic safetensors checkpoints with known deltas."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from safetensors.numpy import save_file

from layerswap import figures
from layerswap.errors import UserError

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
    return (save(tmp_path / "base", base), save(tmp_path / "lang", lang),
            save(tmp_path / "math", math, shards=3))


def shares(records, expert):
    return {(r["layer"], r["matrix"]): r["share"] for r in records if r["expert"] == expert}


def test_shares_input_rows(checkpoints):
    base, lang, math = checkpoints
    rec = figures.change_shares(base, {"lang": lang, "math": math}, {"lang": 0.1, "math": 0.15})
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


def test_shares_output_rows(checkpoints):
    base, lang, math = checkpoints
    rec = figures.change_shares(base, {"lang": lang}, {"lang": 0.1}, rows="output")
    s = shares(rec, "lang")
    assert s[(0, "q_proj")] == 1.0
    assert s[(1, "k_proj")] == 0.5
    assert s[(1, "down_proj")] == 0.25
    assert sum(s.values()) == 1.75


def test_cli_writes_svg_png_csv(checkpoints, tmp_path):
    base, lang, math = checkpoints
    prefix = tmp_path / "figs" / "param_change"
    parser = argparse.ArgumentParser()
    figures.add_arguments(parser)
    figures.run(parser.parse_args(["--base", str(base), "--expert", f"lang={lang}", "--expert", f"math={math}",
                                   "--threshold-json", json.dumps({"lang": 0.1, "*": 0.15}),
                                   "--out-prefix", str(prefix)]))
    svg = (tmp_path / "figs" / "param_change.svg").read_text()
    assert svg.lstrip().startswith("<svg") and "threshold 1.0e-01" in svg and "threshold 1.5e-01" in svg
    assert (tmp_path / "figs" / "param_change.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    frame = pd.read_csv(tmp_path / "figs" / "param_change.csv")
    assert list(frame.columns) == ["expert", "layer", "matrix", "share", "n_above", "n_rows", "threshold"]
    got = frame.set_index(["expert", "layer", "matrix"])["share"]
    assert got[("lang", 0, "q_proj")] == 0.25 and got[("math", 1, "gate_proj")] == 1.0
    assert set(frame.loc[frame["expert"] == "math", "threshold"]) == {0.15}


def test_chart_layer0_at_bottom_and_matrix_order(checkpoints):
    base, lang, _ = checkpoints
    frame = pd.DataFrame.from_records(figures.change_shares(base, {"lang": lang}, {"lang": 0.1}))
    spec = figures.heatmap_chart(frame, ["lang"]).to_dict()
    enc = spec["spec"]["encoding"]
    assert enc["y"]["sort"] == "descending" and enc["y"]["field"] == "layer"
    assert enc["x"]["sort"] == figures.MATRIX_NAMES
    assert spec["facet"]["column"]["field"] == "panel"


def test_errors(checkpoints, tmp_path):
    base, lang, math = checkpoints
    with pytest.raises(UserError, match="no threshold for expert 'lang'"):
        figures.parse_thresholds('{"math": 0.1}', {"lang": str(lang)})
    with pytest.raises(UserError, match="NAME=DIR"):
        figures.parse_experts(["lang"])
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UserError, match="no model.safetensors"):
        figures.change_shares(base, {"x": empty}, {"x": 0.1})
    partial = base_tensors()
    del partial["model.layers.1.mlp.up_proj.weight"]
    broken = save(tmp_path / "broken", partial)
    with pytest.raises(UserError, match="no tensor model.layers.1.mlp.up_proj.weight"):
        figures.change_shares(base, {"x": broken}, {"x": 0.1})
    (math / "model-00002-of-00003.safetensors").unlink()
    with pytest.raises(UserError, match="missing checkpoint shard .*model-00002-of-00003"):
        figures.change_shares(base, {"math": math}, {"math": 0.1})


def test_expert_from_selection_takes_rank_one(checkpoints, tmp_path):
    base, lang, math = checkpoints
    selection = tmp_path / "math.json"
    selection.write_text(json.dumps({"selected": [{"rank": 2, "path": str(lang)}, {"rank": 1, "path": str(math)}]}))
    assert figures.experts_from_selections([f"math={selection}"]) == {"math": str(math)}
    with pytest.raises(UserError, match="not a selection file"):
        figures.experts_from_selections([f"math={tmp_path / 'missing.json'}"])
