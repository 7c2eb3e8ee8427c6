"""Are evaluation results the same at every batch size? The measurement behind `evaluation.batch_size` being a param.

    python -m scripts.measure.batch_invariance --results results [--batch-sizes 1 8 64] [--model ID=DIR ...]

Evaluates the given models (default: the base and the first checkpoint of the first SFT run under --results) on every
toy benchmark with `layerswap evaluate`, once per batch size, each in a fresh temporary directory, then compares the
evaluation files: scores, and per sample the choice log-likelihoods (loglikelihood tasks) and the generation
(generate_until tasks). Prints, per batch size against the first: files with equal scores, samples whose
extracted answer differs, the largest log-likelihood difference and generations that differ. Bit-identical results
make batch size a setting like threads (no rerun); any difference keeps it a param.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from layerswap.layout import Layout, R

BENCHMARKS = {
    "mgsm": {"shots": 0},
    "belebele": {"shots": 0},
    "flores": {"shots": 0},
    "mmlu": {"shots": 0},
    "mbpp": {"shots": 0, "execute_code": False},
}


def default_models(results: Path) -> list[str]:
    layout = Layout.at(results)
    runs = sorted(p for p in results.glob(layout.relative(layout.checkpoints_record("*"))))
    models = [f"base={layout.base()}"]
    if runs:
        first = json.loads(runs[0].read_text())["checkpoints"][0]
        models.append(f"ckpt={first['path'] if Path(first['path']).is_absolute() else results.parent / first['path']}")
    return models


def evaluate(results: Path, models: list[str], languages: list[str], batch: int, out: Path) -> None:
    spec = {
        b: {**cfg, "languages": [l for l in languages if not (b == "flores" and l == "en")], "limit": None}
        for b, cfg in BENCHMARKS.items()
    }
    cmd = [
        "layerswap",
        "evaluate",
        "--data-dir",
        Layout.at(results).eval_data_dir(),
        "--benchmarks-json",
        json.dumps(spec),
        "--out-dir",
        str(out),
        "--batch-size",
        str(batch),
        "--seed",
        "0",
        "--task-set",
        "toy",
        "--threads",
        "2",
    ]
    for m in models:
        cmd += ["--model", m]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)


def compare(a: Path, b: Path) -> dict:
    stats = {
        "files": 0,
        "equal_scores": 0,
        "samples": 0,
        "extracted_differs": 0,
        "max_ll_diff": 0.0,
        "generation_differs": 0,
    }
    for fa in sorted(a.rglob("*.json")):
        fb = b / fa.relative_to(a)
        stats["files"] += 1
        stats["equal_scores"] += json.loads(fa.read_text())["scores"] == json.loads(fb.read_text())["scores"]
        sa = [json.loads(l) for l in fa.with_suffix(".samples.jsonl").read_text().splitlines()]
        sb = [json.loads(l) for l in fb.with_suffix(".samples.jsonl").read_text().splitlines()]
        for x, y in zip(sa, sb, strict=True):
            stats["samples"] += 1
            stats["extracted_differs"] += x["extracted"] != y["extracted"]
            if "choice_loglikelihoods" in x:
                stats["max_ll_diff"] = max(
                    stats["max_ll_diff"],
                    *(abs(p - q) for p, q in zip(x["choice_loglikelihoods"], y["choice_loglikelihoods"])),
                )
            else:
                stats["generation_differs"] += x["generation"] != y["generation"]
    return stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, default=Path(R))
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--model", action="append", help="ID=DIR (default: the base and one checkpoint)")
    args = parser.parse_args()
    results = args.results.resolve()
    models = args.model or default_models(results)
    layout = Layout.at(results)
    languages = sorted(
        {p.stem.split("_", 1)[1] for p in results.glob(layout.relative(layout.eval_data("mgsm", "*")))},
        key=lambda l: (l != "en", l),
    )
    with tempfile.TemporaryDirectory(prefix="batch-invariance-") as tmp:
        outs = {}
        for batch in args.batch_sizes:
            outs[batch] = Path(tmp) / f"b{batch}"
            print(f"evaluating {len(models)} model(s) in {', '.join(languages)} at batch size {batch} ...", flush=True)
            evaluate(results, models, languages, batch, outs[batch])
        first = args.batch_sizes[0]
        for batch in args.batch_sizes[1:]:
            s = compare(outs[first], outs[batch])
            print(
                f"batch {batch} vs {first}: {s['equal_scores']}/{s['files']} files with equal scores; "
                f"{s['samples']} samples: {s['extracted_differs']} extracted answers differ, "
                f"{s['generation_differs']} generations differ, max |log-likelihood diff| {s['max_ll_diff']:.3g}"
            )


if __name__ == "__main__":
    main()
