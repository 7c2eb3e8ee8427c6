"""The stage layout of issue 18: the flat module names of before it (`layerswap.tables`, `layerswap.sft`, ...) are
gone, and nothing in the repository uses them (an import through an old name fails; a reference to one in a
docstring or a page sends a reader to a module that does not exist)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: The flat module names issue 18 moved into the stage folders, with where each went.
MOVED = {
    old: f"{stage}.{old}"
    for stage, olds in {
        "data": ("toyworld", "hub", "preflight"),
        "train": ("pretrain", "sft", "training", "gguf_base"),
        "evaluation": ("evaluate", "evaluate_merges"),
        "report": ("tables", "intervals", "summary", "figures", "charts"),
        "workflow": ("ablations", "plan", "cost", "prestage"),
    }.items()
    for old in olds
}
OLD = "|".join(sorted(MOVED, key=len, reverse=True))


def test_old_names_are_not_modules():
    for old, new in MOVED.items():
        assert not (REPO / "layerswap" / f"{old}.py").exists(), f"layerswap/{old}.py is back"
        assert (REPO / "layerswap" / f"{new.replace('.', '/')}.py").is_file(), new


def repo_files():
    for pattern in (
        "layerswap/**/*.py",
        "scripts/measure/*.py",
        "scripts/tools/**/*.py",
        "tests/*.py",
        "rules/*.smk",
        "Snakefile",
        "cluster/*.yaml",
        "config/**/*.yaml",
        "README.md",
        "config/README.md",
        "docs/*.md",
        "Makefile",
    ):
        yield from (p for p in REPO.glob(pattern) if p.resolve() != Path(__file__).resolve())


def test_nothing_in_the_repository_uses_an_old_name():
    """Imports, `python -m` lines, quoted and backquoted module paths: all name the stage layout's modules (logger
    names such as "layerswap.evaluate" are names, not modules, and are left alone)."""
    data_modules = {p.stem for p in (REPO / "layerswap" / "data").glob("*.py")}
    patterns = [
        rf"^\s*import layerswap\.({OLD})\b",
        rf"^\s*from layerswap\.({OLD})\b",
        rf"-m layerswap\.({OLD})\b",
        rf"""["'`]layerswap\.({OLD})[.`]""",
        rf"""import_module\(["']layerswap\.({OLD})["']""",
    ]
    found = []
    for path in repo_files():
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            where = f"{path.relative_to(REPO)}:{n}: {line.strip()}"
            if any(re.search(p, line) for p in patterns):
                found.append(where)
            for package, names in re.findall(r"^\s*from (layerswap|layerswap\.data) import ([\w, ]+)", line):
                names = {name.split(" as ")[0].strip() for name in names.split(",")}
                if names & set(MOVED) if package == "layerswap" else names - data_modules:
                    found.append(where)
    assert not found, "old module names in use:\n" + "\n".join(found)
