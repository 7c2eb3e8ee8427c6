"""Bad merge inputs give one-line UserErrors naming the fault and leave no output behind; the recipes command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from layerswap.cli import main
from layerswap.errors import UserError
from layerswap.layout import Layout
from layerswap.merge.engine import build_state_dict, write_merged
from layerswap.merge.recipes import Recipe, validate_recipe

try:
    from test_merge_engine import LANG, TASK, llama_shapes, make_ckpt, swap
except ImportError:  # tests/ made a package
    from tests.test_merge_engine import LANG, TASK, llama_shapes, make_ckpt, swap


def refuse(recipe: dict, out: Path, match: str) -> None:
    with pytest.raises(UserError, match=match) as err:
        write_merged(recipe, str(out))
    assert "\n" not in str(err.value)
    assert not out.exists()
    assert not [p for p in out.parent.iterdir() if p.name.startswith(f".{out.name}")]


@pytest.fixture
def pair(tmp_path: Path) -> tuple[str, str]:
    return make_ckpt(tmp_path / "task", 4, expert=TASK), make_ckpt(tmp_path / "lang", 4, expert=LANG)


def test_layer_counts_and_architectures_differ(tmp_path: Path, pair: tuple[str, str]) -> None:
    task, _ = pair
    other = make_ckpt(tmp_path / "six", 6, expert=LANG)
    refuse(swap(task, other, bottom=1, top=1), tmp_path / "out", "num_hidden_layers")
    arch = make_ckpt(tmp_path / "arch", 4, expert=LANG, model_type="mistral")
    refuse(swap(task, arch, bottom=1, top=1), tmp_path / "out", "model_type")


def test_vocab_shapes_and_names_differ(tmp_path: Path, pair: tuple[str, str]) -> None:
    task, _ = pair
    shapes = llama_shapes(4)
    bigger = {n: torch.zeros((40, s[1]) if "embed" in n or "lm_head" in n else s) for n, s in shapes.items()}
    refuse(
        swap(task, make_ckpt(tmp_path / "voc", 4, bigger, vocab_size=40), bottom=1, top=1),
        tmp_path / "out",
        "vocab_size",
    )
    reshaped = {n: torch.zeros(s) for n, s in shapes.items()} | {"model.norm.weight": torch.zeros(9)}
    refuse(swap(task, make_ckpt(tmp_path / "shp", 4, reshaped), bottom=1, top=1), tmp_path / "out", "model.norm.weight")
    fewer = {n: torch.zeros(s) for n, s in shapes.items() if n != "lm_head.weight"}
    refuse(swap(task, make_ckpt(tmp_path / "nm", 4, fewer), bottom=1, top=1), tmp_path / "out", "lm_head.weight")


@pytest.mark.parametrize(
    "params,match",
    [
        ({"bottom": 3, "top": 1, "transition_bottom": 1}, "exceeds"),
        ({"lang_layers": [0, 4]}, "lang_layers"),
        ({"lang_layers": [0], "bottom": 1}, "params.bottom"),
        ({"bottom": 1}, "params.top"),
        ({"bottom": 1, "top": 1, "shuffle": 1}, "shuffle"),
        ({"bottom": -1, "top": 1}, "params.bottom"),
        ({"bottom": 1, "top": 1, "non_layer": "mean"}, "average, lang, task"),
    ],
)
def test_bad_swap_params(tmp_path: Path, pair: tuple[str, str], params: dict, match: str) -> None:
    refuse(swap(*pair, **params), tmp_path / "out", match)


def test_bad_recipe_keys() -> None:
    with pytest.raises(UserError, match="'merge'.*layer_swap, soup, ties"):
        validate_recipe({"method": "merge", "inputs": {}})
    with pytest.raises(UserError, match="unknown key 'extra'"):
        validate_recipe({"method": "soup", "inputs": {"models": ["a"]}, "extra": 1})
    with pytest.raises(UserError, match="params.density"):
        validate_recipe({"method": "ties", "base": "b", "inputs": {"models": ["a"]}, "params": {"density": 1.5}})
    with pytest.raises(UserError, match="base: required"):
        validate_recipe({"method": "ties", "inputs": {"models": ["a"]}, "params": {"density": 0.5}})


def test_truncated_and_corrupt_safetensors(tmp_path: Path, pair: tuple[str, str]) -> None:
    task, _ = pair
    bad = Path(make_ckpt(tmp_path / "trunc", 4, expert=LANG))
    data = (bad / "model.safetensors").read_bytes()
    (bad / "model.safetensors").write_bytes(data[:-100])
    refuse(swap(task, str(bad), bottom=1, top=1), tmp_path / "out", "truncated")
    (bad / "model.safetensors").write_bytes(data[:8] + b"\xff" * 50 + data[58:])
    refuse(swap(task, str(bad), bottom=1, top=1), tmp_path / "out", "corrupt")


def test_pickle_checkpoint_refused(tmp_path: Path, pair: tuple[str, str]) -> None:
    task, _ = pair
    pkl = Path(make_ckpt(tmp_path / "pkl", 4, expert=LANG))
    (pkl / "model.safetensors").unlink()
    (pkl / "pytorch_model.bin").write_bytes(b"not loaded")
    refuse(swap(task, str(pkl), bottom=1, top=1), tmp_path / "out", "pickle checkpoint.*pytorch_model.bin")


def test_nan_in_input_refused(tmp_path: Path, pair: tuple[str, str]) -> None:
    task, _ = pair
    tensors = {n: torch.zeros(s) for n, s in llama_shapes(4).items()}
    tensors["model.layers.2.mlp.up_proj.weight"][3, 1] = float("nan")
    nan = make_ckpt(tmp_path / "nan", 4, tensors)
    refuse(
        swap(task, nan, bottom=3, top=0, transition_bottom=1),
        tmp_path / "out",
        "model.layers.2.mlp.up_proj.weight.*NaN",
    )
    tensors["model.layers.2.mlp.up_proj.weight"][3, 1] = float("inf")
    inf = make_ckpt(tmp_path / "inf", 4, tensors)
    with pytest.raises(UserError, match="Inf"):
        build_state_dict(swap(task, inf, bottom=3, top=0))


def test_different_base_refused_unless_allowed(tmp_path: Path, pair: tuple[str, str]) -> None:
    task, _ = pair
    other = make_ckpt(tmp_path / "other", 4, expert=LANG, fingerprint="b1")
    refuse(swap(task, other, bottom=1, top=1), tmp_path / "out", "base_sha256.*allow_different_base")
    write_merged(swap(task, other, bottom=1, top=1) | {"allow_different_base": True}, str(tmp_path / "out"))
    assert (tmp_path / "out" / "config.json").is_file()


def test_failure_keeps_previous_output(tmp_path: Path, pair: tuple[str, str]) -> None:
    out = tmp_path / "out"
    write_merged(swap(*pair, bottom=1, top=1), str(out))
    before = sorted(p.name for p in out.iterdir())
    with pytest.raises(UserError, match="bottom"):
        write_merged(swap(*pair, bottom=4, top=1), str(out), force=True)
    assert sorted(p.name for p in out.iterdir()) == before


def test_cli_merge_and_recipes(tmp_path: Path, pair: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    task, lang = pair
    sel = lambda t, ps: {"expert_type": t, "selected": [{"rank": i + 1, "path": p} for i, p in enumerate(ps)]}  # noqa: E731
    (tmp_path / "math.json").write_text(json.dumps(sel("math", [task, task])))
    (tmp_path / "swh.json").write_text(json.dumps(sel("toy_swh", [lang, lang, lang])))
    (tmp_path / "yor.json").write_text(json.dumps(sel("toy_yor", [lang + "/../lang"])))
    params = json.dumps({"method": "layer_swap", "bottom": 1, "top": 1, "transition_bottom": 0, "transition_top": 0})
    common = [
        "--params-json",
        params,
        "--lang-selection",
        str(tmp_path / "swh.json"),
        "--task-selection",
        str(tmp_path / "math.json"),
        "--base",
        Layout().base(),
    ]
    assert main(["recipes", *common, "--out-dir", str(tmp_path / "r")]) == 0
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == [f"l{i}m{j}.json" for i in (1, 2, 3) for j in (1, 2)]
    recipe = Recipe.load(tmp_path / "r" / "l2m1.json").written
    assert recipe["inputs"] == {"task": task, "lang": lang} and recipe["base"] == Layout().base()
    assert (
        main(
            [
                "recipes",
                *common,
                "--out-dir",
                str(tmp_path / "s"),
                "--soup-then-swap",
                "--all-lang-selections",
                str(tmp_path / "swh.json"),
                str(tmp_path / "yor.json"),
            ]
        )
        == 0
    )
    multi = Recipe.load(tmp_path / "s" / "multisoup.json").written
    assert multi["inputs"]["lang"]["inputs"]["models"] == [lang, lang + "/../lang"]
    assert Recipe.load(tmp_path / "s" / "langsoup.json").written["inputs"]["task"]["inputs"]["models"] == [task, task]
    recipe["base"] = None
    (tmp_path / "ok.json").write_text(json.dumps(recipe))
    assert main(["merge", "--recipe", str(tmp_path / "ok.json"), "--out", str(tmp_path / "m")]) == 0
    assert (tmp_path / "m" / "model.safetensors.index.json").is_file()
    recipe["params"]["bottom"] = 9
    (tmp_path / "bad.json").write_text(json.dumps(recipe))
    capsys.readouterr()
    assert main(["merge", "--recipe", str(tmp_path / "bad.json"), "--out", str(tmp_path / "n")]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "exceeds" in err
    assert not (tmp_path / "n").exists()


def test_the_layer_count_check_has_one_owner_that_the_engine_uses():
    """layer_swap.overflow is the count config.check (through layer_swap.check), ablations.expand and the engine's
    layer_plan (through layer_swap.check) all use: a swap of exactly L layers fits, one more does not."""
    from layerswap.merge.methods.layer_swap import layer_plan
    from layerswap.merge.methods.layer_swap import overflow as swap_layer_overflow

    fits = {"bottom": 3, "transition_bottom": 2, "transition_top": 1, "top": 2}
    assert swap_layer_overflow(fits, 8) is None and layer_plan(fits, 8).count("lang") == 5
    assert swap_layer_overflow({"bottom": 4, "top": 4, "transition_bottom": None}, 8) is None  # absent/None: 0
    over = {**fits, "top": 3}
    assert swap_layer_overflow(over, 8) == [3, 2, 1, 3]
    with pytest.raises(UserError, match=r"= 3\+2\+1\+3 = 9 exceeds the 8 layers of the model"):
        layer_plan(over, 8, where="recipe.params")
