"""Ablation variants of kind `method`: a sweep over the parameters of any registered merge method.

::

    variants:
      - {kind: method, method: ties, density: [0.1, 0.3, 0.5], lam: 1.0}   # 3 TIES configs
      - {kind: method, method: dare, density: 0.3, seed: [0, 1, 2]}       # 3 DARE configs

Keys besides `kind`, `label` and `method` are the method's config params (layerswap/merge/methods/<method>.py); a
list sweeps (the cartesian product in the method's own param order; a layer list param takes its list as one value),
a param left out keeps its default. Each combination is checked as a workflow config's merge config would be (the
generated schema, then the method's own check against the base's depth; params that do not fit the depth, the
check's `misfit`, make a skipped row) and becomes one merge config, named
``abl_<method>_<param><value>...`` after the params that differ from the defaults (``.`` written ``p``, ``-`` ``m``),
so the generic merge and evaluation jobs build it; a combination equal to a config of ``merges.configs`` reuses it.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

from layerswap.errors import UserError
from layerswap.merge.methods.layer_swap import SWAP_KEYS
from layerswap.merge.params import ParamError
from layerswap.merge.registry import METHODS
from layerswap.merge.schema import config_defaults, config_schema

BASE_KEYS = {"kind", "label", "method"}


def _params(method: str) -> list[str]:
    return [k for k, p in METHODS[method].params.items() if p.config]


def allowed_keys(variant: dict, where: str) -> set[str]:
    """The keys a `method` variant may have; a one-line error if its method is not registered."""
    method = variant.get("method")
    if method not in METHODS:
        raise UserError(f"{where}: kind method needs method; allowed: {', '.join(METHODS)}")
    return BASE_KEYS | set(_params(method))


def _token(value: Any) -> str:
    text = "_".join(map(str, value)) if isinstance(value, list) else str(value)
    return re.sub(r"[^A-Za-z0-9_]", lambda m: {".": "p", "-": "m"}.get(m.group(), "_"), text)


def slug(cfg: dict, swap_slug: str | None = None) -> str:
    """A merge config's name from the params that differ from the method's defaults (after `swap_slug`, the layer
    swap's own naming of its layer params, if given)."""
    defaults = config_defaults(cfg["method"])
    skip = {*SWAP_KEYS, "lang_layers"} if swap_slug else set()
    parts = [
        f"{k}{_token(cfg[k])}"
        for k in _params(cfg["method"])
        if k not in skip and k in cfg and cfg[k] != defaults.get(k)
    ]
    head = swap_slug or f"abl_{cfg['method']}"
    return "_".join([head, *parts])


def expand(where: str, variant: dict, depth: int) -> list[tuple[str, dict | None, str]]:
    """[(label, merge config or None, reason skipped)] of one `method` variant for a base of `depth` layers."""
    from jsonschema import Draft202012Validator

    name = variant["method"]
    method = METHODS[name]
    keys = [k for k in _params(name) if k in variant]
    kinds = {k: method.params[k].kind for k in keys}
    swept = {k for k in keys if isinstance(variant[k], list) and kinds[k] != "int_list"}
    grid = [variant[k] if k in swept else [variant[k]] for k in keys]
    validator = Draft202012Validator(config_schema())
    out = []
    for combo in itertools.product(*grid):
        given = dict(zip(keys, combo))
        shown = [f"{k}={v}" for k, v in given.items() if k in swept or not variant.get("label")]
        label = " ".join([variant.get("label") or name, *shown])
        cfg = {"method": name, **config_defaults(name), **given}
        errors = sorted(validator.iter_errors(cfg), key=lambda e: list(e.absolute_path))
        if errors:
            raise UserError(f"{where}: {label}: {errors[0].message}")
        try:
            method.run_check(cfg, given, depth)
        except ParamError as err:
            if err.misfit:
                out.append((label, None, err.message))  # params that do not fit this model: a skipped row
                continue
            raise err.user_error(f"{where}: {label}") from None
        out.append((label, cfg, ""))
    return out
