"""`layerswap token-counts --configfile <config>`: count each evaluation key's prompt tokens as a job will send them.

lm-eval builds every request of every task the config evaluates exactly as an evaluation job does (the task plans of
`layerswap evaluate`, its few-shot seed, the config's shots and generation budgets), offline from the pre-staged
datasets (paper task set) or the toy world's files (`--data-dir`), and the base's tokenizer counts them (the
pre-staged base snapshot, or `--tokenizer DIR`). The counts (layerswap.workflow.token_counts.Lengths per benchmark and
key) go to `<HF cache>/layerswap/token_counts.json`, where `layerswap cost`, the jobs' batch sizes and time limits
read them (`--out` elsewhere). `layerswap prestage` runs this after its downloads. Deterministic for a fixed config and
data. Nothing is evaluated: no model is loaded, only its tokenizer.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import sys
import tempfile
from pathlib import Path

from layerswap.errors import UserError

log = logging.getLogger("layerswap.token_counts")


def tokenizer_dir(config: dict, given: Path | None) -> Path:
    if given is not None:
        return given
    base = config["base"]
    if Path(base["source"]).expanduser().is_dir():  # a local base directory
        return Path(base["source"]).expanduser()
    from layerswap.data.hub import MODEL_PATTERNS, snapshot

    item = {"hub_id": base["source"], "revision": base.get("revision"), "allow_patterns": MODEL_PATTERNS}
    return snapshot(item, local_files_only=True)


def count(config: dict, data_dir: Path | None = None, tokenizer: Path | None = None) -> dict:
    """The counts document of a config (see the module docstring)."""
    from transformers import AutoTokenizer

    from layerswap.evaluation.paper_tasks import paper_include_paths, plan_paper
    from layerswap.evaluation.tasks import (
        parse_benchmarks,
        plan_benchmarks,
        set_task_settings,
        task_leaves,
        write_task_yamls,
    )
    from layerswap.workflow.spec import Spec
    from layerswap.workflow.token_counts import VERSION, combine, count_task, settings_key, tokenizer_id

    evals = Spec(config).evals
    tasks = config["evaluation"]["tasks"]
    names = [b for b in tasks if not evals.skipped(b)]
    spec = parse_benchmarks(
        json.dumps({b: {**settings_key(tasks[b]), "languages": evals.task_languages(b)} for b in names})
    )
    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir(config, tokenizer)))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    seed = int(config["seed"])
    with tempfile.TemporaryDirectory(prefix="layerswap-count-") as tmp:
        os.environ["LM_HARNESS_CACHE_PATH"] = str(Path(tmp) / "cache")
        from lm_eval.tasks import TaskManager

        if config["world"] == "toy":
            if data_dir is None:
                raise UserError("--data-dir is required for a toy-world config (its evaluation files)")
            plans = plan_benchmarks(data_dir, spec)
            include = str(Path(tmp) / "tasks")
            task_names = write_task_yamls(plans, Path(include))
        else:
            plans = plan_paper(spec)
            include = paper_include_paths(plans)
            task_names = sorted({t.name for p in plans for t in p.run_tasks})
        task_dict = TaskManager(include_path=include, include_defaults=False).load(task_names)
        set_task_settings(task_dict, plans)
        out: dict[str, dict] = {}
        for plan in plans:
            keys = {}
            for t in plan.run_tasks:
                parts = []
                for leaf in task_leaves(task_dict, t.name):
                    task = task_dict["tasks"][leaf]
                    task.set_fewshot_seed(seed=seed)  # as `layerswap evaluate` does before every model
                    random.seed(seed)
                    task.build_all_requests(limit=None, rank=0, world_size=1)
                    parts.append(count_task(task.instances, tok, plan.max_new_tokens or 0))
                keys[t.key] = combine(parts)
                log.info("token-counts: %s %s: %s", plan.name, t.key, keys[t.key])
            out[plan.name] = {"settings": settings_key(tasks[plan.name]), "keys": keys}
    return {"version": VERSION, "tokenizer": tokenizer_id(config), "task_set": evals.task_set, "benchmarks": out}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--configfile", required=True, type=Path, help="workflow config, e.g. config/paper.yaml")
    parser.add_argument("--hf-home", default=None, help="HF cache (default: storage.hf_home, the site file's, HF_HOME)")
    parser.add_argument("--data-dir", type=Path, default=None, help="toy world: its evaluation files")
    parser.add_argument(
        "--tokenizer", type=Path, default=None, help="a model dir whose tokenizer counts (default: the base)"
    )
    parser.add_argument("--out", type=Path, default=None, help="default: <HF cache>/layerswap/token_counts.json")


def run(args: argparse.Namespace) -> None:
    from layerswap.config import load_config
    from layerswap.hf_cache import use_hf_home

    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    config = load_config(args.configfile)
    hf_home = args.hf_home or (config.get("storage") or {}).get("hf_home")
    use_hf_home(hf_home)
    write_counts(config, args.out, args.data_dir, args.tokenizer)


def write_counts(config: dict, out: Path | None, data_dir: Path | None = None, tokenizer: Path | None = None) -> None:
    """Count and write the counts file (`out`, default: in the HF cache HF_HOME names), atomically."""
    from layerswap.workflow.token_counts import counts_path

    out = out or counts_path(os.environ.get("HF_HOME"))  # the cache use_hf_home set (--hf-home, storage.hf_home)
    if out is None:
        raise UserError("token-counts: no HF cache (--hf-home, storage.hf_home or HF_HOME) and no --out")
    doc = count(config, data_dir, tokenizer)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(out)
    print(f"token counts of {len(doc['benchmarks'])} benchmarks written to {out}")
    print("the plan reads them where storage.hf_home (the config's, else the site file's) names this cache")
