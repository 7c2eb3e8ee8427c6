"""Records put back are cross-checked against what they describe (issue 43).

`results/manifest.json` travels with the results and can be edited: a job's params changed there (to the current
config's), then `.snakemake/` deleted, would have `provenance.restore` put back a record saying the file was made
with params it was not made with, and Snakemake would keep it. So before a record is put back, the file it
describes is checked against it where the file's bytes carry what made it:

- a merge recipe holds its merge config (method, params and the top-level keys): the record's `merge` param, the
  JSON the recipes job was given;
- an SFT run's `checkpoints.json` holds the run's params (`params`): the record's `--params-json`;
- a selection holds its top_k, weights, constraints, cap and kind: the record's selection params;
- `config_used.yaml` is the config: the record's config param.

A record that does not describe its file is not put back: the file is named (it has no record now, and the run
stops with the repair, `provenance.check`). Outputs whose bytes do not carry their params (weights, evaluation
scores, tables) are checked by their sha256 against the manifest's entry (`provenance._same_bytes`) and by their
job's other rerun triggers; the cross-check covers the records whose forging would keep results of other params at
their source (the experts, the selections and the recipes every merge and table is built from).
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


def _object(params, output: str, load) -> tuple[dict | None, dict | str]:
    """(the record's one JSON object param, the output's object) or (None, why not)."""
    objects = _json_params(params)
    if len(objects) != 1:
        return None, "its params hold no single JSON object"
    try:
        value = load(Path(output).read_text())
    except (OSError, ValueError):
        return None, "the file is not readable"
    if not isinstance(value, dict):
        return None, "the file is not an object"
    return objects[0], value


def _sft(params, output: str) -> str | None:
    if Path(output).name != "checkpoints.json":
        return None
    want, got = _object(params, output, json.loads)
    if want is None:
        return got
    return None if got.get("params") == want else "the run's params in it are not the record's"


def _selection(params, output: str) -> str | None:
    want, got = _object(params, output, json.loads)
    if want is None:
        return got
    differ = sorted(k for k in want if k in got and got[k] != want[k])
    return f"its {', '.join(differ)} differ from the record's" if differ else None


def _config_used(params, output: str) -> str | None:
    if not output.endswith((".yaml", ".yml")):
        return None
    import yaml

    want, got = _object(params, output, yaml.safe_load)
    if want is None:
        return got
    return None if got == want else "the config in it is not the record's"


DESCRIBERS = {
    **{rule: _recipe for rule in RECIPE_RULES},
    "sft": _sft,
    "select": _selection,
    "config_used": _config_used,
}


def mismatch(rule: str, params, output: str) -> str | None:
    """Why the record (rule, params) does not describe `output`'s bytes, or None (it does, or they carry nothing
    to compare)."""
    check = DESCRIBERS.get(rule)
    return check(params, output) if check and Path(output).is_file() else None
