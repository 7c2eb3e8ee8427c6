"""A job whose benchmarks name two backends (issue 48: `evaluation.backend` a mapping, `tasks_per_job: grouped`):
one process holding an HF host and a vLLM engine (what `layerswap evaluate-merges` does, `evaluate.Part`) against the
same work split into two jobs, one per backend, each its own process. Run in the CPU vLLM environment
(`make vllm-cpu-venv`), interleaved, each command a fresh process:

  one    evaluate-merges --backend vllm, MGSM on vLLM, Belebele's own backend hf: both hosts in one process
  split  evaluate-merges --backend hf on Belebele, then --backend vllm on MGSM: two processes (their times added)

    .venv/bin/python -m scripts.measure.backend_parts [--reps 2] [--merges 4]

The world: tests/test_evaluate.py's fixture data and random Llamas (hidden 128, 4 heads: head_dim 32, 2 layers,
float32), two task and two language experts, `--merges` of their layer swaps (bottom 1), and a checkpoint; MGSM
1-shot in two languages, Belebele 0-shot. Per command: wall seconds of the process (imports, task loading, each
merge built and loaded, evaluation) and its peak RSS; for `one`, the check that its files equal `split`'s byte for byte.
Prints one JSON line per run and a summary line of the medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from scripts import vllm_cpu_env

ROOT = Path(__file__).resolve().parents[2]
MGSM = {"shots": 1, "languages": ["en", "toy_swh"]}
BELEBELE = {"shots": 0}
CHILD = (
    "import json, resource, sys\nfrom layerswap.cli import main\nrc = main(json.loads(sys.argv[1]))\n"
    "print('RESULT ' + json.dumps({'rc': rc, 'peak_rss_gib': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss "
    "/ 2**20}), flush=True)\nsys.exit(rc)"
)


def world(root: Path, merges: int) -> list[tuple[str, Path]]:
    from scripts.fixture_world import make_data, make_model

    vocab = make_data(root / "data")
    for name, seed in [("task0", 0), ("task1", 1), ("lang0", 2), ("lang1", 3)]:
        make_model(root / name, vocab, seed=seed, hidden=128, layers=2)
    models = [("base", root / "task0")]
    for k in range(merges):
        i, j = divmod(k % 4, 2)
        recipe = root / f"r{k}.json"
        inputs = {"task": str(root / f"task{j}"), "lang": str(root / f"lang{i}")}
        recipe.write_text(json.dumps({"method": "layer_swap", "params": {"bottom": 1, "top": 0}, "inputs": inputs}))
        models.append((f"m/r{k}", recipe))
    return models


def command(root: Path, out: Path, models, backend: str, bench: dict) -> dict:
    argv = ["evaluate-merges", "--backend", backend, "--device", "cpu", "--dtype", "float32"]
    argv += ["--data-dir", str(root / "data"), "--out-dir", str(out), "--benchmarks-json", json.dumps(bench)]
    argv += ["--batch-size", "16", "--seed", "0", "--threads", "1"]
    argv += [a for m, src in models for a in ("--model", f"{m}={src}")]
    t0 = time.perf_counter()
    proc = vllm_cpu_env.run(
        ["python", "-c", CHILD, json.dumps(argv)],
        env_extra={"PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=1800,
    )
    wall = time.perf_counter() - t0
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode or not lines:
        raise SystemExit(f"{backend} {list(bench)}: failed: {proc.stderr[-1500:]}")
    return {"wall_s": round(wall, 1), "peak_rss_gib": round(json.loads(lines[-1][7:])["peak_rss_gib"], 3)}


def same_files(a: Path, b: Path) -> bool:
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    return files == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file()) and all(
        (a / f).read_bytes() == (b / f).read_bytes() for f in files
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--merges", type=int, default=4)
    a = p.parse_args()
    if why := vllm_cpu_env.unavailable():
        raise SystemExit(why)
    runs: dict[str, list[float]] = {"one": [], "split": []}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        models = world(root, a.merges)
        for rep in range(a.reps):
            one = command(
                root, root / f"one{rep}", models, "vllm", {"mgsm": MGSM, "belebele": {**BELEBELE, "backend": "hf"}}
            )
            hf = command(root, root / f"split{rep}", models, "hf", {"belebele": BELEBELE})
            vl = command(root, root / f"split{rep}", models, "vllm", {"mgsm": MGSM})
            equal = same_files(root / f"one{rep}", root / f"split{rep}")
            split = {"wall_s": round(hf["wall_s"] + vl["wall_s"], 1), "hf": hf, "vllm": vl}
            print(json.dumps({"rep": rep, "one": one, "split": split, "files_equal": equal}), flush=True)
            runs["one"].append(one["wall_s"])
            runs["split"].append(split["wall_s"])
    med = {k: round(statistics.median(v), 2) for k, v in runs.items()}
    print(json.dumps({"median_wall_s": med, "models": len(models), "reps": a.reps}))


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
