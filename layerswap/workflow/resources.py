"""What each job asks of SLURM (memory, time limit, CPUs, GPUs, partition), sized by the model and the job's work.

The rules take their requests from here (`rules/common.smk`: `resources: **requests.of(<kind>)`), so the same
profile serves the toy world and the paper: a toy config asks for toy resources on the CPU partition, an 8B config
for what an 8B model needs. Three inputs:

- the base's size: `base.parameters` where the config gives it (config/paper.yaml: Llama 3.1 8B), else counted from
  the base's shape (the toy world's `base.toy_model`, or a local base directory's config.json), and the bytes per
  weight of `base.dtype` and of the runs' `export_dtype` (the checkpoints the evaluations load);
- the job's work: an SFT run's samples x sequence length (tokens), and per-job GPU- or CPU-hours of the config's
  `estimates` where it has them (measured where their `source` says so);
- the site's limits as caps: the most memory and CPUs of one node of the job's partition and the partition's time
  limit, where `sinfo` answers (`Site.limits`).

Memory: a fixed process overhead plus the weights the job holds in host memory (MEMORY below), x1.5. Time: the work at
the rates below, x2, plus 15 minutes of start-up, at least 15 minutes; an evaluation job on a GPU: its own work in the
evaluation plan (start-up included), x2, at least 15 minutes (`job_runtime`: a function of the job's wildcards).
Every figure is a sizing rule, not a measurement: `layerswap cost --resources` prints what a config will ask for,
and `--set-resources` on the command line overrides any of it (docs/CLUSTER.md).
"""

from __future__ import annotations

import math

from layerswap.errors import UserError
from layerswap.workflow.batch_fit import parameters
from layerswap.workflow.merge_groups import family

#: bytes per weight of base.dtype and export_dtype
BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "fp32": 4, "bf16": 2, "fp16": 2}
GB = 1e9
OVERHEAD_GB = 4.0  # one Python process with torch, transformers and lm-eval imported, its data and tokenizer
MEMORY_MARGIN = 1.5
TIME_MARGIN = 2.0
STARTUP_MIN = 15  # queue-side start-up: Snakemake re-parsing the workflow in the job, imports, model loading
MIN_RUNTIME = 15
MAX_RUNTIME = 24 * 60 - 1  # under a day: a 24-hour partition limit; an evaluation job cut there resumes from its store
#: training throughput in parameters x tokens per second per device: 1.24B-parameter Llama shapes at ~25.7k tokens/s
#: on one H100 in bf16 (the project's first GPU measurements, 2026-11-26); the toy world's 0.45M-parameter base at
#: ~12.7k tokens/s on two CPU threads
TRAIN_RATE = {"gpu": 1.24e9 * 25.7e3, "cpu": 0.45e6 * 12.7e3 / 2}
CPUS_PER_GPU = 8  # data loading and tokenisation beside each GPU

#: job kinds: which weights (in units of the base's parameters) a job holds in host memory at once, by dtype role.
#: sft: the base as loaded (base dtype) and a full export gathered on rank 0 (export dtype); one evaluation: one
#: checkpoint (export dtype); merges: the base as loaded (base dtype, while the model is built) and two merged states
#: (export dtype: the one loaded into the model and the next, built ahead on a thread, layerswap/merge/merger.py; the
#: experts are read in chunks, not held), counted as 2 base + 2 export, an upper bound with room for the experts'
#: page cache; heatmap: base and an expert; gguf: the dequantised fp32 weights, twice.
MEMORY: dict[str, dict[str, float]] = {
    "sft": {"base": 1, "export": 1},
    "evaluate": {"export": 1},
    "evaluate_merges": {"base": 2, "export": 2},
    "heatmap": {"base": 1, "export": 1},
    "gguf_base": {"fp32": 2},
}
#: data and bookkeeping jobs: their work does not grow with the model (mem_mb, runtime minutes)
FIXED = {
    "toy_corpus": (4000, 30),
    "hub_data": (32000, 120),  # one pre-staged hub source, offline (the NLLB files are several GB)
    "sft_mix": (8000, 30),
    "toy_base": (4000, 60),
    "prepare_base": (4000, 30),  # links the pre-staged snapshot
    "manifest": (4000, 120),  # hashes every result file
}
#: rule -> job kind
KINDS = {
    "sft": "sft",
    "ablation_sft": "sft",
    "heatmap": "heatmap",
    "gguf_base": "gguf_base",
    "evaluate_base": "evaluate",
    "evaluate_base_select": "evaluate",
    "evaluate_ablation_base": "evaluate",
    "evaluate_checkpoints": "evaluate",
    "evaluate_checkpoints_other": "evaluate",
    "evaluate_checkpoint_leaders": "evaluate",
    "evaluate_merges": "evaluate_merges",
    "evaluate_merge_group": "evaluate_merges",  # every evaluate_merge_group_<name> (layerswap/workflow/merge_groups.py)
    "evaluate_soup_then_swap": "evaluate_merges",
    "evaluate_table2": "evaluate_merges",
    "evaluate_ablation_merges": "evaluate_merges",
    "merged_model": "evaluate_merges",
    "ablation_toy_base": "toy_base",
    "ablation_prepare_base": "prepare_base",
}


def _round_mb(gb: float) -> int:
    return int(math.ceil(gb)) * 1000


class Requests:
    """Per-rule SLURM requests for one validated config. `spec`: the rules' view (GPUs per job, runs); `site`: the
    site file (None: no cluster; then only memory and time are given, which a local run ignores)."""

    def __init__(self, config: dict, spec, site=None):
        self.config, self.spec, self.site = config, spec, site
        self.params = parameters(config)
        if self.params is None and site is not None:
            raise UserError(
                f"base.parameters: not set, and the size of base.source {config['base']['source']!r} "
                "cannot be read before the run; give the base's parameter count (e.g. 8.03e9 for "
                "Llama 3.1 8B) so that jobs ask for the memory it needs"
            )
        dtypes = {"base": config["base"].get("dtype", "float32")}
        exports = [r.get("export_dtype", "base") for r in spec.runs.main.values()] or ["base"]
        dtypes["export"] = max((dtypes["base"] if e == "base" else e for e in exports), key=BYTES.__getitem__)
        self.bytes = {"base": BYTES[dtypes["base"]], "export": BYTES[dtypes["export"]], "fp32": 4}
        self.estimates = config.get("estimates") or {}
        self.limits = site.limits() if site is not None else {}
        self._plan = None

    @property
    def plan(self):
        """The evaluation plan (layerswap/workflow/eval_plan.py): the evaluation jobs' work, built once."""
        if self._plan is None:
            from layerswap.workflow.eval_plan import EvalPlan  # imports nothing of this module

            self._plan = EvalPlan(self.config, self.spec, (self.params or 0) * self.bytes["export"] / GB)
        return self._plan

    # --- caps ----------------------------------------------------------------------------------------------------
    def _partition(self, gpus: int) -> str | None:
        if self.site is None:
            return None
        return self.site.gpu_partition if gpus else self.site.cpu_partition

    def _cap(self, key: str, value: int, gpus: int) -> int:
        limit = self.limits.get(self._partition(gpus), {}).get(key)
        return min(value, limit) if limit else value

    # --- sizes ---------------------------------------------------------------------------------------------------
    def mem_mb(self, kind: str, processes: int = 1) -> int:
        weights = sum(n * self.bytes[role] for role, n in MEMORY[kind].items()) * (self.params or 0) / GB
        return _round_mb(MEMORY_MARGIN * weights + OVERHEAD_GB * max(1, processes))

    def runtime(self, rule: str, kind: str, devices: int, gpus: int, run: str | None = None) -> int:
        """Minutes: for an evaluation rule on a GPU, its largest job's work in the evaluation plan (models x language
        keys x items at the plan's rates); else the config's per-job estimate for the rule (GPU-hours over the job's
        GPUs, or CPU-hours over its CPUs) and, for SFT, its tokens at TRAIN_RATE, the larger; x TIME_MARGIN, +
        STARTUP_MIN."""
        est = self.estimates.get(rule) or self.estimates.get(rule.replace("ablation_", "")) or {}
        hours = float(est.get("gpu_hours", 0.0)) / max(1, gpus) if gpus else float(est.get("cpu_hours", 0.0)) / devices
        planned = self.plan.largest_job_hours(rule) if gpus and rule.startswith("evaluate") else None
        if planned is not None:
            hours = planned
        if kind == "sft" and run is not None and self.params:
            r = self.spec.runs.spec(run)
            tokens = int(r["num_samples"]) * int(r["seq_len"])
            rate = TRAIN_RATE["gpu" if gpus else "cpu"] * devices
            hours = max(hours, self.params * tokens / rate / 3600)
        return max(MIN_RUNTIME, int(math.ceil(TIME_MARGIN * hours * 60)) + STARTUP_MIN)

    # --- what a rule gets ----------------------------------------------------------------------------------------
    def job(self, rule: str, gpus: int, threads: int, run: str | None = None) -> dict[str, int | str]:
        """The requests of one job of `rule` that uses `gpus` GPUs and `threads` threads (values, no callables)."""
        kind = KINDS.get(family(rule), rule)
        if kind in FIXED:
            mem, minutes = FIXED[kind]
        else:
            processes = gpus if kind == "sft" and gpus else 1
            mem = self.mem_mb(kind, processes)
            minutes = self.runtime(rule, kind, gpus or threads, gpus, run)
        out: dict[str, int | str] = {
            "mem_mb": self._cap("mem_mb", mem, gpus),
            "runtime": self._cap("runtime", minutes, gpus),
        }
        if gpus:
            cpus = self._cap("cpus", CPUS_PER_GPU * gpus, gpus) // gpus
            out |= {"cpus_per_gpu": max(1, cpus), "nodes": 1}
        if self.site is not None and gpus:
            out["slurm_partition"] = self.site.gpu_partition
        return out

    def job_runtime(self, rule: str, wildcards: dict) -> int:
        """Minutes of one evaluation job on a GPU: its own planned work (models x keys x items, start-up and loads
        included; layerswap/workflow/eval_plan.py) x TIME_MARGIN, at least MIN_RUNTIME, under a day (MAX_RUNTIME),
        capped by the partition."""
        hours = self.plan.job_hours(rule, wildcards)
        if hours is None:
            hours = self.plan.largest_job_hours(rule) or 0.0
        minutes = min(MAX_RUNTIME, max(MIN_RUNTIME, int(math.ceil(TIME_MARGIN * hours * 60))))
        return self._cap("runtime", minutes, 1)

    def of(self, rule: str) -> dict:
        """`resources:` of a rule, as Snakemake takes them (`**requests.of("sft")`): per-run rules (SFT) get
        functions of the job's wildcards, the others plain values."""
        kind = KINDS.get(family(rule), rule)
        if kind == "sft":

            def pick(key):
                return lambda w, threads: self.job(rule, self.spec.runs.sft_gpus(w.run), threads, w.run).get(key, "")

            runs = self.spec.runs.main
            keys = self.job(rule, self.spec.evals.gpus, 1, next(iter(runs), None)).keys() if runs else ()
            return {key: pick(key) for key in keys}
        gpus = self.spec.evals.gpus if rule.startswith("evaluate") else 0  # merged_model: a merge written on a CPU
        threads = self.spec.evals.threads if rule.startswith("evaluate") else 1
        out = self.job(rule, gpus, threads)
        if gpus and self.plan.largest_job_hours(rule) is not None:  # each job's own planned work
            out["runtime"] = lambda w: self.job_runtime(rule, dict(w.items()))
        return out
