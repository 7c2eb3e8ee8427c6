"""Expert-set ablations: an ablation that trains its own experts (extra SFT runs, possibly from another base) and
swaps them (layerswap/workflow/ablations.py plans the ablation; this module its expert sets).

An ablation may also train its own experts. ``expert_sets`` (a list) then replaces "the main experts" by a set of
extra runs, and every swap ``variant`` is applied to each set (table rows = set x variant)::

    bases:                                  # optional extra base models, by name
      b2:
        toy: {seed: 1, model: {}}           # toy world: toy_base again with another seed / base.toy_model overrides
        paper: {source: meta-llama/Meta-Llama-3-8B, revision: null}   # hf world: a hub id (pre-staged)
    expert_sets:
      - name: lr2                            # [A-Za-z0-9]+, part of run / config names
        label: "lr x2"
        experts: [math, languages]           # which main runs to copy (non-joint ones)
        scale: {lr: 2, num_samples: 1}       # multiply the copied run's (effective) values
        set: {peft_method: lora, lora: {r: 4}}  # then override values
        base: main                           # or a name in `bases`: fine-tune from that base
        lang_from: set                       # language experts of the swap: this set's (set) or the main ones (main)
        task_from: set                       # math experts of the swap: likewise
        allow_different_base: false          # put into the merge recipes (experts of two bases: needs true)

Each copied run ``<run>`` becomes ``ax_<ablation>_<set>_<run>`` (outside ``sft.runs``: the main selection never sees
it), checked by the same config check as ``sft.runs`` (so e.g. ``peft_method: prefix`` is refused with its one-line
message). Selection per (set, expert type): ``results/ablations/<ablation>/selection/<set>/<expert>.json``; merge
configs ``ax_<ablation>_<set>_<swap config name>``, built by ``ablation_merge_recipes`` and evaluated by the generic
merge evaluation rules. A toy base whose model differs in shape from the main one is refused at parse time naming the
first mismatching tensor and both shapes (the merge engine would refuse it the same way); paper-world bases are
checked by the engine at merge time.
"""

from __future__ import annotations

import copy
import re

from layerswap.errors import UserError
from layerswap.workflow.variants import check_mapping, describe, fail, n_lang, slug

EXPERT_SET_KEYS = {"name", "label", "experts", "scale", "set", "base", "lang_from", "task_from", "allow_different_base"}
BASE_KEYS = {"toy", "paper", "note"}
EXPERT_GROUPS = ("math", "languages")
#: prefix of the merge configs of expert-set ablations (their own recipe rule; the main merge_recipes skips them)
EXPERT_MERGE_PREFIX = "ax_"
SHAPE_KEYS = ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim")


def check_file(where: str, spec: dict) -> None:
    """The `bases` and `expert_sets` of an ablation file (`spec`, read at `where`): one line naming the first fault."""
    sets, bases = spec.get("expert_sets"), spec.get("bases") or {}
    if not isinstance(bases, dict):
        raise fail(f"{where}: bases", "must be a mapping name -> {toy, paper}")
    for name, base in bases.items():
        if not re.fullmatch(r"[A-Za-z0-9]+", str(name)) or not isinstance(base, dict) or set(base) - BASE_KEYS:
            raise fail(
                f"{where}: bases.{name}", f"needs a [A-Za-z0-9]+ name and keys among {', '.join(sorted(BASE_KEYS))}"
            )
    if sets is None:
        if bases:
            raise fail(f"{where}: bases", "are only used by expert_sets")
        return
    if not isinstance(sets, list) or not sets:
        raise fail(f"{where}: expert_sets", "must be a non-empty list")
    seen = set()
    for i, es in enumerate(sets):
        ew = f"{where}: expert_sets[{i}]"
        check_mapping(es, ew, EXPERT_SET_KEYS)
        name = es.get("name")
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9]+", name) or name in seen:
            raise fail(f"{ew}.name", f"needs a unique [A-Za-z0-9]+ name, got {name!r}")
        seen.add(name)
        experts = es.get("experts", list(EXPERT_GROUPS))
        if not isinstance(experts, list) or not experts or any(e not in EXPERT_GROUPS for e in experts):
            raise fail(f"{ew}.experts", f"{experts!r}: a non-empty list of {', '.join(EXPERT_GROUPS)}")
        for key in ("scale", "set"):
            if not isinstance(es.get(key, {}), dict):
                raise fail(f"{ew}.{key}", "must be a mapping")
        for key, factor in (es.get("scale") or {}).items():
            if isinstance(factor, bool) or not isinstance(factor, (int, float)) or factor <= 0:
                raise fail(f"{ew}.scale.{key}", f"expected a positive number, got {factor!r}")
        if es.get("base", "main") != "main" and es.get("base") not in bases:
            raise fail(f"{ew}.base", f"{es.get('base')!r} is not 'main' or a name in bases")
        for key in ("lang_from", "task_from"):
            if es.get(key, "set") not in ("set", "main"):
                raise fail(f"{ew}.{key}", "must be set or main")
            group = "languages" if key == "lang_from" else "math"
            if es.get(key, "set") == "set" and group not in experts:
                raise fail(f"{ew}.{key}", f"is 'set' but experts does not include {group}")
        if not isinstance(es.get("allow_different_base", False), bool):
            raise fail(f"{ew}.allow_different_base", "expected true or false")
    for i, v in enumerate(spec["variants"]):
        if isinstance(v, dict) and v.get("kind") not in ("bottom_top", "grid"):
            raise fail(f"{where}: variants[{i}]", "expert_sets ablations take bottom_top / grid variants only")


def _toy_shapes(model: dict, depth: int) -> dict[str, list[int]]:
    """Tensor shapes of the toy Llama for these model params (meta device: nothing is allocated)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=64, num_hidden_layers=depth, tie_word_embeddings=False, **model)
    with torch.device("meta"):
        m = LlamaForCausalLM(cfg)
    return {n: list(t.shape) for n, t in m.state_dict().items()}


def check_toy_base_shape(where: str, main_model: dict, other_model: dict, depth: int) -> None:
    """Refuse a second toy base of another shape, naming the first mismatching tensor and both shapes."""
    if all(main_model.get(k) == other_model.get(k) for k in SHAPE_KEYS):
        return
    a, b = _toy_shapes(main_model, depth), _toy_shapes(other_model, depth)
    for name in sorted(a, key=lambda n: [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", n)]):
        if a[name] != b.get(name):
            raise fail(
                where,
                f"tensor {name} has shape {b.get(name)} in this base but {a[name]} in the main base "
                "(bases of different shapes cannot be layer-swapped)",
            )


def plan(name: str, spec: dict, config: dict, variants: list[dict]) -> dict:
    """Extra runs, bases, selections and merge configs of an expert-set ablation (see the module docstring)."""
    from layerswap.config import check, effective_runs, expert_type, validate_config
    from layerswap.config_schema import schema_maximum

    toy = config["world"] == "toy"
    depth = int(config["base"]["num_layers"])
    bases = {}
    for bname, b in spec["bases"].items():
        where = f"ablation {name}: bases.{bname}"
        if toy:
            t = b.get("toy") or {}
            model = {**config["base"].get("toy_model", {}), **(t.get("model") or {})}
            check_toy_base_shape(where, config["base"].get("toy_model", {}), model, depth)
            seed, most = t.get("seed", config["seed"]), schema_maximum("seed")
            if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= most:
                raise fail(f"{where}.toy.seed", f"expected an integer from 0 to {most} (numpy's seeding), got {seed!r}")
            bases[bname] = {"model": model, "seed": seed}
        else:
            pb = b.get("paper") or {}
            if not pb.get("source"):
                raise fail(where, "needs paper.source (a hub id) on the paper config")
            bases[bname] = {"source": pb["source"], "revision": pb.get("revision")}
    main_runs = effective_runs(config)
    probe = copy.deepcopy(config)
    raw: dict[str, tuple[int, str]] = {}
    for i, es in enumerate(spec["expert_sets"]):
        for run, eff in main_runs.items():
            kind = expert_type(eff["expert"])
            if kind == "joint" or ("math" if kind == "math" else "languages") not in es.get("experts", EXPERT_GROUPS):
                continue
            new = {k: v for k, v in eff.items()}
            for key, factor in (es.get("scale") or {}).items():
                if not isinstance(new.get(key), (int, float)) or isinstance(new.get(key), bool):
                    raise fail(f"ablation {name}: expert_sets[{i}].scale.{key}", "is not a numeric run setting")
                value = new[key] * factor
                new[key] = int(round(value)) if isinstance(new[key], int) and float(value).is_integer() else value
            new.update(copy.deepcopy(es.get("set") or {}))
            rname = f"{EXPERT_MERGE_PREFIX}{name}_{es['name']}_{run}"
            probe["sft"]["runs"][rname] = new
            raw[rname] = (i, es["name"])
    try:
        validate_config(probe)
        check(probe)
    except UserError as err:
        raise UserError(f"ablation {name}: expert_sets: {err}") from None
    eff_probe = effective_runs(probe)
    runs = {r: eff_probe[r] for r in raw}
    run_base = {r: spec["expert_sets"][i].get("base", "main") for r, (i, _) in raw.items()}
    selections = {
        es["name"]: sorted({runs[r]["expert"] for r, (_, s) in raw.items() if s == es["name"]})
        for es in spec["expert_sets"]
    }
    merges, rows = {}, []
    configs = config["merges"]["configs"]
    for es in spec["expert_sets"]:
        for var in variants:
            label = f"{es.get('label') or es['name']} / {var['label']}"
            if var["merge"] is None:
                rows.append(
                    {"label": label, "config": "", "skipped": var["skipped"], "layers": "", "n_lang_layers": None}
                )
                continue
            same = [n for n, c in configs.items() if c == var["merge"]]
            cname = f"{EXPERT_MERGE_PREFIX}{name}_{es['name']}_{same[0] if same else slug(var['merge'])}"
            cfg = {**var["merge"], "allow_different_base": bool(es.get("allow_different_base", False))}
            merges[cname] = {
                "merge": cfg,
                "set": es["name"],
                "lang_from": es.get("lang_from", "set"),
                "task_from": es.get("task_from", "set"),
            }
            rows.append(
                {
                    "label": label,
                    "config": cname,
                    "skipped": "",
                    "layers": describe(cfg, depth),
                    "n_lang_layers": n_lang(cfg),
                }
            )
    return {
        "runs": runs,
        "run_base": run_base,
        "bases": bases,
        "selections": selections,
        "merges": merges,
        "rows": rows,
    }
