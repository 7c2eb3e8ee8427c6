"""The machine a manifest records and how two machines differ: the workflow's git state, package versions,
hardware (CPU model and instruction-set flags from /proc/cpuinfo, torch's CPU kernel level, CPU count, GPU names).

`layerswap audit` prints one `hardware:` line per difference between the manifest's machine and this one (machine,
CPU model, instruction-set flags, torch's CPU kernel level, GPUs, cpu_count): informational, never drift.
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
from pathlib import Path

PACKAGES = (
    "torch",
    "transformers",
    "accelerate",
    "lm-eval",
    "snakemake",
    "safetensors",
    "peft",
    "tokenizers",
    "pandas",
    "altair",
    "numpy",
    "datasets",
    "sacrebleu",
)


def checkout() -> Path:
    """The directory holding the running `layerswap` package: the workflow's checkout in an editable install."""
    return Path(__file__).resolve().parents[1]


def git_state(path: Path) -> dict:
    try:
        commit = subprocess.run(
            ["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=30
        )
        if commit.returncode != 0:
            return {"commit": None, "dirty": None, "note": "not a git checkout"}
        status = subprocess.run(
            ["git", "-C", str(path), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        return {"commit": commit.stdout.strip(), "dirty": bool(status.stdout.strip())}
    except (OSError, subprocess.TimeoutExpired):
        return {"commit": None, "dirty": None, "note": "git not available"}


def package_versions() -> dict[str, str | None]:
    from importlib import metadata

    out = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def cpu_info(cpuinfo: Path = Path("/proc/cpuinfo")) -> dict:
    """CPU model and instruction-set flags of the first processor in /proc/cpuinfo (Linux; `Features` on ARM).
    Elsewhere, or when the file cannot be read: the model from `platform` and no flags, `cpu_source` saying so."""
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        text = ""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break  # the first processor's block is enough: every core of a machine reports the same
            continue
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip().lower(), value.strip())
    flags = fields.get("flags", fields.get("features"))
    model = fields.get("model name") or fields.get("hardware") or fields.get("cpu model")
    if model is None and flags is None:
        return {
            "cpu_model": platform.processor() or platform.machine() or None,
            "cpu_flags": None,
            "cpu_source": f"platform (no readable {cpuinfo}: instruction-set flags not recorded)",
        }
    return {
        "cpu_model": model,
        "cpu_flags": sorted(set(flags.split())) if flags is not None else None,
        "cpu_source": str(cpuinfo),
    }


def hardware() -> dict:
    """What float results can depend on: CPU model and instruction-set flags, the SIMD level torch's CPU kernels
    dispatch to, CPU count, GPU names. Best effort: an error leaves its entry out and is recorded."""
    info = {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor(),
        "cpu_count": os.cpu_count(),
        **cpu_info(),
        "gpus": [],
    }
    try:
        import torch

        info["torch_cpu_capability"] = torch.backends.cpu.get_cpu_capability()
        if torch.cuda.is_available():
            info["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        info["cuda"] = torch.version.cuda
    except Exception as err:  # noqa: BLE001 (hardware info is best effort)
        info["gpus_error"] = repr(err)
    return info


HARDWARE_COMPARED = (
    ("machine", "machine"),
    ("cpu_model", "cpu model"),
    ("cpu_flags", "cpu flags"),
    ("torch_cpu_capability", "torch CPU kernels"),
    ("gpus", "gpus"),
    ("cpu_count", "cpu_count"),
)
ISA_FLAG = re.compile(r"^(avx|amx|fma|f16c|sse|ssse|vnni|vpclmul|gfni|asimd|sve|sme|bf16|i8mm|fp16|neon)")
FLAGS_SHOWN = 5


def _flag_summary(flags: set[str]) -> str:
    """`N (a, b, ... +k)`: instruction-set extensions named first, base ones (avx512f) before their variants."""
    names = sorted(flags, key=lambda f: (not ISA_FLAG.match(f), len(f), f))
    more = f", ... +{len(names) - FLAGS_SHOWN}" if len(names) > FLAGS_SHOWN else ""
    return f"{len(names)} ({', '.join(names[:FLAGS_SHOWN])}{more})"


def hardware_diff(recorded: dict, here: dict) -> list[str]:
    """One line per hardware property that differs between the manifest's machine and this one, then a line saying
    the difference is informational. Properties the manifest does not record (older manifests) are not compared."""
    lines = []
    for key, label in HARDWARE_COMPARED:
        if key not in recorded or key not in here or recorded[key] == here[key]:
            continue
        was, now = recorded[key], here[key]
        if key == "cpu_flags":
            if not isinstance(was, list) or not isinstance(now, list):
                continue  # a machine without /proc/cpuinfo records none: nothing to compare
            gone, new = set(was) - set(now), set(now) - set(was)
            if not gone and not new:
                continue
            parts = ([f"{_flag_summary(gone)} only in manifest"] if gone else []) + (
                [f"{_flag_summary(new)} only here"] if new else []
            )
            lines.append(f"hardware: {label}: " + "; ".join(parts))
        elif key == "gpus":
            names = [", ".join(map(str, v)) if isinstance(v, list) else str(v) for v in (was, now)]
            lines.append(f"hardware: {label}: manifest {names[0] or 'none'}; here {names[1] or 'none'}")
        else:
            lines.append(f"hardware: {label}: manifest {was}; here {now}")
    if lines:
        lines.append(
            "hardware: the lines above are informational, not drift: trained weights, evaluations and scores "
            "can differ across CPU/GPU types (docs/AUDITS.md), so changed files may come from it"
        )
    return lines
