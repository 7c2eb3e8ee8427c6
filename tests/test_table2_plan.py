"""Table 2 evaluates what it reads (issue 41, item 1): `layerswap table2-models` names, per extra MGSM language, the
models Table 2 shows (its winners chosen on the table's language as the table chooses them); the extra-language
evaluation job evaluates only the models its list names, and a changed winner evaluates only the new one (the
store keeps the rest)."""

from __future__ import annotations

import argparse
import json
import logging
import re
from pathlib import Path

import pytest

from layerswap.contracts import checkpoint_model_id, merge_model_id
from layerswap.errors import UserError
from layerswap.layout import Layout
from layerswap.report import table2_models as t2m

COUNT = re.compile(r"evaluate: store: reused (\d+), evaluated (\d+)")
LAYOUT = Layout()
PAIRS = ["l1m1", "l1m2", "l2m1", "l2m2"]
PARAMS = {
    "languages": ["toy_swh"],
    "mgsm_languages": ["en", "toy_swh", "toy_tel"],
    "top_k": 2,
    "best_of": {"soup": ["soup_a", "soup_b"], "layer_swap": ["swap_default", "swap_x"], "ties": ["ties_a"]},
    "default_swap": "swap_default",
    "world": "toy",
    "table2_language": "toy_swh",
}
COVERED = {
    "base": ["en", "toy_swh", "toy_tel"],
    "math_expert": ["en", "toy_swh", "toy_tel"],
    "language_expert": ["en", "toy_swh"],
    "joint_sft": ["en", "toy_swh"],
    "swap_default": ["toy_swh"],
    "soup_best": ["toy_swh"],
    "ties_best": ["toy_swh"],
    "swap_best": ["toy_swh"],
}


def write_results(root: Path, scores: dict[str, float]) -> tuple[Path, Path]:
    """Selections of math, toy_swh and joint_toy_swh (2 experts each) and the toy_swh MGSM of every merge."""
    sel_dir, evals = root / LAYOUT.selection_dir(), root / LAYOUT.evals()
    for expert in ("math", "toy_swh", "joint_toy_swh"):
        path = root / LAYOUT.selection(expert)
        path.parent.mkdir(parents=True, exist_ok=True)
        selected = [{"rank": r, "run": f"{expert}_{r}", "checkpoint": "checkpoint-16"} for r in (1, 2)]
        path.write_text(json.dumps({"selected": selected}))
    for cfg in [c for names in PARAMS["best_of"].values() for c in names]:
        for pair in PAIRS:
            mid = merge_model_id(cfg, "toy_swh", pair)
            path = root / LAYOUT.eval_file(mid, "mgsm")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({"scores": {"toy_swh": scores.get(mid, 0.25)}, "n": {"toy_swh": 12}}))
    return sel_dir, evals


def choose(root: Path, scores: dict[str, float], langs=("en", "toy_tel")) -> dict[str, list[str]]:
    sel_dir, evals = write_results(root, scores)
    outs = [root / f"{lang}.models.json" for lang in langs]
    parser = argparse.ArgumentParser()
    t2m.add_arguments(parser)
    args = ["--selection-dir", str(sel_dir), "--evals-dir", str(evals), "--params-json", json.dumps(PARAMS)]
    args += ["--covered-json", json.dumps(COVERED), "--languages", *langs, "--out", *map(str, outs)]
    t2m.run(parser.parse_args(args))
    return {lang: json.loads(out.read_text())["models"] for lang, out in zip(langs, outs)}


def test_the_lists_hold_the_winners_the_default_swap_and_the_experts_that_lack_the_language(tmp_path):
    win = merge_model_id("swap_x", "toy_swh", "l2m1")
    lists = choose(tmp_path, {win: 0.9, merge_model_id("soup_b", "toy_swh", "l1m1"): 0.5})
    en, tel = lists["en"], lists["toy_tel"]
    # English: the experts' own files hold it; merges only hold the table's language
    assert not any(m.startswith("ckpt/") for m in en) and "base" not in en
    assert win in en and merge_model_id("swap_default", "toy_swh", "l2m1") in en
    assert merge_model_id("soup_b", "toy_swh", "l1m1") in en and merge_model_id("soup_a", "toy_swh", "l1m1") not in en
    assert merge_model_id("soup_a", "toy_swh", "l1m2") in en  # ties go to the earlier config
    # 4 pairs x (soup, ties, swap default, swap best; swap best = default on 3 pairs, listed once)
    assert len(en) == 4 * 4 - 3
    # toy_tel: also the language and joint experts (their files hold English and toy_swh only), not math or base
    experts = {checkpoint_model_id(f"{e}_{r}", "checkpoint-16") for e in ("toy_swh", "joint_toy_swh") for r in (1, 2)}
    assert set(tel) == set(en) | experts
    assert not any(m.startswith("ckpt/math") for m in tel)


def test_a_changed_winner_changes_only_its_entry(tmp_path):
    old = choose(tmp_path / "a", {merge_model_id("swap_x", "toy_swh", "l1m1"): 0.9})["en"]
    new = choose(tmp_path / "b", {merge_model_id("swap_x", "toy_swh", "l1m2"): 0.9})["en"]
    assert set(new) - set(old) == {merge_model_id("swap_x", "toy_swh", "l1m2")}
    assert set(old) - set(new) == {merge_model_id("swap_x", "toy_swh", "l1m1")}


def test_a_missing_column_in_covered_is_one_error(tmp_path):
    sel_dir, evals = write_results(tmp_path, {})
    params = t2m.Params.from_json(json.dumps(PARAMS))
    with pytest.raises(UserError, match="ties_best"):
        t2m.table2_models(sel_dir, evals, params, {k: v for k, v in COVERED.items() if k != "ties_best"})


# -- the evaluation job: only the listed models, a changed winner evaluates only the new one --------------------
pytest.importorskip("lm_eval")
pytest.importorskip("torch")

from layerswap.evaluation import evaluate_merges as em  # noqa: E402
from tests.test_switch import BENCHMARKS, grid  # noqa: E402,F401 (fixture)


def evaluate(grid, out: Path, store: Path, only: list[str], caplog) -> tuple[int, int]:
    listing = out.parent / f"{out.name}.models.json"
    listing.parent.mkdir(parents=True, exist_ok=True)
    listing.write_text(json.dumps({"language": "toy_swh", "models": only}))
    parser = argparse.ArgumentParser()
    em.add_arguments(parser)
    argv = ["--data-dir", str(grid["data"]), "--out-dir", str(out), "--benchmarks-json", json.dumps(BENCHMARKS)]
    argv += ["--batch-size", "16", "--seed", "0", "--threads", "1", "--store", str(store)]
    argv += ["--only-models", str(listing), "--index", str(out / "index.json")]
    for model_id, src in grid["recipes"].items():  # every candidate, as rule evaluate_table2 passes them
        argv += ["--model", f"{model_id}={src}"]
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="layerswap.evaluate"):
        em.run(parser.parse_args(argv))
    found = COUNT.findall(caplog.text)
    assert len(found) == 1, caplog.text
    return int(found[0][0]), int(found[0][1])


def test_a_table2_winner_change_evaluates_only_the_new_winner(grid, tmp_path, caplog):
    store = tmp_path / "store"
    a, b, c = sorted(grid["recipes"])[:3]
    assert evaluate(grid, tmp_path / "first", store, [a, b], caplog) == (0, 2)
    assert sorted(p.name for p in (tmp_path / "first").iterdir() if p.is_dir()) == sorted([a, b])
    assert evaluate(grid, tmp_path / "second", store, [a, c], caplog) == (1, 1)  # b lost to c: c alone is new
    index = json.loads((tmp_path / "second" / "index.json").read_text())
    assert [e["model_id"] for e in index["checkpoints"]] == [a, c]


def test_a_listed_model_that_is_no_candidate_is_one_error(grid, tmp_path, caplog):
    with pytest.raises(UserError, match="not among this job's --model candidates"):
        evaluate(grid, tmp_path / "x", tmp_path / "store", ["merge/nope/toy_swh/l1m1"], caplog)


def test_only_selected_keeps_this_runs_selected_checkpoints(tmp_path):
    """Table 5's jobs after selection: of a run's checkpoints (the candidates), those the selection file's top k
    name; the selection's checkpoints of other runs are other jobs'."""
    from layerswap.evaluation import model_lists

    selection = tmp_path / "math.json"
    selected = [{"rank": 1, "run": "math_2", "checkpoint": "s2"}, {"rank": 2, "run": "math_1", "checkpoint": "s3"}]
    selected.append({"rank": 3, "run": "math_1", "checkpoint": "s1"})
    selection.write_text(json.dumps({"selected": selected}))
    items = [f"ckpt/math_1/s{i}=results/experts/math_1/s{i}" for i in (1, 2, 3)]
    args = argparse.Namespace(only_models=None, only_selected=selection, top_k=2)
    assert model_lists.restrict(items, args) == [items[2]]
    args.top_k = 3
    assert model_lists.restrict(items, args) == [items[2], items[0]]
    args.top_k = 0
    with pytest.raises(UserError, match="--top-k"):
        model_lists.restrict(items, args)
