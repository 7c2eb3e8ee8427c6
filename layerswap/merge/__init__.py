"""Merge engine: layer swap, soups, TIES and soup-then-swap as recipes, built in memory or written to disk."""

from layerswap.merge.engine import ExpertCache, build_state_dict, model_dir_of, write_merged
from layerswap.merge.recipes import load_recipe, recipe_hash, validate_recipe

__all__ = [
    "ExpertCache", "build_state_dict", "load_recipe", "model_dir_of", "recipe_hash", "validate_recipe", "write_merged",
]
