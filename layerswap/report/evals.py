"""The evaluation files of a results tree, read for the tables, the figures and the ablation tables.

`Evals(<results>/evals)` loads each file once (docs/ARCHITECTURE.md, "Evaluation file"): a score for (model,
benchmark, key), the item count behind it, the per-item correctness of its `.samples.jsonl` (the 95% intervals,
layerswap.report.intervals) and whether the benchmark was skipped. A missing or unreadable file, one whose bytes differ
from the sha256 its checkpoint evaluation index records, or a missing score where one is needed, is one error naming
the file. `mean` and `pct` are the numbers every reader computes with.
"""

from __future__ import annotations

import glob
import math
import os
from pathlib import Path

from layerswap.contracts import read_json
from layerswap.errors import UserError
from layerswap.jsonl import read_rows
from layerswap.layout import Layout

MISSING = "n/a"  # no score for the key in the file (Table 5 shows it)
SKIPPED = "skipped"  # the benchmark was not run (MBPP without opt-in)


_LAYOUT = Layout()  # its file names in the folder an `Evals` is given (`folder=`)


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


def pct(x: float) -> float:
    return 100.0 * x


class Evals:
    """Evaluation files under one directory, loaded once each.

    A score for (model, benchmark, key) is in the model's file for the benchmark (<root>/<model>/<bench>.json) or,
    when that file lacks the key, in a file of that language alone (<root>/by_language/<key>/<model>/<bench>.json:
    Table 2's extra languages, evaluated in jobs of their own so that adding one reruns nothing that exists)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self._cache: dict[Path, dict] = {}
        self._samples: dict[Path, list[dict]] = {}
        self._hashes: dict[str, tuple[str, Path]] | None = None

    def _recorded(self, path: Path) -> tuple[str, Path] | tuple[None, None]:
        """(sha256, index) of an evaluation file that a checkpoint evaluation index under the root records (its paths
        are as the job named them, relative to the working directory), else (None, None)."""
        if self._hashes is None:
            self._hashes = {}
            for index in self._indexes():
                recorded = read_json(index, "evaluation index")
                recorded = recorded.get("sha256") if isinstance(recorded, dict) else None
                for name, sha in (recorded if isinstance(recorded, dict) else {}).items():
                    self._hashes[os.path.abspath(name)] = (str(sha), index)
        return self._hashes.get(os.path.abspath(path), (None, None))

    def _indexes(self) -> list[Path]:
        """The checkpoint evaluation indexes under the root (`index.json`, `index.<part>.json`, the leaders'
        constraint evaluations `leaders/<expert>.json`), sorted."""
        root = glob.escape(str(self.root))
        patterns = (
            _LAYOUT.checkpoint_index("*", folder=root),
            _LAYOUT.checkpoint_index("*", "*", folder=root),
            _LAYOUT.leaders_index("*", folder=root),
        )
        return sorted(Path(p) for pattern in patterns for p in glob.glob(pattern, include_hidden=True))

    def path(self, model_id: str, bench: str) -> Path:
        return Path(_LAYOUT.eval_file(model_id, bench, folder=self.root))

    def language_path(self, model_id: str, bench: str, key: str) -> Path:
        return Path(_LAYOUT.eval_file(model_id, bench, folder=_LAYOUT.language_evals(key, folder=self.root)))

    def _load(self, path: Path) -> dict:
        if path not in self._cache:
            data = read_json(path, "evaluation", *self._recorded(path))
            if not isinstance(data, dict) or not isinstance(data.get("scores", {}), dict):
                raise UserError(f"{path}: 'scores' must be an object keyed by language")
            self._cache[path] = data
        return self._cache[path]

    def load(self, model_id: str, bench: str) -> dict:
        return self._load(self.path(model_id, bench))

    def source(self, model_id: str, bench: str, key: str) -> Path:
        """The file that holds (or should hold) this score."""
        path = self.path(model_id, bench)
        data = self._load(path)
        if data.get("skipped") or key in (data.get("scores") or {}):
            return path
        by_language = self.language_path(model_id, bench, key)
        return by_language if by_language.is_file() else path

    def skipped(self, model_id: str, bench: str) -> str | None:
        reason = self.load(model_id, bench).get("skipped")
        return str(reason) if reason else None

    def score(self, model_id: str, bench: str, key: str) -> float:
        """One score; a missing file, a skipped benchmark or a missing key is an error naming the file."""
        value = self.maybe_score(model_id, bench, key)
        path = self.source(model_id, bench, key)
        if value == SKIPPED:
            reason = self._load(path)["skipped"]
            raise UserError(f"{path}: benchmark skipped ({reason}), but a score for '{key}' is needed")
        if value == MISSING:
            raise UserError(f"{path}: no numeric score for '{key}' in 'scores'")
        return value

    def samples_path(self, model_id: str, bench: str, key: str) -> Path:
        """The per-item log beside the file that holds this score (layerswap.evaluation.results.write_outputs)."""
        path = self.source(model_id, bench, key)
        return path.with_name(f"{path.name[: -len('.json')]}.samples.jsonl")

    def _records(self, path: Path) -> list[dict]:
        if path not in self._samples:
            if not path.is_file():
                raise UserError(
                    f"missing per-item file {path} (the tables' 95% intervals read it; the evaluation "
                    "job writes it beside its JSON)"
                )
            self._samples[path] = [row for _, row in read_rows(path, ("key", "doc_id"))]
        return self._samples[path]

    def count(self, model_id: str, bench: str, key: str) -> int | None:
        """Items behind a score: the evaluation file's 'n' for the key (None where the file gives none)."""
        data = self._load(self.source(model_id, bench, key))
        value = (data.get("n") or {}).get(key)
        return int(value) if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None

    def items(self, model_id: str, bench: str, key: str):
        """Per-item correctness (numpy 0/1, ordered by doc_id) behind a score, or None for a corpus metric (BLEU:
        the records carry no 'correct'). Records are those of the key, else of the same lm-eval task (paper MBPP:
        one English task recorded under every language key)."""
        import numpy as np

        path = self.samples_path(model_id, bench, key)
        records = self._records(path)
        mine = [r for r in records if r["key"] == key]
        if not mine:
            task = (self._load(self.source(model_id, bench, key)).get("lm_eval_tasks") or {}).get(key)
            mine = [r for r in records if task is not None and r.get("task") == task]
        if not mine:
            raise UserError(f"{path}: no per-item records for '{key}'")
        if any(r.get("correct") is None for r in mine):
            return None
        n = self.count(model_id, bench, key)
        if n is not None and n != len(mine):
            raise UserError(f"{path}: {len(mine)} per-item records for '{key}', the evaluation file says n = {n}")
        mine.sort(key=lambda r: (str(r.get("task", "")), r["doc_id"]))
        return np.array([bool(r["correct"]) for r in mine], dtype=float)

    def maybe_score(self, model_id: str, bench: str, key: str) -> float | str:
        """Like score(), but a skipped benchmark gives SKIPPED and a missing key MISSING (Table 5)."""
        data = self._load(self.source(model_id, bench, key))
        if data.get("skipped"):
            return SKIPPED
        value = (data.get("scores") or {}).get(key)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            return MISSING
        return float(value)

    def smallest_count(self, models: list[str], bench: str, keys: list[str]) -> int | None:
        """Items per model and key behind a cell of these models (the smallest, should they differ); None where a
        file records none."""
        counts = [self.count(m, bench, key) for m in models for key in keys]
        return None if None in counts else min(counts)
