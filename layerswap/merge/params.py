"""The declaration of a merge method, and the checks of its params.

Each method module (`layerswap/merge/methods/<name>.py`) declares a `Method`: its name, table label, parameters
(`Param`), inputs, whether it needs the base, its checks and its per-tensor computation; `layerswap.merge.registry`
lists them (this module imports none of them). `filled_params` checks given params against a declaration (each value
by its kind, `check_value`, then the method's own check) and fills the defaults: recipes, the swap-grid figure and
the ablation variants call it or its parts; `layerswap.merge.schema` generates the config schema's merge block and a
config's defaults from the declarations. Nothing here imports torch: a method's computation imports it when it runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from layerswap.errors import UserError

REQUIRED = object()  # a param without a default: a recipe or config must give it


@dataclass(frozen=True)
class Param:
    default: Any
    kind: str | tuple[str, ...]  # "int" (>= 0), "number", "int_list" (layer indices), or the allowed strings
    description: str = ""
    schema: dict = field(default_factory=dict)  # further JSON-schema limits of a workflow config's value
    config: bool = True  # a workflow config may set it (False: recipes only)


class ParamError(Exception):
    """A method's check failing: the param at fault (None: the params together), what is wrong, what is allowed;
    `misfit`: the params are valid but do not fit the model's depth (an ablation keeps such a variant as a skipped
    row). Each caller words the place (a config key, a recipe's params, a tensor source)."""

    def __init__(self, key: str | None, message: str, allowed: str | None = None, misfit: bool = False):
        super().__init__(message)
        self.key, self.message, self.allowed, self.misfit = key, message, allowed, misfit

    def user_error(self, where: str) -> UserError:
        place = f"{where}.{self.key}" if self.key else where
        return UserError(f"{place}: {self.message}" + (f"; allowed: {self.allowed}" if self.allowed else ""))


def _always(_params: dict) -> bool:
    return True


@dataclass(frozen=True)
class Method:
    """One merge method, as its module declares it.

    `inputs`: ("models",) takes a list of models (the two experts of a pair, or more); named inputs (the layer swap's
    ("task", "lang")) take one model each, the task expert first. `check(params, given, n_layers, depth)` raises
    ParamError (params: filled in; given: as written; n_layers: the model's depth where known, worded as `depth`).
    `compute(node)` returns the per-tensor computation of one merge (`prepare()`, `fill(name, start, stop, dest)`;
    the node is the merge engine's, layerswap/merge/engine.py). `tables`: the tables (1, 2) that show its best
    config as a column when `merges.best_of` lists it; `column`: that column's key, `<column>_best`."""

    name: str
    label: str  # in table columns "<label> (best config, n pairs)" and the best-config tables
    note: str  # short name in table notes ("... among soup [...] / TIES [...]")
    params: dict[str, Param]
    inputs: tuple[str, ...]
    compute: Callable[[Any], Any]
    needs_base: Callable[[dict], bool] = _always
    check: Callable[..., None] | None = None
    tables: tuple[int, ...] = (1, 2)
    column: str = ""

    @property
    def best_column(self) -> str:
        return f"{self.column or self.name}_best"

    def pair_inputs(self, task: Any, lang: Any) -> dict:
        """The recipe inputs of an expert pair: the task (math) expert and the language expert."""
        return {"models": [task, lang]} if self.inputs == ("models",) else dict(zip(self.inputs, (task, lang)))

    def input_refs(self, inputs: dict) -> list[tuple[str, Any]]:
        """(key, model reference) of a validated recipe's inputs, in order."""
        if self.inputs == ("models",):
            return [(f"models[{i}]", ref) for i, ref in enumerate(inputs["models"])]
        return [(key, inputs[key]) for key in self.inputs]

    def run_check(
        self, params: dict, given: dict | None = None, n_layers: int | None = None, depth: str | None = None
    ) -> None:
        if self.check is not None:
            self.check(
                params,
                given if given is not None else params,
                n_layers,
                depth or (f"the {n_layers} layers of the model" if n_layers is not None else ""),
            )


def check_value(where: str, value: Any, kind: Any) -> Any:
    if isinstance(kind, tuple):
        if value not in kind:
            raise UserError(f"{where}: {value!r} is not one of {', '.join(kind)}")
        return value
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise UserError(f"{where}: expected a non-negative integer, got {value!r}")
        return value
    if kind == "number":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
            raise UserError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if not isinstance(value, list) or any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in value):
        raise UserError(f"{where}: expected a list of non-negative layer indices, got {value!r}")
    if len(set(value)) != len(value):
        raise UserError(f"{where}: repeated layer index in {value!r}")
    return sorted(value)


def filled_params(
    method: Method, given: dict, where: str, n_layers: int | None = None, depth: str | None = None
) -> dict[str, Any]:
    """`given` params of `method` checked (known keys, each value of its kind, the method's own check) and with
    every default filled in; a one-line UserError naming `where`.<key> otherwise."""
    spec = method.params
    for key in given:
        if key not in spec:
            raise UserError(f"{where}: unknown param {key!r} for {method.name} (allowed: {', '.join(spec)})")
    filled: dict[str, Any] = {}
    for key, param in spec.items():
        value = given.get(key)
        if value is None:
            if param.default is REQUIRED:
                raise UserError(f"{where}.{key}: missing (required for {method.name})")
            filled[key] = param.default
        else:
            filled[key] = check_value(f"{where}.{key}", value, param.kind)
    try:
        method.run_check(filled, given, n_layers, depth)
    except ParamError as err:
        raise err.user_error(where) from None
    return filled
