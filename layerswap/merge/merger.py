"""`Merger`: the merge engine of one evaluation job. `layerswap evaluate-merges` gives one to the model host
(layerswap/evaluation/hosts.py), which calls it for each recipe: the merges' tensors built in memory (`changes`, in
the `order` where consecutive merges share the most) with the experts opened once for the job (one ExpertCache), or
a merge written to disk (`write`, vLLM without weight reload)."""

from __future__ import annotations

import torch

from layerswap.merge.engine import ExpertCache, TensorKeys, build_changes, switch_order, tensor_keys, write_merged
from layerswap.merge.recipes import Recipe


class Merger:
    def __init__(self) -> None:
        self.cache = ExpertCache()

    def changes(self, recipe: Recipe, held: TensorKeys | None) -> tuple[TensorKeys, dict[str, torch.Tensor]]:
        """engine.build_changes: the merge's tensor keys, and the tensors whose keys differ from `held`'s."""
        return build_changes(recipe, self.cache, held)

    def order(self, recipes: list[Recipe]) -> list[int]:
        """engine.switch_order of the recipes (indices)."""
        return switch_order([tensor_keys(r, self.cache) for r in recipes])

    def write(self, recipe: Recipe, out_dir: str) -> None:
        write_merged(recipe, out_dir)

    def close(self) -> None:
        self.cache.close()
