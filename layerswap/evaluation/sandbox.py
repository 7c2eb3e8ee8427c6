"""Run model-written code (MBPP-like pass@1) in a constrained subprocess.

Used only when the user opts in (`execute_code: true`). Each program runs in its own process:
- `python -I -S` (isolated mode, no site-packages, no PYTHON* variables), in an empty temporary working directory,
  with an environment holding only PATH, LANG and HOME (the temp dir): no proxy variables, no credentials;
- rlimits: address space (`MEMORY_BYTES`), CPU seconds, file size, open files, no core dumps;
- a wall-clock timeout; the whole process group is killed when it runs out;
- no network, two layers: when `unshare -rn` works on this machine (user + network namespace without privileges),
  the process runs in a new network namespace that has only a down loopback; in every case an audit hook installed
  before the program runs refuses socket creation/connect/bind/DNS and process spawning (os.system, subprocess,
  fork, exec). The hook alone is a guard against accidents, not a security boundary (ctypes can get around it);
  `network_isolation()` says which layer is active and `layerswap evaluate` logs it.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile

TIMEOUT_S = 5.0
MEMORY_BYTES = 1 << 30
FILE_BYTES = 1 << 20

# Runs before the program: block network and process creation through audit hooks, then exec the program (stdin).
_BOOTSTRAP = r"""
import sys
_BLOCKED = ("socket.", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty",
            "subprocess.Popen", "pty.spawn", "ctypes.dlopen", "urllib.Request", "http.client.connect")
def _hook(event, args):
    if event.startswith(_BLOCKED):
        raise PermissionError("sandbox: " + event + " is not allowed")
_src = sys.stdin.read()
sys.addaudithook(_hook)
del _hook
_code = compile(_src, "<program>", "exec")
exec(_code, {"__name__": "__main__", "__builtins__": __builtins__})
"""


@dataclasses.dataclass(frozen=True)
class Outcome:
    passed: bool
    status: str  # passed | failed | timeout
    returncode: int | None
    stderr_tail: str


@functools.lru_cache(maxsize=1)
def network_isolation() -> str:
    """'unshare -rn' when a network namespace can be created here, else 'audit-hook'."""
    unshare = shutil.which("unshare")
    if unshare:
        try:
            done = subprocess.run(
                [unshare, "-rn", sys.executable, "-I", "-S", "-c", "pass"], capture_output=True, timeout=10
            )
            if done.returncode == 0:
                return "unshare -rn"
        except (OSError, subprocess.SubprocessError):
            pass
    return "audit-hook"


def _limits(cpu_s: int, memory: int):
    def apply() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
        resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_BYTES, FILE_BYTES))
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return apply


def run_program(source: str, timeout: float = TIMEOUT_S, memory: int = MEMORY_BYTES) -> Outcome:
    """Run `source`; passed when it exits 0 within `timeout` seconds."""
    prefix = ["unshare", "-rn"] if network_isolation() == "unshare -rn" else []
    cmd = [*prefix, sys.executable, "-I", "-S", "-c", _BOOTSTRAP]
    with tempfile.TemporaryDirectory(prefix="layerswap-sandbox-") as cwd:
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": cwd}
        proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=_limits(int(timeout) + 1, memory),
        )
        try:
            _, err = proc.communicate(source.encode("utf-8", "replace"), timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.communicate()
            return Outcome(False, "timeout", None, "")
    tail = err.decode("utf-8", "replace")[-500:]
    ok = proc.returncode == 0
    return Outcome(ok, "passed" if ok else "failed", proc.returncode, tail)


def mbpp_program(doc: dict, completion: str) -> str:
    """The program run for one MBPP item: setup code, the model's code, then the item's asserts."""
    parts = [doc.get("test_setup_code") or "", completion, *list(doc.get("test_list") or [])]
    return "\n".join(p for p in parts if p)


def execute_all(resps, docs, program=mbpp_program) -> list[list[str]]:
    """Run every generation of every item as `program(doc, generation)`, several sandboxes at a time.

    Returns the outcome per response: "passed", "failed" or "timeout". The MBPP task filters of both task sets
    call this; it runs only when the user opted in (`execute_code: true`)."""
    from concurrent.futures import ThreadPoolExecutor

    jobs = [(i, program(doc, gen)) for i, (gens, doc) in enumerate(zip(resps, docs)) for gen in gens]
    with ThreadPoolExecutor(max_workers=max(1, min(8, os.cpu_count() or 1))) as pool:
        outcomes = list(pool.map(lambda job: run_program(job[1]).status, jobs))
    out: list[list[str]] = [[] for _ in resps]
    for (i, _), status in zip(jobs, outcomes):
        out[i].append(status)
    return out


def pass_at_1(doc: dict, results: list[str]) -> dict:
    """pass@1 of the greedy sample, from the outcome `execute_all` put in place of the generation."""
    return {"pass_at_1": 1.0 if results[0] == "passed" else 0.0}
