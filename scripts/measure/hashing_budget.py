"""What verifying checkpoints costs each GPU job at paper scale, hashed once per process (before issue 41) and once per
file state (layerswap.hashcache): arithmetic from the config, not a measurement.

    python -m scripts.measure.hashing_budget                        # config/paper.yaml
    python -m scripts.measure.hashing_budget --configfile my.yaml --rate-mib-s 630

Inputs, each named: the per-job GPU hours of the config's `estimates` (the job's time), the SFT runs (how many
checkpoints each exports: num_samples / checkpoint_every, and in which dtype: export_dtype), `selection.top_k`, the
base's parameter count (`--params`, default Llama 3.1 8B's 8.03e9) and the sha256 rate (`--rate-mib-s`, default the
~630 MiB/s docs/SAFE_IO.md measures with scripts/measure/hashing.py). What each job hashes:

- sft: each checkpoint it exports, once (the record of its weights). Before, while its GPUs waited; after, on a
  background thread while training goes on (layerswap/train/export.py), so the job waits only for the last export's
  hash and for any hash that outlasts the training between two saves (the job's wall time, its GPU hours over its
  GPUs: the most of `--gpus-per-node` that split the batch, divided by its exports); the cache keeps that state, so no
  later job hashes it again;
- evaluate_checkpoints (one run per job): before, every checkpoint of the run; after, none;
- evaluate_merges (one merge config and language): before, the top-k experts of both types it reads (TIES: + the
  base, not counted); after, none;
- evaluate_table2 (one language): before, every checkpoint Table 2 reads (all runs' checkpoints); after, none;
- manifest (a CPU job): before, every checkpoint not covered by a record newer than it; after, none (its states are
  cached); shown as the time it would take, against its own request.

"After" assumes the cache answers (the jobs share `results/store/hashes`); where a network file system gives each node
its own st_dev, each node hashes a file once, and the `hashing:` line of every evaluation log says what a job hashed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

from layerswap.config import effective_runs, validate_config

BYTES = {"fp32": 4, "float32": 4, "bf16": 2, "bfloat16": 2, "fp16": 2, "float16": 2}
LIMIT = 0.05  # issue 41: no GPU job spends more than 5% of its time hashing


def budget(config: dict, params: float, rate: float, gpus_per_node: int = 8) -> list[dict]:
    runs = effective_runs(config)
    base_dtype = config["base"].get("dtype", "float32")
    est = config.get("estimates") or {}
    ckpts, sizes = {}, {}
    for name, run in runs.items():
        every = int(run.get("checkpoint_every") or run["num_samples"])
        ckpts[name] = max(1, int(run["num_samples"]) // every)
        dtype = run.get("export_dtype", "base")
        sizes[name] = params * BYTES[base_dtype if dtype == "base" else dtype]
    per_ckpt = max(sizes.values())
    per_run = max(ckpts.values())
    total = sum(ckpts[r] * sizes[r] for r in runs)
    top_k = int(config["selection"]["top_k"])

    def gpus_of(run: dict) -> int:  # runs.Runs.processes: the most GPUs of a node that split the run's batch
        batch = int(run["batch_size"])
        return max(n for n in range(1, min(batch, gpus_per_node) + 1) if batch % n == 0)

    def row(rule: str, before: float, after: float, hours: float | None, note: str) -> dict:
        secs = hours * 3600 if hours else None
        return {
            "rule": rule,
            "before_gb": before / 1e9,
            "after_gb": after / 1e9,
            "before_s": before / rate,
            "after_s": after / rate,
            "job_s": secs,
            "before_share": before / rate / secs if secs else None,
            "after_share": after / rate / secs if secs else None,
            "note": note,
        }

    def hours(rule: str, per_gpu: int = 1) -> float | None:
        h = (est.get(rule) or {}).get("gpu_hours") or (est.get(rule) or {}).get("cpu_hours")
        return h / per_gpu if h else None

    def sft_row(name: str) -> dict:
        """One SFT job as the plan has it: its own exports, its own GPUs. Each export is hashed on a background
        thread while training goes on (layerswap/train/export.py); the job waits only where a hash outlasts the
        training between two saves, and for the last export's hash (training is over)."""
        n, size, gpus = ckpts[name], sizes[name], gpus_of(runs[name])
        sft_hours = hours("sft", gpus)
        between = sft_hours * 3600 / n * rate if sft_hours else 0.0  # bytes hashed in the time between two saves
        after = size + (n - 1) * max(0.0, size - between) if sft_hours else n * size
        note = f"{name}: {n} exports x {size / 1e9:.1f} GB, {gpus} GPUs; after: the last export's hash, the others "
        return row("sft", n * size, after, sft_hours, note + "hashed while training goes on")

    # the SFT job that spends the largest share of its time hashing, among the config's own runs (each with its
    # exports and its GPUs: the joint runs' 16 exports on 8 GPUs, the math runs' 8 on 4)
    sft = max((sft_row(name) for name in runs), key=lambda r: (r["after_share"] or 0, r["before_share"] or 0))
    return [
        sft,
        row("evaluate_checkpoints", per_run * per_ckpt, 0, hours("evaluate_checkpoints"), f"{per_run} checkpoints"),
        row("evaluate_merges", 2 * top_k * per_ckpt, 0, hours("evaluate_merges"), f"2 x top-{top_k} experts"),
        row("evaluate_table2", total, 0, hours("evaluate_table2"), f"{sum(ckpts.values())} checkpoints"),
        row("manifest", total, 0, hours("manifest"), "CPU job: every kept checkpoint"),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configfile", default="config/paper.yaml")
    parser.add_argument("--params", type=float, default=8.03e9, help="base parameters (Llama 3.1 8B: 8.03e9)")
    parser.add_argument("--gpus-per-node", type=int, default=8, help="site gpus_per_node (an SFT job's GPUs)")
    parser.add_argument("--rate-mib-s", type=float, default=630.0, help="sha256 MiB/s (docs/SAFE_IO.md)")
    args = parser.parse_args(argv)
    config = validate_config(yaml.safe_load(Path(args.configfile).read_text()))
    rows = budget(config, args.params, args.rate_mib_s * 2**20, args.gpus_per_node)
    print(f"hashing at {args.rate_mib_s:g} MiB/s, {args.params:.3g} parameters ({args.configfile})")
    print(f"{'rule':<22}{'hashed before':>15}{'after':>10}{'job':>9}{'share before':>14}{'after':>8}  what")
    over = []
    for r in rows:
        job = f"{r['job_s'] / 3600:.2f} h" if r["job_s"] else "?"
        share_b = f"{r['before_share']:.1%}" if r["before_share"] is not None else "?"
        share_a = f"{r['after_share']:.1%}" if r["after_share"] is not None else "?"
        print(
            f"{r['rule']:<22}{r['before_gb']:>8.0f} GB {r['before_s'] / 60:>4.0f}m{r['after_s'] / 60:>8.1f}m"
            f"{job:>9}{share_b:>14}{share_a:>8}  {r['note']}"
        )
        if r["rule"] != "manifest" and r["after_share"] is not None and r["after_share"] > LIMIT:
            over.append(r["rule"])
    print(
        "GPU jobs above 5% of their time hashing: "
        + (", ".join(over) if over else "none")
        + " (after: once per file state, SFT exports hashed in the background)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
