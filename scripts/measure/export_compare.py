"""What scripts/measure/export_dtype.py compares between the fp32 and bf16 exports of an expert: weight element changes
against the base, the heatmap records (paper Fig. 2), and the logits of the experts and their merges on a fixed
batch."""

from __future__ import annotations

from pathlib import Path

import torch

TEMPLATE = "Q: {prompt}\nA:"
LANG = "toy_swh"
THRESHOLDS = {"math": 1.0e-5, "lang": 1.9e-5}  # paper Fig. 2 (config/paper.yaml analysis.heatmap_thresholds)
EXPORTS = ("fp32", "bf16")
COMPUTE = {"fp32": torch.float32, "bf16": torch.bfloat16}

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
