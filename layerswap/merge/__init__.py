"""Merge engine: layer swap, soups, TIES and soup-then-swap as recipes, built in memory or written to disk.

`registry` lists the merge methods (`methods/<name>.py`, one module each: parameters, checks, per-tensor
computation; TIES and DARE configure the generalized task arithmetic of `task_arithmetic`, what else two share is in
`shared`), `params` declares what a method declares and checks params against it, `schema` generates the config
schema's merge block and a config's defaults, `recipes` reads and validates recipes (`Recipe.load`: once per
recipe), `engine` builds merged state dicts and writes merged models (`layers`: the layer of a parameter name),
`merger` is the engine of one evaluation job. The API below is resolved on first use (PEP 562), so reading a config
or a recipe (`params`, `recipes`) imports no torch.
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
