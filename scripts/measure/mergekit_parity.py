"""Parity with mergekit 0.1.5: swap (linear + slices + filtered weights), linear soup and TIES, same parameters.

    python -m scripts.measure.mergekit_parity [--venv VENV] [--workdir DIR]

Installs mergekit into its own venv (torch==2.13.0 first, so pip takes the local CPU wheel), builds small
Llama-shaped checkpoints, runs both tools and compares every tensor. mergekit runs with dtype float32 (our
arithmetic precision) and writes out_dtype. Conventions mapped: our TIES `lam` is mergekit's `lambda`, `density`
the same (k = max(1, int(density * numel)) kept per tensor), mergekit `normalize: true` (disjoint mean) and
weight 1 per model. One known difference: entries whose |delta| ties with the k-th largest are all kept by us,
while mergekit keeps exactly k by argsort order; with bf16 inputs such ties are frequent, so TIES is also
reported on float32 inputs, where they are absent.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
import yaml

from layerswap.merge.engine import build_state_dict, write_merged
from scripts.measure.bench_merge import mergekit_config, our_recipe
from scripts.measure.common import load_weights, random_model

SMALL = dict(
    vocab_size=96,
    hidden_size=64,
    intermediate_size=160,
    num_hidden_layers=8,
    num_attention_heads=4,
    num_key_value_heads=2,
)


def ensure_mergekit(venv: Path) -> Path:
    exe = venv / "bin" / "mergekit-yaml"
    if not exe.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(venv / "bin" / "pip"), "install", "-q"]
        subprocess.run(pip + ["torch==2.13.0"], check=True)
        subprocess.run(pip + ["-r", str(Path(__file__).resolve().parents[2] / "envs" / "mergekit.txt")], check=True)
    return exe


def compare(ours: dict[str, torch.Tensor], theirs: dict[str, torch.Tensor]) -> dict:
    if ours.keys() != theirs.keys():
        return {"error": f"names differ: {sorted(ours.keys() ^ theirs.keys())[:3]}"}
    n = equal = 0
    max_abs = 0.0
    worst = ""
    for name in ours:
        a, b = ours[name], theirs[name]
        if a.dtype != b.dtype or a.shape != b.shape:
            return {"error": f"{name}: {a.dtype}{list(a.shape)} vs {b.dtype}{list(b.shape)}"}
        n += a.numel()
        equal += int(
            (a.view(-1).view(torch.uint8).view(a.numel(), -1) == b.view(-1).view(torch.uint8).view(b.numel(), -1))
            .all(1)
            .sum()
        )
        diff = float((a.float() - b.float()).abs().max())
        if diff > max_abs:
            max_abs, worst = diff, name
    return {"elements": n, "bit_equal_fraction": equal / n, "max_abs_diff": max_abs, "worst_tensor": worst}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--venv", default="/tmp/mergekit-venv")
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args()
    exe = ensure_mergekit(Path(args.venv))
    work = Path(args.workdir or tempfile.mkdtemp(prefix="mk-parity-"))
    env = dict(os.environ, PYTHONHASHSEED="0")
    results = []
    cases = [
        ("swap b=2 u=1", "swap", torch.bfloat16, {"bottom": 2, "top": 1}),
        ("swap b=3 u=1 tb=1 tu=2", "swap", torch.bfloat16, {"bottom": 3, "top": 1, "tb": 1, "tu": 2}),
        ("swap b=2 u=0 tb=0 tu=1", "swap", torch.bfloat16, {"bottom": 2, "top": 0, "tu": 1}),
        ("soup (linear)", "soup", torch.bfloat16, {}),
        ("ties d=0.2 lam=1 f32", "ties", torch.float32, {"density": 0.2, "lam": 1.0}),
        ("ties d=0.5 lam=0.8 f32", "ties", torch.float32, {"density": 0.5, "lam": 0.8}),
        ("ties d=0.2 lam=1 bf16", "ties", torch.bfloat16, {"density": 0.2, "lam": 1.0}),
    ]
    for label, method, dtype, p in cases:
        tag = "f32" if dtype == torch.float32 else "bf16"
        models = {k: str(work / "models" / f"{k}_{tag}") for k in ("base", "a", "b")}
        random_model(Path(models["base"]), SMALL, seed=1, dtype=str(dtype).removeprefix("torch."))
        random_model(Path(models["a"]), SMALL, seed=2, base_seed=1, dtype=str(dtype).removeprefix("torch."))
        random_model(Path(models["b"]), SMALL, seed=3, base_seed=1, dtype=str(dtype).removeprefix("torch."))
        case = work / label.replace(" ", "_").replace("=", "")
        case.mkdir(parents=True, exist_ok=True)
        out_dtype = "float32" if dtype == torch.float32 else "bfloat16"
        cfg = mergekit_config(
            method, models["base"], models["a"], models["b"], SMALL["num_hidden_layers"], p, out_dtype
        )
        (case / "mergekit.yml").write_text(yaml.safe_dump(cfg))
        subprocess.run(
            [str(exe), str(case / "mergekit.yml"), str(case / "mk"), "--quiet"],
            check=True,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        recipe = our_recipe(method, models["base"], models["a"], models["b"], p)
        (case / "recipe.json").write_text(json.dumps(recipe, indent=1))
        write_merged(recipe, str(case / "ours"))
        ours = load_weights(case / "ours")
        mem = build_state_dict(recipe)
        assert all(torch.equal(mem[k].view(torch.uint8), ours[k].view(torch.uint8)) for k in mem), "memory != disk"
        res = compare(ours, load_weights(case / "mk"))
        results.append((label, res))
        print(f"{label:26s} {json.dumps(res)}", flush=True)
    print(f"\nworkdir: {work}")
    bad = [
        label for label, r in results if "error" in r or (r["max_abs_diff"] > 1e-6 and "bf16" not in label.split()[-1])
    ]
    if bad:
        raise SystemExit(f"parity failures: {bad}")


if __name__ == "__main__":
    main()
