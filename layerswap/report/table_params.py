"""`Params`: the `--params-json` of `layerswap tables` (layerswap/report/tables.py) and of `layerswap charts
table1-bars` (without Table 2's keys), checked on parse (layerswap/command_params.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

from layerswap.benchmarks import BENCHMARKS
from layerswap.command_params import AtLeast, parse
from layerswap.errors import UserError
from layerswap.merge.registry import METHODS
from layerswap.report import intervals

Languages = Annotated[list[str], AtLeast(1)]


@dataclass
class Params:
    """--params-json of `layerswap tables` (and of `layerswap charts table1-bars`, without Table 2's keys)."""

    languages: Languages
    mgsm_languages: Languages
    top_k: Annotated[int, AtLeast(1)]
    default_swap: str
    world: Literal["toy", "hf", "paper"]  # "paper" is an alias of "hf"; kept as "toy" or "paper"
    best_of: dict[str, Annotated[list[str], AtLeast(1)]] = field(default_factory=dict)
    table2_language: str | None = None  # None where only Table 1 is built (the table1-bars figure)
    language_names: dict[str, str] = field(default_factory=dict)
    benchmarks: list[str] = field(default_factory=lambda: list(BENCHMARKS))
    seed: Annotated[int, AtLeast(0)] = 0  # of the bootstrap intervals (layerswap.report.intervals)
    bootstrap_draws: Annotated[int, AtLeast(100)] = intervals.DEFAULT_DRAWS

    def __post_init__(self):
        self.world = "toy" if self.world == "toy" else "paper"
        for method in self.best_of:
            if method not in METHODS:
                raise UserError(f"--params-json: 'best_of.{method}': unknown merge method; known: {', '.join(METHODS)}")
        if self.table2_language is not None and self.table2_language not in self.languages:
            raise UserError(f"--params-json: 'table2_language' {self.table2_language!r} is not in 'languages'")
        unknown = [b for b in self.benchmarks if b not in BENCHMARKS]
        if unknown:
            raise UserError(f"--params-json: 'benchmarks' has unknown entries {unknown}; known: {list(BENCHMARKS)}")

    @classmethod
    def from_json(cls, text: str, table2: bool = True) -> "Params":
        """Checked params; table2=False: 'table2_language' may be left out (Table 1 alone)."""
        params = parse(cls, text)
        if table2 and params.table2_language is None:
            raise UserError("--params-json: missing key 'table2_language'")
        return params
