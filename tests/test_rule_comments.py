"""The file patterns printed above the rules (`#   in:` / `#   out:`, docs/ARCHITECTURE.md: a rule reads alone) are
the files their jobs read and write: each pattern matches a file of a job of its rule in a dry run of the micro
config and of the paper config, so a comment cannot drift from the layout it describes."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from conftest import REPO

from scripts.tools.dry_run_jobs import jobs

RULE = re.compile(r"^(?:rule (\w+):|use rule \w+ as (\w+) with:)")
SEGMENT = re.compile(r"\b(in|out):(.*?)(?=\b(?:in|out):|$)")  # `in: ...; out: ...` on one line too
PATH = re.compile(r"(?:<[^>]*>|[^\s<(])+")  # a path; `<...>` may hold spaces


def all_rules() -> list[str]:
    """Every rule of the rule files, wherever it stands (at the top or inside an `if` block)."""
    return [
        m.group(1) or m.group(2)
        for smk in sorted((REPO / "rules").glob("*.smk"))
        for line in smk.read_text().splitlines()
        if (m := RULE.match(line.strip()))
    ]


def commented_rules() -> dict[str, dict[str, list[list[str]]]]:
    """{rule: {"in"/"out": [the file patterns of each such comment line: alternatives, one must match]}}, of the
    rules at the top of a rule file and those inside an `if` block alike."""
    found: dict[str, dict[str, list[list[str]]]] = {}
    for smk in sorted((REPO / "rules").glob("*.smk")):
        comments: list[str] = []
        for line in smk.read_text().splitlines():
            if line.lstrip().startswith("#"):
                comments.append(line.strip())
                continue
            match = RULE.match(line.strip())
            if match and comments:
                patterns: dict[str, list[list[str]]] = {}
                for comment in comments:
                    for kind, text in SEGMENT.findall(comment):
                        paths = [p.rstrip(",;)") for p in PATH.findall(text) if "/" in p]
                        if paths:
                            patterns.setdefault(kind, []).append(paths)
                if patterns:
                    found[match.group(1) or match.group(2)] = patterns
            comments = []
    return found


def as_regex(pattern: str) -> re.Pattern:
    """`{wildcard}` is one path segment (or part of one), `<anything described>` any run of characters."""
    parts = re.split(r"(\{[^}]+\}|<[^>]+>)", pattern)
    body = "".join(
        "[^/]+" if p.startswith("{") else ".+" if p.startswith("<") else re.escape(p) for p in parts if p != ""
    )
    return re.compile(body)


def planned_files(tmp_path, configfile) -> dict[str, dict[str, set[str]]]:
    """{rule: {"in": inputs, "out": outputs}} of every job of a forced dry run of `configfile` (all and ablations)."""
    files: dict[str, dict[str, set[str]]] = {}
    for target in ("all", "ablations"):
        cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(tmp_path)]
        cmd += ["--configfile", str(configfile), "--cores", "1", "--dry-run", "--forceall", target]
        run = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=600)
        assert run.returncode == 0, run.stderr[-3000:]
        for block in jobs(run.stdout + run.stderr):
            lines = block.splitlines()
            rule = re.sub(r"^(local)?(rule|checkpoint) ", "", lines[0]).rstrip(":")
            entry = files.setdefault(rule, {"in": set(), "out": set()})
            for line in lines[1:]:
                for kind, key in (("in", "input: "), ("out", "output: ")):
                    if line.startswith(key):
                        entry[kind] |= set(line[len(key) :].split(", "))
    return files


def test_every_rule_prints_its_file_patterns():
    """A rule file reads alone: every rule, wherever it stands, says what it reads and writes above it."""
    rules = commented_rules()
    assert {"evaluate_merges", "merge_recipes", "select", "sft"} <= set(rules), sorted(rules)
    missing = [r for r in all_rules() if r not in rules and r != "all"]
    assert not missing, f"rules without an `in:` / `out:` comment above them: {missing}"


@pytest.mark.parametrize("configfile", [REPO / "config" / "micro.yaml", REPO / "config" / "paper.yaml"])
def test_each_printed_pattern_is_a_file_of_its_rules_jobs(tmp_path, configfile):
    planned = planned_files(tmp_path, configfile)
    checked, wrong = [], []
    for rule, patterns in commented_rules().items():
        if rule not in planned:  # not in this config's DAG (a merged model is made only by request)
            continue
        for kind, shown in patterns.items():
            for alternatives in shown:
                regexes = [as_regex(p) for p in alternatives]
                if any(r.fullmatch(f) for r in regexes for f in planned[rule][kind]):
                    checked.append((rule, alternatives[0]))
                else:
                    wrong.append(f"{rule} {kind}: {alternatives} (its jobs: {sorted(planned[rule][kind])[:3]} ...)")
    assert not wrong, "\n".join(wrong)
    assert len(checked) >= 10, checked
