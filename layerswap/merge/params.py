"""The parameters of each merge method, declared once.

`recipes` validates a recipe's params and fills their defaults from here; `config` builds the config schema's
`merge_config` from here (config/schema.yaml holds no copy); `ablations` builds the merge configs of its variants
with these defaults. Kept apart from `engine` (which implements the methods) so that reading a config or a recipe
imports no torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

REQUIRED = object()  # a param without a default: a recipe or config must give it


@dataclass(frozen=True)
class Param:
    default: Any
    kind: str | tuple[str, ...]  # "int" (>= 0), "number", "int_list" (layer indices), or the allowed strings
    description: str = ""
    schema: dict = field(default_factory=dict)  # further JSON-schema limits of a workflow config's value
    config: bool = True  # a workflow config may set it (False: recipes only)


METHOD_PARAMS: dict[str, dict[str, Param]] = {
    "layer_swap": {
        "bottom": Param(None, "int", "layers from the language expert at the bottom (b of Algorithm 1)"),
        "top": Param(None, "int", "layers from the language expert at the top (u)"),
        "transition_bottom": Param(0, "int", "averaged layers above the bottom block (t_b)"),
        "transition_top": Param(0, "int", "averaged layers below the top block (t_u)"),
        "w_task": Param(1.0, "number", "weight of the task expert in averaged tensors", {"exclusiveMinimum": 0}),
        "w_lang": Param(1.0, "number", "weight of the language expert in averaged tensors", {"exclusiveMinimum": 0}),
        "weighting": Param("fixed", ("fixed", "magnitude"), "fixed weights or magnitude-adjusted ones", config=False),
        "non_layer": Param("average", ("average", "lang", "task"),
                           "embeddings, final norm and LM head: averaged, or from one expert"),
        "lang_layers": Param(None, "int_list", "explicit layer indices taken from the language expert (replaces "
                             "bottom/top)", {"minItems": 1}),
        "transition_layers": Param(None, "int_list", "explicit averaged layers (with lang_layers)", config=False),
    },
    "soup": {
        "weighting": Param("uniform", ("uniform", "magnitude"), "uniform mean or magnitude-adjusted weights"),
    },
    "ties": {
        "density": Param(REQUIRED, "number", "share of each task vector's entries kept (by |delta|)",
                         {"exclusiveMinimum": 0, "maximum": 1}),
        "lam": Param(1.0, "number", "scale of the merged task vector", {"exclusiveMinimum": 0}),
    },
}
INPUT_KEYS = {"layer_swap": ("task", "lang"), "soup": ("models",), "ties": ("models",)}


def _has_default(p: Param) -> bool:
    """A config gets the default filled in (None only for the explicit layer lists: a null int means 'give it')."""
    return p.default is not REQUIRED and (p.default is not None or p.kind == "int_list")


def config_defaults(method: str) -> dict[str, Any]:
    """What validating a workflow config fills into a merge config of `method` (config_schema's defaults)."""
    out = {k: p.default for k, p in METHOD_PARAMS[method].items() if p.config and _has_default(p)}
    return {**out, "allow_different_base": False}


# The blocks of a bottom/top layer swap, bottom up: b language layers, t_b averaged, (task layers), t_u averaged, u
# language layers.
SWAP_LAYER_KEYS = ("bottom", "transition_bottom", "transition_top", "top")


def swap_layer_overflow(params: dict, n_layers: int) -> list[int] | None:
    """The one check that a bottom/top layer swap fits its model: its counts [b, t_b, t_u, u] if together they
    exceed `n_layers` (the config check, the ablation planner and the merge engine each word the error for their own
    context), else None. An absent transition counts 0."""
    counts = [params.get(k) or 0 for k in SWAP_LAYER_KEYS]
    return counts if sum(counts) > n_layers else None


def _value_schema(p: Param) -> dict:
    if isinstance(p.kind, tuple):
        out: dict[str, Any] = {"enum": list(p.kind)}
    elif p.kind == "int":
        out = {"type": "integer", "minimum": 0}
    elif p.kind == "number":
        out = {"type": "number"}
    else:
        out = {"type": ["array", "null"], "items": {"type": "integer"}, "uniqueItems": True}  # range: config.check
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
    for method, params in METHOD_PARAMS.items():
        props: dict[str, Any] = {"method": {}}
        props.update({k: _value_schema(p) for k, p in params.items() if p.config})
        props["allow_different_base"] = {"type": "boolean", "default": False,
                                         "description": "allow experts fine-tuned from different bases"}
        then: dict[str, Any] = {"additionalProperties": False, "properties": props}
        required = [k for k, p in params.items() if p.config and p.default is REQUIRED]
        if required:
            then["required"] = required
        branches.append({"if": {"required": ["method"], "properties": {"method": {"const": method}}}, "then": then})
    return {"type": "object", "required": ["method"], "properties": {"method": {"enum": list(METHOD_PARAMS)}},
            "allOf": branches}


# config/schema.yaml keeps a copy of config_schema() between these markers, so that the schema file stands alone
# (snakemake.utils.validate reads it); tests/test_config.py checks the copy, `python -m layerswap.merge.params`
# rewrites it.
BEGIN = "  # BEGIN merge_config: generated from layerswap/merge/params.py by `python -m layerswap.merge.params`"
END = "  # END merge_config"


def schema_block() -> str:
    import yaml

    body = yaml.safe_dump({"merge_config": config_schema()}, sort_keys=False, width=110, default_flow_style=None)
    return "\n".join([BEGIN, *("  " + line for line in body.splitlines()), END])


def rewrite_schema(path: str) -> None:
    from pathlib import Path

    text = Path(path).read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{path}: no '{BEGIN.strip()}' ... '{END.strip()}' block")
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    Path(path).write_text(head + schema_block() + tail)


if __name__ == "__main__":
    rewrite_schema(str(__import__("pathlib").Path(__file__).parents[2] / "config" / "schema.yaml"))
