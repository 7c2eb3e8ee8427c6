"""The generalized task-arithmetic merge that TIES and DARE configure (mergekit's `generalized_task_arithmetic`).

Per tensor chunk: the task vectors delta_i = W_i - W_base, each optionally sparsified in place (`sparsify`: DARE's
random drop and rescale, TIES' magnitude trim), optionally a sign consensus (`consensus`: the sign of sum_i delta_i
is elected per element, +1 where the sum is >= 0, and only the deltas that agree with it are kept), then their sum
(`normalize`: divided per element by the number of deltas kept, TIES' disjoint mean), scaled by `lam` and added to
the base. With neither sparsification nor consensus it is task arithmetic: W_base + lam * sum_i delta_i. A method's
`Compute` subclasses `TaskArithmetic` and sets what it configures; non-float tensors come from the first input.
"""

from __future__ import annotations


class TaskArithmetic:
    """Generalized task arithmetic of the node's inputs against its base, tensor chunk by chunk (the node is the merge
    engine's, layerswap/merge/engine.py). Subclasses override `consensus`, `normalize`, `start` and `sparsify`."""

    consensus = False  # TIES sign election
    normalize = False  # divide by the number of deltas that agree (with consensus): a disjoint mean, else a sum

    def __init__(self, node) -> None:
        self.node = node
        self.lam = node.params["lam"]

    def prepare(self) -> None:
        pass

    def start(self, name: str) -> None:
        """Before a chunk of tensor `name` is read (TIES: its thresholds, once per tensor)."""

    def sparsify(self, name: str, index: int, start: int, stop: int, delta) -> None:
        """Sparsify in place elements [start, stop) of input `index`'s task vector of tensor `name` (none here)."""

    def fill(self, name: str, start: int, stop: int, dest) -> None:
        import torch

        node, n = self.node, stop - start
        if not dest.is_floating_point():
            node.copy(node.inputs[0], name, start, stop, dest)
            return
        self.start(name)
        base = node.read(node.base, name, start, stop, "base")
        deltas = []
        for i, src in enumerate(node.inputs):
            d = node.read(src, name, start, stop, f"d{i}").sub_(base)
            self.sparsify(name, i, start, stop, d)
            deltas.append(d)
        total = node.buffer("sum", torch.float32, n).copy_(deltas[0])
        for d in deltas[1:]:
            total.add_(d)
        if self.consensus:  # keep the deltas whose sign agrees with their sum's (+1 where the sum is >= 0)
            sign = torch.sign(total, out=node.buffer("sign", torch.float32, n)).add_(0.5).sign_()
            agree = node.buffer("agree", torch.float32, n)
            count = node.buffer("count", torch.float32, n).zero_() if self.normalize else None
            total.zero_()
            for d in deltas:
                torch.mul(d, sign, out=agree).sign_().clamp_(min=0.0)  # 1 where d is non-zero with the sign, else 0
                if count is not None:
                    count.add_(agree)
                total.add_(d.mul_(agree))
            if count is not None:
                total.div_(count.clamp_(min=1.0))
        if self.lam != 1.0:
            total.mul_(self.lam)
        dest.copy_(base.add_(total))
