"""Counts a maintainer reads the package's structure by (issue 37): where a results path is spelled, how many members
the rules' `Spec` has, and the import cycles and upward imports between the package's modules.

    python -m scripts.tools.structure_counts            # a table
    python -m scripts.tools.structure_counts --json     # the same, as JSON (e.g. to compare two commits)

Results paths: string literals (f-strings included) in rules/*.smk, the Snakefile and layerswap/**/*.py that spell a
path under the results folder (`{R}/...`, `results/...`) or the experts' or merged models' folder
(`{...experts}/...`, `{...merged}/...`). `layout module` is the file that owns them (layerswap/layout.py once
it exists); a kind is a path with its `{...}` parts blanked, and `kinds spelled twice or more` counts the kinds
spelled in more than one place outside it.

Spec: the members of `layerswap.workflow.spec.Spec` that the package defines: methods and class attributes of Spec
and of every base class from the package, plus the `self.<name> =` attributes their methods set. The parts Spec holds
(`self.<name> = <package class>(...)` in its methods) are listed with their own members, counted the same way (a
part's private `_name` attributes included), so a count does not shrink by moving members into a part.

Imports: the graph of `layerswap.fingerprint.imports_of` (imports inside functions included; a package's `__init__`
aside). A cycle is a strongly connected set of two modules or more. Layers (docs/ARCHITECTURE.md, "Layers: who
imports whom"), bottom to top: base (the top-level modules that know no stage, among them the results layout `layout`
and its scratch namespace `scratch`), the stages (data, train, select, merge, evaluation, report, and the
task files), `config`, then workflow and audit, then the entry points `cli` and `schema_blocks`; an import of a
higher layer's module is upward, and one stage's import of another stage is `across` (listed; the page lists the
stage pairs allowed).
tests/test_imports.py checks the graph against the page with the functions below.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PATH_RE = re.compile(r"""(?:^|["'/])(\{[^{}]*\}|results)/""")
ROOTS = re.compile(r"^(\{R\}|results|\{[\w.]*experts\}|\{[\w.]*merged\}|\{big\})/")
#: The layers, bottom to top; `layer(module)` places a module.
LAYERS = ("base", "stages", "config", "workflow", "entry points")
STAGES = ("data", "train", "select", "merge", "evaluation", "report", "tasks")
CONFIG = ("config",)
TOP = ("workflow", "audit")
ENTRY_POINTS = ("cli", "schema_blocks")


def _strings(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every string literal of a Python file; an f-string's placeholders become `{name}`."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".py":
        tree = ast.parse(text)
    else:  # a Snakemake file: its string literals, by a regex (it is no Python file)
        return [
            (text.count("\n", 0, m.start()) + 1, m.group(2))
            for m in re.finditer(r"""(?:f|rf|fr)?(["'])((?:(?!\1).)*)\1""", text)
        ]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            parts = [v.value if isinstance(v, ast.Constant) else "{" + ast.unparse(v.value) + "}" for v in node.values]
            found.append((node.lineno, "".join(parts)))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.append((node.lineno, node.value))
    inner = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    return [(line, s) for line, s in found if id(s) not in inner]


def results_paths() -> dict:
    files = [*REPO.glob("rules/*.smk"), REPO / "Snakefile", *REPO.glob("layerswap/**/*.py")]
    layout = REPO / "layerswap/layout.py"
    spelled, kinds = [], defaultdict(set)
    for path in sorted(files):
        for line, s in _strings(path):
            for word in s.split():
                if ROOTS.match(word.strip("\"'")):
                    where = f"{path.relative_to(REPO)}:{line}"
                    kind = re.sub(r"\{+[^{}]*\}+", "{}", word.strip("\"'"))
                    kind = re.sub(r"^\{\}", "{root}", kind)
                    if path != layout:
                        spelled.append((where, kind))
                        kinds[kind].add(where)
    twice = {k: sorted(v) for k, v in kinds.items() if len(v) > 1}
    return {
        "spelled outside the layout module": len(spelled),
        "kinds spelled twice or more": len(twice),
        "most spelled": sorted(((len(v), k) for k, v in twice.items()), reverse=True)[:5],
    }


def _class_node(cls) -> ast.ClassDef:
    source = Path(sys.modules[cls.__module__].__file__).read_text(encoding="utf-8")
    return next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ClassDef) and n.name == cls.__name__)


def spec_members() -> dict:
    from layerswap.workflow import spec as spec_module

    counts = _members(spec_module.Spec)
    parts = {}
    for sub in ast.walk(_class_node(spec_module.Spec)):
        if (
            isinstance(sub, ast.Assign)
            and isinstance(sub.value, ast.Call)
            and isinstance(sub.value.func, ast.Name)
            and isinstance(getattr(spec_module, sub.value.func.id, None), type)
        ):
            cls = getattr(spec_module, sub.value.func.id)
            if cls.__module__.startswith("layerswap."):
                parts[ast.unparse(sub.targets[0]).removeprefix("self.")] = {"class": cls.__name__, **_members(cls)}
    return {**counts, "parts": parts}


def _members(top) -> dict:
    members: set[str] = set()
    own = [c for c in top.__mro__ if c.__module__.startswith("layerswap.")]
    for cls in own:
        members.update(n for n in vars(cls) if not (n.startswith("__") and n.endswith("__")))
        for sub in ast.walk(_class_node(cls)):
            targets = (
                sub.targets
                if isinstance(sub, ast.Assign)
                else ([sub.target] if isinstance(sub, (ast.AnnAssign, ast.AugAssign)) else [])
            )
            for t in targets:
                for e in ast.walk(t):
                    if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "self":
                        members.add(e.attr)
    methods = [n for c in own for n, v in vars(c).items() if callable(v) or isinstance(v, (staticmethod, property))]
    return {"members": len(members), "methods": len(set(methods)), "classes in its MRO": [c.__name__ for c in own]}


def layer(module: str) -> int:
    """The index in LAYERS of a package module (`layerswap.<name>`)."""
    name = module.removeprefix("layerswap.")
    top = name.split(".")[0]
    if name in ENTRY_POINTS:
        return 4
    if top in TOP:
        return 3
    if name in CONFIG:
        return 2
    return 1 if top in STAGES else 0


def stage(module: str) -> str | None:
    """The stage a module belongs to (its folder under layerswap/, or `select`), None outside the stages."""
    return module.split(".")[1] if layer(module) == 1 else None


def import_graph():
    """The package's modules and their imports of each other, as a networkx DiGraph."""
    import networkx as nx

    from layerswap.fingerprint import imports_of

    names = sorted(
        ".".join(("layerswap", *p.relative_to(REPO / "layerswap").with_suffix("").parts))
        for p in (REPO / "layerswap").rglob("*.py")
        if p.name != "__init__.py"
    )
    graph = nx.DiGraph()
    for name in names:
        graph.add_node(name)
        for target in imports_of(name)[0]:
            if target in names and target != name:
                graph.add_edge(name, target)
    return graph


def imports() -> dict:
    import networkx as nx

    graph = import_graph()
    cycles = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    upward = sorted(f"{a} -> {b}" for a, b in graph.edges if layer(b) > layer(a))
    across = sorted(f"{a} -> {b}" for a, b in graph.edges if stage(a) and stage(b) and stage(a) != stage(b))
    return {"cycles": sorted(cycles), "upward": upward, "across stages": across}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    counts = {"results paths": results_paths(), "Spec": spec_members(), "imports": imports()}
    if args.json:
        print(json.dumps(counts, indent=1))
        return
    paths, spec, imp = counts["results paths"], counts["Spec"], counts["imports"]
    print(f"results paths spelled outside the layout module: {paths['spelled outside the layout module']}")
    print(
        f"  kinds spelled twice or more: {paths['kinds spelled twice or more']}; most spelled: "
        + ", ".join(f"{k} ({n})" for n, k in paths["most spelled"])
    )
    print(f"Spec: {spec['members']} members ({spec['methods']} methods) over {', '.join(spec['classes in its MRO'])}")
    if spec["parts"]:
        parts = spec["parts"].items()
        print("  its parts: " + ", ".join(f"{name} ({p['class']}: {p['members']})" for name, p in parts))
    print(f"import cycles: {len(imp['cycles'])}")
    for c in imp["cycles"]:
        print(f"  {' <-> '.join(c)}")
    print(f"upward imports: {len(imp['upward'])}")
    for line in imp["upward"]:
        print(f"  {line}")
    print(f"imports across stages: {len(imp['across stages'])}")
    for line in imp["across stages"]:
        print(f"  {line}")


if __name__ == "__main__":
    main()
