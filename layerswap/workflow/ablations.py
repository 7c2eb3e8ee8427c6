"""Ablations as declarative experiments: `config/ablations/<name>.yaml` -> extra merge configs, a table and a figure.

An ablation file lists *variants* of the layer swap, or of any registered merge method (kind ``method``,
layerswap/workflow/sweeps.py); each resolves, for the workflow's base model depth L, to one merge config. At parse time (rules/common.smk) ``plan`` returns those configs beside the config, which it
leaves unchanged, and the rules look merge configs up in ``merges.configs`` plus these (``spec.merge_configs``,
layerswap/workflow/spec.py), so the generic ``merge_recipes`` / ``evaluate_merges`` rules build and evaluate them
for every language and expert pair; ``layerswap ablation-table`` then turns their evaluation files into
``results/ablations/<name>/table.{csv,md}`` and ``figure.{svg,png}``.

Ablation file
-------------
::

    title: Swapped-layer count            # table/figure title
    plan: "seed 002: ..."                  # where the ablation comes from (free text, shown in the Markdown)
    metrics: [mgsm]                        # mgsm (always first), then any benchmark (layerswap/benchmarks.py)
    reference_depth: 32                    # depth the `scaled` layer counts are given for (optional)
    variants:
      - {kind: bottom_top, bottom: 5, top: 2, scaled: true, label: "b5 u2"}
      - {kind: grid, transition_bottom: [0, 1, 2], transition_top: [0, 1, 2]}
      - {kind: middle}
      - {kind: alternating, offset: 0}
      - {kind: random, seed: 0, draws: 3}
      - {kind: layers, lang_layers: [0, 1, 7]}
      - {kind: method, method: ties, density: [0.2, 0.5]}   # any registered method's params (sweeps.py)

Variant kinds (L = base.num_layers; "default" = the value of ``merges.default_swap``):

* ``bottom_top``: ``bottom``, ``top``, ``transition_bottom``, ``transition_top`` (each an int or ``default``;
  ``bottom``/``top`` default to ``default``, transitions to 0). With ``scaled: true`` bottom and top are counts for a
  ``reference_depth``-layer model, scaled to L as ``round_half_up(v * L / reference_depth)``, at least 1 when v > 0
  (so a swap the plan asks for never vanishes on a small model). Transition counts are never scaled.
* ``grid``: like ``bottom_top`` but any field may be a list; the cartesian product, in order.
* ``middle``: the default swap's number of language layers n = bottom + top, as one centred block
  ``[(L - n) // 2, (L - n) // 2 + n)``.
* ``alternating``: n layers, no two adjacent: from the layers of parity ``offset`` (0: 0, 2, 4, ...; 1: 1, 3, ...)
  the n evenly spread ones, candidate index ``floor((i + 0.5) * m / n)`` for i < n (m candidates).
* ``random``: ``draws`` sets of n layers, draw d uses ``random.Random(seed + d).sample(range(L), n)`` (sorted).
* ``layers``: explicit ``lang_layers`` (indices for this depth).
* ``method``: a merge config of any registered method (``method``), its params given or swept as lists
  (layerswap/workflow/sweeps.py); what the others leave at the default swap's values, it leaves at the method's
  defaults.

Location variants (middle/alternating/random/layers) have no transition layers. A variant that does not fit the
model (layers past L, or n > L) is kept as a table row marked ``skipped`` with the reason, and builds nothing.

Expert sets (extra SFT runs)
----------------------------
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

Merge config names
------------------
``abl_b<b>u<u>t<tb><tu>`` or ``abl_L<i>_<j>_...`` (the resolved layers, not the variant label), so variants that
resolve to the same layers share one config (and its evaluations) across ablations; a variant equal to a config
already in ``merges.configs`` (e.g. the default swap) reuses that config's name and evaluations.
"""

from __future__ import annotations

import argparse
import copy
import itertools
import math
import random
import re
from pathlib import Path
from typing import Any

from layerswap.benchmarks import BENCHMARKS, NAMES
from layerswap.contracts import pair_ids, read_text
from layerswap.errors import UserError, yaml_problem
from layerswap.jsonl import json_object
from layerswap.merge.methods.layer_swap import overflow
from layerswap.merge.params import config_defaults
from layerswap.merge.registry import SWAP
from layerswap.workflow import sweeps

KINDS = ("bottom_top", "grid", "middle", "alternating", "random", "layers", "method")
METRICS = NAMES  # the benchmarks (layerswap/benchmarks.py)
SWAP_FIELDS = ("bottom", "top", "transition_bottom", "transition_top")
VARIANT_KEYS = {
    "bottom_top": {"kind", "label", "scaled", *SWAP_FIELDS},
    "grid": {"kind", "label", "scaled", *SWAP_FIELDS},
    "middle": {"kind", "label"},
    "alternating": {"kind", "label", "offset"},
    "random": {"kind", "label", "seed", "draws"},
    "layers": {"kind", "label", "lang_layers"},
    "method": sweeps.BASE_KEYS,  # and the method's params (sweeps.allowed_keys)
}
FILE_KEYS = {"title", "plan", "metrics", "reference_depth", "variants", "note", "expert_sets", "bases"}
EXPERT_SET_KEYS = {"name", "label", "experts", "scale", "set", "base", "lang_from", "task_from",
                   "allow_different_base"}
BASE_KEYS = {"toy", "paper", "note"}
EXPERT_GROUPS = ("math", "languages")
#: prefix of the merge configs of expert-set ablations (their own recipe rule; the main merge_recipes skips them)
EXPERT_MERGE_PREFIX = "ax_"
LAYER_SWAP_DEFAULTS = config_defaults("layer_swap")  # what config validation fills in: variants compare equal
# table columns per language, after `language`/`variant`
COLUMNS = ["ablation", "variant", "config", "layers", "n_lang_layers", "language", "language_name", "n_pairs",
           *(f"{m}_{s}" for m in METRICS for s in ("avg", "max")), "note"]
# per metric: 95% interval of avg and max (layerswap.report.intervals; none for a corpus metric) and items per model
COLUMNS += [f"{m}_{c}" for m in METRICS
            for c in (("n",) if BENCHMARKS[m].corpus else ("avg_lo", "avg_hi", "max_lo", "max_hi", "n"))]


def _fail(where: str, message: str) -> UserError:
    return UserError(f"{where}: {message}")


def _check_mapping(value, where: str, allowed: set[str]) -> None:
    """A dict whose keys are all in `allowed`, else one line naming the first unknown key."""
    if not isinstance(value, dict):
        raise _fail(where, "expected a mapping")
    extra = sorted(set(value) - allowed)
    if extra:
        raise _fail(where, f"unknown key '{extra[0]}'; allowed: {', '.join(sorted(allowed))}")


# ----------------------------------------------------------------------------------------------------------------
# loading and expansion


def enabled(value: Any, available: list[str]) -> list[str]:
    """The `ablations` config value (list, comma-separated string or 'all'; absent: all) as a list of names."""
    if value is None:
        return list(available)
    if value in ("", []):
        return []
    if isinstance(value, str):
        names = available if value.strip() == "all" else [v.strip() for v in value.split(",") if v.strip()]
    else:
        names = [str(v) for v in value]
    for name in names:
        if name not in available:
            raise UserError(f"config key 'ablations': unknown ablation '{name}'; allowed: {', '.join(available)}")
    return list(dict.fromkeys(names))


def available(ablations_dir: str | Path) -> list[str]:
    return sorted(p.stem for p in Path(ablations_dir).glob("*.yaml"))


def load(path: str | Path) -> dict:
    """Read and check one ablation file (structure only; depth-dependent checks happen in `expand`)."""
    import yaml

    path = Path(path)
    text = read_text(path, "ablation file")  # missing, unreadable or not UTF-8: one line naming the file
    try:
        spec = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise UserError(f"ablation file {path} {yaml_problem(err)}") from None
    where = str(path)
    _check_mapping(spec, where, FILE_KEYS)
    variants = spec.get("variants")
    if not isinstance(variants, list) or not variants:
        raise _fail(f"{where}: variants", "must be a non-empty list")
    metrics = spec.get("metrics", ["mgsm"])
    if not isinstance(metrics, list) or "mgsm" not in metrics or any(m not in METRICS for m in metrics):
        raise _fail(f"{where}: metrics", f"{metrics!r} must be a list containing mgsm; allowed: {', '.join(METRICS)}")
    _load_expert_sets(where, spec)
    texts = [(k, spec.get(k)) for k in ("title", "plan", "note")]
    texts += [(f"variants[{i}].label", v.get("label")) for i, v in enumerate(variants) if isinstance(v, dict)]
    for key, text in texts:
        if isinstance(text, str) and re.search(r"\{\s*[.\w]+\s*[,}]", text):  # they reach a rule's params string
            raise _fail(f"{where}: {key}", "must not contain {name} or {name, ...} (Snakemake reads it in params as a "
                        "wildcard)")
    for i, v in enumerate(variants):
        vw = f"{where}: variants[{i}]"
        if not isinstance(v, dict) or v.get("kind") not in KINDS:
            raise _fail(vw, f"needs kind; allowed: {', '.join(KINDS)}")
        keys = sweeps.allowed_keys(v, vw) if v["kind"] == "method" else VARIANT_KEYS[v["kind"]]
        extra = sorted(set(v) - keys)
        if extra:
            raise _fail(vw, f"unknown key '{extra[0]}' for kind {v['kind']}; allowed: {', '.join(sorted(keys))}")
        if v.get("scaled") and not isinstance(spec.get("reference_depth"), int):
            raise _fail(vw, "scaled: true needs an integer reference_depth in the file")
    return {"name": path.stem, "title": spec.get("title", path.stem), "plan": spec.get("plan", ""),
            "note": spec.get("note", ""), "metrics": list(dict.fromkeys(metrics)),
            "reference_depth": spec.get("reference_depth"), "variants": variants,
            "expert_sets": spec.get("expert_sets") or [], "bases": spec.get("bases") or {}}


def _load_expert_sets(where: str, spec: dict) -> None:
    import re

    sets, bases = spec.get("expert_sets"), spec.get("bases") or {}
    if not isinstance(bases, dict):
        raise _fail(f"{where}: bases", "must be a mapping name -> {toy, paper}")
    for name, base in bases.items():
        if not re.fullmatch(r"[A-Za-z0-9]+", str(name)) or not isinstance(base, dict) or set(base) - BASE_KEYS:
            raise _fail(f"{where}: bases.{name}", f"needs a [A-Za-z0-9]+ name and keys among {', '.join(sorted(BASE_KEYS))}")
    if sets is None:
        if bases:
            raise _fail(f"{where}: bases", "are only used by expert_sets")
        return
    if not isinstance(sets, list) or not sets:
        raise _fail(f"{where}: expert_sets", "must be a non-empty list")
    seen = set()
    for i, es in enumerate(sets):
        ew = f"{where}: expert_sets[{i}]"
        _check_mapping(es, ew, EXPERT_SET_KEYS)
        name = es.get("name")
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9]+", name) or name in seen:
            raise _fail(f"{ew}.name", f"needs a unique [A-Za-z0-9]+ name, got {name!r}")
        seen.add(name)
        experts = es.get("experts", list(EXPERT_GROUPS))
        if not isinstance(experts, list) or not experts or any(e not in EXPERT_GROUPS for e in experts):
            raise _fail(f"{ew}.experts", f"{experts!r}: a non-empty list of {', '.join(EXPERT_GROUPS)}")
        for key in ("scale", "set"):
            if not isinstance(es.get(key, {}), dict):
                raise _fail(f"{ew}.{key}", "must be a mapping")
        for key, factor in (es.get("scale") or {}).items():
            if isinstance(factor, bool) or not isinstance(factor, (int, float)) or factor <= 0:
                raise _fail(f"{ew}.scale.{key}", f"expected a positive number, got {factor!r}")
        if es.get("base", "main") != "main" and es.get("base") not in bases:
            raise _fail(f"{ew}.base", f"{es.get('base')!r} is not 'main' or a name in bases")
        for key in ("lang_from", "task_from"):
            if es.get(key, "set") not in ("set", "main"):
                raise _fail(f"{ew}.{key}", "must be set or main")
            group = "languages" if key == "lang_from" else "math"
            if es.get(key, "set") == "set" and group not in experts:
                raise _fail(f"{ew}.{key}", f"is 'set' but experts does not include {group}")
        if not isinstance(es.get("allow_different_base", False), bool):
            raise _fail(f"{ew}.allow_different_base", "expected true or false")
    for i, v in enumerate(spec["variants"]):
        if isinstance(v, dict) and v.get("kind") not in ("bottom_top", "grid"):
            raise _fail(f"{where}: variants[{i}]", "expert_sets ablations take bottom_top / grid variants only")


def scale(value: int, depth: int, reference: int) -> int:
    """A layer count given for a `reference`-layer model, scaled to `depth` layers (half up, >= 1 if > 0)."""
    if value <= 0:
        return 0
    return max(1, math.floor(value * depth / reference + 0.5))


def _default_swap(config: dict) -> dict:
    name = config["merges"]["default_swap"]
    cfg = config["merges"]["configs"][name]
    if cfg.get("lang_layers") is not None:
        raise UserError(f"merges.default_swap '{name}' uses lang_layers; ablations need one with bottom/top")
    return cfg


def _int(where: str, value: Any, default: int) -> int:
    if value == "default":
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _fail(where, f"expected a non-negative integer or 'default', got {value!r}")
    return value


def _layer_config(layers: list[int]) -> dict:
    return {"method": "layer_swap", **LAYER_SWAP_DEFAULTS, "lang_layers": sorted(layers)}


def _bt_config(b: int, u: int, tb: int, tu: int) -> dict:
    return {"method": "layer_swap", **LAYER_SWAP_DEFAULTS, "bottom": b, "top": u,
            "transition_bottom": tb, "transition_top": tu}


def _slug(cfg: dict) -> str:
    if cfg["method"] != SWAP:
        return sweeps.slug(cfg)
    if cfg.get("lang_layers") is not None:
        return sweeps.slug(cfg, "abl_L" + "_".join(str(x) for x in cfg["lang_layers"]))
    return sweeps.slug(cfg, f"abl_b{cfg['bottom']}u{cfg['top']}t{cfg['transition_bottom']}{cfg['transition_top']}")


def describe(cfg: dict, depth: int) -> str:
    """Language layers of a layer-swap config as text: 'b=.. u=.. (lang 0,1,7)' for bottom/top, the index list
    otherwise ('' for another method: its variant label names its params)."""
    if cfg["method"] != SWAP:
        return ""
    if cfg.get("lang_layers") is not None:
        return "lang " + ",".join(str(x) for x in cfg["lang_layers"])
    b, u, tb, tu = (cfg[k] for k in SWAP_FIELDS)
    text = f"b={b} u={u} tb={tb} tu={tu}"
    lang = list(range(b)) + list(range(depth - u, depth))
    return text + (f" (lang {','.join(map(str, lang))})" if lang else " (no lang layers)")


def _n_lang(cfg: dict) -> int | None:
    if cfg["method"] != SWAP:
        return None
    return len(cfg["lang_layers"]) if cfg.get("lang_layers") is not None else cfg["bottom"] + cfg["top"]


def expand(spec: dict, config: dict) -> list[dict]:
    """Variants of an ablation for this config: [{label, merge (config dict or None), skipped (reason or '')}]."""
    depth = int(config["base"]["num_layers"])
    d_b = d_u = d_tb = d_tu = 0
    if any(v["kind"] != "method" for v in spec["variants"]):  # the swap kinds start from the default swap
        dflt = _default_swap(config)
        d_b, d_u = int(dflt["bottom"]), int(dflt["top"])
        d_tb, d_tu = int(dflt.get("transition_bottom") or 0), int(dflt.get("transition_top") or 0)
    n = d_b + d_u
    ref = spec.get("reference_depth")
    out: list[dict] = []

    def add(label: str, cfg: dict | None, skipped: str = "") -> None:
        out.append({"label": label, "merge": cfg, "skipped": skipped})

    for i, v in enumerate(spec["variants"]):
        where = f"ablation {spec['name']}: variants[{i}]"
        kind = v["kind"]
        if kind == "method":
            for label, cfg, skipped in sweeps.expand(where, v, depth):
                add(label, cfg, skipped)
            continue
        if kind in ("bottom_top", "grid"):
            fields = {k: v.get(k, "default") for k in SWAP_FIELDS}
            grid = {k: (val if isinstance(val, list) else [val]) for k, val in fields.items()}
            if kind == "bottom_top" and any(isinstance(val, list) for val in fields.values()):
                raise _fail(where, "lists need kind: grid")
            for combo in itertools.product(*(grid[k] for k in SWAP_FIELDS)):
                raw = dict(zip(SWAP_FIELDS, combo))
                defaults = {"bottom": d_b, "top": d_u, "transition_bottom": d_tb, "transition_top": d_tu}
                vals = {k: _int(f"{where}.{k}", raw[k], defaults[k]) for k in SWAP_FIELDS}
                given = f"b{raw['bottom']} u{raw['top']}"
                if v.get("scaled"):
                    for k in ("bottom", "top"):
                        if raw[k] != "default":
                            vals[k] = scale(vals[k], depth, ref)
                label = v.get("label") if kind == "bottom_top" and v.get("label") else None
                if label is None:
                    label = (f"{given}@{ref}L -> b{vals['bottom']} u{vals['top']}" if v.get("scaled")
                             else f"b{vals['bottom']} u{vals['top']}")
                    label += f" tb{vals['transition_bottom']} tu{vals['transition_top']}"
                counts = overflow(vals, depth)
                if counts is not None:
                    add(label, None, f"b+tb+tu+u = {sum(counts)} exceeds the {depth} layers of the model")
                else:
                    add(label, _bt_config(vals["bottom"], vals["top"], vals["transition_bottom"],
                                          vals["transition_top"]))
            continue
        if kind == "layers":
            layers = v.get("lang_layers")
            if not isinstance(layers, list) or not layers or any(
                    isinstance(x, bool) or not isinstance(x, int) or x < 0 for x in layers) or len(set(layers)) != len(layers):
                raise _fail(f"{where}.lang_layers", f"expected a list of distinct layer indices, got {layers!r}")
            label = v.get("label") or "layers " + ",".join(map(str, sorted(layers)))
            bad = [x for x in layers if x >= depth]
            add(label, None if bad else _layer_config(layers),
                f"layer {bad[0]} is outside the {depth}-layer model" if bad else "")
            continue
        if n == 0 or n > depth:
            add(v.get("label") or kind, None, f"the default swap has {n} language layers; needs 1..{depth}")
            continue
        if kind == "middle":
            start = (depth - n) // 2
            add(v.get("label") or f"middle {n}", _layer_config(list(range(start, start + n))))
        elif kind == "alternating":
            offset = _int(f"{where}.offset", v.get("offset", 0), 0)
            cands = list(range(offset % 2, depth, 2))
            label = v.get("label") or f"alternating {n} ({'even' if offset % 2 == 0 else 'odd'})"
            if n > len(cands):
                add(label, None, f"{n} non-adjacent layers of parity {offset % 2} do not fit {depth} layers")
            else:
                add(label, _layer_config([cands[math.floor((j + 0.5) * len(cands) / n)] for j in range(n)]))
        elif kind == "random":
            seed = _int(f"{where}.seed", v.get("seed", 0), 0)
            draws = _int(f"{where}.draws", v.get("draws", 1), 1)
            if draws < 1:
                raise _fail(f"{where}.draws", "must be >= 1")
            for d in range(draws):
                layers = sorted(random.Random(seed + d).sample(range(depth), n))
                add(f"{v.get('label') or 'random'} {n} (seed {seed + d})", _layer_config(layers))
    return out


def assign_names(variants: list[dict], configs: dict) -> dict[str, dict]:
    """Give each buildable variant a merge config name (reusing an equal existing config); return the new ones."""
    new: dict[str, dict] = {}
    for var in variants:
        cfg = var["merge"]
        if cfg is None:
            var["config"] = ""
            continue
        same = [name for name, c in configs.items() if c == cfg]
        name = same[0] if same else _slug(cfg)
        if name in configs and configs[name] != cfg:
            raise UserError(f"merge config name '{name}' is taken by a different config in merges.configs")
        var["config"] = name
        if name not in configs:
            new[name] = cfg
    return new


SHAPE_KEYS = ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim")


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
            raise _fail(where, f"tensor {name} has shape {b.get(name)} in this base but {a[name]} in the main base "
                        "(bases of different shapes cannot be layer-swapped)")


def _expert_sets(name: str, spec: dict, config: dict, variants: list[dict]) -> dict:
    """Extra runs, bases, selections and merge configs of an expert-set ablation (see the module docstring)."""
    from layerswap.config import check, effective_runs, expert_type, validate_config

    toy = config["world"] == "toy"
    depth = int(config["base"]["num_layers"])
    bases = {}
    for bname, b in spec["bases"].items():
        where = f"ablation {name}: bases.{bname}"
        if toy:
            t = b.get("toy") or {}
            model = {**config["base"].get("toy_model", {}), **(t.get("model") or {})}
            check_toy_base_shape(where, config["base"].get("toy_model", {}), model, depth)
            bases[bname] = {"model": model, "seed": int(t.get("seed", config["seed"]))}
        else:
            pb = b.get("paper") or {}
            if not pb.get("source"):
                raise _fail(where, "needs paper.source (a hub id) on the paper config")
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
                    raise _fail(f"ablation {name}: expert_sets[{i}].scale.{key}", "is not a numeric run setting")
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
    selections = {es["name"]: sorted({runs[r]["expert"] for r, (_, s) in raw.items() if s == es["name"]})
                  for es in spec["expert_sets"]}
    merges, rows = {}, []
    configs = config["merges"]["configs"]
    for es in spec["expert_sets"]:
        for var in variants:
            label = f"{es.get('label') or es['name']} / {var['label']}"
            if var["merge"] is None:
                rows.append({"label": label, "config": "", "skipped": var["skipped"], "layers": "",
                             "n_lang_layers": None})
                continue
            same = [n for n, c in configs.items() if c == var["merge"]]
            cname = f"{EXPERT_MERGE_PREFIX}{name}_{es['name']}_{same[0] if same else _slug(var['merge'])}"
            cfg = {**var["merge"], "allow_different_base": bool(es.get("allow_different_base", False))}
            merges[cname] = {"merge": cfg, "set": es["name"], "lang_from": es.get("lang_from", "set"),
                             "task_from": es.get("task_from", "set")}
            rows.append({"label": label, "config": cname, "skipped": "", "layers": describe(cfg, depth),
                         "n_lang_layers": _n_lang(cfg)})
    return {"runs": runs, "run_base": run_base, "bases": bases, "selections": selections, "merges": merges,
            "rows": rows}


def plan(config: dict, ablations_dir: str | Path) -> tuple[dict[str, dict], dict[str, dict]]:
    """Load every ablation file: (specs by name, the merge configs they add to merges.configs). `config` is left as
    it is; the rules merge the added configs into a view of their own (`with_merge_configs`), so each ablation's
    target exists whatever the `ablations` key selects (that key only picks what the `ablations` target builds).

    A spec: {title, plan, note, metrics, variants: [{label, config, layers, n_lang_layers, skipped}], and for
    expert-set ablations also runs, run_base, bases, selections, merges (see _expert_sets)}.
    """
    if config.get("ablations") not in ("", []) and not Path(ablations_dir).is_dir():
        raise UserError(f"config key 'ablations_dir': {ablations_dir} is not a directory")
    names = available(ablations_dir) if Path(ablations_dir).is_dir() else []
    enabled(config.get("ablations"), names)  # an unknown name in the key is an error, here at parse time
    depth = int(config["base"]["num_layers"])
    main = config["merges"]["configs"]
    configs = dict(main)  # the main configs and those added so far: an equal config keeps its first name
    out: dict[str, dict] = {}
    for name in names:
        spec = load(Path(ablations_dir) / f"{name}.yaml")
        variants = expand(spec, config)
        if spec["expert_sets"]:
            extra = _expert_sets(name, spec, config, variants)
            out[name] = {k: spec[k] for k in ("title", "plan", "note", "metrics")} | {"variants": extra.pop("rows")}
            out[name].update(extra)
            continue
        configs.update(assign_names(variants, configs))
        rows = [{"label": v["label"], "config": v["config"], "skipped": v["skipped"],
                 "layers": describe(v["merge"], depth) if v["merge"] else "",
                 "n_lang_layers": _n_lang(v["merge"]) if v["merge"] else None} for v in variants]
        out[name] = {k: spec[k] for k in ("title", "plan", "note", "metrics")} | {"variants": rows}
    return out, {k: v for k, v in configs.items() if k not in main}


def with_merge_configs(config: dict, added: dict[str, dict]) -> dict:
    """A copy of `config` whose merges.configs also hold `added` (to validate and check them with the rest)."""
    view = copy.deepcopy(config)
    view["merges"]["configs"].update(copy.deepcopy(added))
    return view


# ----------------------------------------------------------------------------------------------------------------
# table + figure


def _metric_scores(evals, model_ids: list[str], bench: str, lang: str) -> list[float] | str:
    from layerswap.report.tables import pct

    scores = []
    for model_id in model_ids:
        if evals.skipped(model_id, bench):
            return "skipped: " + str(evals.skipped(model_id, bench))
        keys = BENCHMARKS[bench].keys(lang)  # FLORES: the mean of the two directions
        value = sum(evals.score(model_id, bench, key) for key in keys) / len(keys)
        scores.append(value if BENCHMARKS[bench].unit == "bleu" else pct(value))  # BLEU: already 0..100
    return scores


def records(evals_dir: str | Path, params: dict) -> list[dict]:
    """One row per (variant, language): avg and max over the expert pairs of each metric (percent; FLORES BLEU,
    mean of en->lang and lang->en), with their 95% intervals (params seed, bootstrap_draws; none for BLEU) and the
    items per model (FLORES: sentences per direction)."""
    from layerswap.report import intervals
    from layerswap.report.tables import Evals, mean

    for key in ("name", "variants", "languages", "top_k", "metrics"):
        if params.get(key) in (None, "", []):
            raise UserError(f"--params-json: missing key '{key}'")
    k = int(params["top_k"])
    pairs = pair_ids(k)
    names = params.get("language_names") or {}
    evals = Evals(evals_dir)
    rows = []
    for var in params["variants"]:
        for lang in params["languages"]:
            row = {c: None for c in COLUMNS}
            row.update(ablation=params["name"], variant=var["label"], config=var["config"], layers=var["layers"],
                       n_lang_layers=var["n_lang_layers"], language=lang, language_name=names.get(lang, lang),
                       note=var["skipped"] and f"skipped: {var['skipped']}")
            if not var["skipped"]:
                ids = [f"merge/{var['config']}/{lang}/{p}" for p in pairs]
                row["n_pairs"] = len(ids)
                notes = []
                for bench in params["metrics"]:
                    scores = _metric_scores(evals, ids, bench, lang)
                    if isinstance(scores, str):
                        notes.append(f"{bench} {scores}")
                        continue
                    row[f"{bench}_avg"], row[f"{bench}_max"] = round(mean(scores), 4), round(max(scores), 4)
                    keys = BENCHMARKS[bench].keys(lang)
                    counts = [evals.count(m, bench, key) for m in ids for key in keys]
                    row[f"{bench}_n"] = None if None in counts else min(counts)
                    for stat in ("avg", "max") if not BENCHMARKS[bench].corpus else ():  # no per-item scores
                        bounds = intervals.cell_interval(
                            evals.items, ids, [lang], stat, bench=bench, seed=int(params.get("seed") or 0),
                            draws=int(params.get("bootstrap_draws") or intervals.DEFAULT_DRAWS))
                        if bounds is not None:
                            row[f"{bench}_{stat}_lo"], row[f"{bench}_{stat}_hi"] = (round(b, 4) for b in bounds)
                row["note"] = "; ".join(notes)
            rows.append(row)
    return rows


def markdown(frame, params: dict) -> str:
    metrics = params["metrics"]
    cols = ["variant", "layers"] + [f"{m}_{s}" for m in metrics for s in ("avg", "max")]
    lines = [f"## Ablation: {params.get('title', params['name'])}", ""]
    if params.get("world") == "toy":
        lines += ["**TOY WORLD**: synthetic toy languages and a tiny model; these numbers say nothing about the "
                  "real languages or the paper's models.", ""]
    if params.get("plan"):
        lines += [f"Plan: {params['plan']}", ""]
    percent = ", ".join(b.title for b in BENCHMARKS.values() if b.unit != "bleu")
    bleu = ", ".join(b.title + (" (mean of en->x and x->en)" if b.directions else "") for b in BENCHMARKS.values()
                     if b.unit == "bleu")
    corpus = ", ".join(f"{b.title} BLEU" if b.unit == "bleu" else b.title for b in BENCHMARKS.values() if b.corpus)
    lines += [f"Avg / max over the {int(params['top_k']) ** 2} expert pairs (language rank x math rank); {percent} "
              f"in %, {bleu} in BLEU, all in the target language.", "",
              "[lo, hi]: 95% interval, seeded bootstrap (layerswap/report/intervals.py): avg resamples the items (the "
              f"same draw for every pair) and the pairs, max the items only; {corpus} has none (corpus metric).", ""]
    counts = []
    for m in metrics:
        found = sorted({int(v) for v in frame[f"{m}_n"] if v is not None and v == v})
        if found:
            unit = "sentences per direction" if BENCHMARKS[m].directions else "items"
            counts.append(f"{m} {found[0]}" + (f"-{found[-1]}" if len(found) > 1 else "") + f" {unit}")
    if counts:
        lines += ["n per model and language: " + ", ".join(counts) + ".", ""]

    def number(r, c: str) -> str:
        if r[c] is None or r[c] != r[c]:
            return "-"
        lo, hi = r.get(f"{c}_lo"), r.get(f"{c}_hi")
        bounds = f" [{lo:.1f}, {hi:.1f}]" if lo is not None and lo == lo and hi is not None and hi == hi else ""
        return f"{r[c]:.1f}{bounds}"

    for lang in params["languages"]:
        part = frame[frame["language"] == lang]
        lines += [f"### {(params.get('language_names') or {}).get(lang, lang)}", "",
                  "| " + " | ".join(cols + ["note"]) + " |", "|" + "---|" * (len(cols) + 1)]
        for _, r in part.iterrows():
            cells = [str(r[c]) if c in ("variant", "layers") else number(r, c) for c in cols]
            cells.append(str(r["note"] or ""))
            lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
        lines.append("")
    return "\n".join(lines)


def chart(frame, params: dict):
    import altair as alt

    data = frame[frame["mgsm_avg"].notna()].copy()
    if data.empty:
        raise UserError("no variant has MGSM scores to plot (all skipped)")
    order = list(dict.fromkeys(data["variant"]))
    base = alt.Chart(data).encode(x=alt.X("variant:N", sort=order, title=None, axis=alt.Axis(labelAngle=-35,
                                                                                          labelLimit=260)))
    bars = base.mark_bar(color="#4c78a8").encode(
        y=alt.Y("mgsm_avg:Q", title="MGSM target language (%)"),
        tooltip=["variant:N", "layers:N", alt.Tooltip("mgsm_avg:Q", format=".2f"),
                 alt.Tooltip("mgsm_max:Q", format=".2f")])
    ticks = base.mark_tick(color="#e45756", thickness=2, size=18).encode(y="mgsm_max:Q")
    interval = base.transform_filter(alt.expr.isValid(alt.datum.mgsm_avg_lo))
    whisker = interval.mark_rule(color="#222222", strokeWidth=1.5).encode(y="mgsm_avg_lo:Q", y2="mgsm_avg_hi:Q")
    caps = [interval.mark_tick(color="#222222", thickness=1.5, size=10).encode(y=f"mgsm_avg_{end}:Q")
            for end in ("lo", "hi")]
    world = "TOY WORLD (synthetic): " if params.get("world") == "toy" else ""
    return alt.layer(bars, ticks, whisker, *caps).properties(width=max(160, 34 * len(order)), height=180).facet(
        row=alt.Row("language_name:N", title=None, header=alt.Header(labelAngle=0, labelAlign="left"))
    ).properties(title=alt.Title(f"{world}ablation: {params.get('title', params['name'])}",
                                 subtitle="bar: MGSM mean over the expert pairs, with its 95% interval; red "
                                          "tick: best pair"))


def build(evals_dir: str | Path, params: dict, out_dir: str | Path) -> list[Path]:
    import pandas as pd

    from layerswap.report.figures import save_chart

    frame = pd.DataFrame.from_records(records(evals_dir, params), columns=COLUMNS)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    keep = [c for c in COLUMNS if not any(c.startswith(f"{m}_") for m in METRICS if m not in params["metrics"])]
    frame[keep].to_csv(out / "table.csv", index=False)
    (out / "table.md").write_text(markdown(frame, params) + "\n")
    return [out / "table.csv", out / "table.md", *save_chart(chart(frame, params), out / "figure")]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--evals-dir", required=True, help="results/evals")
    parser.add_argument("--params-json", required=True,
                        help="{name, title, plan, metrics, variants, languages, top_k, world, language_names}")
    parser.add_argument("--out-dir", required=True, help="results/ablations/<name>")


def run(args: argparse.Namespace) -> None:
    build(args.evals_dir, json_object(args.params_json, "--params-json"), args.out_dir)
