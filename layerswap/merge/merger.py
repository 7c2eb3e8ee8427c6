"""`Merger`: the merge engine of one evaluation job. `layerswap evaluate-merges` gives one to the model host
(layerswap/evaluation/hosts.py), which calls it for each recipe: the merges' tensors built in memory (`changes`, in
the `order` where consecutive merges share the most) with the experts opened once for the job (one ExpertCache), or
a merge written to disk (`write`, vLLM without weight reload).

Built one merge ahead (`AHEAD`): once the host has taken merge i's tensors, merge i+1 of the order is built on a
background thread while the host loads merge i and evaluates it, so the GPU does not wait for the CPU's build (at
8B: 13-16 s a merge, docs/MEASUREMENTS.md) unless a build takes longer than an evaluation. Bounded memory: at most
one merge is built ahead, and it starts only when the previous one was handed over. The same bytes: the build is the
same deterministic function of (recipe, what the host holds) as without it; `changes` hands over a build made ahead
only when the host asks for exactly that recipe with exactly the tensors the build assumed it holds, and builds
synchronously otherwise. An error of a build made ahead is raised where the host asks for that merge, so it is the
same one line, at the same point of the job, as without it. One thread at a time uses the expert cache: `changes`
waits for the build ahead before building anything else."""

from __future__ import annotations

import threading

import torch

from layerswap.merge.engine import ExpertCache, TensorKeys, build_changes, switch_order, tensor_keys, write_merged
from layerswap.merge.recipes import Recipe

#: merges built ahead of the one the host evaluates (`layerswap.workflow.eval_plan` counts a merge's build as hidden
#: behind the previous merge's evaluation when this is 1)
AHEAD = 1


class _Ahead(threading.Thread):
    """The build of one merge on a background thread: `build_changes(recipe, cache, held)`, its result or error
    kept for `Merger.changes`. A daemon: a job that stops does not wait for a build no one will take."""

    def __init__(self, recipe: Recipe, cache: ExpertCache, held: TensorKeys) -> None:
        super().__init__(name="layerswap-merge-ahead", daemon=True)
        self.recipe, self.cache, self.held = recipe, cache, held
        self.result: tuple[TensorKeys, dict[str, torch.Tensor]] | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        from threadpoolctl import threadpool_limits

        try:
            # One OpenMP thread for this thread's chunk ops (memory-bound: one is as fast, and a second team beside the
            # evaluation's oversubscribes the cores; measured here: a build took 2-4 s instead of 0.5 s). Through the
            # OpenMP runtime's own per-thread setting, after torch set this thread up (it would undo it): torch's
            # set_num_threads would change the evaluation's threads too (engine.one_thread leaves it alone here).
            torch.get_num_threads()
            with threadpool_limits(limits=1, user_api="openmp"):
                self.result = build_changes(self.recipe, self.cache, self.held)
        except BaseException as err:  # handed to the main thread, raised there (Merger.changes)
            self.error = err

    def take(self) -> tuple[TensorKeys, dict[str, torch.Tensor]]:
        self.join()
        result, error, self.result, self.error = self.result, self.error, None, None
        if error is not None:
            raise error
        assert result is not None
        return result


class Merger:
    def __init__(self, ahead: int = AHEAD) -> None:
        """`ahead`: 1 builds the next merge of the order on a background thread; 0 builds each when asked."""
        if ahead not in (0, 1):
            raise ValueError("Merger(ahead=...): 0 or 1")
        self.cache = ExpertCache()
        self.ahead = ahead
        self._queue: list[Recipe] = []  # the evaluation order given by `order`
        self._next: _Ahead | None = None
        self.built = self.built_ahead = 0  # merges handed over, and of those, built ahead (the job's log says)

    def changes(self, recipe: Recipe, held: TensorKeys | None) -> tuple[TensorKeys, dict[str, torch.Tensor]]:
        """engine.build_changes: the merge's tensor keys, and the tensors whose keys differ from `held`'s; then the
        next merge of the order is built ahead, for a host that will hold this one's tensors."""
        pending = self._next
        if pending is not None and pending.recipe is recipe and pending.held == held:
            self._next = None
            result = pending.take()
            self.built_ahead += 1
        else:
            if pending is not None:
                pending.join()  # one thread at a time on the expert cache; kept if it is the next merge's
                if pending.recipe is recipe:  # this merge, for other tensors than the host holds: of no use
                    self._next = None
            result = build_changes(recipe, self.cache, held)
        self.built += 1
        self._build_next(recipe, result[0])
        return result

    def _build_next(self, recipe: Recipe, held: TensorKeys) -> None:
        """Start building the merge after `recipe` in the order, for a host holding `held` (unless it is built or
        being built for that already: a host that asked for `recipe` twice, e.g. vLLM widening a partial load)."""
        at = next((i for i, r in enumerate(self._queue) if r is recipe), None)
        if not self.ahead or at is None or at + 1 >= len(self._queue):
            return
        nxt, pending = self._queue[at + 1], self._next
        if pending is not None:
            if pending.recipe is nxt and pending.held == held:
                return
            pending.join()
        self._next = _Ahead(nxt, self.cache, held)
        self._next.start()

    def order(self, recipes: list[Recipe]) -> list[int]:
        """engine.switch_order of the recipes (indices); the merges are built ahead in this order."""
        order = switch_order([tensor_keys(r, self.cache) for r in recipes])
        self._queue = [recipes[i] for i in order]
        return order

    def write(self, recipe: Recipe, out_dir: str) -> None:
        write_merged(recipe, out_dir)

    def close(self) -> None:
        pending, self._next = self._next, None
        if pending is not None:
            pending.join()  # it reads through the cache closed below
        self.cache.close()
