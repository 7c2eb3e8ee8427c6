"""Ablation variants resolved for one workflow config: each to a merge config (or a skipped row) and its name.

The variant kinds and their rules are in layerswap/workflow/ablations.py's docstring (the ablation file format);
kind ``method`` is layerswap/workflow/sweeps.py. Here: `expand` (variants -> merge configs for the base's depth L),
`assign_names` (a name per merge config) and what a row of the ablation table says about a config (`describe`,
`n_lang`).

Merge config names: ``abl_b<b>u<u>t<tb><tu>`` or ``abl_L<i>_<j>_...`` (the resolved layers, not the variant
label), so variants that resolve to the same layers share one config (and its evaluations) across ablations; a
variant equal to a config already in ``merges.configs`` (e.g. the default swap) reuses that config's name and
evaluations.
"""

from __future__ import annotations

import itertools
import math
import random
from typing import Any

from layerswap.errors import UserError
from layerswap.merge.methods.layer_swap import overflow
from layerswap.merge.params import config_defaults
from layerswap.merge.registry import SWAP
from layerswap.workflow import sweeps

SWAP_FIELDS = ("bottom", "top", "transition_bottom", "transition_top")
LAYER_SWAP_DEFAULTS = config_defaults("layer_swap")  # what config validation fills in: variants compare equal


def fail(where: str, message: str) -> UserError:
    """The one-line error of an ablation file or variant: '<where>: <message>'."""
    return UserError(f"{where}: {message}")


def check_mapping(value, where: str, allowed: set[str]) -> None:
    """A dict whose keys are all in `allowed`, else one line naming the first unknown key."""
    if not isinstance(value, dict):
        raise fail(where, "expected a mapping")
    extra = sorted(set(value) - allowed)
    if extra:
        raise fail(where, f"unknown key '{extra[0]}'; allowed: {', '.join(sorted(allowed))}")


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
        raise fail(where, f"expected a non-negative integer or 'default', got {value!r}")
    return value


def _layer_config(layers: list[int]) -> dict:
    return {"method": "layer_swap", **LAYER_SWAP_DEFAULTS, "lang_layers": sorted(layers)}


def _bt_config(b: int, u: int, tb: int, tu: int) -> dict:
    return {"method": "layer_swap", **LAYER_SWAP_DEFAULTS, "bottom": b, "top": u,
            "transition_bottom": tb, "transition_top": tu}


def slug(cfg: dict) -> str:
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


def n_lang(cfg: dict) -> int | None:
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
                raise fail(where, "lists need kind: grid")
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
                raise fail(f"{where}.lang_layers", f"expected a list of distinct layer indices, got {layers!r}")
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
                raise fail(f"{where}.draws", "must be >= 1")
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
        name = same[0] if same else slug(cfg)
        if name in configs and configs[name] != cfg:
            raise UserError(f"merge config name '{name}' is taken by a different config in merges.configs")
        var["config"] = name
        if name not in configs:
            new[name] = cfg
    return new
