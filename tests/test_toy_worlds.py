"""The toy-transfer study's configs (config/toy_transfer.yaml + config/worlds/*.yaml) and its record page."""

from pathlib import Path

import pytest
import yaml
from snakemake.utils import update_config

from layerswap.config import check, validate_config
from scripts.measure import toy_worlds

REPO = Path(__file__).resolve().parents[1]
LEVERS = sorted(p.stem for p in (REPO / "config" / "worlds").glob("*.yaml"))


def stacked(*levers: str) -> dict:
    """The config Snakemake builds from `--configfile config/toy_transfer.yaml config/worlds/<lever>.yaml ...`."""
    config = yaml.safe_load((REPO / "config" / "toy_transfer.yaml").read_text())
    for lever in levers:
        update_config(config, yaml.safe_load((REPO / "config" / "worlds" / f"{lever}.yaml").read_text()))
    validate_config(config)
    check(config)
    return config


@pytest.mark.parametrize("lever", LEVERS)
def test_every_lever_is_a_valid_world_alone_and_on_the_richest_base(lever):
    alone = stacked(lever)
    assert alone != stacked()  # the lever changes the world
    stacked("relex", "parallel", "toymath", lever)


def test_levers_change_what_they_say():
    base = stacked()
    assert {s["word_order"] for s in stacked("relex")["toy_world"]["languages"].values()} == {"svo"}
    mix = stacked("parallel", "toymath")["toy_world"]["pretrain_mix"]
    assert mix == {"parallel": 0.40, "code_switched": 0.20, "toy_math": 0.15}  # overlays merge key by key
    restricted = stacked("restricted")["sft"]
    assert restricted["defaults"]["peft_method"] == "lora"
    assert restricted["runs"]["math_1"]["lora"]["layers"] == [2, 3, 4, 5, 6]
    swap = base["merges"]["configs"][base["merges"]["default_swap"]]
    middle = list(range(swap["bottom"], base["base"]["num_layers"] - swap["top"]))
    assert restricted["runs"]["math_1"]["lora"]["layers"] == middle  # the math experts train what the swap takes
    assert sorted(restricted["defaults"]["lora"]["layers"] + middle) == list(range(base["base"]["num_layers"]))
    # only the world changes: evaluation, selection and merges are the study's for every lever
    for lever in LEVERS:
        world = stacked(lever)
        for key in ("evaluation", "selection", "merges", "analysis"):
            assert world[key] == base[key], (lever, key)


def test_unknown_lever_is_one_line(capsys):
    script = toy_worlds
    with pytest.raises(SystemExit, match=r"config/worlds/nope.yaml: no such lever; known: format, less_english, "):
        script.configfiles(["nope"])


def test_record_page_rows(tmp_path, monkeypatch):
    script = toy_worlds
    page = tmp_path / "toy_worlds.md"
    page.write_text(f"# t\n\nintro\n\n{script.BEGIN}\nold\n{script.END}\n\nafter\n")
    monkeypatch.setattr(script, "PAGE", page)
    cell = {
        "base": [15.0, 10.0, 20.0],
        "language_expert": [0.0, 0.0, 0.0],
        "math_expert": [12.0, 8.0, 16.0],
        "soup_best": [9.0, 6.0, 12.0],
        "swap_default": [25.0, 21.0, 29.0],
        "swap_best": [25.0, 21.0, 29.0],
    }
    scores = {
        "a": {"holds": False, "math_en_above_base": True, "languages": {"toy_a": {"belebele": True, "flores": False}}},
        "b": {"holds": True, "languages_won": ["toy_a"]},
        "c": {
            "math": {"middle_share": 0.7},
            "language": {"middle_share": 0.5},
            "flat_share": 0.625,
            "paper_pattern": True,
        },
        "table1_avg": {"toy_a": cell},
    }
    record = {
        "world": "relex",
        "levers": ["relex"],
        "command": "python -m scripts.measure.toy_worlds --workdir DIR --levers relex",
        "wall_s": 600.0,
        "scores": scores,
    }
    script.write_page([record])
    text = page.read_text()
    assert text.startswith("# t\n\nintro\n\n") and text.endswith(f"{script.END}\n\nafter\n") and "old" not in text
    line = text.splitlines()[7]
    assert line.startswith(
        "| relex | relex | no: toy_a flores | yes, 1/1 | toy_a: 25.0 [21.0, 29.0] vs best rival "
        "15.0 [10.0, 20.0] | math 0.700 / lang 0.500 (flat 0.625): paper-like | 10.0 min |"
    )
