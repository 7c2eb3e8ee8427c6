"""TIES-merging (Yadav et al. 2023): per tensor, trim each task vector (W_i - W_base) to its top-k |delta| (k =
density * numel), elect the sign of the summed trimmed deltas, take the disjoint mean of the deltas that agree with
it, scale by lambda and add to the base. mergekit's `ties` with its defaults (normalize: true): the generalized task
arithmetic of layerswap/merge/task_arithmetic.py with the magnitude trim as its sparsification, sign consensus and a
disjoint mean."""

from __future__ import annotations

import math

from layerswap.merge.params import REQUIRED, Method, Param
from layerswap.merge.shared import check_density
from layerswap.merge.task_arithmetic import TaskArithmetic

SAMPLE = 1 << 18  # sample size used to bracket the TIES threshold before the exact selection
SMALL = 1 << 16  # tensors up to this size get an exact kthvalue directly

PARAMS = {
    "density": Param(
        REQUIRED,
        "number",
        "share of each task vector's entries kept (by |delta|)",
        {"exclusiveMinimum": 0, "maximum": 1},
    ),
    "lam": Param(1.0, "number", "scale of the merged task vector", {"exclusiveMinimum": 0}),
}


def kth_largest_bracket(sample, n: int, k: int, widen: float = 1.0) -> tuple[float, float]:
    """Bounds [lo, hi] likely to hold the k-th largest of n values, from a strided sample of them."""
    import torch

    m = sample.numel()
    srt = torch.sort(sample).values
    q = 1.0 - k / n
    eps = widen * (6.0 * (q * (1.0 - q) / m) ** 0.5 + 4.0 / m)
    lo_i, hi_i = int((q - eps) * m), int((q + eps) * m) + 1
    lo = float(srt[lo_i]) if lo_i >= 0 else 0.0
    hi = float(srt[hi_i]) if hi_i < m else float("inf")
    return lo, hi


def trim_(delta, threshold: float, tmp) -> None:
    """Zero the entries of `delta` with |delta| < threshold (`tmp`: a float32 buffer of its size)."""
    import torch

    torch.abs(delta, out=tmp)
    tmp.sub_(threshold).sign_().add_(1.0).clamp_(max=1.0)  # 1 where |delta| >= threshold (exact), else 0
    delta.mul_(tmp)


class Compute(TaskArithmetic):
    """TIES: task arithmetic over the trimmed deltas with sign consensus and a disjoint mean (thresholds once per
    tensor)."""

    consensus = normalize = True

    def __init__(self, node) -> None:
        super().__init__(node)
        self.density = node.params["density"]
        self._thresholds: tuple[str, list[float | None]] = ("", [])

    def threshold(self, src, name: str) -> float | None:
        """The k-th largest |delta| over the tensor, k = max(1, int(density * numel)) as mergekit; None keeps all.

        Entries tied with the k-th largest are all kept (mergekit breaks such ties by argsort order)."""
        import torch

        node = self.node
        n = math.prod(node.shapes[name])
        k = max(1, int(self.density * n))
        if k >= n:
            return None
        ranges = node.chunks(name)
        if n > SMALL:
            stride = max(1, n // SAMPLE)
            parts = []
            for start, stop in ranges:
                first = -start % stride
                a = node.read_raw(src, name, start, stop, "m")[first::stride].float()
                a.sub_(node.read_raw(node.base, name, start, stop, "base")[first::stride].float()).abs_()
                parts.append(a)
            sample = torch.cat(parts)
            for widen in (1.0, 8.0, 64.0):
                lo, hi = kth_largest_bracket(sample, n, k, widen)
                above, cands = 0, []
                for start, stop in ranges:
                    d = node.read(src, name, start, stop, "m")
                    d.sub_(node.read(node.base, name, start, stop, "base")).abs_()
                    mask = node.buffer("mask", torch.bool, stop - start)
                    above += int(torch.count_nonzero(torch.gt(d, hi, out=mask)))
                    torch.ge(d, lo, out=mask)
                    cands.append(
                        d[mask.logical_and_(torch.le(d, hi, out=node.buffer("mask2", torch.bool, stop - start)))]
                    )
                cand = torch.cat(cands)
                need = k - above
                if 1 <= need <= cand.numel():
                    return float(torch.kthvalue(cand, cand.numel() - need + 1).values)
        full = torch.empty(n, dtype=torch.float32)
        for start, stop in ranges:
            d = full[start:stop]
            node.copy(src, name, start, stop, d)
            d.sub_(node.read(node.base, name, start, stop, "base")).abs_()
        return float(torch.kthvalue(full, n - k + 1).values)

    def start(self, name: str) -> None:
        if self._thresholds[0] != name:
            self._thresholds = (name, [self.threshold(src, name) for src in self.node.inputs])

    def sparsify(self, name: str, index: int, start: int, stop: int, delta) -> None:
        threshold = self._thresholds[1][index]
        if threshold is not None:
            import torch

            trim_(delta, threshold, self.node.buffer("trim", torch.float32, stop - start))


METHOD = Method(
    name="ties",
    label="TIES-merging",
    note="TIES",
    params=PARAMS,
    inputs=("models",),
    compute=Compute,
    check=check_density,
    tables=(2,),
)
METHODS = (METHOD,)
