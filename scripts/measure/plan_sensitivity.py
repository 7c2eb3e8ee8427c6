"""How far the evaluation plan's GPU-hours move with its least certain inputs: arithmetic over `layerswap cost`'s own
plan (layerswap/workflow/eval_plan.py), each row changing one more input from its planned value, not a measurement.

    python -m scripts.measure.plan_sensitivity                       # config/paper.yaml
    python -m scripts.measure.plan_sensitivity --configfile my.yaml

Rows, cumulative: the plan as `layerswap cost` prints it; Telugu at the low end of its published length factor
(7x English, the plan takes 10x); a prefill rate twice the estimate (40,000 tokens/s); a decode step reaching 80%
of the HBM bandwidth (the estimate: 50%); MGSM's eight exemplars in one fixed order for every item (a shared prompt
prefix that vLLM's prefix cache prefills once per model; lm-eval's MGSM task shuffles them per item, so this is a
change of the prompts, not of the plan). None of these was measured here (no GPU); the rows say how much each
uncertainty is worth, so that a GPU measurement or a decision can be weighed before it is made.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Callable

from layerswap.config import load_config
from layerswap.workflow import eval_plan, token_counts
from layerswap.workflow.cost import stage_of
from layerswap.workflow.resources import Requests
from layerswap.workflow.spec import Spec


def totals(configfile: Path) -> tuple[float, float]:
    """(selection, evaluation) GPU-hours of the config's plan under the module-level inputs as they stand."""
    config = load_config(configfile)
    spec = Spec(config)
    hours = Requests(config, spec).plan.gpu_hours()
    return tuple(sum(h for r, h in hours.items() if stage_of(r) == s) for s in ("selection", "evaluation"))


def steps() -> list[tuple[str, Callable[[], None]]]:
    def telugu():
        token_counts.LENGTH_FACTORS["tel"] = (7.0, "the low end of issue 48's 7-10x")

    def prefill():
        eval_plan.RATES["prefill_tokens_per_s"] = (40000.0, "twice the estimate")

    def bandwidth():
        eval_plan.RATES["bandwidth_efficiency"] = (0.8, "80% of the HBM bandwidth")

    def shared_shots():
        token_counts.ENGLISH["mgsm"] = dataclasses.replace(token_counts.ENGLISH["mgsm"], shared_shots=True)

    return [
        ("the plan (layerswap cost)", lambda: None),
        ("+ Telugu 7x English (plan: 10x)", telugu),
        ("+ prefill 40,000 tokens/s (plan: 20,000)", prefill),
        ("+ decode at 80% of HBM bandwidth (plan: 50%)", bandwidth),
        ("+ MGSM exemplars in one fixed order (shared prefix)", shared_shots),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configfile", type=Path, default=Path("config/paper.yaml"))
    args = parser.parse_args(argv)
    print(f"{'inputs (cumulative)':<52}{'selection':>10}{'evaluation':>11}{'sum':>8}")
    for label, change in steps():
        change()
        sel, ev = totals(args.configfile)
        print(f"{label:<52}{sel:>10.1f}{ev:>11.1f}{sel + ev:>8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
