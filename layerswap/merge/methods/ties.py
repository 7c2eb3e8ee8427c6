"""TIES-merging (Yadav et al. 2023): per tensor, trim each task vector (W_i - W_base) to its top-k |delta| (k =
density * numel), elect the sign of the summed trimmed deltas, take the disjoint mean of the deltas that agree with
it, scale by lambda and add to the base. mergekit's `ties` with its defaults (normalize: true)."""

from __future__ import annotations

import math

from layerswap.merge.params import REQUIRED, Method, Param
from layerswap.merge.shared import check_density

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


class TiesChunk:
    """Per-chunk TIES: trim by per-expert threshold, elect sign by summed deltas, disjoint mean, scale, add base."""

    def __init__(self) -> None:
        self.num = self.cnt = self.tmp = self.sign = self.mask = None

    def _bufs(self, n: int):
        import torch

        if self.num is None or self.num.numel() < n:
            self.num = torch.empty(n, dtype=torch.float32)
            self.cnt = torch.empty(n, dtype=torch.float32)
            self.tmp = torch.empty(n, dtype=torch.float32)
            self.sign = torch.empty(n, dtype=torch.float32)
            self.mask = torch.empty(n, dtype=torch.bool)
        assert self.cnt is not None and self.tmp is not None and self.sign is not None and self.mask is not None
        return self.num[:n], self.cnt[:n], self.tmp[:n], self.sign[:n], self.mask[:n]

    def trim_(self, delta, threshold: float) -> None:
        """Zero the entries of `delta` with |delta| < threshold."""
        import torch

        _, _, tmp, _, _ = self._bufs(delta.numel())
        torch.abs(delta, out=tmp)
        tmp.sub_(threshold).sign_().add_(1.0).clamp_(max=1.0)  # 1 where |delta| >= threshold (exact), else 0
        delta.mul_(tmp)

    def merge_(self, base, deltas: list, lam: float):
        """base <- base + lam * disjoint mean of the trimmed deltas that agree with the elected sign."""
        import torch

        num, cnt, tmp, sign, _ = self._bufs(base.numel())
        num.copy_(deltas[0])
        for d in deltas[1:]:
            num.add_(d)
        torch.sign(num, out=sign)  # elected sign: +1 where the sum is >= 0, else -1
        sign.add_(0.5).sign_()
        num.zero_()
        cnt.zero_()
        for d in deltas:
            agree = torch.mul(d, sign, out=tmp)
            agree.sign_().clamp_(min=0.0)  # 1 where d is non-zero with the elected sign, else 0
            cnt.add_(agree)
            d.mul_(agree)
            num.add_(d)
        cnt.clamp_(min=1.0)
        num.div_(cnt)
        if lam != 1.0:
            num.mul_(lam)
        return base.add_(num)


class Compute:
    """TIES of the node's inputs against its base, tensor chunk by chunk (thresholds once per tensor)."""

    def __init__(self, node) -> None:
        self.node = node
        self.density, self.lam = node.params["density"], node.params["lam"]
        self.chunk = TiesChunk()
        self._thresholds: tuple[str, list[float | None]] = ("", [])

    def prepare(self) -> None:
        pass

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

    def fill(self, name: str, start: int, stop: int, dest) -> None:
        node = self.node
        if not dest.is_floating_point():
            node.copy(node.inputs[0], name, start, stop, dest)
            return
        if self._thresholds[0] != name:
            self._thresholds = (name, [self.threshold(src, name) for src in node.inputs])
        base = node.read(node.base, name, start, stop, "base")
        deltas = []
        for i, (src, thr) in enumerate(zip(node.inputs, self._thresholds[1])):
            d = node.read(src, name, start, stop, f"d{i}")
            d.sub_(base)
            if thr is not None:
                self.chunk.trim_(d, thr)
            deltas.append(d)
        dest.copy_(self.chunk.merge_(base, deltas, self.lam))


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
