"""Merge engine: layer swap, soups, TIES and soup-then-swap as recipes, built in memory or written to disk.

`registry` lists the merge methods (`methods/<name>.py`, one module each: parameters, checks, per-tensor
computation; what two share is in `shared`), `params` declares what a method declares and checks params against it,
`schema` generates the config schema's merge block and a config's defaults, `recipes` validates recipes, `engine`
builds merged state dicts and writes merged models (`layers`: the layer of a parameter name). The API below is
resolved on first use (PEP 562), so reading a config or a recipe (`params`, `recipes`) imports no torch.
"""

import importlib

_API = {
    "ExpertCache": "engine",
    "build_state_dict": "engine",
    "write_merged": "engine",
    "build_changes": "engine",
    "tensor_keys": "engine",
    "switch_order": "engine",
}
__all__ = sorted(_API)


def __getattr__(name: str):
    if name not in _API:
        raise AttributeError(f"module 'layerswap.merge' has no attribute {name!r}")
    return getattr(importlib.import_module(f"layerswap.merge.{_API[name]}"), name)
