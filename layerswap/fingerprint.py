"""Source fingerprints of the code a `layerswap` command runs.

Snakemake's `code` rerun trigger sees only a rule's own body, not the package code it calls. Each rule passes
`command_hash(<its command>)` as a param: a hash over the package modules that command can import (its import
graph, read from the sources with `ast`, imports inside functions included) and the resource files those modules
declare. So an edit to, say, the merge engine reruns the jobs whose command imports it, and nothing else.

Written by hand because no library answers "which files can this command execute" statically: importlib and
modulefinder follow only imports that run (or top-level ones), and an evaluation's merge path imports inside a
function. Two conventions keep the graph honest: a module that reads package files at run time names them in a
module-level `RESOURCES` tuple (paths relative to the package), and the dispatcher `layerswap.cli` and its command
table `layerswap.commands` are left out (registering a new command must not rerun every job).
"""

from __future__ import annotations

import ast
import hashlib
from functools import lru_cache
from pathlib import Path

PACKAGE = "layerswap"
PACKAGE_DIR = Path(__file__).resolve().parent
DISPATCH_MODULES = (f"{PACKAGE}.cli", f"{PACKAGE}.commands")


def file_sha256(path: Path) -> str:
    """sha256 of a file's bytes, read in 1 MiB blocks (here, not in `training`, so light commands need no torch)."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def module_file(name: str, root: Path = PACKAGE_DIR) -> Path | None:
    """The source file of module `name` (layerswap.x.y), or None if it is not a module of the package."""
    parts = name.split(".")
    if parts[0] != PACKAGE:
        return None
    path = root.joinpath(*parts[1:])
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    if path.with_suffix(".py").is_file():
        return path.with_suffix(".py")
    return None


def _package_of(name: str, file: Path) -> str:
    return name if file.name == "__init__.py" else name.rpartition(".")[0]


def _resources(tree: ast.Module) -> list[str]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "RESOURCES" for t in node.targets):
            value = ast.literal_eval(node.value)
            if not isinstance(value, (tuple, list)) or not all(isinstance(v, str) for v in value):
                raise ValueError("RESOURCES must be a tuple of paths relative to the package")
            return list(value)
    return []


def imports_of(name: str, root: Path = PACKAGE_DIR) -> tuple[set[str], list[str]]:
    """(package modules `name` imports anywhere in its source, its declared resources)."""
    file = module_file(name, root)
    tree = ast.parse(file.read_text(encoding="utf-8"), filename=str(file))
    package = _package_of(name, file)
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from .io import x / from . import io
                base = package.split(".")
                base = ".".join(base[: len(base) - node.level + 1])
                mod = f"{base}.{node.module}" if node.module else base
            else:
                mod = node.module or ""
            found.add(mod)
            found.update(f"{mod}.{alias.name}" for alias in node.names)  # `from pkg import submodule`
    return {m for m in found if module_file(m, root) is not None}, _resources(tree)


def _with_parents(name: str) -> list[str]:
    """Importing a.b.c runs a/__init__, a/b/__init__ first."""
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


@lru_cache(maxsize=None)
def closure(start: str, root: Path = PACKAGE_DIR) -> tuple[tuple[str, ...], tuple[Path, ...]]:
    """(modules, resource files) that `start` can run: its import graph within the package, minus the dispatcher."""
    seen: set[str] = set()
    resources: set[Path] = set()
    todo = [start]
    while todo:
        for name in _with_parents(todo.pop()):
            if name in seen or name in DISPATCH_MODULES or module_file(name, root) is None:
                continue
            seen.add(name)
            modules, declared = imports_of(name, root)
            todo.extend(modules)
            for rel in declared:
                path = root / rel
                if not path.exists():
                    raise FileNotFoundError(f"{module_file(name, root)}: RESOURCES names {rel}, which does not exist")
                files = [path] if path.is_file() else path.rglob("*")
                resources.update(p for p in files if p.is_file() and "__pycache__" not in p.parts)
    return tuple(sorted(seen)), tuple(sorted(resources))


def source_files(start: str, root: Path = PACKAGE_DIR) -> list[Path]:
    modules, resources = closure(start, root)
    return sorted({module_file(m, root) for m in modules} | set(resources))


def module_hash(start: str, root: Path = PACKAGE_DIR) -> str:
    """sha256 (first 16 hex digits) over the files `start` (a module name) can run or read."""
    digest = hashlib.sha256()
    for file in source_files(start, root):
        digest.update(str(file.relative_to(root)).encode())
        digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


def command_hash(command: str) -> str:
    """The code fingerprint of `layerswap <command>` (the `code` param of every rule that runs it)."""
    from layerswap.commands import COMMANDS

    if command not in COMMANDS:
        raise KeyError(f"no layerswap command {command!r}")
    return module_hash(COMMANDS[command][0])
