"""Evaluation stage: `layerswap evaluate` and `evaluate-merges` (lm-eval on checkpoints and merges), their helpers."""
