"""What each of the plan's work-saving modes is worth for a config: selection + evaluation GPU-hours of the evaluation
plan (layerswap/workflow/eval_plan.py, the same arithmetic `layerswap cost` prints) with and without each mode,
arithmetic from the config, not a measurement.

    python -m scripts.measure.plan_modes                       # config/paper.yaml
    python -m scripts.measure.plan_modes --configfile my.yaml

Modes: `vllm generation` (evaluation.backend {mgsm, flores, mbpp: vllm}, the log-likelihood benchmarks on HF),
`leaders` (selection.constraint_evaluation: leaders), `overlapped build` (the next merge built on the CPU while the
current one is evaluated). `layerswap cost` itself counts the modes the config's jobs have (`Features.of`); this
prints the others beside them, so a change can be weighed before it is built.
"""

from __future__ import annotations

import argparse
import copy
import itertools
import sys
from pathlib import Path

from layerswap.config import load_config
from layerswap.workflow.cost import stage_of
from layerswap.workflow.eval_plan import EvalPlan, Features
from layerswap.workflow.resources import Requests
from layerswap.workflow.spec import Spec

GENERATION = ("mgsm", "flores", "mbpp")


def totals(config: dict, vllm: bool, leaders: bool, overlap: bool) -> tuple[float, float]:
    config = copy.deepcopy(config)
    config["evaluation"]["backend"] = (
        {b: "vllm" for b in GENERATION if b in config["evaluation"]["tasks"]} if vllm else "hf"
    )
    config["selection"]["constraint_evaluation"] = "leaders" if leaders else "all"
    spec = Spec(config)
    plan = EvalPlan(config, spec, Requests(config, spec).plan.checkpoint_gb, Features(overlapped_build=overlap))
    hours = plan.gpu_hours()
    return tuple(sum(h for r, h in hours.items() if stage_of(r) == s) for s in ("selection", "evaluation"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configfile", type=Path, default=Path("config/paper.yaml"))
    args = parser.parse_args(argv)
    config = load_config(args.configfile)
    print(f"{'vllm generation':<17}{'leaders':<9}{'overlapped build':<18}{'selection':>10}{'evaluation':>11}{'sum':>8}")
    for vllm, leaders, overlap in itertools.product((False, True), repeat=3):
        sel, ev = totals(config, vllm, leaders, overlap)
        yes = {True: "yes", False: "-"}
        print(f"{yes[vllm]:<17}{yes[leaders]:<9}{yes[overlap]:<18}{sel:>10.1f}{ev:>11.1f}{sel + ev:>8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
