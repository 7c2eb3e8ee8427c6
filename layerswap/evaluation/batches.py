"""Per-key batch sizes inside one lm-eval `evaluate` call (`--benchmarks-json`'s `batch_sizes`: the plan's memory fit,
layerswap/workflow/batch_fit.py).

lm-eval pools the requests of every task of a call by request type and sends each pool to the model in batches of the
model's one `batch_size`. Where some keys need a smaller batch (their prompts are longer), `per_task_batches` splits
each pool by task, runs each part at its task's batch, and puts the answers back in the pool's order. lm-eval has no
per-task batch size (its `batch_size` is one per model), hence this wrapper; it changes nothing where no key has its
own batch (the toy world's jobs). Each part is a call of the model's own method, so what a request scores depends only
on its part's batch, as it depended on the pool's before.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager

log = logging.getLogger("layerswap.evaluate")
METHODS = ("loglikelihood", "loglikelihood_rolling", "generate_until")


def set_batch(lm, size: int) -> None:
    """The batch of an lm-eval model: HFLM keeps it in `batch_size_per_gpu`, the vLLM wrapper in `batch_size`."""
    if hasattr(lm, "batch_size_per_gpu"):
        lm.batch_size_per_gpu = size
    else:
        lm.batch_size = size


@contextmanager
def per_task_batches(lm, batch_of: dict[str, int], default: int):
    """Within the block, `lm`'s request methods run each task's requests at `batch_of[task]` (else `default`)."""
    if not batch_of:
        yield
        return

    def split(name: str):
        method = getattr(lm, name)

        def run(requests, *args, **kwargs):
            parts: dict[int, list[int]] = {}
            for i, req in enumerate(requests):
                parts.setdefault(batch_of.get(req.task_name, default), []).append(i)
            out = [None] * len(requests)
            try:
                for size, index in sorted(parts.items(), reverse=True):
                    set_batch(lm, size)
                    log.info("evaluate: %s of %d requests at batch %d", name, len(index), size)
                    for i, answer in zip(index, method([requests[i] for i in index], *args, **kwargs)):
                        out[i] = answer
            finally:
                set_batch(lm, default)
            return out

        return run

    wrapped = [name for name in METHODS if hasattr(lm, name)]
    for name in wrapped:
        setattr(lm, name, split(name))  # instance attributes shadow the class's methods
    try:
        yield
    finally:
        for name in wrapped:
            delattr(lm, name)
