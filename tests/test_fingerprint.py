"""Code fingerprints (layerswap/fingerprint.py): a rule's `code` param is the hash of what its command can import."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from layerswap.commands import COMMANDS
from layerswap.fingerprint import PACKAGE_DIR, closure, command_hash, module_hash, source_files

REPO = PACKAGE_DIR.parent


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture
def package(tmp_path) -> Path:
    """A small package: a imports b inside a function and declares a resource; b imports c relatively (from inside
    a subpackage); d is imported by nobody."""
    root = tmp_path / "layerswap"
    write(root, "__init__.py", "")
    write(root, "a.py", 'RESOURCES = ("res",)\n\ndef f():\n    from layerswap.sub import b\n    return b\n')
    write(root, "sub/__init__.py", "")
    write(root, "sub/b.py", "from .c import X\n")
    write(root, "sub/c.py", "X = 1\n")
    write(root, "d.py", "Y = 2\n")
    write(root, "res/t.yaml", "k: v\n")
    return root


def test_closure_follows_imports_inside_functions_relative_imports_and_resources(package):
    modules, resources = closure("layerswap.a", package)
    assert modules == ("layerswap", "layerswap.a", "layerswap.sub", "layerswap.sub.b", "layerswap.sub.c")
    assert resources == (package / "res" / "t.yaml",)


@pytest.mark.parametrize(
    "edited, changes", [("d.py", False), ("sub/c.py", True), ("res/t.yaml", True), ("sub/__init__.py", True)]
)
def test_an_edit_changes_the_hash_iff_the_module_can_run_it(package, edited, changes):
    closure.cache_clear()
    before = module_hash("layerswap.a", package)
    (package / edited).write_text((package / edited).read_text() + "# edited\n")
    closure.cache_clear()
    assert (module_hash("layerswap.a", package) != before) is changes


def test_a_resource_that_does_not_exist_is_named(package):
    write(package, "a.py", 'RESOURCES = ("nope",)\n')
    closure.cache_clear()
    with pytest.raises(FileNotFoundError, match=r"a.py: RESOURCES names nope"):
        closure("layerswap.a", package)


def commands_running(module_file: Path, root: Path) -> set[str]:
    return {c for c, (m, _) in COMMANDS.items() if module_file in source_files(m, root)}


def test_an_edit_to_a_package_module_changes_exactly_the_commands_that_import_it(tmp_path):
    """Every module of the real package, edited in a copy: the commands whose hash changes are those whose import
    graph reaches it; and the graph says what the rules rely on (the merge engine is not in the checkpoint
    evaluations, the evaluation code is not in merges, the dispatcher in nothing)."""
    root = tmp_path / "layerswap"
    shutil.copytree(PACKAGE_DIR, root, ignore=shutil.ignore_patterns("__pycache__"))
    closure.cache_clear()
    hashes = {c: module_hash(m, root) for c, (m, _) in COMMANDS.items()}
    for file in sorted(root.rglob("*.py")):
        original = file.read_text()
        file.write_text(original + "\n# edited\n")
        closure.cache_clear()
        changed = {c for c, (m, _) in COMMANDS.items() if module_hash(m, root) != hashes[c]}
        file.write_text(original)
        assert changed == commands_running(file, root), file.relative_to(root)
    closure.cache_clear()
    assert commands_running(root / "merge" / "engine.py", root) == {"merge", "evaluate-merges", "audit"}  # not
    # recipes; `audit --reevaluate-store` evaluates store-fed merges again (layerswap.audit.reevaluate)
    evaluating = {"evaluate", "evaluate-merges", "evaluate-leaders", "audit"}  # leaders: the selection's constraints
    assert commands_running(root / "evaluation" / "evaluate.py", root) == evaluating
    assert commands_running(root / "evaluation" / "paper_tasks.py", root) == evaluating | {"prestage", "token-counts"}
    assert commands_running(root / "select.py", root) == {"select", "evaluate-leaders"}  # the walk both follow
    assert "prestage" not in commands_running(root / "evaluation" / "hosts.py", root)
    assert commands_running(root / "cli.py", root) == set()
    assert commands_running(root / "tasks" / "toy" / "mgsm.yaml", root) >= {"evaluate", "evaluate-merges"}


def test_every_rule_fingerprints_the_command_it_runs():
    """In rules/*.smk every `code=` param is command_hash(<the layerswap command in that rule's shell>); an evaluation
    rule's `**evals.evaluation_params("<command>")` (`evals`: `spec.evals`) holds `code=command_hash("<command>")`
    and its shell is `evaluate_shell("<command>", ...)` (layerswap/workflow/words.py); a `use rule` runs its parent's
    shell."""
    header = re.compile(r"^\s*(?:rule (\w+)|use rule (\w+) as (\w+) with|rule)\s*:")  # `rule:` named below
    seen = 0
    parent, commands, hashed = {}, {}, {}
    for smk in sorted((REPO / "rules").glob("*.smk")):
        rule = None
        for n, line in enumerate(smk.read_text().splitlines()):
            m = header.match(line)
            if m:
                rule = m.group(1) or m.group(3) or f"{smk.name} line {n + 1}"
                if m.group(2):
                    parent[rule] = m.group(2)
            if rule is None or line.strip().startswith("#"):
                continue
            if c := re.search(r'(?:command_hash|\*\*evals\.evaluation_params)\("([a-z-]+)"\)', line):
                hashed[rule] = (smk.name, c.group(1))
            if (
                c := re.search(r'layerswap ([a-z][a-z-]+) |evaluate_shell\("([a-z-]+)"', line)
            ) and rule not in commands:
                commands[rule] = c.group(1) or c.group(2)
    for rule, (smk, cmd) in hashed.items():
        ran = commands.get(rule) or commands.get(parent.get(rule)) or ("sft" if "sft" in rule else None)
        assert ran == cmd, f"{smk}: rule {rule} runs `layerswap {ran}` but fingerprints {cmd}"
        assert cmd in COMMANDS
        seen += 1
    assert seen > 30
    assert "code_hash" not in "".join(p.read_text() for p in (REPO / "rules").glob("*.smk"))


def test_command_hash_is_stable_and_names_unknown_commands():
    assert command_hash("evaluate") == command_hash("evaluate") != command_hash("evaluate-merges")
    with pytest.raises(KeyError, match="nope"):
        command_hash("nope")
