"""Records put back are cross-checked against what they describe (issue 43).

`results/manifest.json` travels with the results and can be edited: a job's params changed there (to the current
config's), then `.snakemake/` deleted, would have `provenance.restore` put back a record saying the file was made
with params it was not made with, and Snakemake would keep it. So before a record is put back, the file it
describes is checked against it where the file's bytes carry what made it: a merge recipe holds its merge config
(method, params and the top-level keys), which must be the record's `merge` param, the JSON the recipes job was
given. A record that does not describe its file is not put back: the file is named (it has no record now, and the
run stops with the repair, `provenance.check`).

Outputs whose bytes do not carry their params (weights, evaluation scores) are checked by their sha256 against the
manifest's entry (`provenance._same_bytes`) and by their job's rerun triggers; the cross-check covers the records
whose forging keeps a result of other params (a recipe: every merge of a config is built from it).
"""

from __future__ import annotations

import ast
import json
import shlex
from pathlib import Path

#: Rules whose outputs are merge recipes (`layerswap recipes`), with their `merge` param: the merge config as JSON.
RECIPE_RULES = ("merge_recipes", "soup_then_swap_recipes", "ablation_merge_recipes")
TOP_LEVEL = ("allow_different_base",)  # merge config keys a recipe keeps beside `params` (`merge.recipes`)


def _json_params(params) -> list:
    """The JSON objects among a record's params (each kept as the repr of its value: a shell-quoted JSON word)."""
    out = []
    for item in params if isinstance(params, list) else []:
        value = item
        try:
            value = ast.literal_eval(item) if isinstance(item, str) else item
        except (ValueError, SyntaxError):
            pass
        if not isinstance(value, str):
            continue
        try:
            words = shlex.split(value)
        except ValueError:
            continue
        for word in words if len(words) == 1 else [value]:
            try:
                parsed = json.loads(word)
            except ValueError:
                continue
            if isinstance(parsed, dict):
                out.append(parsed)
    return out


def _recipe(params, output: str) -> str | None:
    configs = [p for p in _json_params(params) if "method" in p]
    if not configs:
        return "its params hold no merge config"
    try:
        recipe = json.loads(Path(output).read_text())
    except (OSError, ValueError):
        return "the recipe is not readable JSON"
    if not isinstance(recipe, dict):
        return "the recipe is not a JSON object"
    cfg = dict(configs[0])
    want = {"method": cfg.pop("method"), **{k: cfg.pop(k) for k in TOP_LEVEL if k in cfg}, "params": cfg}
    got = {k: recipe.get(k) for k in want}
    if got != want:
        differ = sorted(k for k in want if got.get(k) != want[k])
        return f"the recipe's {', '.join(differ)} {'is' if len(differ) == 1 else 'are'} not the record's merge config"
    return None


DESCRIBERS = {rule: _recipe for rule in RECIPE_RULES}


def mismatch(rule: str, params, output: str) -> str | None:
    """Why the record (rule, params) does not describe `output`'s bytes, or None (it does, or they carry nothing
    to compare)."""
    check = DESCRIBERS.get(rule)
    return check(params, output) if check and Path(output).is_file() else None
