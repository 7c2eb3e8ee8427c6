"""What a workflow config's merge configs get from the registered methods' declarations: the defaults filled in
(`config_defaults`) and the config schema's `merge_config` and `merge_best_of` blocks (config/schema.yaml holds a
generated copy). Nothing here imports torch."""

from __future__ import annotations

from typing import Any

from layerswap.merge.params import REQUIRED, Param
from layerswap.merge.registry import METHODS
from layerswap.merge.registry import method as registered


def _has_default(p: Param) -> bool:
    """A config gets the default filled in (None only for the explicit layer lists: a null int means 'give it')."""
    return p.default is not REQUIRED and (p.default is not None or p.kind == "int_list")


def config_defaults(method: str) -> dict[str, Any]:
    """What validating a workflow config fills into a merge config of `method` (config_schema's defaults)."""
    out = {k: p.default for k, p in registered(method).params.items() if p.config and _has_default(p)}
    return {**out, "allow_different_base": False}


def _value_schema(p: Param) -> dict:
    if isinstance(p.kind, tuple):
        out: dict[str, Any] = {"enum": list(p.kind)}
    elif p.kind == "int":
        out = {"type": "integer", "minimum": 0}
    elif p.kind == "number":
        out = {"type": "number"}
    else:
        out = {"type": ["array", "null"], "items": {"type": "integer"}, "uniqueItems": True}  # range: the check
    out.update(p.schema)
    if p.description:
        out["description"] = p.description
    if _has_default(p):
        out["default"] = p.default
    return out


def config_schema() -> dict:
    """JSON schema of one merge config of a workflow config (`merges.configs.<name>`): method, its params, and
    `allow_different_base`."""
    branches = []
    for name, method in METHODS.items():
        params = method.params
        props: dict[str, Any] = {"method": {}}
        props.update({k: _value_schema(p) for k, p in params.items() if p.config})
        props["allow_different_base"] = {
            "type": "boolean",
            "default": False,
            "description": "allow experts fine-tuned from different bases",
        }
        then: dict[str, Any] = {"additionalProperties": False, "properties": props}
        required = [k for k, p in params.items() if p.config and p.default is REQUIRED]
        if required:
            then["required"] = required
        branches.append({"if": {"required": ["method"], "properties": {"method": {"const": name}}}, "then": then})
    return {
        "type": "object",
        "required": ["method"],
        "properties": {"method": {"enum": list(METHODS)}},
        "allOf": branches,
    }


def best_of_schema() -> dict:
    """JSON schema of `merges.best_of`: per registered method, the configs whose best result a table reports."""
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": {name: {"$ref": "#/$defs/name_list"} for name in METHODS},
    }


# config/schema.yaml keeps a copy of config_schema() and best_of_schema() between these markers; tests/test_config.py
# checks the copy, `python -m layerswap.schema_blocks` rewrites it.
BEGIN = "  # BEGIN merge_config: generated from layerswap/merge/schema.py by `python -m layerswap.schema_blocks`"
END = "  # END merge_config"


def schema_block() -> str:
    import yaml

    body = yaml.safe_dump(
        {"merge_config": config_schema(), "merge_best_of": best_of_schema()},
        sort_keys=False,
        width=110,
        default_flow_style=None,
    )
    return "\n".join([BEGIN, *("  " + line for line in body.splitlines()), END])
