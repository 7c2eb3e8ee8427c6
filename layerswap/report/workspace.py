"""What the tables read, resolved: the selected experts (selection files), the models of each table column and
their MGSM scores, and each merge method's best config per pair (`Workspace`); how a selection file chose
(`selection_rule`, Table 5's note) and which selected experts fail a constraint (`below_base`, a note under Table 5).
The tables themselves: layerswap/report/builders/ (one module each).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from layerswap.benchmarks import MATH
from layerswap.contracts import checkpoint_model_id, merge_model_id, pair_ids, read_json, read_selection
from layerswap.errors import UserError
from layerswap.layout import Layout
from layerswap.report.evals import Evals, mean
from layerswap.report.table_params import Params


def selection_file(selection_dir: str | Path, expert_type: str) -> Path:
    """The selection file of `expert_type` in the folder `selection_dir` (the tables' `--selection-dir`)."""
    return Path(Layout().selection(expert_type, folder=selection_dir))


def load_selection(selection_dir: str | Path, expert_type: str, top_k: int) -> list[str]:
    """Model ids (ckpt/<run>/<checkpoint>) of the top-k selected experts, by rank."""
    path = selection_file(selection_dir, expert_type)
    entries = read_selection(path, ("run", "checkpoint"))
    if len(entries) < top_k:
        raise UserError(f"{path}: {len(entries)} selected experts, top_k is {top_k}")
    return [checkpoint_model_id(e["run"], e["checkpoint"]) for e in entries[:top_k]]


def selection_rule(selection_dir: str | Path, expert_type: str) -> str:
    """How a selection file chose: '<w>·<metric> + ...', then the constraints and their margins (if any)."""
    path = selection_file(selection_dir, expert_type)
    data = read_json(path, "selection")
    weights, constraints = data.get("weights") or {}, data.get("constraints") or {}
    text = "ranked by " + " + ".join(f"{w:g}·{m}" for m, w in weights.items())
    if constraints:
        text += ", rejected if below the base model by more than a margin on " + ", ".join(
            f"{m} (margin {margin:g})" for m, margin in constraints.items()
        )
    return text


def below_base(selection_dir: str | Path, expert_type: str, top_k: int) -> list[str]:
    """The top-k selected experts of a selection file that fail a constraint (selection.on_no_pass: best took them,
    too few candidates passing): '#<rank> (<run>/<checkpoint>): <metric> <value> vs base <base> (margin m); ...'."""
    entries = read_selection(selection_file(selection_dir, expert_type), ("run", "checkpoint"))[:top_k]
    return [
        f"#{e['rank']} ({e['run']}/{e['checkpoint']}): "
        + "; ".join(f"{f['metric']} {f['value']:.3f} vs base {f['base']:.3f} (margin {f['margin']:g})" for f in failed)
        for e in entries
        if (failed := e.get("failed"))
    ]


@dataclass
class Stats:
    min: float
    avg: float
    max: float

    @classmethod
    def of(cls, values: list[float]) -> "Stats":
        return cls(min(values), mean(values), max(values))


@dataclass
class BestChoice:
    language: str
    method: str
    pair: str
    config: str
    model_id: str
    score: float  # MGSM in the target language, fraction
    candidates: dict[str, float]


class Workspace:
    """Resolves the models of each table column and their MGSM scores."""

    def __init__(self, selection_dir: str | Path, evals: Evals, params: Params):
        self.selection_dir = Path(selection_dir)
        self.evals = evals
        self.p = params
        self._experts: dict[str, list[str]] = {}

    def experts(self, expert_type: str) -> list[str]:
        if expert_type not in self._experts:
            self._experts[expert_type] = load_selection(self.selection_dir, expert_type, self.p.top_k)
        return self._experts[expert_type]

    def pairs(self) -> list[str]:
        return pair_ids(self.p.top_k)

    def merge_models(self, config: str, lang: str) -> list[str]:
        return [merge_model_id(config, lang, pair) for pair in self.pairs()]

    def math_score(self, model_id: str, lang: str) -> float:
        return self.evals.score(model_id, MATH, lang)

    def math_all(self, model_id: str) -> float:
        return mean([self.math_score(model_id, lang) for lang in self.p.mgsm_languages])

    def best(self, method: str, lang: str) -> list[BestChoice]:
        choices = []
        for pair in self.pairs():
            candidates = {
                config: self.math_score(merge_model_id(config, lang, pair), lang) for config in self.p.best_of[method]
            }
            winner = max(candidates, key=lambda c: candidates[c])  # first of equal maxima
            choices.append(
                BestChoice(
                    lang, method, pair, winner, merge_model_id(winner, lang, pair), candidates[winner], candidates
                )
            )
        return choices
