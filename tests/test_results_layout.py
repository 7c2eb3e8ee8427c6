"""The results layout (layerswap/layout.py) is where the commands that are given a folder read and write:
a results folder elsewhere (`Layout.at`), a path inside a folder a command is given (`relative`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from layerswap.audit.files import RECORDS
from layerswap.contracts import checkpoint_model_id, merge_model_id
from layerswap.evaluation.results import result_file
from layerswap.evaluation.tasks import _data_file
from layerswap.layout import RUN_RECORD, Layout
from layerswap.report.evals import Evals


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


def test_a_command_given_a_folder_finds_the_file_the_layout_puts_there(tmp_path):
    """The names inside a folder a command is given (`--data-dir`, `--out-dir`, a run's folder) are the layout's
    own: the evaluation commands, the checkpoint checks and the layout build the same paths, none derived from the
    other."""
    layout = Layout.at(tmp_path)
    assert _data_file(Path(layout.eval_data_dir()), "mgsm", "toy_swh") == Path(layout.eval_data("mgsm", "toy_swh"))
    assert layout.eval_set("mgsm_toy_swh") == layout.eval_data("mgsm", "toy_swh")
    assert Path(layout.run_dir("math_1"), RUN_RECORD) == Path(layout.checkpoints_record("math_1"))
    merge = merge_model_id("ties", "toy_swh", "l1m2")
    assert layout.merge_eval("ties", "toy_swh", "l1m2", "mgsm") == layout.eval_file(merge, "mgsm")
    assert result_file(Path(layout.language_evals("en")), merge, "mgsm") == Path(
        layout.language_evals("en"), merge, "mgsm.json"
    )
    index, models = layout.table2_index("en", "toy_swh"), layout.table2_models("en", "toy_swh")
    assert Path(index).parent == Path(models).parent == Path(layout.language_evals("en")) and index != models
