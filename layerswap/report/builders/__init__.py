"""One module per table of layerswap/report/registry.py, each with `build(Builder, *args) -> Table`, listed here by the
name a registry entry gives (`TableEntry.builder`); importing this folder is what a command that builds tables does
(so its code fingerprint, layerswap/fingerprint.py, covers every builder)."""

from __future__ import annotations

from typing import Any

from layerswap.report.builders import best_configs, table1, table2, table5, table6

MODULES = {m.__name__.rpartition(".")[2]: m for m in (best_configs, table1, table2, table5, table6)}


def build(entry: Any, b: Any):
    """The `Table` of registry entry `entry` (a TableEntry), built by its module from the Builder `b`."""
    return MODULES[entry.builder].build(b, *entry.args)
