"""Helpers of `layerswap evaluate` (the CLI module is `layerswap/evaluate.py`)."""
