"""The arithmetic of each merge method, on float32 chunks (in place, into reusable buffers)."""

from __future__ import annotations

import re

import torch

from layerswap.errors import UserError
from layerswap.merge.params import swap_layer_overflow

LAYER_RE = re.compile(r"(?:^|\.)layers\.(\d+)\.")
LANG, TASK, MIX = "lang", "task", "mix"
SAMPLE = 1 << 18  # sample size used to bracket the TIES threshold before the exact selection


def layer_of(name: str) -> int | None:
    """Layer index of a parameter name (`model.layers.<l>.`), None for embeddings, final norm, LM head."""
    m = LAYER_RE.search(name)
    return int(m.group(1)) if m else None


def layer_plan(params: dict, n_layers: int, where: str = "params") -> list[str]:
    """Source of each layer: 'lang', 'task' or 'mix' (Algorithm 1 with `and` where the paper prints `or`)."""
    L = n_layers
    if params.get("lang_layers") is not None:
        plan = [TASK] * L
        for key, kind in (("lang_layers", LANG), ("transition_layers", MIX)):
            for l in params.get(key) or []:
                if l >= L:
                    raise UserError(f"{where}.{key}: layer {l} is out of range for a model of {L} layers")
                plan[l] = kind
        return plan
    b, u = params["bottom"], params["top"]
    tb, tu = params.get("transition_bottom") or 0, params.get("transition_top") or 0
    if swap_layer_overflow(params, L) is not None:
        raise UserError(
            f"{where}: bottom+transition_bottom+transition_top+top = {b}+{tb}+{tu}+{u} exceeds the {L} layers of the model"
        )
    plan = []
    for l in range(L):
        if l < b or l >= L - u:
            plan.append(LANG)
        elif l < b + tb or L - u - tu <= l:
            plan.append(MIX)
        else:
            plan.append(TASK)
    return plan


def weighted_mean_(acc: torch.Tensor, others: list[torch.Tensor], weights: list[float]) -> torch.Tensor:
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


def magnitude_rows(delta: torch.Tensor, shape: tuple[int, ...]) -> tuple[float, int]:
    """(sum of row means of |delta|, number of rows) for a row-aligned chunk of a 2-D tensor."""
    cols = shape[-1]
    rows = delta.numel() // cols
    return float(delta.abs_().view(rows, cols).mean(dim=1).sum(dtype=torch.float64)), rows


def kth_largest_bracket(sample: torch.Tensor, n: int, k: int, widen: float = 1.0) -> tuple[float, float]:
    """Bounds [lo, hi] likely to hold the k-th largest of n values, from a strided sample of them."""
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
        self.num: torch.Tensor | None = None
        self.cnt: torch.Tensor | None = None
        self.tmp: torch.Tensor | None = None
        self.sign: torch.Tensor | None = None
        self.mask: torch.Tensor | None = None

    def _bufs(self, n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        if self.num is None or self.num.numel() < n:
            self.num = torch.empty(n, dtype=torch.float32)
            self.cnt = torch.empty(n, dtype=torch.float32)
            self.tmp = torch.empty(n, dtype=torch.float32)
            self.sign = torch.empty(n, dtype=torch.float32)
            self.mask = torch.empty(n, dtype=torch.bool)
        assert self.cnt is not None and self.tmp is not None and self.sign is not None and self.mask is not None
        return self.num[:n], self.cnt[:n], self.tmp[:n], self.sign[:n], self.mask[:n]

    def trim_(self, delta: torch.Tensor, threshold: float) -> None:
        """Zero the entries of `delta` with |delta| < threshold."""
        _, _, tmp, _, _ = self._bufs(delta.numel())
        torch.abs(delta, out=tmp)
        tmp.sub_(threshold).sign_().add_(1.0).clamp_(max=1.0)  # 1 where |delta| >= threshold (exact), else 0
        delta.mul_(tmp)

    def merge_(self, base: torch.Tensor, deltas: list[torch.Tensor], lam: float) -> torch.Tensor:
        """base <- base + lam * disjoint mean of the trimmed deltas that agree with the elected sign."""
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
