"""Merge recipes: `Recipe` (a recipe read and validated once: what the evaluation store, the model hosts and the merge
engine take), validation, content hash, and the `layerswap recipes` command that writes them."""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from layerswap.contracts import pair_id, read_selection, read_text, write_json_atomic
from layerswap.errors import UserError, yaml_problem
from layerswap.inputs import check_recipe_inputs
from layerswap.jsonl import json_object
from layerswap.merge.params import filled_params
from layerswap.merge.registry import METHODS, SWAP
from layerswap.merge.registry import method as registered

TOP_KEYS = ("method", "base", "inputs", "params", "allow_different_base", "name")


def _check_ref(where: str, ref: Any) -> str | dict:
    if isinstance(ref, dict):
        return validate_recipe(ref, where)
    if not isinstance(ref, str) or not ref:
        raise UserError(f"{where}: expected a checkpoint directory path or a nested recipe, got {ref!r}")
    return ref


def validate_recipe(recipe: Any, where: str = "recipe") -> dict:
    """Check a recipe and return a copy with every param filled in; a bad key or value raises one-line UserError."""
    if not isinstance(recipe, dict):
        raise UserError(f"{where}: expected a mapping, got {type(recipe).__name__}")
    for key in recipe:
        if key not in TOP_KEYS:
            raise UserError(f"{where}: unknown key {key!r} (allowed: {', '.join(TOP_KEYS)})")
    method = registered(recipe.get("method"), f"{where}.method")
    out: dict[str, Any] = {"method": method.name}
    base = recipe.get("base")
    out["base"] = None if base is None else _check_ref(f"{where}.base", base)
    if "allow_different_base" in recipe:
        if not isinstance(recipe["allow_different_base"], bool):
            raise UserError(f"{where}.allow_different_base: expected true or false")
        out["allow_different_base"] = recipe["allow_different_base"]
    if "name" in recipe:
        out["name"] = str(recipe["name"])
    out["inputs"] = _check_inputs(where, method.name, method.inputs, recipe.get("inputs"))
    params = recipe.get("params") or {}
    if not isinstance(params, dict):
        raise UserError(f"{where}.params: expected a mapping")
    filled = filled_params(method, params, f"{where}.params")
    if method.needs_base(filled) and out["base"] is None:
        raise UserError(
            f"{where}.base: required for {method.name} with these params (task vectors are taken against it)"
        )
    out["params"] = filled
    return out


def _check_inputs(where: str, method: str, keys: tuple[str, ...], inputs: Any) -> dict:
    """Named inputs (one model each) or ("models",): a non-empty list of models."""
    if not isinstance(inputs, dict):
        raise UserError(f"{where}.inputs: expected a mapping with keys {', '.join(keys)}")
    for key in inputs:
        if key not in keys:
            raise UserError(f"{where}.inputs: unknown key {key!r} for {method} (allowed: {', '.join(keys)})")
    if keys == ("models",):
        models = inputs.get("models")
        if not isinstance(models, list) or not models:
            raise UserError(f"{where}.inputs.models: expected a non-empty list")
        return {"models": [_check_ref(f"{where}.inputs.models[{i}]", m) for i, m in enumerate(models)]}
    for key in keys:
        if key not in inputs:
            raise UserError(f"{where}.inputs.{key}: missing")
    return {k: _check_ref(f"{where}.inputs.{k}", inputs[k]) for k in keys}


def input_paths(recipe: dict) -> list[str]:
    """Every checkpoint directory a validated recipe reads: its base and inputs, nested recipes' ones included."""
    refs = [
        recipe.get("base"),
        *recipe["inputs"].get("models", []),
        *(recipe["inputs"][k] for k in ("task", "lang") if k in recipe["inputs"]),
    ]
    paths: list[str] = []
    for ref in refs:
        if isinstance(ref, dict):
            paths += input_paths(ref)
        elif isinstance(ref, str):
            paths.append(ref)
    return list(dict.fromkeys(paths))


def canonical_json(recipe: Any) -> str:
    return json.dumps(recipe, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def recipe_hash(recipe: dict) -> str:
    """sha256 (first 16 hex digits) of the recipe's canonical JSON."""
    return hashlib.sha256(canonical_json(recipe).encode()).hexdigest()[:16]


def model_dir_of(recipe: dict) -> str:
    """Checkpoint dir whose config and tokenizer the merge uses: the first input (the task expert of a swap, else the
    first model), down nested recipes."""
    ref: Any = recipe
    while isinstance(ref, dict):
        inputs = ref.get("inputs") or {}
        method = METHODS.get(ref.get("method"))
        first = method.inputs[0] if method is not None else "models"
        ref = inputs.get(first)
        ref = (ref or [None])[0] if first == "models" else ref
    if not isinstance(ref, str):
        raise UserError("recipe: no checkpoint directory found in inputs")
    return ref


@dataclass(frozen=True)
class Recipe:
    """A merge recipe, validated once (`Recipe.load` for a file, `Recipe.of` for a mapping): the one object the
    evaluation store (`canonical`, `inputs`), the model hosts (`model_dir`, `path`) and the merge engine (`full`)
    take. `written`: the recipe as written (hashed, recorded in result files and merge outputs); `full`: validated,
    every param filled in; `path`: the file it was read from (None: built in memory)."""

    written: dict
    full: dict
    hash: str  # recipe_hash(written)
    inputs: tuple[str, ...]  # every checkpoint directory it reads, nested recipes' included
    model_dir: str  # model_dir_of: the checkpoint whose config and tokenizer the merge takes
    path: Path | None = None

    @classmethod
    def of(cls, recipe: Any, where: str = "recipe", path: Path | None = None) -> Recipe:
        """`recipe` (a mapping) validated; a bad key or value raises one-line UserError naming `where`."""
        full = validate_recipe(recipe, where)
        return cls(recipe, full, recipe_hash(recipe), tuple(input_paths(full)), model_dir_of(full), path)

    @classmethod
    def load(cls, path: str | Path) -> Recipe:
        """Read a JSON or YAML recipe file and validate it; within the workflow its inputs must lie under the run's
        folders (layerswap.inputs.check_recipe_inputs)."""
        text = read_text(path, "recipe")  # missing, unreadable or not UTF-8: one line naming the file
        try:
            if str(path).endswith((".yaml", ".yml")):
                import yaml

                recipe = yaml.safe_load(text)
            else:
                recipe = json.loads(text)
        except ValueError as err:  # yaml.YAMLError subclasses Exception; caught below
            raise UserError(f"{path}: not valid JSON ({err})") from err
        except Exception as err:  # noqa: BLE001 - yaml errors
            raise UserError(f"recipe {path} {yaml_problem(err)}") from err
        loaded = cls.of(recipe, str(path), Path(path))
        check_recipe_inputs(path, list(loaded.inputs))
        return loaded

    @property
    def canonical(self) -> str:
        """The recipe as written, as canonical JSON (the evaluation store's key)."""
        return canonical_json(self.written)

    @property
    def name(self) -> str:
        return self.path.name if self.path is not None else "recipe"

    def __str__(self) -> str:  # error and log lines name the recipe file, as they name a checkpoint dir
        return str(self.path) if self.path is not None else "recipe"


# ---- `layerswap recipes` -------------------------------------------------------------------------------------


def _selected(path: str) -> list[tuple[int, str]]:
    return [(e["rank"], str(e["path"])) for e in read_selection(path)]


def _split_params(params_json: str) -> tuple[str, dict, dict]:
    expected = "an object with a 'method' key"
    cfg = json_object(params_json, "--params-json", expected)
    if "method" not in cfg:
        raise UserError(f"--params-json: expected {expected}")
    cfg = copy.deepcopy(cfg)
    method = cfg.pop("method")
    top = {k: cfg.pop(k) for k in ("allow_different_base",) if k in cfg}
    return method, cfg, top


def _recipe(method: str, base: str, task: Any, lang: Any, params: dict, top: dict) -> dict:
    inputs = registered(method, "--params-json: method").pair_inputs(task, lang)
    recipe = {"method": method, "base": base, "inputs": inputs, "params": params, **top}
    validate_recipe(recipe)
    return recipe


def _soup(base: str, paths: list[str]) -> dict:
    return {"method": "soup", "base": base, "inputs": {"models": paths}, "params": {"weighting": "uniform"}}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--params-json", required=True, help="merge config as JSON, including 'method'")
    parser.add_argument("--lang-selection", required=True, help="selection file of the language experts")
    parser.add_argument("--task-selection", required=True, help="selection file of the task (math) experts")
    parser.add_argument("--base", required=True, help="base model directory")
    parser.add_argument("--out-dir", required=True, help="directory for the recipe files")
    parser.add_argument("--soup-then-swap", action="store_true", help="write langsoup.json (and multisoup.json)")
    parser.add_argument("--all-lang-selections", nargs="*", default=[], help="selections pooled in multisoup.json")


def run(args: argparse.Namespace) -> None:
    method, params, top = _split_params(args.params_json)
    langs, tasks = _selected(args.lang_selection), _selected(args.task_selection)
    out = Path(args.out_dir)
    if not args.soup_then_swap:
        recipes = {
            f"{pair_id(i, j)}.json": _recipe(method, args.base, tp, lp, params, top)
            for i, lp in langs
            for j, tp in tasks
        }
    else:
        if method != SWAP:
            raise UserError(f"--params-json: method {method!r}; soup-then-swap needs layer_swap")
        math_soup = _soup(args.base, [p for _, p in tasks])
        recipes = {
            "langsoup.json": _recipe(method, args.base, math_soup, _soup(args.base, [p for _, p in langs]), params, top)
        }
        if args.all_lang_selections:
            pooled: list[str] = []
            for sel in args.all_lang_selections:
                for _, path in _selected(sel):
                    if path not in pooled:
                        pooled.append(path)
            recipes["multisoup.json"] = _recipe(method, args.base, math_soup, _soup(args.base, pooled), params, top)
    for name, recipe in recipes.items():
        write_json_atomic(out / name, recipe)
