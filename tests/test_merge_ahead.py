"""The next merge is built while the current one is evaluated (issue 48, item 6): `layerswap evaluate-merges` builds
merge i+1 on a background thread while merge i is evaluated (layerswap/merge/merger.py), at most one ahead, with the
bytes of merges built when asked, and an error of a merge built ahead is the same one line as without."""

from __future__ import annotations

import json
import logging
import re
import shutil
import subprocess
import sys
import threading

import pytest

pytest.importorskip("lm_eval")
torch = pytest.importorskip("torch")

from layerswap.evaluation import evaluate_merges  # noqa: E402
from layerswap.merge import merger as merger_mod  # noqa: E402
from tests.test_evaluate import make_args  # noqa: E402
from tests.test_switch import BENCHMARKS, grid  # noqa: E402,F401 (fixture)

AHEAD = re.compile(r"evaluate: merges built ahead of their evaluation: (\d+) of (\d+)")


def _files(root):
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_merges_built_ahead_give_the_bytes_of_merges_built_when_asked(grid, tmp_path, caplog, monkeypatch):
    """The 2x2 grid in one job: every merge after the first is built ahead, on a thread, never more than one at a
    time and only once the previous one was handed over; the result files equal a job that builds each merge when
    the host asks for it."""
    models = sorted(grid["recipes"].items())
    real_run, alive, handed = merger_mod._Ahead.run, [], []

    def run(self):
        alive.append(sum(t.name == "layerswap-merge-ahead" and t.is_alive() for t in threading.enumerate()))
        real_run(self)

    real_take = merger_mod._Ahead.take
    monkeypatch.setattr(merger_mod._Ahead, "run", run)
    monkeypatch.setattr(merger_mod._Ahead, "take", lambda self: handed.append(self) or real_take(self))
    with caplog.at_level(logging.INFO, logger="layerswap.evaluate"):
        evaluate_merges.run(make_args(grid["data"], tmp_path / "ahead", models, BENCHMARKS))
    assert AHEAD.findall(caplog.text) == [("3", "4")]
    assert alive == [1, 1, 1] and len(handed) == 3  # one build ahead at a time, each taken by the host
    caplog.clear()
    monkeypatch.setattr(evaluate_merges, "Merger", lambda: merger_mod.Merger(ahead=0))
    with caplog.at_level(logging.INFO, logger="layerswap.evaluate"):
        evaluate_merges.run(make_args(grid["data"], tmp_path / "asked", models, BENCHMARKS))
    assert AHEAD.findall(caplog.text) == [("0", "4")]
    ahead, asked = _files(tmp_path / "ahead"), _files(tmp_path / "asked")
    assert len(ahead) == 4 * 2 * 2 and ahead == asked


def _nan_expert(grid, tmp_path):
    """A copy of language expert l1 whose first layer's q_proj holds a NaN: a merge that reads that tensor fails
    while it is built (its headers, read when the job orders its merges, are sound)."""
    from safetensors.torch import load_file, save_file

    expert = tmp_path / "l1nan"
    shutil.copytree(grid["experts"]["l1"], expert)
    weights = expert / "model.safetensors"
    state = load_file(str(weights))
    name = "model.layers.0.self_attn.q_proj.weight"
    state[name][0, 0] = float("nan")
    save_file(state, str(weights), metadata={"format": "pt"})
    models = []
    for pair, lang in (("t0xl0", grid["experts"]["l0"]), ("t0xl1", expert)):
        recipe = {"method": "layer_swap", "inputs": {"task": str(grid["experts"]["t0"]), "lang": str(lang)}}
        path = tmp_path / f"{pair}.json"
        path.write_text(json.dumps({**recipe, "params": {"bottom": 1, "top": 1}}))
        models.append((f"merge/swap/toy_swh/{pair}", path))
    return models, f"{expert}: tensor {name} contains NaN or Inf"


def test_an_error_of_a_merge_built_ahead_is_the_same_one_line_at_the_same_point(grid, tmp_path, monkeypatch):
    """The second merge's build (made ahead, while the first is evaluated) fails: the job stops with the one line it
    stops with when the merge is built on request, after the first merge's results were written, as before."""
    models, line = _nan_expert(grid, tmp_path)
    argv = [sys.executable, "-m", "layerswap.cli", "evaluate-merges", "--data-dir", str(grid["data"])]
    argv += ["--out-dir", str(tmp_path / "ahead"), "--benchmarks-json", json.dumps(BENCHMARKS)]
    argv += ["--batch-size", "16", "--threads", "1"] + [f"--model={m}={p}" for m, p in models]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == f"layerswap evaluate-merges: error: {line}", proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert sorted(p.name for p in (tmp_path / "ahead").rglob("*.json")) == ["belebele.json", "mgsm.json"]
    assert (tmp_path / "ahead" / "merge/swap/toy_swh/t0xl0/mgsm.json").is_file()
    # built on request: the same error, after the same first model
    monkeypatch.setattr(evaluate_merges, "Merger", lambda: merger_mod.Merger(ahead=0))
    from layerswap.errors import UserError

    with pytest.raises(UserError) as err:
        evaluate_merges.run(make_args(grid["data"], tmp_path / "asked", models, BENCHMARKS))
    assert str(err.value) == line
    assert _files(tmp_path / "asked") == _files(tmp_path / "ahead")


def test_a_host_asking_again_for_other_tensors_gets_a_build_made_for_them(grid):
    """The vLLM host asks for a merge a second time for every tensor (a decoder layer would load in part): that
    build is made when asked, and the next merge's build made ahead stays valid (the host holds this merge after
    either load). Every answer equals engine.build_changes for the same (recipe, held)."""
    from layerswap.merge import engine
    from layerswap.merge.recipes import Recipe

    recipes = [Recipe.load(p) for _, p in sorted(grid["recipes"].items())]
    merger = merger_mod.Merger()
    try:
        order = [recipes[i] for i in merger.order(recipes)]
        asks = [(order[0], None), (order[1], "prev"), (order[1], None), (order[2], "prev"), (order[3], "prev")]
        held, prev, got = None, None, []
        for recipe, hold in asks:
            held = prev if hold == "prev" else None
            keys, state = merger.changes(recipe, held)
            got.append((recipe, held, keys, state))
            prev = keys
        assert (merger.built, merger.built_ahead) == (5, 3)  # order[1] (first ask), order[2], order[3]
    finally:
        merger.close()
    for recipe, held, keys, state in got:
        want_keys, want = engine.build_changes(recipe, None, held)
        assert keys == want_keys and state.keys() == want.keys()
        assert all(torch.equal(state[n], want[n]) for n in want)


def test_a_merge_built_ahead_runs_one_openmp_thread_and_leaves_the_evaluations_alone(grid, monkeypatch):
    """The evaluation runs with its own torch thread count (here 2) while a merge is built ahead: the build's thread
    runs one OpenMP thread (two teams would oversubscribe the cores), the evaluation's count never changes."""
    from layerswap.merge.recipes import Recipe

    recipes = [Recipe.load(p) for _, p in sorted(grid["recipes"].items())]
    building, release, seen = threading.Event(), threading.Event(), {}
    real = merger_mod.build_changes

    def build(recipe, cache, held):
        if threading.current_thread() is not threading.main_thread():
            seen["build"] = torch.get_num_threads()
            building.set()
            assert release.wait(30)
        return real(recipe, cache, held)

    monkeypatch.setattr(merger_mod, "build_changes", build)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    merger = merger_mod.Merger()
    try:
        order = [recipes[i] for i in merger.order(recipes)]
        keys, _ = merger.changes(order[0], None)
        assert building.wait(30)
        seen["evaluation"] = torch.get_num_threads()  # while the next merge is built
        torch.mm(torch.ones(64, 64), torch.ones(64, 64))
        seen["evaluation after an op"] = torch.get_num_threads()
        release.set()
        merger.changes(order[1], keys)
        seen["after"] = torch.get_num_threads()
    finally:
        release.set()
        merger.close()
        torch.set_num_threads(before)
    assert seen == {"build": 1, "evaluation": 2, "evaluation after an op": 2, "after": 2}
