import json

import pytest

from layerswap.errors import UserError
from layerswap.select import select


def write_run(tmp_path, run, scores):
    """An evaluation index for a run whose checkpoints have the given (mgsm en, mgsm xx) scores."""
    files, ckpts = {}, []
    for name, (en, xx) in scores.items():
        mid = f"ckpt/{run}/{name}"
        path = tmp_path / f"{run}_{name}_mgsm.json"
        path.write_text(json.dumps({"scores": {"en": en, "xx": xx}}))
        files[mid] = {"mgsm": str(path)}
        ckpts.append({"model_id": mid, "name": name, "path": f"experts/{run}/{name}"})
    index = tmp_path / f"{run}.json"
    index.write_text(json.dumps({"run": run, "checkpoints": ckpts, "files": files}))
    return index


def test_top_k_with_run_cap_and_reasons(tmp_path):
    a = write_run(tmp_path, "math_1", {"s1": (0.9, 0.1), "s2": (0.8, 0.1), "s3": (0.7, 0.1)})
    b = write_run(tmp_path, "math_2", {"s1": (0.1, 0.1), "s2": (0.5, 0.5)})
    out = select([a, b], "math", "math", None, {"mgsm_en": 1.0, "mgsm_avg": 1.0}, 3, 2, ["en", "xx"])
    picked = [(s["rank"], s["run"], s["checkpoint"]) for s in out["selected"]]
    assert picked == [(1, "math_1", "s1"), (2, "math_1", "s2"), (3, "math_2", "s2")]
    status = {(c["run"], c["checkpoint"]): c["status"] for c in out["candidates"]}
    assert status[("math_1", "s3")] == "run cap" and status[("math_2", "s1")] == "below top-k"
    assert out["selected"][0]["metrics"] == {"mgsm_en": 0.9, "mgsm_avg": 0.5}


def test_too_few_checkpoints_is_an_error(tmp_path):
    a = write_run(tmp_path, "math_1", {"s1": (0.9, 0.1), "s2": (0.8, 0.1)})
    with pytest.raises(UserError, match="only 1 checkpoints selectable for top_k=2"):
        select([a], "math", "math", None, {"mgsm_en": 1.0}, 2, 1, ["en"])
    with pytest.raises(UserError, match="'belebele': needs a target language"):
        select([a], "math", "math", None, {"belebele": 1.0}, 1, 1, ["en"])
    with pytest.raises(UserError, match="'bleu': unknown metric"):
        select([a], "math", "math", None, {"bleu": 1.0}, 1, 1, ["en"])


def write_base(tmp_path, scores):
    path = tmp_path / "base_mgsm.json"
    path.write_text(json.dumps({"benchmark": "mgsm", "scores": scores}))
    return path


def test_constraints_reject_candidates_worse_than_the_base_and_say_which(tmp_path):
    """Paper 3.1: selection is by the primary measures, and a candidate must not fall below the base on a secondary
    measure by more than the margin; the highest-scoring candidate that fails is passed over, and the file says why."""
    a = write_run(tmp_path, "xx_1", {"s1": (0.9, 0.1), "s2": (0.6, 0.35), "s3": (0.5, 0.26), "s4": (0.4, 0.24)})
    base = write_base(tmp_path, {"en": 0.5, "xx": 0.3})
    out = select(
        [a],
        "xx",
        "language",
        "xx",
        {"mgsm_en": 1.0},
        2,
        4,
        ["en", "xx"],
        constraints={"mgsm_target": 0.05},
        base_evals=[base],
    )
    assert [s["checkpoint"] for s in out["selected"]] == ["s2", "s3"]  # s1 scores highest but fails
    assert out["constraints"] == {"mgsm_target": 0.05} and out["base"] == {"mgsm_target": 0.3}
    status = {c["checkpoint"]: c["status"] for c in out["candidates"]}
    assert status["s1"] == "failed constraint mgsm_target: 0.1 < base 0.3 - margin 0.05"
    assert status["s4"].startswith("failed constraint mgsm_target: 0.24")
    (s1,) = [c for c in out["candidates"] if c["checkpoint"] == "s1"]
    assert s1["failed"] == [{"metric": "mgsm_target", "value": 0.1, "base": 0.3, "margin": 0.05}]
    assert s1["metrics"] == {"mgsm_en": 0.9, "mgsm_target": 0.1}  # constrained metrics are recorded too
    # margin 0: equal to the base passes (no worse), one below fails
    out = select(
        [a],
        "xx",
        "language",
        "xx",
        {"mgsm_en": 1.0},
        1,
        4,
        ["en", "xx"],
        constraints={"mgsm_target": 0.0},
        base_evals=[write_base(tmp_path, {"en": 0.5, "xx": 0.35})],
    )
    assert [s["checkpoint"] for s in out["selected"]] == ["s2"]


def test_strict_mode_stops_when_too_few_candidates_meet_the_constraints_naming_them(tmp_path):
    """selection.on_no_pass: stop is today's refusal, one line saying how many candidates failed which constraint."""
    a = write_run(tmp_path, "xx_1", {"s1": (0.9, 0.1), "s2": (0.6, 0.35)})
    base = write_base(tmp_path, {"en": 0.5, "xx": 0.3})
    with pytest.raises(
        UserError,
        match=r"only 1 checkpoints selectable for top_k=2 .*1 fail "
        r"selection.constraints.language.mgsm_target\); selection.on_no_pass: stop",
    ):
        select(
            [a],
            "xx",
            "language",
            "xx",
            {"mgsm_en": 1.0},
            2,
            2,
            ["en", "xx"],
            constraints={"mgsm_target": 0.0},
            base_evals=[base],
            on_no_pass="stop",
        )
    with pytest.raises(UserError, match="no base evaluation of 'mmlu'"):
        select(
            [a],
            "xx",
            "language",
            "xx",
            {"mgsm_en": 1.0},
            1,
            2,
            ["en", "xx"],
            constraints={"mmlu": 0.0},
            base_evals=[base],
        )


def test_a_run_none_of_whose_checkpoints_passes_gives_its_best_and_the_file_says_it_is_below_the_base(tmp_path):
    """Paper 3.1's secondary measures "ensure slight improvement" where one exists; they do not stop the run. Three
    runs, one expert each (max_per_run 1, as config/paper.yaml): run xx_2 has no checkpoint at or above the base, so
    its best by score is taken, ranked by score among the others, and the selection file records what it fails."""
    a = write_run(tmp_path, "xx_1", {"s1": (0.5, 0.31), "s2": (0.4, 0.32)})
    b = write_run(tmp_path, "xx_2", {"s1": (0.9, 0.2), "s2": (0.7, 0.25), "s3": (0.3, 0.1)})
    c = write_run(tmp_path, "xx_3", {"s1": (0.2, 0.3)})
    base = write_base(tmp_path, {"en": 0.5, "xx": 0.3})
    args = ([a, b, c], "xx", "language", "xx", {"mgsm_en": 1.0}, 3, 1, ["en", "xx"])
    out = select(*args, constraints={"mgsm_target": 0.0}, base_evals=[base])
    picked = [(s["rank"], s["run"], s["checkpoint"]) for s in out["selected"]]
    assert picked == [(1, "xx_2", "s1"), (2, "xx_1", "s1"), (3, "xx_3", "s1")]
    assert out["on_no_pass"] == "best"
    below = out["selected"][0]
    assert below["failed"] == [{"metric": "mgsm_target", "value": 0.2, "base": 0.3, "margin": 0.0}]
    assert below["status"] == (
        "selected although it failed constraint mgsm_target: 0.2 < base 0.3 - margin 0: fewer than top_k=3 "
        "candidates pass (selection.on_no_pass: best)"
    )
    assert [s["failed"] for s in out["selected"][1:]] == [[], []]
    status = {(c["run"], c["checkpoint"]): c["status"] for c in out["candidates"]}
    assert status[("xx_2", "s2")].startswith("failed constraint mgsm_target: 0.25")  # not its run's best
    assert status[("xx_1", "s2")] == "run cap"
    # every checkpoint of every run below the base: the best three by score, each recorded
    out = select(*args, constraints={"mgsm_target": 0.0}, base_evals=[write_base(tmp_path, {"en": 0.5, "xx": 0.9})])
    assert [(s["run"], s["checkpoint"]) for s in out["selected"]] == [("xx_2", "s1"), ("xx_1", "s1"), ("xx_3", "s1")]
    assert all(s["failed"] and s["status"].startswith("selected although") for s in out["selected"])
    with pytest.raises(UserError, match=r"only 0 checkpoints selectable for top_k=3 .*6 fail"):
        select(*args, constraints={"mgsm_target": 0.0}, base_evals=[base], on_no_pass="stop")


def test_the_cli_says_which_selected_expert_is_below_the_base(tmp_path, capsys):
    from layerswap.cli import main

    index = write_run(tmp_path, "xx_1", {"s1": (0.9, 0.1), "s2": (0.6, 0.35)})
    base = write_base(tmp_path, {"en": 0.5, "xx": 0.3})
    params = {"kind": "language", "lang": "xx", "weights": {"mgsm_en": 1.0}, "top_k": 2, "mgsm_languages": ["en"]}
    params |= {"constraints": {"mgsm_target": 0.0}, "max_per_run": 2}
    argv = ["select", "--index", str(index), "--base-evals", str(base), "--leaders", "--expert", "xx"]
    argv += ["--out", str(tmp_path / "xx.json"), "--params-json"]
    assert main([*argv, json.dumps(params)]) == 0
    out = capsys.readouterr().out
    assert "xx #1: xx_1/s1 score=0.9\nxx #1 is below the base: selected although it failed constraint" in out, out
    assert main([*argv, json.dumps({**params, "on_no_pass": "stop"})]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "only 1 checkpoints selectable for top_k=2" in err, err
    assert json.loads((tmp_path / "xx.json").read_text())["on_no_pass"] == "best"  # the refused run wrote nothing


def _select_cli(index, base, tmp_path):
    from layerswap.cli import main

    params = json.dumps(
        {
            "kind": "math",
            "weights": {"mgsm_en": 1.0},
            "top_k": 1,
            "mgsm_languages": ["en", "xx"],
            "constraints": {"mgsm_en": 0.5},
        }
    )
    return main(
        [
            "select",
            "--index",
            str(index),
            "--base-evals",
            str(base),
            "--expert",
            "math",
            "--params-json",
            params,
            "--out",
            str(tmp_path / "selection.json"),
        ]
    )


def test_a_damaged_evaluation_file_is_one_line_naming_it(tmp_path, capsys):
    """A truncated evaluation file (the base's, or a checkpoint's) is one line naming the file and its line; an
    evaluation file whose bytes differ from the sha256 its index records is refused before its scores are used."""
    from layerswap.fingerprint import file_sha256

    index = write_run(tmp_path, "math_1", {"s1": (0.9, 0.1)})
    data = json.loads(index.read_text())
    score_file = data["files"]["ckpt/math_1/s1"]["mgsm"]
    data["sha256"] = {score_file: file_sha256(score_file)}
    index.write_text(json.dumps(data))
    base = write_base(tmp_path, {"en": 0.5, "xx": 0.3})
    assert _select_cli(index, base, tmp_path) == 0
    base.write_bytes(base.read_bytes()[:20])  # truncate -s 20
    assert _select_cli(index, base, tmp_path) == 1
    err = capsys.readouterr().err
    assert err == (
        f"layerswap select: error: evaluation file {base} line 1 column 21: not valid JSON (Expecting ',' "
        "delimiter); layerswap audit --repair names the job that rebuilds it "
        "(docs/REPAIR.md)\n"
    ), err
    write_base(tmp_path, {"en": 0.5, "xx": 0.3})
    with open(score_file, "w") as f:  # the same JSON, other scores: valid, but not what was evaluated
        f.write(json.dumps({"scores": {"en": 0.1, "xx": 0.1}}))
    assert _select_cli(index, base, tmp_path) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(
        f"layerswap select: error: evaluation file {score_file}: sha256 differs from the one {index} records"
    ), err


def test_no_run_cap(tmp_path):
    """selection.max_per_run: null (the schema's default) is no cap, not a crash."""
    a = write_run(tmp_path, "math_1", {"s1": (0.9, 0.1), "s2": (0.8, 0.1), "s3": (0.7, 0.1)})
    out = select([a], "math", "math", None, {"mgsm_en": 1.0}, 3, None, ["en"])
    assert [s["checkpoint"] for s in out["selected"]] == ["s1", "s2", "s3"]


def test_checkpoint_index_is_its_own_command_joining_a_runs_per_benchmark_indexes(tmp_path, capsys):
    """`layerswap checkpoint-index` (its own module: every command has one, none branches on its name) joins a run's
    per-benchmark indexes into the one index `select` reads; a malformed part is one error naming it."""
    from layerswap.cli import main
    from layerswap.commands import COMMANDS

    modules = [module for module, _ in COMMANDS.values()]
    assert len(set(modules)) == len(modules), "two commands share a module"
    parts = []
    for bench, score in (("mgsm", 0.5), ("belebele", 0.25)):
        path = tmp_path / f"s1_{bench}.json"
        path.write_text(json.dumps({"scores": {"en": score}}))
        part = tmp_path / f"index.{bench}.json"
        ckpts = [{"model_id": "ckpt/r/s1", "name": "s1", "path": "experts/r/s1"}]
        part.write_text(json.dumps({"checkpoints": ckpts, "files": {"ckpt/r/s1": {bench: str(path)}}, "sha256": {}}))
        parts.append(part)
    out = tmp_path / "index.json"
    assert main(["checkpoint-index", "--out", str(out), *map(str, parts)]) == 0
    joined = json.loads(out.read_text())
    assert set(joined["files"]["ckpt/r/s1"]) == {"mgsm", "belebele"}
    assert [c["name"] for c in joined["checkpoints"]] == ["s1"]
    parts[1].write_text(json.dumps({"files": {}}))
    assert main(["checkpoint-index", "--out", str(out), *map(str, parts)]) == 1
    assert f"evaluation index {parts[1]}: needs 'checkpoints'" in capsys.readouterr().err
