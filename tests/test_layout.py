"""The stage layout of issue 18: the old flat module names are aliases of the moved modules (for users' scripts and
notebooks), and nothing in the repository uses them, so code fingerprints follow the real files."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import layerswap
from layerswap.fingerprint import module_file

REPO = Path(__file__).resolve().parents[1]
OLD = "|".join(sorted(layerswap.MOVED, key=len, reverse=True))


def test_every_old_name_is_the_moved_module_itself(monkeypatch):
    for old, new in layerswap.MOVED.items():
        assert module_file(f"layerswap.{old}") is None, f"layerswap/{old}.py is back beside its alias"
        moved = importlib.import_module(f"layerswap.{new}")
        assert importlib.import_module(f"layerswap.{old}") is moved, old
        assert getattr(layerswap, old) is moved, old
        assert moved.__name__ == moved.__spec__.name == f"layerswap.{new}", old  # the real spec, not the alias's
    monkeypatch.setattr("layerswap.tables.build_tables", "patched")  # through the old name: the one module is patched
    assert importlib.import_module("layerswap.report.tables").build_tables == "patched"


def test_an_old_name_imported_first_in_a_fresh_process():
    code = ("import layerswap.plan as old\nfrom layerswap import cost\nimport layerswap.workflow.plan as new\n"
            "import layerswap.workflow.cost\nassert old is new and cost is layerswap.workflow.cost\n"
            "assert new.__spec__.name == 'layerswap.workflow.plan'\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    old_launch = subprocess.run([sys.executable, "-m", "layerswap.sft", "--help"], cwd=REPO, capture_output=True,
                                text=True, timeout=120)  # an accelerate launch line written before the move
    assert old_launch.returncode == 0 and old_launch.stdout.startswith("usage: layerswap sft"), old_launch.stderr


def repo_files():
    for pattern in ("layerswap/**/*.py", "scripts/*.py", "tests/*.py", "rules/*.smk", "Snakefile", "cluster/*.yaml"):
        yield from (p for p in REPO.glob(pattern) if p.resolve() != Path(__file__).resolve())


def test_nothing_in_the_repository_uses_an_old_name():
    """The aliases serve outside users only: the package, rules, scripts and tests import the new names (a fingerprint
    follows real files; an import through an alias would hide the module from it)."""
    data_modules = {p.stem for p in (REPO / "layerswap" / "data").glob("*.py")}
    patterns = [rf"^\s*import layerswap\.({OLD})\b", rf"^\s*from layerswap\.({OLD})\b", rf"-m layerswap\.({OLD})\b",
                rf"""["']layerswap\.({OLD})\.""", rf"""import_module\(["']layerswap\.({OLD})["']"""]
    found = []
    for path in repo_files():
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            where = f"{path.relative_to(REPO)}:{n}: {line.strip()}"
            if any(re.search(p, line) for p in patterns):
                found.append(where)
            for package, names in re.findall(r"^\s*from (layerswap|layerswap\.data) import ([\w, ]+)", line):
                names = {name.split(" as ")[0].strip() for name in names.split(",")}
                if names & set(layerswap.MOVED) if package == "layerswap" else names - data_modules:
                    found.append(where)
    assert not found, "old module names in use:\n" + "\n".join(found)
