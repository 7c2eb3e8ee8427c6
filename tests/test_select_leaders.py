"""Selection evaluates its constraint benchmarks on its leaders only (issue 48, item 4): `layerswap evaluate-leaders`
evaluates the candidates selection reaches in score order, round by round, and `layerswap select` picks from those
what it picks with every checkpoint evaluated, with fewer evaluations; the job resumes from the store after a kill
and writes what an uninterrupted job writes."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from layerswap.cli import main
from layerswap.errors import UserError
from layerswap.evaluation import evaluate
from layerswap.select import select

PRIMARY, CONSTRAINT = "belebele", "mmlu"  # weights {belebele: 1}; constraints {mmlu: margin}


def index_of(run: str, ckpts: dict[str, str], bench: str, folder: Path) -> dict:
    """An evaluation index naming `<folder>/ckpt/<run>/<ckpt>/<bench>.json` of each checkpoint."""
    files = {f"ckpt/{run}/{c}": {bench: str(folder / "ckpt" / run / c / f"{bench}.json")} for c in ckpts}
    entries = [{"model_id": f"ckpt/{run}/{c}", "name": c, "path": path} for c, path in ckpts.items()]
    return {"run": run, "checkpoints": entries, "files": files, "sha256": {}}


def write_score(folder: Path, model_id: str, bench: str, value: float) -> None:
    path = folder / model_id / f"{bench}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"benchmark": bench, "scores": {"xx": value}}))


def world(tmp_path: Path, rng: random.Random) -> dict:
    """A random expert type: 1-4 runs of 1-5 checkpoints, primary and constraint scores in steps of 0.05 (ties
    happen), a base in the same range, top_k and max_per_run that check-config lets through."""
    runs = {f"xx_{r}": [f"s{c}" for c in range(rng.randint(1, 5))] for r in range(rng.randint(1, 4))}
    cap = rng.choice([None, 1, 2])
    usable = sum(len(cs) if cap is None else min(cap, len(cs)) for cs in runs.values())
    full, primary = tmp_path / "full", tmp_path / "primary"
    indexes, full_indexes = [], []
    for run, ckpts in runs.items():
        paths = {c: f"experts/{run}/{c}" for c in ckpts}
        for c in ckpts:
            write_score(full, f"ckpt/{run}/{c}", PRIMARY, rng.randint(0, 20) / 20)
            write_score(full, f"ckpt/{run}/{c}", CONSTRAINT, rng.randint(0, 20) / 20)
        index = index_of(run, paths, PRIMARY, full)
        indexes.append(tmp_path / f"{run}.primary.json")
        indexes[-1].write_text(json.dumps(index))
        both = index_of(run, paths, CONSTRAINT, full)
        both["files"] = {m: {**index["files"][m], **fs} for m, fs in both["files"].items()}
        full_indexes.append(tmp_path / f"{run}.full.json")
        full_indexes[-1].write_text(json.dumps(both))
    base = []
    for bench in (CONSTRAINT, PRIMARY):
        base.append(tmp_path / f"base_{bench}.json")
        base[-1].write_text(json.dumps({"benchmark": bench, "scores": {"xx": rng.randint(0, 20) / 20}}))
    constraints = {CONSTRAINT: rng.choice([0, 0.1])}
    if rng.random() < 0.3:  # a constraint on a benchmark the weights read too: every checkpoint has it already
        constraints[PRIMARY] = rng.choice([0, 0.1])
    params = {"kind": "language", "lang": "xx", "weights": {PRIMARY: 1.0}, "mgsm_languages": ["en"]}
    params |= {"top_k": rng.randint(1, usable), "max_per_run": cap, "constraints": constraints}
    return {"indexes": indexes, "full": full_indexes, "base": base, "params": params, "out": primary, "src": full}


def leaders(w: dict, tmp_path: Path, monkeypatch) -> tuple[Path, list[str]]:
    """`layerswap evaluate-leaders` on world `w`, its evaluations those of the full evaluation (`evaluate.run`
    copies a model's file from there: the same evaluations); returns its index and the models it evaluated."""
    evaluated: list[str] = []

    def same_evaluations(args):
        for item in args.model:
            model_id = item.partition("=")[0]
            evaluated.append(model_id)
            dest = Path(args.out_dir) / model_id / f"{CONSTRAINT}.json"
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(w["src"] / model_id / f"{CONSTRAINT}.json", dest)

    monkeypatch.setattr(evaluate, "run", same_evaluations)
    out = tmp_path / "leaders.json"
    argv = ["evaluate-leaders", "--data-dir", str(tmp_path), "--out-dir", str(w["out"]), "--batch-size", "1"]
    argv += ["--benchmarks-json", json.dumps({CONSTRAINT: {"shots": 0, "languages": ["xx"]}}), "--index", str(out)]
    for index in w["indexes"]:
        for c in json.loads(index.read_text())["checkpoints"]:
            argv += ["--model", f"{c['model_id']}={c['path']}"]
    argv += ["--primary", *map(str, w["indexes"]), "--base-evals", *map(str, w["base"]), "--expert", "xx"]
    assert main([*argv, "--params-json", json.dumps(w["params"])]) == 0
    return out, evaluated


def picks(indexes, w, on_no_pass, leaders_index=()) -> list | str:
    p = w["params"]
    try:
        out = select(
            indexes,
            "xx",
            "language",
            "xx",
            p["weights"],
            p["top_k"],
            p["max_per_run"],
            ["en"],
            p["constraints"],
            w["base"],
            on_no_pass,
            leaders_index,
        )
    except UserError as err:  # stop: refused the same way, with the failures it saw
        return str(err).split(" (")[0]
    return [(s["rank"], s["run"], s["checkpoint"], s["score"], s["failed"], s["status"]) for s in out["selected"]]


def test_two_phase_selection_picks_what_full_evaluation_picks_with_fewer_evaluations(tmp_path, monkeypatch):
    """300 random expert types (runs, checkpoints, scores with ties, base, margin, top_k, max_per_run null/1/2), both
    on_no_pass modes: the picks read from the leaders' evaluations equal the picks read from every checkpoint's, the
    job evaluates each candidate at most once, and fewer than all of them in all."""
    rng = random.Random(48)
    evaluated = total = fewer = 0
    for n in range(300):
        case = tmp_path / str(n)
        case.mkdir()
        w = world(case, rng)
        index, done = leaders(w, case, monkeypatch)
        assert len(done) == len(set(done)), done
        candidates = sum(len(json.loads(i.read_text())["checkpoints"]) for i in w["indexes"])
        evaluated, total, fewer = evaluated + len(done), total + candidates, fewer + (len(done) < candidates)
        for mode in ("best", "stop"):
            assert picks(w["indexes"], w, mode, [index]) == picks(w["full"], w, mode), (n, mode, w["params"])
    assert evaluated < total and fewer > 100, (evaluated, total, fewer)


def test_selection_refuses_leaders_evaluations_that_miss_a_candidate_it_reaches(tmp_path, monkeypatch):
    w = world(tmp_path, random.Random(3))
    with pytest.raises(UserError, match=r"no mmlu evaluation of ckpt/xx_\d/s\d.*, which selection reaches in score"):
        select(w["indexes"], "xx", "language", "xx", {PRIMARY: 1.0}, 1, None, ["en"], {CONSTRAINT: 0.0}, w["base"])


# --------------------------------------------------------------------------------------------- on real models
lm_eval = pytest.importorskip("lm_eval")
from tests.test_eval_resume import JOB as KILL  # noqa: E402 (`layerswap`, killing itself as it writes a model)
from tests.test_switch import grid  # noqa: E402,F401 (fixture: four tiny random models and the toy data)

RUNS = {"ra": ("t0", "t1"), "rb": ("l0", "l1")}


def argv(grid, command: str, bench: str, models: list[str], out: Path, *extra: str) -> list[str]:
    words = [command, "--data-dir", str(grid["data"]), "--out-dir", str(out), "--batch-size", "16", "--threads", "1"]
    words += ["--benchmarks-json", json.dumps({bench: {"shots": 0, "languages": ["toy_swh"]}})]
    words += [w for m in models for w in ("--model", f"{m}={grid['experts'][m.split('/')[-1]]}")]
    return [*words, *extra]


def test_leaders_on_real_models_match_full_evaluation_and_resume_after_a_kill(grid, tmp_path, caplog):
    """Two runs of two tiny models each; primary Belebele on all four, the MMLU constraint on the leaders: one per run
    (max_per_run 1, top_k 2, everyone at or above the base). The leaders' files are the bytes a full evaluation of
    those models writes, selection picks the same, and a job killed (SIGKILL) as it writes its second model resumes
    from the store and writes the same bytes."""
    primary, full = [], []
    for run, names in RUNS.items():
        models = [f"ckpt/{run}/{m}" for m in names]
        for bench, out, indexes in ((PRIMARY, "evals", primary), (CONSTRAINT, "full", full)):
            indexes.append(tmp_path / f"{run}.{bench}.json")
            assert (
                main(argv(grid, "evaluate", bench, models, tmp_path / out, "--run", run, "--index", str(indexes[-1])))
                == 0
            )
    lowest = min(json.loads((tmp_path / "full" / m / "mmlu.json").read_text())["scores"]["toy_swh"] for m in every())
    base = tmp_path / "base_mmlu.json"
    base.write_text(json.dumps({"benchmark": "mmlu", "scores": {"toy_swh": lowest}}))
    params = {"kind": "language", "lang": "toy_swh", "weights": {PRIMARY: 1.0}, "mgsm_languages": ["en"]}
    params |= {"top_k": 2, "max_per_run": 1, "constraints": {CONSTRAINT: 0.0}}
    rest = ["--primary", *map(str, primary), "--base-evals", str(base), "--expert", "toy_swh"]
    rest += ["--params-json", json.dumps(params), "--store", str(tmp_path / "store")]

    def leaders_argv(folder: str) -> list[str]:
        index = str(tmp_path / folder / "leaders.json")
        return argv(grid, "evaluate-leaders", CONSTRAINT, every(), tmp_path / folder, *rest, "--index", index)

    with caplog.at_level("INFO", logger="layerswap.evaluate"):
        assert main(leaders_argv("clean")) == 0
    assert "toy_swh: 2 of 4 candidates evaluated on mmlu, in 1 round(s)" in caplog.text
    index = json.loads((tmp_path / "clean" / "leaders.json").read_text())
    done = [m for r in index["rounds"] for m in r]
    assert len(index["rounds"]) == 1 and len(done) == 2 and {m.split("/")[1] for m in done} == {"ra", "rb"}
    for m in done:  # the same evaluation as the full job's, byte for byte
        for name in ("mmlu.json", "mmlu.samples.jsonl"):
            assert (tmp_path / "clean" / m / name).read_bytes() == (tmp_path / "full" / m / name).read_bytes()
    both = [tmp_path / f"{r}.both.json" for r in RUNS]  # each run's index of both benchmarks on every checkpoint
    for path, p, f in zip(both, primary, full):
        a, b = json.loads(p.read_text()), json.loads(f.read_text())
        a["files"] = {m: {**fs, **b["files"][m]} for m, fs in a["files"].items()}
        a["sha256"] |= b["sha256"]
        path.write_text(json.dumps(a))
    assert select_ids(primary, base, params, [tmp_path / "clean" / "leaders.json"]) == select_ids(both, base, params)

    shutil.rmtree(tmp_path / "store")  # the kill drill: a fresh store, the second model killed as it is written
    job = [sys.executable, "-c", KILL]
    killed = subprocess.run([*job, done[1], *leaders_argv("resumed")], capture_output=True, text=True, timeout=900)
    assert killed.returncode == -9, killed.stderr[-2000:]
    resumed = subprocess.run([*job, "", *leaders_argv("resumed")], capture_output=True, text=True, timeout=900)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "evaluate: store: reused 1, evaluated 1" in resumed.stderr, resumed.stderr[-2000:]
    files = {p.relative_to(tmp_path / "clean"): p for p in (tmp_path / "clean").rglob("*") if p.is_file()}
    assert len(files) == 1 + 2 * 2
    for rel, path in files.items():
        again = (tmp_path / "resumed" / rel).read_bytes()
        assert again.replace(b"/resumed/", b"/clean/") == path.read_bytes(), rel


def every() -> list[str]:
    return [f"ckpt/{r}/{m}" for r, ms in RUNS.items() for m in ms]


def select_ids(indexes, base, p, leaders_index=()) -> list[tuple]:
    args = (indexes, "toy_swh", "language", "toy_swh", p["weights"], p["top_k"], p["max_per_run"], ["en"])
    out = select(*args, p["constraints"], [base], "best", leaders_index)
    return [(s["rank"], s["run"], s["checkpoint"], s["failed"]) for s in out["selected"]]
