"""What the drills share: Snakemake and layerswap runs in a work directory (progress relayed, killable), copies of
the reference run, the audit against its manifest, edited configs."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from layerswap.layout import Layout

REPO = Path(__file__).resolve().parents[3]
LAYOUT = Layout()
CONFIG = REPO / "config" / "micro.yaml"
BIN = str(Path(sys.executable).parent)
ENV = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
SNAKEMAKE = [
    sys.executable,
    "-m",
    "snakemake",
    "-s",
    str(REPO / "Snakefile"),
    "--configfile",
    str(CONFIG),
    "--cores",
    "2",
]
PROGRESS = re.compile(
    r"^repair:|\d+ of \d+ steps|Nothing to be done|LockException|Directory cannot be locked|Error in rule"
)
START = time.monotonic()


def say(text: str) -> None:
    print(f"[{time.monotonic() - START:6.0f} s] {text}", flush=True)


def snakemake(work: Path, *args: str, kill_when=None) -> tuple[int, str]:
    """Run Snakemake in `work`, relaying its progress lines; `kill_when()` true: kill -9 its process group (Snakemake
    and every job it started). Returns the exit status (-9 when killed) and the log."""
    return logged(work, [*SNAKEMAKE, "--directory", str(work), *args], kill_when)


def logged(work: Path, cmd: list[str], kill_when=None) -> tuple[int, str]:
    """`cmd` in `work`, its output appended to `work/snakemake.log` and its progress lines relayed."""
    log = work / "snakemake.log"
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(cmd)}\n")
        out.flush()
        start = out.tell()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=ENV, cwd=work, start_new_session=True)
        seen = start
        while proc.poll() is None:
            time.sleep(0.01)
            seen = relay(log, seen)
            if kill_when is not None and kill_when():
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                return -9, log.read_text()[start:]
    relay(log, seen)
    return proc.returncode, log.read_text()[start:]


def relay(log: Path, offset: int) -> int:
    with log.open() as f:
        f.seek(offset)
        text = f.read()
    complete = text[: text.rfind("\n") + 1]
    for line in complete.splitlines():
        if PROGRESS.search(line):
            say(f"  | {line.strip()}")
    return offset + len(complete)


def layerswap(work: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "layerswap.cli", *args], cwd=work, env=ENV, capture_output=True, text=True
    )


def audit_against(reference: Path, work: Path) -> tuple[bool, str]:
    """`layerswap audit` of work's results against the reference run's manifest: (passed, its last line)."""
    proc = layerswap(work, "audit", "--manifest", str(reference / LAYOUT.manifest()))
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    return proc.returncode == 0, "; ".join(lines[-3:])


def survivors(work: Path) -> list[int]:
    """Processes still running in `work` (Linux: their working directory)."""
    pids = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if Path(os.readlink(proc / "cwd")) == work:
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids


def copy_run(reference: Path, dest: Path) -> Path:
    shutil.copytree(reference, dest, symlinks=True, ignore=shutil.ignore_patterns("locks", "snakemake.log"))
    return dest


def steps_of(log: Path) -> list[int]:
    return [json.loads(line)["step"] for line in log.read_text().splitlines()]


def new_dir(path: Path) -> Path:
    path.mkdir(parents=True)
    return path


def edited_config(dest: Path, edit) -> Path:
    """micro.yaml with `edit(config)` applied, written to `dest`."""
    import yaml

    config = yaml.safe_load(CONFIG.read_text())
    edit(config)
    dest.write_text(yaml.safe_dump(config, sort_keys=False))
    return dest


def with_config(config: Path) -> list[str]:
    """The drills' Snakemake command line with another config file."""
    return [*SNAKEMAKE[:6], str(config), *SNAKEMAKE[7:]]


def planned_jobs(work: Path, config: Path) -> tuple[int, list[str]]:
    """A dry run of `config` in `work`: its exit status and the jobs it plans (`rule[wildcards]`, all aside)."""
    from layerswap.workflow.plan import parse_dry_run

    code, text = logged(work, [*with_config(config), "--directory", str(work), "--dry-run"])
    return code, sorted(j.name for j in parse_dry_run(text) if j.rule != "all")


def first_score(value, path=()):
    """The key path of the first float (a score) in a JSON value."""
    if isinstance(value, float):
        return path
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        found = first_score(item, (*path, key))
        if found is not None:
            return found
    return None


def last_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1] if lines else ""
