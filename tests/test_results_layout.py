"""The results layout (layerswap/workflow/layout.py) is where the commands that are given a folder read and write:
a results folder elsewhere (`Layout.at`), a path inside a folder a command is given (`relative`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from layerswap.audit.files import RECORDS
from layerswap.contracts import checkpoint_model_id, merge_model_id
from layerswap.evaluation.results import result_file
from layerswap.report.evals import Evals
from layerswap.workflow.layout import Layout


def test_a_results_folder_elsewhere_holds_its_big_artefacts_too(tmp_path):
    layout = Layout.at(tmp_path / "results")
    assert layout.root == layout.big == str(tmp_path / "results")
    assert layout.checkpoint("math_1", "s0000016") == f"{tmp_path}/results/experts/math_1/s0000016"
    assert layout.merged_model("swap_default", "toy_swh", "l1m1").startswith(f"{tmp_path}/results/")


def test_relative_is_the_path_inside_a_folder_of_the_layout():
    layout = Layout()
    assert layout.relative(layout.selection("math"), layout.selection_dir()) == "math.json"
    assert layout.relative(layout.manifest()) == "manifest.json"
    with pytest.raises(ValueError, match="is not in"):
        layout.relative(layout.selection("math"), layout.evals())


def test_evaluations_are_read_where_the_evaluate_commands_write_them(tmp_path):
    """The evaluate commands write into their --out-dir and the report reads its --evals-dir: both where the layout
    puts a model's evaluation, Table 2's languages in their own folder; the audit reuses every index's hashes."""
    layout = Layout.at(tmp_path)
    evals = Evals(layout.evals())
    for model_id in ("base", checkpoint_model_id("math_1", "s0000016"), merge_model_id("ties", "toy_swh", "l1m2")):
        assert evals.path(model_id, "mgsm") == Path(layout.eval_file(model_id, "mgsm"))
        assert result_file(Path(layout.evals()), model_id, "mgsm") == evals.path(model_id, "mgsm")
        assert evals.language_path(model_id, "mgsm", "en") == Path(layout.language_evals("en"), model_id, "mgsm.json")
    for record in (
        layout.checkpoints_record("math_1"),
        layout.checkpoint_index("math_1"),
        layout.checkpoint_index("math_1", "mmlu"),
        layout.table2_index("en", "toy_swh"),
    ):
        assert sum(Path(record).match(pattern) for pattern in RECORDS) == 1, record
