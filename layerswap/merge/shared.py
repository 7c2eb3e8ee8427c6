"""What several merge methods share besides the task-arithmetic core (`task_arithmetic`), so that no method module
imports another: the weighted mean of tensors (soup, layer swap) and the density check (TIES, DARE)."""

from __future__ import annotations

from layerswap.merge.params import ParamError


def weighted_mean_(acc, others: list, weights: list[float]):
    """acc <- (w0*acc + sum_i w_i*others_i) / sum(w); equal weights use (sum)/n. Clobbers `others`."""
    equal = all(w == weights[0] for w in weights)
    if not equal and weights[0] != 1.0:
        acc.mul_(weights[0])
    for w, x in zip(weights[1:], others):
        if not equal and w != 1.0:
            x.mul_(w)
        acc.add_(x)
    if equal:
        acc.div_(float(len(weights)))
    else:
        acc.div_(sum(weights))
    return acc


def check_density(p: dict, _given: dict, _n_layers: int | None, _depth: str) -> None:
    """density in (0, 1] (a recipe's; a config's is limited by the schema as well)."""
    if not 0.0 < p["density"] <= 1.0:
        raise ParamError("density", f"{p['density']} is not in (0, 1]")
