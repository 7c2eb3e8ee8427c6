"""The merges of a config: the languages and expert pairs they are made for, the merge configs (the config's and the
ablations'), the best-of configs of each table, the recipe files and the merged models written by request. A part of
`Spec` (layerswap/workflow/spec.py), for rules/merge.smk and the parts that list merge files.
"""

from __future__ import annotations

from layerswap.contracts import SOUP_SWAP, SOUPS, pair_ids
from layerswap.layout import Layout
from layerswap.merge.registry import best_of_methods


class MergeJobs:
    def __init__(self, config: dict, ablation_configs: dict[str, dict], keep_merged, layout: Layout):
        """`ablation_configs`: the merge configs the ablations add (beside merges.configs); `keep_merged`:
        storage.keep_merged (true: every config's merged models are written, or a list of configs)."""
        self._layout = layout
        self._best_of = config["merges"]["best_of"]
        self.langs = list(config["languages"])
        # selection.top_k, read here once: the experts of each kind that are merged (top_k x top_k pairs a language)
        # and what every other part (selection, Table 2's choice, the tables, the ablations, the plan) takes
        self.top_k: int = config["selection"]["top_k"]
        self.pairs = pair_ids(self.top_k)
        self.soup_swap, self.soups = SOUP_SWAP, SOUPS  # the soup-then-swap recipes' config and members
        self.configs = {**config["merges"]["configs"], **ablation_configs}  # what a recipe job looks its config up in
        self.pair_configs = list(config["merges"]["configs"])
        keep = self.pair_configs if keep_merged is True else list(keep_merged or [])
        self.merged_models = [layout.merged_model(c, l, p) for c in keep for l in self.langs for p in self.pairs]

    def recipes(self, configs) -> list[str]:
        """The recipe files of these merge configs: every language and expert pair (rule merge_recipes)."""
        return [self._layout.recipe(c, l, p) for c in configs for l in self.langs for p in self.pairs]

    def soup_recipes(self) -> list[str]:
        """The soup-then-swap recipes of every language (rule soup_then_swap_recipes)."""
        return [self._layout.recipe(SOUP_SWAP, l, m) for l in self.langs for m in SOUPS]

    def best_of_configs(self, table: int) -> list[list[str]]:
        """The best_of configs of each merge method with a best-config column in Table `table`, in column order."""
        return [self._best_of[m.name] for m in best_of_methods(self._best_of, table)]
