"""Layer swapping (the paper's Algorithm 1, with `and` where it prints `or`): per layer, the language expert's
weights, the task expert's, or their weighted mean (transition zone); non-layer tensors averaged or from one expert.

For L layers and bottom b, top u, transitions t_b, t_u: layer l < b or l >= L-u is the language expert's;
b <= l < b+t_b or L-u-t_u <= l < L-u is averaged; the rest is the task expert's. Or explicit `lang_layers` (and
`transition_layers`). `check` below is the one place these params are validated beyond their types: the config
check, recipe validation, the engine, the `method` ablation sweeps and the swap-grid figure call it; the ablation
variants size their swaps by `overflow`, its count. `SWAP_KEYS` names the bottom/top params for every module that
lists them (ablation variants, sweeps, the swap-grid figure).
"""

from __future__ import annotations

from layerswap.merge.layers import layer_of
from layerswap.merge.params import Method, Param, ParamError
from layerswap.merge.shared import weighted_mean_

LANG, TASK, MIX = "lang", "task", "mix"
#: The params of a bottom/top layer swap, in their declared order: b, u, t_b, t_u (the ablation variants, their grid
#: order, the swap-grid figure and the sweeps' config names use them).
SWAP_KEYS = ("bottom", "top", "transition_bottom", "transition_top")

PARAMS = {
    "bottom": Param(None, "int", "layers from the language expert at the bottom (b of Algorithm 1)"),
    "top": Param(None, "int", "layers from the language expert at the top (u)"),
    "transition_bottom": Param(0, "int", "averaged layers above the bottom block (t_b)"),
    "transition_top": Param(0, "int", "averaged layers below the top block (t_u)"),
    "w_task": Param(1.0, "number", "weight of the task expert in averaged tensors", {"exclusiveMinimum": 0}),
    "w_lang": Param(1.0, "number", "weight of the language expert in averaged tensors", {"exclusiveMinimum": 0}),
    "weighting": Param("fixed", ("fixed", "magnitude"), "fixed weights or magnitude-adjusted ones", config=False),
    "non_layer": Param(
        "average", ("average", "lang", "task"), "embeddings, final norm and LM head: averaged, or from one expert"
    ),
    "lang_layers": Param(
        None, "int_list", "explicit layer indices taken from the language expert (replaces bottom/top)", {"minItems": 1}
    ),
    "transition_layers": Param(None, "int_list", "explicit averaged layers (with lang_layers)", config=False),
}


def overflow(params: dict, n_layers: int) -> list[int] | None:
    """The counts of a bottom/top swap's blocks, bottom up ([b, t_b, t_u, u]: b language layers, t_b averaged, the
    task layers, t_u averaged, u language layers), if together they exceed `n_layers`, else None (an absent
    transition counts 0)."""
    b, u, tb, tu = (params.get(k) or 0 for k in SWAP_KEYS)
    counts = [b, tb, tu, u]
    return counts if sum(counts) > n_layers else None


def check(p: dict, given: dict, n_layers: int | None, depth: str) -> None:
    """Bottom/top or explicit layers, not both; the layers fit the model where its depth is known; weights."""
    if p.get("lang_layers") is None:
        for key in ("bottom", "top"):
            if p.get(key) is None:
                raise ParamError(key, "required key is missing (layer_swap needs bottom and top, or lang_layers)")
        if p.get("transition_layers") is not None:
            raise ParamError("transition_layers", "only allowed together with lang_layers")
        counts = overflow(p, n_layers) if n_layers is not None else None
        if counts is not None:
            raise ParamError(
                None,
                f"bottom+transition_bottom+transition_top+top = {'+'.join(map(str, counts))} = "
                f"{sum(counts)} exceeds {depth}",
                f"a sum <= {n_layers}",
                misfit=True,
            )
    else:
        for key in ("bottom", "top"):
            if p.get(key) is not None:
                raise ParamError(
                    key, "cannot be combined with lang_layers", "either lang_layers or bottom/top/transition_*"
                )
        for key in ("transition_bottom", "transition_top"):
            if p.get(key):
                raise ParamError(key, "cannot be combined with lang_layers", "0")
        overlap = sorted(set(p["lang_layers"]) & set(p.get("transition_layers") or []))
        if overlap:
            raise ParamError("transition_layers", f"layer {overlap[0]} is also in lang_layers")
        for key in ("lang_layers", "transition_layers"):
            for i, layer in enumerate(p.get(key) or []):
                if layer < 0 or (n_layers is not None and layer >= n_layers):
                    raise ParamError(
                        f"{key}[{i}]",
                        f"layer {layer} is outside the model ({depth})",
                        f"0..{n_layers - 1}" if n_layers is not None else "layer indices >= 0",
                        misfit=True,
                    )
    if p.get("weighting") == "magnitude":
        for key in ("w_task", "w_lang"):
            if given.get(key) is not None:
                raise ParamError(key, "cannot be set with weighting magnitude")
    elif (w := [p.get("w_task", 1.0), p.get("w_lang", 1.0)]) and (min(w) < 0 or sum(w) <= 0):
        raise ParamError("w_task/w_lang", "must be non-negative with a positive sum")


def layer_plan(params: dict, n_layers: int, where: str = "params") -> list[str]:
    """Source of each layer: 'lang', 'task' or 'mix' (checked against the model's depth first)."""
    try:
        check(params, {}, n_layers, f"the {n_layers} layers of the model")
    except ParamError as err:
        raise err.user_error(where) from None
    if params.get("lang_layers") is not None:
        plan = [TASK] * n_layers
        for key, kind in (("lang_layers", LANG), ("transition_layers", MIX)):
            for layer in params.get(key) or []:
                plan[layer] = kind
        return plan
    L, b, u = n_layers, params["bottom"], params["top"]
    tb, tu = params.get("transition_bottom") or 0, params.get("transition_top") or 0
    plan = []
    for layer in range(L):
        if layer < b or layer >= L - u:
            plan.append(LANG)
        elif layer < b + tb or L - u - tu <= layer:
            plan.append(MIX)
        else:
            plan.append(TASK)
    return plan


class Compute:
    """A layer swap of the node's two inputs (task, lang), tensor chunk by chunk."""

    def __init__(self, node) -> None:
        self.node = node
        p = node.params
        self.plan = layer_plan(p, node.n_layers, f"{node.label}.params")
        self.non_layer = {"average": MIX, "lang": LANG, "task": TASK}[p["non_layer"]]
        self.weights = [p["w_task"], p["w_lang"]]

    def prepare(self) -> None:
        if self.node.params["weighting"] == "magnitude":
            self.weights = self.node.magnitude_weights()

    def source(self, name: str) -> str:
        layer = layer_of(name)
        return self.non_layer if layer is None else self.plan[layer]

    def key(self, name: str) -> list:
        """What tensor `name` is computed from: one expert's tensor (converted to the merge's dtype), or the weighted
        mean of both experts' tensors (the engine's Node.key)."""
        node = self.node
        task, lang = node.inputs
        src, dtype = self.source(name), node.dtypes[name]
        if src != MIX or not dtype.is_floating_point:
            return ["copy", (lang if src == LANG else task).key(name), str(dtype)]
        return ["mean", self.weights, task.key(name), lang.key(name), str(dtype)]

    def fill(self, name: str, start: int, stop: int, dest) -> None:
        node = self.node
        task, lang = node.inputs
        src = self.source(name)
        if src != MIX or not dest.is_floating_point():
            node.copy(lang if src == LANG else task, name, start, stop, dest)
            return
        acc = node.read(task, name, start, stop, "task")
        other = node.read(lang, name, start, stop, "lang")
        dest.copy_(weighted_mean_(acc, [other], self.weights))


METHOD = Method(
    name="layer_swap",
    label="layer swap",
    note="swap",
    column="swap",
    params=PARAMS,
    inputs=("task", "lang"),
    compute=Compute,
    needs_base=lambda p: p.get("weighting") == "magnitude",
    check=check,
)
METHODS = (METHOD,)
