"""The expert SFT runs of a config: the config's own (`main`: what the main selections read) and the extra runs of the
expert-set ablations (`extra`: layerswap/workflow/expert_sets.py; never in `main`), each run's params, and how its
job is launched and on how many GPUs. A part of `Spec` (layerswap/workflow/spec.py), for rules/train.smk and the
parts that list a run's files.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from layerswap.config import effective_runs
from layerswap.layout import Layout
from layerswap.workflow.site import Site
from layerswap.workflow.words import as_json


class Runs:
    def __init__(self, config: dict, ablations: dict[str, dict], layout: Layout, site: Site | None = None):
        """`ablations`: the planned ablations (those with `runs` train experts of their own); `site`: the SLURM
        site's settings (GPUs per node), if any."""
        self._world, self._sft, self._template = config["world"], config["sft"], config["prompt_template"]
        self._site = site
        self.main = effective_runs(config)
        self.extra: dict[str, dict] = {}
        self.base_dir: dict[str, str | None] = {}  # extra run -> its base folder (None: the main base)
        for name, abl in ablations.items():
            if "runs" not in abl:  # no expert set
                continue
            self.extra.update(abl["runs"])
            for run, base in abl["run_base"].items():
                self.base_dir[run] = None if base == "main" else layout.ablation_base(name, base)
        self.other_base = sorted(r for r, b in self.base_dir.items() if b)  # their own SFT rule (ablation_sft)

    def spec(self, run: str) -> dict:
        """A run's params (a main or an extra run)."""
        return self.main[run] if run in self.main else self.extra[run]

    def of(self, expert: str) -> list[str]:
        """The main runs of an expert type."""
        return sorted(r for r, p in self.main.items() if p["expert"] == expert)

    def expert_types(self) -> list[str]:
        return sorted({p["expert"] for p in self.main.values()})

    def sft_params(self, run: str) -> str:
        return as_json({**self.spec(run), "template": self._template})

    def sft_gpus(self, run: str) -> int:
        """GPUs an SFT job asks for (its rule's `gpu` resource): none in the toy world; under `accelerate launch`
        the most of one node's GPUs (the site file's gpus_per_node; 1 without a site file) that split the run's
        global batch evenly (batch 4 on an 8-GPU node: 4), so a job holds only the GPUs its processes use; else 1."""
        if self._world == "toy":
            return 0
        if self._sft["launcher"] != "accelerate":
            return 1
        return self.processes(run, self._site.gpus_per_node if self._site else 1)

    def processes(self, run: str, gpus: int) -> int:
        """Data-parallel processes of a run on `gpus` GPUs: the most that split its global batch evenly."""
        batch, gpus = int(self.spec(run)["batch_size"]), max(1, int(gpus))
        return max(n for n in range(1, min(batch, gpus) + 1) if batch % n == 0)

    def sft_launch(self, run: str, gpus: int, basedir: str | Path) -> str:
        """The command that runs `layerswap sft`: the plain CLI, or `accelerate launch` with the repo's accelerate
        config and one process per GPU the job gets (resources.gpu: `sft_gpus`, or what --set-resources says), at
        most batch_size. A derived param: moving a workflow from one launcher to the other does not retrain finished
        runs. `basedir`: the workflow's directory (a relative accelerate config not found here is its).
        `--main_process_port 0`: accelerate asks the OS for a free rendezvous port as the job starts, so SFT jobs that
        start together on one node never share one (its default, 29500, is one port for all); the same words for
        every job and every run, so the param never differs between identical runs."""
        sft = self._sft
        if sft["launcher"] != "accelerate":
            return "layerswap sft"
        procs = self.processes(run, gpus)
        # a relative accelerate config is the repository's (cluster/...), wherever --directory points
        accel = Path(sft["accelerate_config"])
        accel = accel if accel.is_absolute() or accel.exists() else Path(basedir) / accel
        return (
            f"accelerate launch --config_file {shlex.quote(str(accel))} "
            f"--num_processes {procs} --main_process_port 0 -m layerswap.train.sft"
        )
