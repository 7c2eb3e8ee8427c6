import json

import pytest
from conftest import read_jsonl

from layerswap.data.mixes import build_mix, normalise
from layerswap.errors import UserError


def test_normalisers_map_each_schema(toy_world):
    math = normalise(toy_world / "raw" / "orca_math.jsonl", "orca_math", "en", "orca")
    assert {"prompt", "response", "source"} == set(math[0]) and math[0]["source"] == "orca"
    nllb = normalise(toy_world / "raw" / "nllb_toy_swh.jsonl", "nllb", "toy_swh", "nllb")
    row = read_jsonl(toy_world / "raw" / "nllb_toy_swh.jsonl")[0]["translation"]
    assert nllb[0] == {
        "prompt": f"translate en to toy_swh : {row['eng_Latn']}",
        "response": row["toy_swh"],
        "source": "nllb",
    }
    assert nllb[1]["prompt"] == f"translate toy_swh to en : {row['toy_swh']}"


def test_mix_is_seeded_deduplicated_and_counted(toy_world, tmp_path):
    sources = [
        {
            "name": "aya",
            "schema": "aya",
            "path": str(toy_world / "raw" / "aya_toy_swh.jsonl"),
            "n": 20,
            "lang": "toy_swh",
        },
        {"name": "math", "schema": "orca_math", "path": str(toy_world / "raw" / "orca_math.jsonl"), "n": 10},
    ]
    counts = build_mix(sources, 5, tmp_path / "a.jsonl")
    build_mix(sources, 5, tmp_path / "b.jsonl")
    assert counts == {"aya:toy_swh": 20, "math:en": 10}
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    rows = read_jsonl(tmp_path / "a.jsonl")
    assert len({(r["prompt"], r["response"]) for r in rows}) == 30


def test_bad_inputs_name_the_file(toy_world, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"question": "q"}) + "\n")
    with pytest.raises(UserError, match=r"bad.jsonl:1: missing field 'answer'"):
        normalise(bad, "orca_math", "en", "orca")
    with pytest.raises(UserError, match="unknown schema 'dolly'"):
        normalise(bad, "dolly", "en", "x")
    with pytest.raises(UserError, match="empty mix"):
        build_mix([], 0, tmp_path / "out.jsonl")
    with pytest.raises(UserError, match="asked for 100000 rows"):
        build_mix(
            [{"name": "m", "schema": "orca_math", "path": str(toy_world / "raw" / "orca_math.jsonl"), "n": 100000}],
            0,
            tmp_path / "out.jsonl",
        )
    assert not (tmp_path / "out.jsonl").exists()
