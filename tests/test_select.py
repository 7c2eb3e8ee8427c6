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
