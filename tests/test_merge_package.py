"""The merge package's shape that docs/EXTENDING.md promises a contributor: a method module imports only the shared
core and helpers (`merge/task_arithmetic.py`, `merge/shared.py`, `merge/params.py`, `merge/layers.py`), never another
method; the engine and the declarations import no method, the package's imports have no cycle, and the layer swap's
name and bottom/top keys are spelled in its own module only."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "layerswap"
SWAP_KEYS = {"bottom", "top", "transition_bottom", "transition_top"}


def _name(path: Path) -> str:
    return ".".join(("layerswap", *path.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__")


MODULES = {_name(p): p for p in PACKAGE.rglob("*.py")}
MERGE = {name for name in MODULES if name.startswith("layerswap.merge.")}
METHODS = {name for name in MERGE if name.startswith("layerswap.merge.methods.")}


def _imports(name: str) -> set[str]:
    """The package modules that module `name` imports, at its top or inside functions."""
    found = set()
    for node in ast.walk(ast.parse(MODULES[name].read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
    return (found & set(MODULES)) - {name}


#: What a method module may import of the package: the shared core (generalized task arithmetic) and helpers.
SHARED = {
    "layerswap.merge.task_arithmetic",
    "layerswap.merge.shared",
    "layerswap.merge.params",
    "layerswap.merge.layers",
}


def test_methods_import_only_the_shared_core_and_helpers_and_only_the_registry_imports_them():
    assert {"layerswap.merge.methods.layer_swap", "layerswap.merge.methods.dare"} <= METHODS
    assert SHARED <= MERGE
    for name in METHODS:
        assert not _imports(name) & METHODS, f"{name} imports another method module"
        own = _imports(name) & MERGE  # of the merge package (layerswap.errors and the like are fine)
        assert own <= SHARED, f"{name} imports {sorted(own - SHARED)}: only the shared core and helpers"
    for name in SHARED:  # the core and helpers build on no method
        assert not _imports(name) & METHODS, f"{name} imports a method module"
    assert {"layerswap.merge.task_arithmetic"} <= _imports("layerswap.merge.methods.ties") & _imports(
        "layerswap.merge.methods.dare"
    ), "TIES and DARE configure the shared task-arithmetic core"
    assert {"layerswap.merge.engine", "layerswap.merge.params", "layerswap.merge.shared"} <= MERGE
    for name in MERGE - METHODS - {"layerswap.merge.registry"}:  # the registry lists them; the rest looks them up
        assert not _imports(name) & METHODS, f"{name} imports a method module"


def test_the_merge_package_has_no_import_cycle():
    graph = {name: _imports(name) & MERGE for name in MERGE}
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> None:
        if name in path:
            raise AssertionError("import cycle: " + " -> ".join(path[path.index(name) :] + [name]))
        if name not in done:
            for target in sorted(graph[name]):
                visit(target, path + [name])
            done.add(name)

    for name in sorted(graph):
        visit(name, [])


def test_the_layer_swap_is_named_and_its_keys_listed_in_its_module_only():
    """Variants, sweeps, the swap-grid figure and the registry use `layer_swap.SWAP_KEYS` and the method's name."""
    own = "layerswap.merge.methods.layer_swap"
    for name, path in MODULES.items():
        if name == own:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value == "layer_swap":
                raise AssertionError(f"{path.relative_to(REPO)}:{node.lineno}: 'layer_swap' (use registry.SWAP)")
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                words = {e.value for e in node.elts if isinstance(e, ast.Constant)}
                assert not SWAP_KEYS <= words, (
                    f"{path.relative_to(REPO)}:{node.lineno}: the swap keys spelled again (use layer_swap.SWAP_KEYS)"
                )
