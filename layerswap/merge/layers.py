"""The layer a parameter belongs to, read from its name: the engine checks it against the model's depth, the layer
swap picks each tensor's source by it."""

from __future__ import annotations

import re

LAYER_RE = re.compile(r"(?:^|\.)layers\.(\d+)\.")


def layer_of(name: str) -> int | None:
    """Layer index of a parameter name (`model.layers.<l>.`), None for embeddings, final norm, LM head."""
    m = LAYER_RE.search(name)
    return int(m.group(1)) if m else None
