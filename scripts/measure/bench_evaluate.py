"""Wall time of `layerswap evaluate` in one process: a toy-sized model on MGSM for several in-memory weight sets.

    .venv/bin/python -m scripts.measure.bench_evaluate [--models 9] [--langs 5] [--items 100] [--shots 3] \
        [--threads 1] [--batch-size 64] [--hidden 64] [--layers 8] [--vocab 900] [--work DIR]

Builds (in a temp dir unless --work): a random LlamaForCausalLM (hidden 64, 8 layers, intermediate 3*hidden,
max_position_embeddings 256) with a word-level tokenizer of ~900 words, MGSM-like files for `--langs` languages with
`--items` scored items each (plus the 8-line few-shot pool), and `--models` merge recipes. Then it runs the
evaluation in a fresh child process, as a Snakemake job would, and splits the child's wall time into:
  start-up   interpreter start until the child's first line runs (measured by the parent)
  imports    torch + transformers + lm_eval (+ layerswap.evaluation.evaluate)
  tasks      writing the task YAMLs, TaskManager(include_path=..., include_defaults=False), TaskManager.load
  model load first model: from_pretrained + HFLM; later ones: build the merged state dict + load_state_dict
  evaluate   lm_eval.evaluator.evaluate per model (+ writing its JSON files)
The models are `--models` layer-swap recipes (bottom 2, top 1) over 3 "task" x 3 "language" experts (base weights plus
seeded noise, saved as checkpoints) built in memory by merge.engine.build_state_dict with one shared ExpertCache;
`--standin-merge` replaces layerswap.merge by a stand-in (base weights plus seeded noise, no checkpoints read).
A random model never emits "\n", so every MGSM generation runs the full max_gen_toks (32): an upper bound; a trained
toy model stops after ~16 tokens ("3 + 4 = 7 . the answer is 7 \n").
"""

from __future__ import annotations

import time

T_CHILD_START = time.time()

import argparse  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import types  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def build_world(work: Path, a: argparse.Namespace) -> list[str]:
    import torch
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from scripts.measure.common import swap_recipe  # (here: the child's import timings start without torch)

    rng = random.Random(0)
    langs = ["en", "toy_swh", "toy_tel", "toy_ben", "toy_jpn"][: a.langs]
    n_words = max(50, a.vocab - 250)
    words = [f"w{i}" for i in range(n_words)]
    per_lang = {lang: words[i :: len(langs)] for i, lang in enumerate(langs)}
    data = work / "data"
    data.mkdir(parents=True, exist_ok=True)
    for lang in langs:
        w = per_lang[lang]
        rows = []
        for _ in range(a.items + 8):
            x, y, z = rng.randint(2, 60), rng.randint(2, 30), rng.randint(1, 20)
            name, obj = rng.choice(w), rng.choice(w)
            q = (
                f"{name} {rng.choice(w)} {x} {obj} . {name} {rng.choice(w)} {y} {rng.choice(w)} . "
                f"{name} {rng.choice(w)} {z} . {rng.choice(w)} {rng.choice(w)} {obj} {name} {rng.choice(w)}"
            )
            ans = x + y - z
            rows.append(
                {
                    "question": q,
                    "answer": f"{x} + {y} = {x + y} . {x + y} - {z} = {ans} . {w[0]} {w[1]} {w[2]} {ans}",
                    "answer_number": ans,
                    "equation_solution": f"{x}+{y}={x + y}; {x + y}-{z}={ans}",
                }
            )
        (data / f"mgsm_{lang}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    specials = ["<pad>", "<unk>", "<s>", "</s>", "\n"]
    tokens = specials + ["Q:", "A:", ".", "+", "-", "=", *langs, *[str(i) for i in range(-50, 200)], *words]
    tok = Tokenizer(models.WordLevel({t: i for i, t in enumerate(dict.fromkeys(tokens))}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex("\n"), "isolated"), pre_tokenizers.Split(Regex(r"[^\S\n]+"), "removed")]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", unk_token="<unk>", bos_token="<s>", eos_token="</s>"
    )
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=tok.get_vocab_size(),
        hidden_size=a.hidden,
        intermediate_size=3 * a.hidden,
        num_hidden_layers=a.layers,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=256,
        bos_token_id=2,
        eos_token_id=3,
        pad_token_id=0,
        tie_word_embeddings=False,
    )
    base = work / "base"
    model = LlamaForCausalLM(cfg)
    model.save_pretrained(base)
    fast.save_pretrained(base)
    recipes = []
    if a.standin_merge:
        for i in range(a.models):
            p = work / "recipes" / f"m{i}.json"
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(json.dumps({"base": str(base), "bench_seed": i}))
            recipes.append(f"merge/m{i}={p}")
    else:
        # experts = base + small seeded noise, as checkpoints; recipes = layer swaps of every (lang, task) pair
        n_side = max(1, int(round(a.models**0.5)))
        experts = {}
        for kind in ("task", "lang"):
            for j in range(n_side):
                g = torch.Generator().manual_seed(1000 * (kind == "lang") + j)
                with torch.no_grad():
                    expert = LlamaForCausalLM(cfg)
                    expert.load_state_dict(
                        {k: v + 0.01 * torch.randn(v.shape, generator=g) for k, v in model.state_dict().items()}
                    )
                d = work / "experts" / f"{kind}{j}"
                expert.save_pretrained(d)
                fast.save_pretrained(d)
                experts[kind, j] = d
        pairs = [(i, j) for i in range(n_side) for j in range(n_side)][: a.models]
        for i, j in pairs:
            task, lang = experts["task", j], experts["lang", i]
            p = swap_recipe(work / "recipes" / f"l{i}m{j}.json", task, lang, {"bottom": 2, "top": 1}, base)
            recipes.append(f"merge/l{i}m{j}={p}")
    print(
        f"world: {len(langs)} languages x {a.items} items, vocab {tok.get_vocab_size()}, "
        f"{sum(t.numel() for t in LlamaForCausalLM(cfg).parameters()) / 1e6:.2f}M parameters",
        file=sys.stderr,
    )
    return recipes


def standin_merges(model_args: list[str]):
    """In place of the layerswap.merge package: (the job's models, a merger) where a merge is the base weights plus
    seeded noise, no checkpoint read."""
    import torch
    from safetensors.torch import load_file

    class Merger:
        def __init__(self) -> None:
            self.cache: dict = {}

        def changes(self, recipe, held):
            base_dir = recipe.model_dir
            if base_dir not in self.cache:
                self.cache[base_dir] = load_file(str(Path(base_dir) / "model.safetensors"))
            g = torch.Generator().manual_seed(int(recipe.seed))
            state = {
                k: v + 0.01 * torch.randn(v.shape, generator=g, dtype=v.dtype) for k, v in self.cache[base_dir].items()
            }
            return {k: (f"{recipe.seed}", 0) for k in state}, state

        def order(self, recipes):
            return list(range(len(recipes)))

    def recipe(path: str):
        doc = json.loads(Path(path).read_text())
        return types.SimpleNamespace(
            model_dir=doc["base"], seed=doc["bench_seed"], hash=None, path=Path(path), name=Path(path).name
        )

    models = [(m.partition("=")[0], recipe(m.partition("=")[2])) for m in model_args]
    return models, Merger()


def child(a: argparse.Namespace) -> None:
    from layerswap.evaluation import evaluate as ev
    from scripts.measure.common import evaluate_args

    parser = argparse.ArgumentParser()
    ev.add_arguments(parser)
    work = Path(a.work)
    bench = {"mgsm": {"shots": a.shots}}
    argv = evaluate_args(work / "data", work / "evals", bench, a.batch_size, a.threads, a.model_args)
    t_run = time.time()
    if a.standin_merge:
        timings = ev.run(parser.parse_args(argv), *standin_merges(a.model_args))
    else:
        from layerswap.evaluation import evaluate_merges

        timings = evaluate_merges.run(parser.parse_args(argv))
    timings["script_before_run"] = t_run - T_CHILD_START
    timings["child_start_epoch"] = T_CHILD_START
    timings["child_end_epoch"] = time.time()
    print("TIMINGS " + json.dumps(timings), flush=True)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--models", type=int, default=9)
    p.add_argument("--langs", type=int, default=5)
    p.add_argument("--items", type=int, default=100)
    p.add_argument("--shots", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--vocab", type=int, default=900)
    p.add_argument("--work", default=None)
    p.add_argument(
        "--standin-merge",
        action="store_true",
        help="perturbed copies of the base instead of layerswap.merge layer swaps",
    )
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--model-args", nargs="*", default=[], help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        child(a)
        return
    with tempfile.TemporaryDirectory(prefix="bench-eval-") as tmp:
        work = Path(a.work or tmp)
        recipes = build_world(work, a)
        cmd = [
            sys.executable,
            "-m",
            "scripts.measure.bench_evaluate",
            "--child",
            "--work",
            str(work),
            "--shots",
            str(a.shots),
            "--threads",
            str(a.threads),
            "--batch-size",
            str(a.batch_size),
            *(["--standin-merge"] if a.standin_merge else []),
            "--model-args",
            *recipes,
        ]
        t0 = time.time()
        done = subprocess.run(
            cmd, capture_output=True, text=True, env={**__import__("os").environ, "PYTHONPATH": str(ROOT)}
        )
        wall = time.time() - t0
        if done.returncode != 0:
            sys.stderr.write(done.stderr)
            raise SystemExit(done.returncode)
        sys.stderr.write("".join(l + "\n" for l in done.stderr.splitlines() if l.startswith("evaluate:")))
        t = json.loads(next(l for l in done.stdout.splitlines() if l.startswith("TIMINGS "))[8:])
        startup = t["child_start_epoch"] - t0
        per = t["per_model"]
        print(
            f"child wall time            {wall:7.2f} s  ({a.models} models, {a.langs} langs x {a.items} items, "
            f"{a.shots}-shot, threads {a.threads}, batch {a.batch_size})"
        )
        print(f"  interpreter start-up     {startup:7.2f} s")
        print(f"  imports (torch, lm_eval) {t['script_before_run'] + t['imports']:7.2f} s")
        print(f"  task loading             {t['tasks']:7.2f} s")
        ph = per[0]["load_phases"]
        print(
            f"  model load, first        {per[0]['load']:7.2f} s  (state dict {ph.get('state_dict', 0):.2f}, "
            f"from_pretrained + HFLM {ph.get('build', 0):.2f}, load_state_dict {ph.get('load_state_dict', 0):.2f})"
        )
        rest = [m["load"] for m in per[1:]]
        if rest:
            print(
                f"  model load, others       {sum(rest) / len(rest):7.2f} s each (build state dict + load_state_dict)"
            )
        evs = [m["evaluate"] for m in per]
        print(f"  evaluate, first model    {evs[0]:7.2f} s  (builds + caches the requests)")
        if evs[1:]:
            print(
                f"  evaluate, others         {sum(evs[1:]) / len(evs[1:]):7.2f} s each "
                f"(min {min(evs[1:]):.2f}, max {max(evs[1:]):.2f})"
            )
            cpus = [m["cpu"] for m in per[1:]]
            print(
                f"  CPU time per model       {sum(cpus) / len(cpus):7.2f} s (process CPU; wall minus this = waiting "
                f"for a core on a busy machine)"
            )
        print(f"  writing outputs          {t['write']:7.2f} s total")
        print(f"  interpreter exit         {t0 + wall - t['child_end_epoch']:7.2f} s")
        print(
            f"  child CPU time           {t['cpu_total']:7.2f} s until run() returned; load average now "
            f"{open('/proc/loadavg').read().split()[0]} on {__import__('os').cpu_count()} cores"
        )
        print(
            f"  per model, amortised     {(wall - startup) / a.models:7.2f} s; fixed cost "
            f"{startup + t['script_before_run'] + t['imports'] + t['tasks']:.2f} s"
        )


if __name__ == "__main__":
    main()
