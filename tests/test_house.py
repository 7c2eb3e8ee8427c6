"""The house as the design card draws it: the top level's folders, no module over the line cap, and the scripts free of
test code (the tests may use the scripts' stand-ins, never the other way round)."""

from __future__ import annotations

import ast

from conftest import REPO

#: the most lines a module of the package, a script or a rule file may have (docs/ARCHITECTURE.md)
LINE_CAP = 500


def test_the_top_level_is_the_design_cards():
    for name in ("Snakefile", "rules", "config", "envs", "scripts", "tests", "layerswap", "docs"):
        assert (REPO / name).exists(), name
    for gone in ("measure", "tools"):  # now scripts/measure, scripts/tools
        assert not (REPO / gone).exists(), gone


def test_no_module_is_over_the_line_cap():
    files = [*(REPO / "layerswap").rglob("*.py"), *(REPO / "scripts").rglob("*.py"), *(REPO / "rules").glob("*.smk")]
    files.append(REPO / "Snakefile")
    over = {str(p.relative_to(REPO)): n for p in files if (n := len(p.read_text().splitlines())) > LINE_CAP}
    assert not over, f"over {LINE_CAP} lines: {over}"


def test_scripts_import_no_test_code():
    found = []
    for path in (REPO / "scripts").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                if top in ("tests", "conftest") or top.startswith("test_"):
                    found.append(f"{path.relative_to(REPO)}: {name}")
    assert not found, found
