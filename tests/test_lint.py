"""`snakemake --lint` finds nothing, on the embedded default (every ablation included) and on the paper config:
every rule has a conda env, no shell reads a variable from outside its rule, rule files hold rules and
rules/common.smk the helpers (layerswap/workflow/spec.py the logic behind them)."""

from __future__ import annotations

import pytest
from conftest import REPO, snakemake


@pytest.mark.parametrize(
    "configfile",
    [None, REPO / "config" / "paper.yaml", REPO / "config" / "smollm2.yaml"],
    ids=["default", "paper", "smollm2"],
)
def test_snakemake_lint_is_clean(tmp_path, configfile):
    proc = snakemake(tmp_path, "--lint", configfile=configfile)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "Congratulations, your workflow is in a good condition!" in out, out[-4000:]
