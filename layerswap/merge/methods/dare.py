"""DARE (Yu et al. 2023, "Language Models are Super Mario"): drop and rescale each task vector, then add them up.

Per tensor and input model i: delta_i = W_i - W_base; each element is kept with probability p = density and then
divided by p, else set to 0 (so E[kept delta] = delta). The merged model is W_base + lam * sum_i delta_i ("dare",
task arithmetic over the sparsified deltas), or with TIES sign election ("dare_ties"): the sign of sum_i delta_i is
elected per element and only the deltas that agree with it are summed. Both configure the generalized task
arithmetic of layerswap/merge/task_arithmetic.py: DARE's drop is its sparsification.

The keep/drop draw is seeded per block of 2^16 elements by (seed, tensor name, input index, block index): a merge is
bit-identical on rerun (for a given torch version: the draw is torch's CPU generator), independent of the order in
which tensors are filled and of the engine's chunk size.

Compared with mergekit's `dare_linear` / `dare_ties` (mergekit/sparsify.py `bernoulli`, generalized_task_arithmetic
.py): the same elements are candidates (every element of every delta, embeddings and norms included) and the same
combination with mergekit's defaults (weight 1 per model, normalize: false, so a sum; lambda last; sign election by
the summed deltas, +1 where the sum is >= 0). Two differences: mergekit rescales by the L1 norm of the delta before
over after dropping (`rescale: true`, equal to 1/p only in expectation), we by exactly 1/p as the DARE paper does;
and mergekit draws its mask from torch's global generator (`torch.bernoulli`, no seed of its own), so two runs differ
unless the caller seeds torch, and the draws depend on the order tensors are processed.
"""

from __future__ import annotations

import hashlib

from layerswap.merge.params import REQUIRED, Method, Param
from layerswap.merge.shared import check_density
from layerswap.merge.task_arithmetic import TaskArithmetic

BLOCK = 1 << 16  # elements per seeded draw

PARAMS = {
    "density": Param(
        REQUIRED,
        "number",
        "probability that an entry of a task vector is kept (then scaled by 1/density)",
        {"exclusiveMinimum": 0, "maximum": 1},
    ),
    "lam": Param(1.0, "number", "scale of the summed task vectors", {"exclusiveMinimum": 0}),
    "seed": Param(0, "int", "seed of the drop draws (with the tensor name, input index and element block)"),
}


def block_seed(seed: int, name: str, index: int, block: int) -> int:
    """The seed of one block's draw: the first 8 bytes of sha256 over (seed, tensor, input, block)."""
    digest = hashlib.sha256(f"{seed}\0{name}\0{index}\0{block}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


def keep_mask(seed: int, name: str, index: int, start: int, stop: int, density: float, out):
    """float32 0/1 into `out` (length stop - start): whether each element [start, stop) of the tensor is kept."""
    import torch

    draw = torch.empty(BLOCK, dtype=torch.float32)
    gen = torch.Generator()
    for block in range(start // BLOCK, (stop - 1) // BLOCK + 1):
        lo, hi = max(start, block * BLOCK), min(stop, (block + 1) * BLOCK)
        gen.manual_seed(block_seed(seed, name, index, block))
        torch.rand(BLOCK, generator=gen, out=draw)
        torch.lt(draw[lo - block * BLOCK : hi - block * BLOCK], density, out=out[lo - start : hi - start])
    return out


class Compute(TaskArithmetic):
    """DARE: task arithmetic over the dropped and rescaled deltas; `elect`: with TIES sign election (a sum)."""

    def __init__(self, node, elect: bool) -> None:
        super().__init__(node)
        self.consensus = elect
        self.density, self.seed = node.params["density"], node.params["seed"]

    def sparsify(self, name: str, index: int, start: int, stop: int, delta) -> None:
        if self.density < 1.0:
            import torch

            keep = self.node.buffer("keep", torch.float32, stop - start)
            delta.mul_(keep_mask(self.seed, name, index, start, stop, self.density, keep)).div_(self.density)


DARE = Method(
    name="dare",
    label="DARE",
    note="DARE",
    params=PARAMS,
    inputs=("models",),
    compute=lambda node: Compute(node, elect=False),
    check=check_density,
)
DARE_TIES = Method(
    name="dare_ties",
    label="DARE-TIES",
    note="DARE-TIES",
    params=PARAMS,
    inputs=("models",),
    compute=lambda node: Compute(node, elect=True),
    check=check_density,
)
METHODS = (DARE, DARE_TIES)
