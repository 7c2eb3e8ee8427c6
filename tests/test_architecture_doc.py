"""docs/ARCHITECTURE.md's module table stays true: every module it names exists, every package module is in it."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_module_table_names_exactly_the_package_modules():
    text = (REPO / "docs" / "ARCHITECTURE.md").read_text()
    table = text[text.index("## Package `layerswap/`"):text.index("## results/ layout")]
    named = set()
    for row in table.splitlines():
        if row.startswith("| `"):
            named.update(re.findall(r"`([a-z_]+(?:\.py|/))`", row.split("|")[1]))
    missing = sorted(n for n in named if not (REPO / "layerswap" / n.rstrip("/")).exists())
    assert not missing, f"docs/ARCHITECTURE.md names modules that do not exist: {missing}"
    modules = {p.name for p in (REPO / "layerswap").glob("*.py") if p.name != "__init__.py"}
    modules |= {f"{p.name}/" for p in (REPO / "layerswap").iterdir() if (p / "__init__.py").is_file()}
    unnamed = sorted(modules - named)
    assert not unnamed, f"package modules missing from docs/ARCHITECTURE.md: {unnamed}"
