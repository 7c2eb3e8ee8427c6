"""A Hugging Face Hub replica on loopback for tests: `Replica(root)` builds the repositories of `repos.py` as git
repositories and serves them with olah (`serve.py`) on a free port of 127.0.0.1; `env()` gives the variables that
point huggingface_hub, datasets, transformers and lm-eval at it. The server is always stopped on exit, and stops by
itself after `lifetime` seconds.

    with Replica(tmp_path, breaks={"drop_column": ("CohereForAI/aya_dataset", "targets")}) as hub:
        subprocess.run([...], env={**os.environ, **hub.env()})

Deliberate faults (`breaks`, for the pre-flight tests): see `repos.BREAKS`. Network faults (`faults`, for the retry
tests): per repository id, its first N requests (or every one) reset, answered with a status, or delayed:

    with Replica(tmp_path, faults={"CohereForAI/Global-MMLU": reset(first=2)}) as hub: ...

(`serve.Front`; each broken request is a line of `root/faults.log`).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from .repos import BREAKS, Repo, all_repos, external_files

TOKEN = "hf_replica_token_0123456789"
SERVE = Path(__file__).resolve().parent / "serve.py"
_GIT = ["git", "-c", "user.name=replica", "-c", "user.email=replica@localhost", "-c", "commit.gpgsign=false"]
_DATE = {"GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}


def _write(directory: Path, files: dict) -> None:
    for rel, content in files.items():
        path = directory / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content() if callable(content) else content)


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        [*_GIT, *args], cwd=cwd, check=True, capture_output=True, text=True, env={**os.environ, **_DATE}
    ).stdout.strip()


def _commit_repo(path: Path, repo: Repo) -> dict[str, str]:
    """One git repository with `main` holding repo.files; each extra ref an orphan commit of its own files."""
    path.mkdir(parents=True)
    _git(path, "init", "-q", "-b", "main")
    refs = {}
    for ref, files in repo.refs.items():
        _git(path, "checkout", "-q", "--orphan", "replica-tmp")
        _write(path, files)
        _git(path, "add", "-A")
        _git(path, "commit", "-q", "-m", f"{ref} (replica)")
        refs[ref] = _git(path, "rev-parse", "HEAD")
        _git(path, "update-ref", ref, "HEAD")
        _git(path, "rm", "-q", "-r", "--cached", ".")
        for child in path.iterdir():
            if child.name != ".git":
                shutil.rmtree(child) if child.is_dir() else child.unlink()
        _git(path, "checkout", "-q", "--orphan", "main")
    _write(path, repo.files)
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "-m", "replica of " + repo.repo_id)
    _git(path, "branch", "-q", "-D", "replica-tmp") if repo.refs else None
    return refs


def reset(first: int | None = None) -> dict:
    """A network fault: the repository's first `first` requests (None: every one) end in a TCP reset."""
    return {"mode": "reset", "first": first}


def status(code: int, first: int | None = None, retry_after: float | None = None) -> dict:
    """A network fault: the repository's first `first` requests (None: every one) answered `code` (Retry-After)."""
    return {"mode": "status", "status": code, "first": first, "retry_after": retry_after}


def delay(seconds: float, first: int | None = None) -> dict:
    """A network fault: the repository's first `first` requests (None: every one) held `seconds` before olah."""
    return {"mode": "delay", "seconds": seconds, "first": first}


def build(root: Path, breaks: dict | None = None, faults: dict | None = None) -> dict:
    """Write every replica repository under root/mirrors, the external files under root/external, and
    root/replica.json (gated repositories, token, refs, network faults). Returns that metadata."""
    repos = all_repos()
    for name, arg in (breaks or {}).items():
        BREAKS[name](repos, arg)
    known = {repo.repo_id for repo in repos}
    unknown = sorted(set(faults or {}) - known)
    if unknown:
        raise ValueError(f"faults for repositories the replica does not have: {unknown}")
    meta = {"gated": [], "token": TOKEN, "refs": {}, "faults": faults or {}}
    for repo in repos:
        kind = "datasets" if repo.kind == "dataset" else "models"
        key = f"{kind}/{repo.repo_id}"
        refs = _commit_repo(root / "mirrors" / kind / repo.repo_id, repo)
        if refs:
            meta["refs"][key] = refs
        if repo.gated:
            meta["gated"].append(key)
    _write(root / "external", external_files())
    (root / "replica.json").write_text(json.dumps(meta, indent=1))
    return meta


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Replica:
    def __init__(self, root: Path, breaks: dict | None = None, lifetime: float = 900, faults: dict | None = None):
        self.root, self.breaks, self.lifetime, self.faults = Path(root), breaks, lifetime, faults
        self.proc: subprocess.Popen | None = None
        self.port = 0

    def broken(self) -> list[str]:
        """The requests the network faults broke so far, one line each (`<mode> #<n> <path>`)."""
        log = self.root / "faults.log"
        return log.read_text().splitlines() if log.exists() else []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self, token: bool = True) -> dict[str, str]:
        """HF_ENDPOINT at the replica, the replica's token (unless token=False), and no cached login."""
        env = {
            "HF_ENDPOINT": self.url,
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "HF_HUB_DISABLE_IMPLICIT_TOKEN": "",
            "HF_TOKEN_PATH": str(self.root / "no-token"),
            # online against the replica (the rules set the jobs offline themselves)
            "HF_HUB_OFFLINE": "0",
            "HF_DATASETS_OFFLINE": "0",
            "TRANSFORMERS_OFFLINE": "0",
        }
        if token:
            env["HF_TOKEN"] = TOKEN
        return env

    def __enter__(self) -> "Replica":
        self.root.mkdir(parents=True, exist_ok=True)
        build(self.root, self.breaks, self.faults)
        self.port = free_port()
        log = open(self.root / "server.log", "w")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(SERVE),
                "--root",
                str(self.root),
                "--port",
                str(self.port),
                "--lifetime",
                str(self.lifetime),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.root,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"hub replica exited: {(self.root / 'server.log').read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return self
            except OSError:
                time.sleep(0.2)
        self.__exit__(None, None, None)
        raise RuntimeError("hub replica did not start within 60 s")

    def __exit__(self, *exc) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
