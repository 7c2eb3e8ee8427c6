"""The tables `layerswap tables` writes: one entry per table, listed once here.

An entry names the table's file stem, the paper's table it belongs to (the report's subcategory, "Table <n>"), its
report page's caption, its builder (a `Builder` method, layerswap/report/paper_tables.py), the formats it is written
in, whether it is one of the paper's own tables (the paper's numbers beside ours in the paper world) and the kinds of
file it reads. The rules (rules/analysis.smk, through `ReportJobs`: layerswap/workflow/report_jobs.py), the command
(layerswap/report/tables.py) and the writer (layerswap/report/render.py) read it; adding a table is its entry here
and its builder. Importing the registry imports neither pandas nor the builders.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

#: The kinds of file a table reads; `ReportJobs.table_inputs` lists each kind's files (in this order) for the rule.
INPUTS = (
    "selections",  # every expert type's selection file
    "checkpoint_evals",  # the checkpoint evaluation indexes of every expert type (the files behind each)
    "base_evals",  # the base model's evaluation files
    "merge_evals",  # the pairwise merges' evaluation files that a table or figure reads
    "soup_swap_evals",  # the soup-then-swap merges' evaluation files
    "table2_evals",  # Table 2's evaluations in English and every MGSM language (their indexes)
)

#: What the paper's tables are also written as in the paper world: `<stem>_paper_vs_ours.<ext>`, with its caption.
PAPER_VS_OURS_FORMATS = ("csv", "md")
PAPER_VS_OURS_CAPTION = "../report/paper_vs_ours.rst"


def paper_vs_ours(stem: str) -> str:
    """The file stem of a paper table's comparison with the paper's numbers."""
    return f"{stem}_paper_vs_ours"


@dataclass(frozen=True)
class TableEntry:
    name: str  # file stem: results/tables/<name>.<format>
    number: int  # the paper's table it is or belongs to: the report's subcategory "Table <number>"
    caption: str  # its report page's caption, relative to rules/
    build: Callable[[Any], Any]  # a paper_tables.Builder -> its render.Table (neither imported: render reads this)
    inputs: tuple[str, ...]  # kinds of file it reads (INPUTS)
    formats: tuple[str, ...] = ("csv", "md", "tex")  # the CSV holds the numbers, the others as displayed
    paper: bool = True  # one of the paper's tables: a target of the default run, in the paper world its Markdown
    # shows the paper's numbers beside ours and it is also written as paper_vs_ours(name).{csv,md}
    every_setting: bool = False  # its paper_vs_ours notes name every benchmark's setting that differs from the
    # paper's (render.PAPER_TASK_NOTES), else MGSM's alone


_EXPERTS = ("selections", "checkpoint_evals", "base_evals")

TABLES: tuple[TableEntry, ...] = (
    TableEntry("table1", 1, "../report/table1.rst", lambda b: b.table1(), (*_EXPERTS, "merge_evals")),
    TableEntry("table2", 2, "../report/table2.rst", lambda b: b.table2(), (*_EXPERTS, "merge_evals", "table2_evals")),
    TableEntry("table5", 5, "../report/table5.rst", lambda b: b.table5(), _EXPERTS, every_setting=True),
    TableEntry("table6", 6, "../report/table6.rst", lambda b: b.table6(), ("merge_evals", "soup_swap_evals")),
    TableEntry(
        "table1_best_configs",
        1,
        "../report/best_configs.rst",
        lambda b: b.best_configs(1, b.p.languages, "table1_best_configs"),
        ("merge_evals",),
        formats=("csv", "md"),
        paper=False,
    ),
    TableEntry(
        "table2_best_configs",
        2,
        "../report/best_configs.rst",
        lambda b: b.best_configs(2, [b.p.table2_language], "table2_best_configs"),
        ("merge_evals",),
        formats=("csv", "md"),
        paper=False,
    ),
)
