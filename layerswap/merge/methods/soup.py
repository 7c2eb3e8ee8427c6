"""Model soups: the mean of the input models, uniform or magnitude-adjusted (w_i = 1 / mean over all rows of all 1-D
and 2-D tensors of the row mean |W_i - W_base|; the engine computes these weights in one pass before merging)."""

from __future__ import annotations

from layerswap.merge.params import Method, Param
from layerswap.merge.shared import weighted_mean_

PARAMS = {
    "weighting": Param("uniform", ("uniform", "magnitude"), "uniform mean or magnitude-adjusted weights"),
}


class Compute:
    """The (weighted) mean of the node's inputs, tensor chunk by chunk; non-float tensors from the first input."""

    def __init__(self, node) -> None:
        self.node = node
        self.weights = [1.0] * len(node.inputs)

    def prepare(self) -> None:
        if self.node.params["weighting"] == "magnitude":
            self.weights = self.node.magnitude_weights()

    def fill(self, name: str, start: int, stop: int, dest) -> None:
        node = self.node
        if not dest.is_floating_point():
            node.copy(node.inputs[0], name, start, stop, dest)
            return
        acc = node.read(node.inputs[0], name, start, stop, "m0")
        others = [node.read(n, name, start, stop, f"m{i}") for i, n in enumerate(node.inputs) if i]
        dest.copy_(weighted_mean_(acc, others, self.weights))


METHOD = Method(
    name="soup",
    label="model soup",
    note="soup",
    params=PARAMS,
    inputs=("models",),
    compute=Compute,
    needs_base=lambda p: p.get("weighting") == "magnitude",
)
METHODS = (METHOD,)
