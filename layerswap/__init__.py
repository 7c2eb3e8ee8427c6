"""layerswap: layer swapping for zero-shot cross-lingual transfer, as a reproducible workflow."""

__version__ = "0.1.0"
