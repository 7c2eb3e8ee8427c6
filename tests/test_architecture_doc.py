"""docs/ARCHITECTURE.md's module table stays true: every module it names exists, every package module is in it."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_module_table_names_exactly_the_package_modules():
    text = (REPO / "docs" / "ARCHITECTURE.md").read_text()
    table = text[text.index("## Package `layerswap/`") : text.index("## results/ layout")]
    named = set()
    for row in table.splitlines():
        if row.startswith("| `"):
            for name in re.findall(r"`([a-z_/]+(?:\.py|/))`", row.split("|")[1]):
                named.add(name)
                if "/" in name.rstrip("/"):  # a module of a subpackage names the subpackage too
                    named.add(name.split("/")[0] + "/")
    missing = sorted(n for n in named if not (REPO / "layerswap" / n.rstrip("/")).exists())
    assert not missing, f"docs/ARCHITECTURE.md names modules that do not exist: {missing}"
    modules = {p.name for p in (REPO / "layerswap").glob("*.py") if p.name != "__init__.py"}
    modules |= {f"{p.name}/" for p in (REPO / "layerswap").iterdir() if (p / "__init__.py").is_file()}
    unnamed = sorted(modules - named)
    assert not unnamed, f"package modules missing from docs/ARCHITECTURE.md: {unnamed}"


def test_the_stage_picture_names_real_rule_files_commands_and_modules():
    from layerswap.commands import COMMANDS

    text = (REPO / "docs" / "ARCHITECTURE.md").read_text()
    picture = text[text.index("## The stages at a glance") : text.index("## Package `layerswap/`")]
    lines = picture.split("```")[1].splitlines()
    header = lines[1]
    cols = [header.index(c) for c in ("rules/", "command(s)", "modules", "writes")]
    rows = [r for r in lines[3:] if not r.startswith("every rule")]
    assert rows
    for row in rows:
        files, commands, modules = row[cols[0] : cols[1]], row[cols[1] : cols[2]], row[cols[2] : cols[3]]
        for smk in re.findall(r"[a-z]+\.smk", files):
            assert (REPO / "rules" / smk).is_file(), smk
        for command in re.findall(r"[a-z][a-z-]+", commands.replace("(+ above)", "")):
            assert command in COMMANDS, command
        for module in re.findall(r"[a-z_]+(?:/[a-z_]+)?", modules.replace("evaluation/*", "evaluation")):
            assert (REPO / "layerswap" / f"{module}.py").is_file() or (REPO / "layerswap" / module).is_dir(), module
