"""The Hugging Face cache the HF libraries read: `use_hf_home` points them at a folder (``storage.hf_home``, a
command's ``--hf-home``) before they are imported. The hub data commands, pre-staging and the evaluation commands
share it."""

from __future__ import annotations

import os
from pathlib import Path


def use_hf_home(hf_home: str | None) -> None:
    """Point the HF libraries at `hf_home` (before they are imported)."""
    if hf_home:
        os.environ["HF_HOME"] = str(Path(hf_home).expanduser())
