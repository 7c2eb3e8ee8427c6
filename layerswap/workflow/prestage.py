"""Pre-staging: every hub artefact a config needs, listed, checked and downloaded into the HF cache.

``layerswap prestage --configfile config/paper.yaml [--dry-run | --verify | --no-verify]``
    On a machine with internet (a login node): download every hub artefact the config needs into the HF cache
    (``storage.hf_home`` or the environment's ``HF_HOME``): the base model snapshot (safetensors, JSON and
    tokenizer files only), each (data source, language) dataset the mixes read, the FLORES dev/devtest sentences
    used to remove evaluation overlap, the evaluation datasets of the paper task set (``evaluation_artefacts``),
    and the extra base models of the ablations the config's ``ablations`` key selects (all when absent; e.g.
    ``different_base``); then counts each evaluation key's prompt tokens with the base's tokenizer for the plan
    (`layerswap token-counts`, layerswap/workflow/count_tokens.py). ``--dry-run`` prints the list and touches no
    network. The pre-flight check
    (`layerswap.data.preflight`) runs first and nothing is downloaded unless every artefact passes; ``--verify``
    runs only the check. A token comes from the environment (``HF_TOKEN``) or ``huggingface-cli login``; it is never
    printed or written anywhere.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Callable

from layerswap.benchmarks import MATH
from layerswap.data import hub, hub_retry
from layerswap.data.hub import MODEL_PATTERNS, describe, is_local_source, needed_sources, source_spec
from layerswap.errors import UserError
from layerswap.hf_cache import use_hf_home
from layerswap.train.gguf_base import is_gguf_source


def base_is_local(config: dict) -> bool:
    """A local directory, or a GGUF file (a path or a package's file, `layerswap.train.gguf_base`): nothing to stage."""
    source = config["base"]["source"]
    return is_local_source(source) or is_gguf_source(source)


def artefacts(config: dict, ablations_dir: str | Path | None = None) -> list[dict]:
    """Every hub artefact the config needs (with ablations_dir: also its selected ablations' extra bases),
    deduplicated, in a stable order."""
    if config["world"] != "hf":
        return []
    out: list[dict] = []
    base = config["base"]
    if not base_is_local(config):
        out.append(
            {
                "kind": "model",
                "hub_id": base["source"],
                "revision": base.get("revision"),
                "allow_patterns": MODEL_PATTERNS,
                "purpose": "base model",
            }
        )
    for name, lang in sorted(needed_sources(config), key=lambda k: (k[0], k[1])):
        spec = source_spec(config, name, lang)
        out.append(
            {
                "kind": "dataset",
                "hub_id": spec["hub_id"],
                "subset": spec["subset"],
                "split": spec["split"],
                "data_files": spec["data_files"],
                "revision": spec["revision"],
                "builder": spec["builder"],
                "builder_kwargs": spec["builder_kwargs"],
                "purpose": f"SFT data {name} ({lang})",
                "spec": spec,
            }
        )
        out += spec["flores"]
    out += evaluation_artefacts(config)
    if ablations_dir is not None:
        out += ablation_artefacts(config, ablations_dir)
    seen, unique = set(), []
    for item in out:
        key = (
            item["kind"],
            item["hub_id"],
            item.get("subset"),
            item.get("split"),
            item.get("data_files"),
            item.get("revision"),
            item.get("builder"),
            (item.get("spec") or {}).get("language_value"),
        )  # one check per language a filter selects
        if key not in seen:
            seen.add(key)
            unique.append(item)
    return unique


def ablation_artefacts(config: dict, ablations_dir: str | Path) -> list[dict]:
    """The extra base models of the ablations the `ablations` key selects (all when absent), e.g. different_base."""
    from layerswap.workflow import ablations as abl

    if config["world"] != "hf" or not Path(ablations_dir).is_dir():
        return []
    out = []
    for name in abl.enabled(config.get("ablations"), abl.available(ablations_dir)):
        for bname, base in abl.load(Path(ablations_dir) / f"{name}.yaml")["bases"].items():
            paper = base.get("paper") or {}
            if paper.get("source"):
                out.append(
                    {
                        "kind": "model",
                        "hub_id": paper["source"],
                        "revision": paper.get("revision"),
                        "allow_patterns": MODEL_PATTERNS,
                        "purpose": f"ablation {name}: base {bname}",
                    }
                )
    return out


def evaluation_artefacts(config: dict) -> list[dict]:
    """Every evaluation dataset (kind, hub_id, subset, split, columns, purpose) the paper task set can read for
    `config`; none for the toy world. Languages: each task's own list, else English + the targets; MGSM also
    `mgsm_languages`. Languages a benchmark lacks are left out (the evaluation reports them unavailable). Which
    splits a task reads is the benchmark table's (`layerswap.evaluation.paper_tasks.paper_artefacts`)."""
    from layerswap.evaluation.paper_tasks import PAPER_TASKS, lm_eval_task_root, paper_artefacts, paper_task

    if config.get("world") == "toy":
        return []
    tasks = (config.get("evaluation") or {}).get("tasks") or {}
    targets = ["en"] + [lang for lang in config.get("languages") or [] if lang != "en"]
    root = lm_eval_task_root()
    out, seen = [], set()
    for name, cfg in tasks.items():
        if name not in PAPER_TASKS:
            continue
        langs = list((cfg or {}).get("languages") or targets)
        langs += [
            lang for lang in targets + (config.get("mgsm_languages") or [] if name == MATH else []) if lang not in langs
        ]
        for lang in langs:
            keys = ([f"en-{lang}", f"{lang}-en"] if lang != "en" else []) if PAPER_TASKS[name].directions else [lang]
            for key in keys:
                if paper_task(name, key, root)[2]:
                    continue
                for item in paper_artefacts(name, key):
                    ident = (item["hub_id"], item["subset"], item["split"])
                    if ident not in seen:
                        seen.add(ident)
                        out.append({"kind": "dataset", **item, "purpose": f"evaluation: {name}"})
    return out


def prestage(
    config: dict,
    dry_run: bool = False,
    out=None,
    fetch_model: Callable[[dict], Path] | None = None,
    fetch_dataset: Callable[[dict], object] | None = None,
    ablations_dir: str | Path | None = None,
    policy: hub_retry.Policy = hub_retry.Policy(),
) -> list[dict]:
    """Download every artefact into the HF cache, each retried on a transient failure as `policy` says (a line per
    retry); an artefact that still fails is a FAIL line, the others are still fetched, and the command then stops
    with one line naming how many failed."""
    out = out or sys.stdout
    items = artefacts(config, ablations_dir)
    failed = []
    for item in items:
        print(("would fetch " if dry_run else "fetching ") + describe(item), file=out, flush=True)
        if dry_run:
            continue
        if item["kind"] == "model":
            fetch = fetch_model or (lambda i: hub.snapshot(i, local_files_only=False))
        else:
            fetch = fetch_dataset or hub.load_dataset
        try:
            hub_retry.call(describe(item), lambda: fetch(item), policy, out)
        except UserError as err:
            tries = f" (still failing after {policy.tries} tries)" if hub_retry.transient(err) else ""
            print(f"FAIL  {describe(item)}: {err}{tries}", file=out, flush=True)
            failed.append(item)
    where = "" if dry_run else f" in {os.environ.get('HF_HOME', '~/.cache/huggingface')}"
    print(f"{len(items) - len(failed)} artefacts {'listed' if dry_run else 'staged'}{where}", file=out, flush=True)
    if failed:
        raise UserError(
            f"{len(failed)} of {len(items)} artefacts could not be downloaded (the FAIL lines above); "
            "run `layerswap prestage` again: what is in the cache is kept"
        )
    return items


# ----------------------------------------------------------------------------------------------------------------
# CLI


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--configfile", required=True, help="workflow config, e.g. config/paper.yaml")
    parser.add_argument("--dry-run", action="store_true", help="list the artefacts; download nothing")
    parser.add_argument(
        "--verify",
        action="store_true",
        help="pre-flight check only: is every artefact reachable, its gate open to the token, "
        "loadable with the installed datasets/transformers, with the configs, splits, "
        "columns, language values and rows the config needs (one line each; exit 1 on any "
        "failure; downloads nothing)",
    )
    parser.add_argument("--no-verify", action="store_true", help="download without running the pre-flight check first")
    parser.add_argument(
        "--tries",
        type=int,
        default=hub_retry.Policy.tries,
        help="attempts per artefact when the Hub fails for a transient reason: a connection reset or refused, a "
        "timeout, 429 (its Retry-After waited), 5xx (default: %(default)s); gated, missing or bad answers fail at once",
    )
    parser.add_argument(
        "--retry-wait",
        type=float,
        default=hub_retry.Policy.first_wait,
        help=f"seconds before the first retry, doubling for each next one, at most {hub_retry.Policy.max_wait:g} s "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--hf-home",
        default=None,
        help="HF cache (default: storage.hf_home, else the site file's hf_home, else HF_HOME)",
    )
    parser.add_argument(
        "--ablations-dir",
        default=None,
        type=Path,
        help="ablation files whose extra bases to stage too, for the ablations the config's "
        "`ablations` key selects (default: the config's ablations_dir, from the current "
        "directory, i.e. run this from the repository root)",
    )


def run(args: argparse.Namespace) -> None:
    from layerswap.config import load_config
    from layerswap.workflow.site import Site, parse

    try:
        policy = hub_retry.Policy(tries=args.tries, first_wait=args.retry_wait)
    except ValueError as err:
        raise UserError(f"--tries / --retry-wait: {err}") from None
    config = load_config(args.configfile)
    site = Site.locate().is_file() and parse(Site.locate())  # the site file's cache, which the jobs will read
    use_hf_home(args.hf_home or (config.get("storage") or {}).get("hf_home") or (site.hf_home if site else None))
    ablations_dir = args.ablations_dir or Path(config["ablations_dir"])
    if args.verify or not (args.dry_run or args.no_verify):
        from layerswap.data.preflight import verify

        if not verify(artefacts(config, ablations_dir), config["base"].get("num_layers"), policy=policy):
            raise SystemExit(1)
        if args.verify:
            return
    prestage(config, dry_run=args.dry_run, ablations_dir=ablations_dir, policy=policy)
    if not args.dry_run and config["world"] == "hf":  # the plan's token counts, from what was just staged
        from layerswap.workflow.count_tokens import write_counts

        write_counts(config, None)
