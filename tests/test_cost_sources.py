"""`layerswap cost` says which per-job figures were measured and where; the paper config's measured ones name the
H100 run of issue 34."""

from __future__ import annotations

from pathlib import Path

import pytest

from layerswap.workflow import cost as cost_mod

REPO = Path(__file__).resolve().parents[1]


def test_cost_marks_measured_and_estimated_figures():
    where = "measured: scripts/benchmark_costs.py, NVIDIA H100 80GB HBM3, 2026-01-02"
    estimates = {
        "sft": {"gpu_hours": 8.0, "source": "estimate"},
        "evaluate_merges": {"gpu_hours": 0.2, "source": where},
        "select": {"cpu_hours": 0.01},
    }
    cost = cost_mod.plan_cost({"sft": 2, "evaluate_merges": 3, "select": 1, "tables": 1}, estimates)
    assert [cost["rules"][r]["source"] for r in ("sft", "evaluate_merges", "select", "tables")] == [
        "estimate",
        where,
        "estimate",
        "estimate",
    ]
    assert cost["total"]["gpu_hours"] == 16.6  # `source` is no metric
    text = cost_mod.format_cost(cost)
    rows: dict[str, str] = {}
    for line in text.splitlines()[2:]:  # the per-rule table comes first (the by-stage table repeats "sft")
        if line.strip():
            rows.setdefault(line.split()[0], line)
    assert rows["sft"].rstrip().endswith("estimate") and rows["evaluate_merges"].rstrip().endswith("measured")
    assert f"evaluate_merges: {where}" in text and "1 rule(s) measured" in text
    plain = cost_mod.format_cost(cost_mod.plan_cost({"sft": 1}, {"sft": {"gpu_hours": 1.0}}))
    assert "all guesses, none measured" in plain


def test_paper_config_estimates_say_estimate_and_schema_checks_source(tmp_path):
    from layerswap.config import load_config
    from layerswap.errors import UserError

    cfg = load_config(REPO / "config" / "paper.yaml")
    h100 = "measured: scripts/benchmark_costs.py time_merges, one H100 80GB, 2026-11-26"
    sources = {rule: e.get("source") for rule, e in cfg["estimates"].items()}
    assert {r for r, s in sources.items() if s != "estimate"} == {"evaluate_merges"}
    assert sources["evaluate_merges"] == h100
    text = (REPO / "config" / "paper.yaml").read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        text.replace(
            "sft: {gpu_hours: 8.0, disk_gb: 130, scratch_gb: 192, source: estimate}",
            "sft: {gpu_hours: 8.0, disk_gb: 130, scratch_gb: 192, source: guessed}",
        )
    )
    assert bad.read_text() != text
    with pytest.raises(UserError, match="source"):
        load_config(bad)
