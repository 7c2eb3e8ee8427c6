"""Time layerswap's swap, soup and TIES against mergekit 0.1.5 on synthetic Llama-shaped bf16 checkpoints.

    python -m scripts.measure.bench_merge --workdir DIR --mergekit VENV/bin/mergekit-yaml

Generates base + 2 experts (Llama-3.2-1B shapes, untied head: 1.50B parameters each) under --workdir/models,
runs every merge in its own subprocess (wall time, peak RSS from os.wait4) and prints a table with the ratios.
Install mergekit with `python -m scripts.measure.mergekit_parity --venv DIR` (it makes the venv this script points at).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

from scripts.measure.common import LLAMA_1B, parameters, random_model, run_timed


def swap_slices(task: str, lang: str, n_layers: int, bottom: int, top: int, tb: int = 0, tu: int = 0) -> list[dict]:
    """mergekit slices for a swap: lang weight 1 / 0.5 (transition) / 0; non-layer tensors averaged via filters."""

    def src(model: str, lo: int, hi: int, w: float, filters: list[str]) -> dict:
        weight = [{"filter": f, "value": 0.5} for f in filters] + [{"value": w}]
        return {"model": model, "layer_range": [lo, hi], "parameters": {"weight": weight}}

    L = n_layers
    ranges = [
        (0, bottom, 1.0),
        (bottom, bottom + tb, 0.5),
        (bottom + tb, L - top - tu, 0.0),
        (L - top - tu, L - top, 0.5),
        (L - top, L, 1.0),
    ]
    ranges = [r for r in ranges if r[0] < r[1]]
    slices = []
    for i, (lo, hi, w_lang) in enumerate(ranges):
        filters = (["embed_tokens"] if i == 0 else []) + (["model.norm", "lm_head"] if i == len(ranges) - 1 else [])
        slices.append({"sources": [src(lang, lo, hi, w_lang, filters), src(task, lo, hi, 1.0 - w_lang, filters)]})
    return slices


def mergekit_config(
    method: str, base: str, a: str, b: str, n_layers: int, p: dict, out_dtype: str = "bfloat16"
) -> dict:
    common = {"dtype": "float32", "out_dtype": out_dtype}
    if method == "swap":
        return {
            "merge_method": "linear",
            "base_model": a,
            "parameters": {"normalize": True},
            "slices": swap_slices(a, b, n_layers, p["bottom"], p["top"], p.get("tb", 0), p.get("tu", 0)),
            **common,
        }
    if method == "soup":
        return {
            "merge_method": "linear",
            "base_model": a,
            "parameters": {"normalize": True},
            "models": [{"model": m, "parameters": {"weight": 1.0}} for m in (a, b)],
            **common,
        }
    return {
        "merge_method": "ties",
        "base_model": base,
        "parameters": {"normalize": True, "lambda": p["lam"]},
        "models": [{"model": m, "parameters": {"weight": 1.0, "density": p["density"]}} for m in (a, b)],
        **common,
    }


def our_recipe(method: str, base: str, a: str, b: str, p: dict) -> dict:
    if method == "swap":
        return {
            "method": "layer_swap",
            "base": base,
            "inputs": {"task": a, "lang": b},
            "params": {
                "bottom": p["bottom"],
                "top": p["top"],
                "transition_bottom": p.get("tb", 0),
                "transition_top": p.get("tu", 0),
                "non_layer": "average",
            },
        }
    if method == "soup":
        return {"method": "soup", "base": base, "inputs": {"models": [a, b]}, "params": {"weighting": "uniform"}}
    return {
        "method": "ties",
        "base": base,
        "inputs": {"models": [a, b]},
        "params": {"density": p["density"], "lam": p["lam"]},
    }


def run_pair(method: str, models: dict[str, str], work: Path, mergekit: str, n_layers: int, p: dict) -> dict:
    import yaml

    base, a, b = models["base"], models["a"], models["b"]
    (work / f"{method}.json").write_text(json.dumps(our_recipe(method, base, a, b, p)))
    (work / f"{method}.yml").write_text(yaml.safe_dump(mergekit_config(method, base, a, b, n_layers, p)))
    row = {"method": method}
    for tool, cmd in (
        (
            "ours",
            [
                sys.executable,
                "-m",
                "layerswap.cli",
                "merge",
                "--recipe",
                str(work / f"{method}.json"),
                "--out",
                str(work / f"out_ours_{method}"),
            ],
        ),
        ("mergekit", [mergekit, str(work / f"{method}.yml"), str(work / f"out_mk_{method}"), "--quiet"]),
    ):
        out = work / f"out_{'ours' if tool == 'ours' else 'mk'}_{method}"
        shutil.rmtree(out, ignore_errors=True)
        env = dict(os.environ, PYTHONHASHSEED="0", PYTHONPATH=str(Path(__file__).resolve().parents[2]))
        wall, rss = run_timed(cmd, env)
        row[f"{tool}_s"], row[f"{tool}_gib"] = wall, rss / 2**30
        print(f"  {method:5s} {tool:9s} {wall:8.1f} s  {rss / 2**30:6.2f} GiB", flush=True)
        shutil.rmtree(out, ignore_errors=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", required=True, help="scratch dir for models and outputs (about 12 GB)")
    ap.add_argument("--mergekit", default="/tmp/mkvenv/bin/mergekit-yaml", help="mergekit-yaml executable")
    ap.add_argument("--methods", default="swap,soup,ties")
    ap.add_argument("--bottom", type=int, default=5)
    ap.add_argument("--top", type=int, default=2)
    ap.add_argument("--density", type=float, default=0.2)
    ap.add_argument("--lam", type=float, default=1.0)
    ap.add_argument(
        "--layers", type=int, default=LLAMA_1B["num_hidden_layers"], help="fewer layers for a quick smoke run"
    )
    ap.add_argument("--keep-models", action="store_true", help="keep the generated checkpoints")
    args = ap.parse_args()
    cfg = LLAMA_1B | {"num_hidden_layers": args.layers}
    work = Path(args.workdir)
    models = {
        "base": str(work / "models" / "base"),
        "a": str(work / "models" / "expert_a"),
        "b": str(work / "models" / "expert_b"),
    }
    t0 = time.perf_counter()
    random_model(Path(models["base"]), cfg, seed=1)
    random_model(Path(models["a"]), cfg, seed=2, base_seed=1)
    random_model(Path(models["b"]), cfg, seed=3, base_seed=1)
    n = parameters(cfg)
    print(f"checkpoints: 3 x {n / 1e9:.2f}B parameters, bf16 ({time.perf_counter() - t0:.0f} s to generate/find)")
    p = {"bottom": args.bottom, "top": args.top, "density": args.density, "lam": args.lam}
    rows = [run_pair(m, models, work, args.mergekit, cfg["num_hidden_layers"], p) for m in args.methods.split(",")]
    print(
        "\n| merge | ours wall s | mergekit wall s | speed-up | ours peak RSS GiB | mergekit peak RSS GiB | RSS ratio |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['method']} | {r['ours_s']:.1f} | {r['mergekit_s']:.1f} | {r['mergekit_s'] / r['ours_s']:.2f}x "
            f"| {r['ours_gib']:.2f} | {r['mergekit_gib']:.2f} | {r['ours_gib'] / r['mergekit_gib']:.2f} |"
        )
    if not args.keep_models:
        shutil.rmtree(work / "models", ignore_errors=True)


if __name__ == "__main__":
    main()
