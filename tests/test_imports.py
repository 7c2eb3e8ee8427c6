"""The package's layers (docs/ARCHITECTURE.md, "Layers: who imports whom") hold on its import graph: no cycle, no
import of a higher layer's module, no stage importing another but as the page lists; each exception is one the page
justifies, and each one the page lists still exists. The graph and the layers are
scripts/tools/structure_counts.py's."""

from __future__ import annotations

import re
from pathlib import Path

import networkx as nx
import pytest

from scripts.tools import structure_counts as counts

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "ARCHITECTURE.md"


@pytest.fixture(scope="module")
def graph():
    return counts.import_graph()


def _section() -> str:
    text = PAGE.read_text(encoding="utf-8")
    start = text.index("## Layers: who imports whom")
    return text[start : text.index("\n## ", start + 1)]


def _module(name: str) -> str:
    return "layerswap." + name.strip("/").replace("/", ".")


def page_layers() -> dict[str, int]:
    """{module or folder named in a numbered layer item: its layer's index} (a folder as `layerswap.<folder>.`)."""
    found = {}
    items = re.split(r"^(\d)\. \*\*", _section(), flags=re.M)[1:]
    for number, body in zip(items[::2], items[1::2]):
        for name in re.findall(r"`([a-z_/]+)`", body.split("\n\n")[0]):
            key = _module(name) + ("." if name.endswith("/") else "")
            assert found.get(key, int(number) - 1) == int(number) - 1, f"docs/ARCHITECTURE.md: `{name}` in two layers"
            found[key] = int(number) - 1
    return found


def justified() -> tuple[set[tuple[str, str]], set[frozenset[str]], set[tuple[str, str]]]:
    """(module imports, cycles, stage pairs) the page's bullets list."""
    edges, cycles, stages = set(), set(), set()
    for line in _section().splitlines():
        if not (m := re.match(r"\s*- `([^`]+)`:", line)):
            continue
        names = re.split(r" <?-> ", m.group(1))
        if " <-> " in m.group(1):
            cycles.add(frozenset(_module(n) for n in names))
        elif all(n.endswith("/") for n in names):
            stages.add(tuple(n.strip("/") for n in names))
        else:
            edges.add(tuple(_module(n) for n in names))
    return edges, cycles, stages


def test_the_page_places_every_module_in_the_layer_the_script_does(graph):
    named = page_layers()
    assert len(named) > 10 and set(named.values()) == set(range(len(counts.LAYERS)))
    gone = [n for n in named if n.rstrip(".") not in graph and not any(m.startswith(n) for m in graph)]
    assert not gone, f"docs/ARCHITECTURE.md places modules that do not exist: {gone}"
    for module in graph:
        exact = named.get(module)
        folder = max((n for n in named if n.endswith(".") and module.startswith(n)), key=len, default=None)
        where = exact if exact is not None else named.get(folder)
        assert where is not None, f"{module} is in no layer of docs/ARCHITECTURE.md"
        assert where == counts.layer(module), (
            f"{module}: docs/ARCHITECTURE.md puts it in layer {counts.LAYERS[where]}, "
            f"scripts/tools/structure_counts.py in {counts.LAYERS[counts.layer(module)]}"
        )


def test_no_import_cycle_but_those_the_page_justifies(graph):
    found = {frozenset(c) for c in nx.strongly_connected_components(graph) if len(c) > 1}
    listed = justified()[1]
    assert not found - listed, "import cycles: " + "; ".join(" <-> ".join(sorted(c)) for c in found - listed)
    assert not listed - found, "docs/ARCHITECTURE.md justifies cycles that are gone: " + "; ".join(
        " <-> ".join(sorted(c)) for c in listed - found
    )


def test_no_upward_import_but_those_the_page_justifies(graph):
    found = {(a, b) for a, b in graph.edges if counts.layer(b) > counts.layer(a)}
    listed = justified()[0]
    assert not found - listed, "upward imports: " + ", ".join(f"{a} -> {b}" for a, b in sorted(found - listed))
    assert not listed - found, "docs/ARCHITECTURE.md justifies imports that are gone: " + ", ".join(
        f"{a} -> {b}" for a, b in sorted(listed - found)
    )


def test_stages_import_each_other_only_as_the_page_lists(graph):
    found = {}
    for a, b in graph.edges:
        if counts.stage(a) and counts.stage(b) and counts.stage(a) != counts.stage(b):
            found.setdefault((counts.stage(a), counts.stage(b)), []).append(f"{a} -> {b}")
    listed = justified()[2]
    unlisted = [edge for pair in sorted(set(found) - listed) for edge in found[pair]]
    assert not unlisted, "imports across stages the page does not list: " + ", ".join(unlisted)
    assert not listed - set(found), f"docs/ARCHITECTURE.md lists stage imports that are gone: {listed - set(found)}"
