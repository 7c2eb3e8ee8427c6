"""The CPU vLLM environment (`make vllm-cpu-venv`, `.venv-vllm-cpu/`): where it is, why it is unusable, and the
one workaround that is a file (the Makefile calls this with --write-dist-info, then --check).

vllm-cpu installs its code as the package `vllm` under the distribution name `vllm-cpu`. Two callers ask for the
distribution `vllm`: lm-eval's vLLM wrapper (`importlib.metadata.version("vllm")`) and vLLM's platform detection,
which takes the CPU platform only where that version contains "+cpu". A metadata-only distribution
`vllm==<version>+cpu` (a dist-info folder, no code, no files in RECORD but its own) answers both.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VENV = REPO / ".venv-vllm-cpu"
PYTHON = VENV / "bin" / "python"
# the engine core in-process (an engine core in a spawned process would re-import the caller's __main__); the KV
# cache is the vLLM host's to size (layerswap.evaluation.vllm_weights.engine_memory), never set here
ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}


def unavailable() -> str | None:
    """None where the environment is built, else why not (one phrase)."""
    if not (VENV / "bin" / "layerswap").is_file():
        return f"no CPU vLLM environment ({VENV.name}/; `make vllm-cpu-venv` builds it)"
    return None


def write_dist_info(version: str) -> Path:
    from importlib.metadata import version as installed

    have = installed("vllm-cpu")
    if have != version:
        raise SystemExit(f"vllm-cpu {have} is installed, the Makefile pins {version}")
    site = Path(sysconfig.get_paths()["purelib"])
    info = site / f"vllm-{version}+cpu.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}+cpu\n"
        f"Summary: metadata only: the code is vllm-cpu {version}'s\n"
    )
    (info / "INSTALLER").write_text("layerswap Makefile\n")
    (info / "RECORD").write_text("".join(f"{info.name}/{f},,\n" for f in ("METADATA", "INSTALLER", "RECORD")))
    return info


def check() -> None:
    """Import what the vLLM backend imports, in this interpreter, and require the CPU platform."""
    os.environ.update(ENV)
    from importlib.metadata import version

    import transformers  # noqa: F401 - fails where a CUDA torchvision is installed
    from lm_eval.models.vllm_causallms import VLLM  # noqa: F401
    from vllm.platforms import current_platform

    assert "+cpu" in version("vllm"), version("vllm")
    assert current_platform.is_cpu(), f"vLLM platform {current_platform!r}, not the CPU"
    print(
        f"vllm {version('vllm')} (vllm-cpu {version('vllm-cpu')}), torch {__import__('torch').__version__}, "
        f"transformers {transformers.__version__}: CPU platform"
    )


def run(args: list[str], env_extra: dict | None = None, **kw) -> subprocess.CompletedProcess:
    """A command of the environment (args[0] a console script of its bin/), with ENV (and env_extra) set."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_")}
    env = {**env, **ENV, **(env_extra or {}), "PATH": f"{VENV / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run([str(VENV / "bin" / args[0]), *args[1:]], env=env, **kw)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--write-dist-info"]:
        print(write_dist_info(sys.argv[2]))
    elif sys.argv[1:] == ["--check"]:
        check()
    else:
        raise SystemExit("usage: vllm_cpu_env.py --write-dist-info VERSION | --check")
