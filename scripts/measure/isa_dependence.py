"""Which toy-world outputs depend on the CPU's instruction set? The measurement behind docs/AUDITS.md.

    python -m scripts.measure.isa_dependence [--config config/config.yaml] [--steps 20]

One machine stands in for two: the second "CPU" is this one with torch's own kernels held at their lowest SIMD
level (ATEN_CPU_CAPABILITY=default) and MKL's at SSE4.2 (MKL_ENABLE_INSTRUCTIONS=SSE4_2), which is what an older
CPU (or one without AVX2/AVX-512) would run. In a fresh temporary directory it
- generates the config's toy data twice (`generate`, seeded pure Python) and compares every file's sha256;
- pretrains the config's toy base for --steps steps with `layerswap toy-base`: at the config's thread count, at
  one thread, and at the config's thread count with the lower SIMD level; compares model.safetensors bytes and the
  largest weight difference;
- derives two "experts" from the first base (seeded noise added to every tensor) and merges them with
  `layerswap merge` (uniform and magnitude-weighted soup, TIES, layer swap): natively twice and once with the
  lower SIMD level; compares the merged safetensors bytes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import yaml
from safetensors.torch import save_file

from layerswap.data.toyworld import generate
from scripts.measure.common import load_weights

LOWER_SIMD = {"ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2"}


def digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def layerswap(args: list[str], env: dict[str, str]) -> None:
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    subprocess.run(
        ["layerswap", *args],
        check=True,
        env={**os.environ, "PATH": path, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def capability(env: dict[str, str]) -> str:
    code = "import torch; print(torch.backends.cpu.get_cpu_capability())"
    return subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True, text=True, check=True
    ).stdout.strip()


def max_diff(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    return max(float((a[k].double() - b[k].double()).abs().max()) for k in a)


def same_bytes(a: Path, b: Path) -> bool:
    files = sorted(p.name for p in a.glob("*.safetensors"))
    return files == sorted(p.name for p in b.glob("*.safetensors")) and all(
        (a / f).read_bytes() == (b / f).read_bytes() for f in files
    )


def expert(base: Path, out: Path, seed: int) -> str:
    """A copy of the base with seeded noise (1% of each tensor's std) added to every tensor."""
    shutil.copytree(base, out)
    g = torch.Generator().manual_seed(seed)
    sd = {
        k: v + 0.01 * float(v.float().std() if v.numel() > 1 else 1.0) * torch.randn(v.shape, generator=g)
        for k, v in load_weights(base).items()
    }
    for p in out.glob("*.safetensors"):
        p.unlink()
    save_file({k: v.contiguous() for k, v in sd.items()}, str(out / "model.safetensors"), metadata={"format": "pt"})
    return str(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=Path("config/config.yaml"))
    parser.add_argument("--steps", type=int, default=20, help="pretraining steps (the config's count is not needed)")
    args = parser.parse_args()
    cfg = yaml.safe_load(args.config.read_text())
    world, base_cfg = cfg["toy_world"], cfg["base"]
    print(
        f"this CPU: torch kernels {capability({})}; lower SIMD level: {capability(LOWER_SIMD)} "
        f"({' '.join(f'{k}={v}' for k, v in LOWER_SIMD.items())})",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="isa-dependence-") as tmp:
        work = Path(tmp)
        t = time.time()
        for run in ("a", "b"):
            generate(work / run / "raw", work / run / "eval", world["seed"], world["languages"], world["sizes"])
        da, db = digest(work / "a"), digest(work / "b")
        print(
            f"toy data: {len(da)} files generated twice, identical sha256: {da == db} ({time.time() - t:.0f} s)",
            flush=True,
        )

        threads = int(base_cfg["toy_pretrain"].get("threads", 1))
        runs = {
            f"threads {threads}": ({}, threads),
            "threads 1": ({}, 1),
            f"threads {threads}, lower SIMD": (LOWER_SIMD, threads),
        }
        bases = {}
        for i, (name, (env, n)) in enumerate(runs.items()):
            t = time.time()
            bases[name] = work / "base" / str(i)
            train = {**base_cfg["toy_pretrain"], "steps": args.steps, "threads": n}
            layerswap(
                [
                    "toy-base",
                    "--corpus",
                    str(work / "a/raw/pretrain.jsonl"),
                    "--vocab",
                    str(work / "a/raw/vocab.json"),
                    "--out",
                    str(bases[name]),
                    "--model-json",
                    json.dumps(base_cfg["toy_model"]),
                    "--train-json",
                    json.dumps(train),
                    "--num-layers",
                    str(base_cfg["num_layers"]),
                    "--seed",
                    str(cfg["seed"]),
                ],
                env,
            )
            print(f"toy base, {args.steps} steps, {name}: {time.time() - t:.0f} s", flush=True)
        first, *others = runs
        w0 = load_weights(bases[first])
        for name in others:
            print(
                f"toy base {first} vs {name}: model.safetensors byte-identical "
                f"{same_bytes(bases[first], bases[name])}, max |w - w'| {max_diff(w0, load_weights(bases[name])):.3g}"
            )

        base = str(bases[first])
        task, lang = expert(bases[first], work / "task", 1), expert(bases[first], work / "lang", 2)
        recipes = {
            "soup (uniform)": {"method": "soup", "base": base, "inputs": {"models": [task, lang]}, "params": {}},
            "soup (magnitude)": {
                "method": "soup",
                "base": base,
                "inputs": {"models": [task, lang]},
                "params": {"weighting": "magnitude"},
            },
            "ties": {"method": "ties", "base": base, "inputs": {"models": [task, lang]}, "params": {"density": 0.3}},
            "layer swap": {
                "method": "layer_swap",
                "base": base,
                "inputs": {"task": task, "lang": lang},
                "params": {"bottom": 1, "top": 1, "transition_bottom": 1, "transition_top": 1},
            },
        }
        for i, (name, recipe) in enumerate(recipes.items()):
            recipe_file = work / f"recipe{i}.json"
            recipe_file.write_text(json.dumps(recipe))
            outs = {}
            for tag, env in (("native", {}), ("native again", {}), ("lower SIMD", LOWER_SIMD)):
                outs[tag] = work / "merged" / str(i) / tag.replace(" ", "_")
                layerswap(["merge", "--recipe", str(recipe_file), "--out", str(outs[tag])], env)
            print(
                f"merge {name}: rerun byte-identical {same_bytes(outs['native'], outs['native again'])}, "
                f"lower SIMD byte-identical {same_bytes(outs['native'], outs['lower SIMD'])}",
                flush=True,
            )


if __name__ == "__main__":
    main()
