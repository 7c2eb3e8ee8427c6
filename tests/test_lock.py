"""requirements.lock (`make lock`, uv) pins the environment CI tests and the cluster installs: every requirement of
pyproject.toml (with the test and cluster extras) has a pin there that its range admits, and the environment this
suite runs in is the locked one."""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import PackageNotFoundError, version

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from conftest import REPO


def _pins() -> dict[str, Version]:
    pins = {}
    for line in (REPO / "requirements.lock").read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9_.\-]+)==([^\s;]+)", line)
        if match:
            pins[canonicalize_name(match.group(1))] = Version(match.group(2))
    return pins


def _requirements() -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for extra in ("test", "cluster"):
        reqs += project["optional-dependencies"][extra]
    return [Requirement(r) for r in reqs]


def test_every_requirement_is_pinned_within_its_range():
    pins = _pins()
    for req in _requirements():
        name = canonicalize_name(req.name)
        assert name in pins, f"requirements.lock has no pin for {req} (run `make lock`)"
        assert req.specifier.contains(pins[name], prereleases=True), \
            f"requirements.lock pins {name}=={pins[name]}, outside pyproject.toml's {req} (run `make lock`)"


def test_this_environment_is_the_locked_one():
    """What `make` installed (pip -c requirements.lock) is what the lock says; torch may carry a local build label
    (+cpu on a CPU-only machine)."""
    pins = _pins()
    for req in _requirements():
        name = canonicalize_name(req.name)
        try:
            installed = Version(version(req.name))
        except PackageNotFoundError:
            continue
        assert Version(installed.public) == pins[name], \
            f"{name} {installed} installed, requirements.lock pins {pins[name]}"


def test_make_installs_from_the_lock():
    makefile = (REPO / "Makefile").read_text()
    installs = [line for line in makefile.splitlines() if "pip install" in line and "-e '.[" in line]
    assert installs and all("-c requirements.lock" in line for line in installs)
