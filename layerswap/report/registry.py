"""The tables `layerswap tables` writes: one entry per table, listed once here.

An entry names the table's file stem, the paper's table it belongs to (the report's subcategory, "Table <n>"), its
report page's caption, its builder (a module of layerswap/report/builders/, by name), the formats it is written
in, whether it is one of the paper's own tables (the paper's numbers beside ours in the paper world) and the kinds of
file it reads. The rules (rules/analysis.smk, through `ReportJobs`: layerswap/workflow/report_jobs.py), the command
(layerswap/report/tables.py) and the writer (layerswap/report/render.py) read it; adding a table is its entry here
and its builder. Importing the registry imports neither pandas nor the builders.

Each table and figure also declares which pairwise merges' evaluations it reads (`MergeReads`: merge configs by role,
in which languages). The workflow evaluates the union of these declarations and gives each rule its own: the planning
layer (layerswap/workflow/report_jobs.py) names no table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from layerswap.merge.registry import SWAP, best_of_methods

#: The kinds of file a table reads; `ReportJobs.table_inputs` lists each kind's files (in this order) for the rule.
INPUTS = (
    "selections",  # every expert type's selection file
    "checkpoint_evals",  # the checkpoint evaluation indexes of every expert type (the files behind each)
    "base_evals",  # the base model's evaluation files
    "merge_evals",  # the pairwise merges' evaluation files of the table's `MergeReads` (never listed in `inputs`)
    "soup_swap_evals",  # the soup-then-swap merges' evaluation files
    "table2_evals",  # Table 2's evaluations in English and every MGSM language (their indexes)
)

#: What the paper's tables are also written as in the paper world: `<stem>_paper_vs_ours.<ext>`, with its caption.
PAPER_VS_OURS_FORMATS = ("csv", "md")
PAPER_VS_OURS_CAPTION = "../report/paper_vs_ours.rst"


def paper_vs_ours(stem: str) -> str:
    """The file stem of a paper table's comparison with the paper's numbers."""
    return f"{stem}_paper_vs_ours"


#: Roles of merge configs (`merges` is the config's `merges` block): "default_swap"; "swaps", every layer_swap config;
#: "best_of:<n>", the best_of configs of the methods with a best-config column in Table <n>; "best_of:<method>", that
#: method's best_of configs.
def role_configs(role: str, merges: dict) -> list[str]:
    """The merge configs of `role`, in the config's order."""
    best_of = merges["best_of"]
    if role == "default_swap":
        return [merges["default_swap"]]
    if role == "swaps":
        return [name for name, c in merges["configs"].items() if c["method"] == SWAP]
    kind, _, arg = role.partition(":")
    if kind == "best_of" and arg.isdigit():
        return [c for m in best_of_methods(best_of, int(arg)) for c in best_of[m.name]]
    if kind == "best_of" and arg:
        return list(best_of.get(arg, []))
    raise ValueError(f"unknown role of merge configs {role!r}")


@dataclass(frozen=True)
class MergeReads:
    """The pairwise merges' evaluations a table or figure reads: every expert pair of the configs of `roles`
    (`role_configs`), in every target language ("all") or in Table 2's language alone ("table2")."""

    roles: tuple[str, ...]
    languages: str = "all"

    def wants(self, merges: dict, langs: list[str], table2_language: str) -> dict[str, set[str]]:
        """{merge config: the languages it is read in}."""
        read = langs if self.languages == "all" else [l for l in langs if l == table2_language]
        return {c: set(read) for role in self.roles for c in role_configs(role, merges) if read}


@dataclass(frozen=True)
class TableEntry:
    name: str  # file stem: results/tables/<name>.<format>
    number: int  # the paper's table it is or belongs to: the report's subcategory "Table <number>"
    caption: str  # its report page's caption, relative to rules/
    builder: str  # its module in layerswap/report/builders/ (`build(Builder, *args) -> Table`)
    inputs: tuple[str, ...]  # kinds of file it reads (INPUTS) besides its merges'
    merges: MergeReads | None = None  # the pairwise merges' evaluations it reads (INPUTS' "merge_evals")
    formats: tuple[str, ...] = ("csv", "md", "tex")  # the CSV holds the numbers, the others as displayed
    paper: bool = True  # one of the paper's tables: a target of the default run, in the paper world its Markdown
    # shows the paper's numbers beside ours and it is also written as paper_vs_ours(name).{csv,md}
    args: tuple[Any, ...] = ()  # the builder's arguments after the Builder
    every_setting: bool = False  # its paper_vs_ours notes name every benchmark's setting that differs from the
    # paper's (each entry's LmEvalTask.note), else the math benchmark's alone

    @property
    def kinds(self) -> tuple[str, ...]:
        """Every kind of file it reads (INPUTS)."""
        return self.inputs + (("merge_evals",) if self.merges else ())


@dataclass(frozen=True)
class FigureEntry:
    name: str  # file stem: results/figures/<name>.{svg,png,csv}
    subcategory: str  # the report's subcategory
    caption: str  # its report page's caption, relative to rules/
    merges: MergeReads | None = None  # the pairwise merges whose MGSM evaluations it reads


_EXPERTS = ("selections", "checkpoint_evals", "base_evals")

_TABLE1 = MergeReads(("best_of:1", "default_swap"))  # Table 1's columns: the methods it shows, the default swap
_TABLE2 = MergeReads(("best_of:2", "default_swap"), "table2")

TABLES: tuple[TableEntry, ...] = (
    TableEntry("table1", 1, "../report/table1.rst", "table1", _EXPERTS, _TABLE1),
    TableEntry("table2", 2, "../report/table2.rst", "table2", (*_EXPERTS, "table2_evals"), _TABLE2),
    TableEntry("table5", 5, "../report/table5.rst", "table5", _EXPERTS, every_setting=True),
    TableEntry(
        "table6",
        6,
        "../report/table6.rst",
        "table6",
        ("soup_swap_evals",),
        MergeReads(("default_swap", "best_of:soup")),  # the swap, the pairwise soup
    ),
    TableEntry(
        "table1_best_configs",
        1,
        "../report/best_configs.rst",
        "best_configs",
        (),
        MergeReads(("best_of:1",)),
        args=(1,),  # Table 1's best configs
        formats=("csv", "md"),
        paper=False,
    ),
    TableEntry(
        "table2_best_configs",
        2,
        "../report/best_configs.rst",
        "best_configs",
        (),
        MergeReads(("best_of:2",), "table2"),
        args=(2,),
        formats=("csv", "md"),
        paper=False,
    ),
)

#: The figures of the report: results/figures/<name>.{svg,png,csv}.
FIGURES: tuple[FigureEntry, ...] = (
    FigureEntry("param_change", "Parameter change", "../report/heatmap.rst"),
    FigureEntry("param_change_mean", "Parameter change", "../report/param_change_mean.rst"),
    FigureEntry("swap_grid", "Layer-swap grid", "../report/swap_grid.rst", MergeReads(("swaps",))),
    FigureEntry("table1_bars", "Table 1 bars", "../report/table1_bars.rst", _TABLE1),
)
