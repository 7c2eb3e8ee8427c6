"""The registered merge methods: one module per method (`layerswap/merge/methods/<name>.py`), listed once here.

Recipe validation, the merge engine, the config checks and schema, the tables and the ablations look methods up
here. A method module declares its `METHODS` (usually one; DARE declares two configurations of one computation, as
mergekit does); the order below is the order of the tables' columns. Importing the registry imports no torch.
"""

from __future__ import annotations

from layerswap.errors import UserError
from layerswap.merge.methods import dare, layer_swap, soup, ties
from layerswap.merge.params import Method

MODULES = (
    layer_swap,
    soup,
    ties,
    dare,
)

METHODS: dict[str, Method] = {m.name: m for module in MODULES for m in module.METHODS}

#: The method the paper studies: its default config (`merges.default_swap`) has a column of its own, its best config
#: comes after the rivals' in Tables 1 and 2, and soup-then-swap and the swap grid are built from it.
SWAP = layer_swap.METHOD.name


def method(name: str, where: str = "method") -> Method:
    """The registered method `name`, or a one-line UserError naming `where` and the known methods."""
    if not isinstance(name, str) or name not in METHODS:
        raise UserError(f"{where}: {name!r} is not one of {', '.join(METHODS)}")
    return METHODS[name]


def best_of_methods(best_of: dict, table: int) -> list[Method]:
    """The methods with a best-config column in Table `table` (1 or 2), in column order: the rivals listed in
    `best_of` that the table shows (registry order), then the layer swap when `best_of` lists it."""
    rivals = [m for name, m in METHODS.items() if name != SWAP and best_of.get(name) and table in m.tables]
    return rivals + ([METHODS[SWAP]] if best_of.get(SWAP) else [])
