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
from layerswap.merge.methods.layer_swap import SWAP_KEYS, overflow
from layerswap.merge.params import check_value
from layerswap.merge.registry import SWAP
from layerswap.merge.schema import config_defaults
from layerswap.workflow import sweeps

LAYER_SWAP_DEFAULTS = config_defaults(SWAP)  # what config validation fills in: variants compare equal
Row = tuple[str, dict | None, str]  # a variant's label, its merge config (None: skipped) and the reason skipped


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


def _default_counts(config: dict) -> dict[str, int]:
    """The default swap's bottom/top counts (SWAP_KEYS; an absent transition 0): where the swap variants start."""
    name = config["merges"]["default_swap"]
    cfg = config["merges"]["configs"][name]
    if cfg.get("lang_layers") is not None:
        raise UserError(f"merges.default_swap '{name}' uses lang_layers; ablations need one with bottom/top")
    return {k: int(cfg.get(k) or 0) for k in SWAP_KEYS}


#: random layer sets per variant: each is a merge config of every expert pair, evaluated
MAX_DRAWS = 1000


def _int(where: str, value: Any, default: int) -> int:
    """A count of a variant: `default` for 'default', else checked as a merge param of kind int."""
    return default if value == "default" else check_value(where, value, "int")


def _layer_config(layers: list[int]) -> dict:
    return {"method": SWAP, **LAYER_SWAP_DEFAULTS, "lang_layers": sorted(layers)}


def _counts_config(counts: dict[str, int]) -> dict:
    return {"method": SWAP, **LAYER_SWAP_DEFAULTS, **{k: counts[k] for k in SWAP_KEYS}}


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
    b, u, tb, tu = (cfg[k] for k in SWAP_KEYS)
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
    if any(v["kind"] != "method" for v in spec["variants"]):  # the swap kinds start from the default swap
        default = _default_counts(config)
    else:
        default = dict.fromkeys(SWAP_KEYS, 0)
    out = []
    for i, v in enumerate(spec["variants"]):
        where = f"ablation {spec['name']}: variants[{i}]"
        if v["kind"] == "method":
            rows = sweeps.expand(where, v, depth)
        elif v["kind"] in ("bottom_top", "grid"):
            rows = _counted(where, v, depth, default, spec.get("reference_depth"))
        elif v["kind"] == "layers":
            rows = [_listed(where, v, depth)]
        else:
            rows = _placed(where, v, depth, default["bottom"] + default["top"])
        out += [{"label": label, "merge": cfg, "skipped": skipped} for label, cfg, skipped in rows]
    return out


def _counted(where: str, v: dict, depth: int, default: dict[str, int], ref: int | None) -> list[Row]:
    """Kinds bottom_top and grid: a swap per combination of the counts (a list sweeps them, kind grid only)."""
    given = {k: v.get(k, "default") for k in SWAP_KEYS}
    if v["kind"] == "bottom_top" and any(isinstance(x, list) for x in given.values()):
        raise fail(where, "lists need kind: grid")
    rows = []
    for combo in itertools.product(*(x if isinstance(x, list) else [x] for x in given.values())):
        raw = dict(zip(SWAP_KEYS, combo))
        counts = {k: _int(f"{where}.{k}", raw[k], default[k]) for k in SWAP_KEYS}
        if v.get("scaled"):
            for k in ("bottom", "top"):
                if raw[k] != "default":
                    counts[k] = scale(counts[k], depth, ref)
        label = v.get("label") if v["kind"] == "bottom_top" else None
        if not label:
            b, u, tb, tu = (counts[k] for k in SWAP_KEYS)
            label = f"b{raw['bottom']} u{raw['top']}@{ref}L -> " if v.get("scaled") else ""
            label += f"b{b} u{u} tb{tb} tu{tu}"
        over = overflow(counts, depth)
        rows.append(
            (label, None, f"b+tb+tu+u = {sum(over)} exceeds the {depth} layers of the model")
            if over
            else (label, _counts_config(counts), "")
        )
    return rows


def _listed(where: str, v: dict, depth: int) -> Row:
    """Kind layers: the given language layers, checked as the swap's `lang_layers` param (non-empty)."""
    layers = check_value(f"{where}.lang_layers", v.get("lang_layers"), "int_list")
    if not layers:
        raise fail(f"{where}.lang_layers", "expected a non-empty list of layer indices")
    label = v.get("label") or "layers " + ",".join(map(str, layers))
    bad = [x for x in v["lang_layers"] if x >= depth]  # the first as given
    if bad:
        return label, None, f"layer {bad[0]} is outside the {depth}-layer model"
    return label, _layer_config(layers), ""


def _placed(where: str, v: dict, depth: int, n: int) -> list[Row]:
    """Kinds middle, alternating and random: the default swap's n language layers placed elsewhere."""
    kind = v["kind"]
    if n == 0 or n > depth:
        return [(v.get("label") or kind, None, f"the default swap has {n} language layers; needs 1..{depth}")]
    if kind == "middle":
        start = (depth - n) // 2
        return [(v.get("label") or f"middle {n}", _layer_config(list(range(start, start + n))), "")]
    if kind == "alternating":
        offset = _int(f"{where}.offset", v.get("offset", 0), 0)
        cands = list(range(offset % 2, depth, 2))
        label = v.get("label") or f"alternating {n} ({'even' if offset % 2 == 0 else 'odd'})"
        if n > len(cands):
            return [(label, None, f"{n} non-adjacent layers of parity {offset % 2} do not fit {depth} layers")]
        return [(label, _layer_config([cands[math.floor((j + 0.5) * len(cands) / n)] for j in range(n)]), "")]
    seed = _int(f"{where}.seed", v.get("seed", 0), 0)  # kind random
    draws = _int(f"{where}.draws", v.get("draws", 1), 1)
    if not 1 <= draws <= MAX_DRAWS:
        raise fail(f"{where}.draws", f"must be from 1 to {MAX_DRAWS} (each draw is a merge config of every pair)")
    return [
        (
            f"{v.get('label') or 'random'} {n} (seed {seed + d})",
            _layer_config(sorted(random.Random(seed + d).sample(range(depth), n))),
            "",
        )
        for d in range(draws)
    ]


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
