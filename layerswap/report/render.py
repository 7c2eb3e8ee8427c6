"""A table of numbers and how it is written: CSV, Markdown and LaTeX, each number with its 95% interval and item
count, and in the paper world the paper's number beside ours (`<table>_paper_vs_ours.{csv,md}`).

`Table` holds rows, columns, cells and per cell the interval and item count; the paper's tables
(layerswap/report/builders/) and the figures that restate them (layerswap/report/charts.py) build Tables and
write them here. Nothing here reads a results tree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from layerswap.benchmarks import BENCHMARKS, MATH
from layerswap.contracts import write_text_atomic
from layerswap.report.registry import PAPER_VS_OURS_FORMATS, TableEntry, paper_vs_ours

TOY_LABEL = "TOY WORLD — synthetic languages"


def world_title(text: str, world: str) -> str:
    """A table's or figure's title: in the toy world labelled as such."""
    return f"{text} — {TOY_LABEL}" if world == "toy" else text


#: What the paper config runs where the paper names no set or setting, per benchmark (its entry's LmEvalTask.note).
PAPER_TASK_NOTES = {b.name: b.paper.note for b in BENCHMARKS.values() if b.paper and b.paper.note}
INTERVAL_NOTE = (
    "[lo, hi]: 95% interval, seeded bootstrap (layerswap/report/intervals.py): an avg resamples the items "
    "(the same draw for every model) and the experts / pairs; a min, max or single model resamples the "
    "items only; a best-config winner is kept as chosen. Where every item is wrong the interval is "
    "[0, 0]: the bootstrap sees only the observed items (0 of n still allows a rate up to about 3/n)."
)


Cell = float | str | None


@dataclass
class Table:
    name: str
    title: str
    index: list[str]  # names of the label columns
    rows: list[tuple[Any, tuple[str, ...]]]  # (row key, labels)
    columns: list[tuple[str, str]]  # (column key, label)
    cells: dict[tuple[Any, str], Cell]
    fmt: Callable[[Any, float], str]
    notes: list[str] = field(default_factory=list)
    paper: dict[tuple[Any, str], float] = field(default_factory=dict)
    intervals: dict[tuple[Any, str], tuple[float, float]] = field(default_factory=dict)  # 95%, cell units
    counts: dict[tuple[Any, str], int] = field(default_factory=dict)  # items per model (and language)

    def display(self, row: Any, col: str) -> str:
        value = self.cells.get((row, col))
        if value is None:
            return ""
        if isinstance(value, str):
            return value
        text = self.fmt(row, value)
        if (row, col) in self.intervals:
            lo, hi = self.intervals[(row, col)]
            text += f" [{self.fmt(row, lo)}, {self.fmt(row, hi)}]"
        if self.count_mode() == "cell" and (row, col) in self.counts:
            text += f" (n={self.counts[(row, col)]})"
        return text

    def count_mode(self) -> str | None:
        """How the Markdown/LaTeX show item counts: 'table' (one number: a note), 'row' (an n column), 'cell'."""
        if not self.counts:
            return None
        if len(set(self.counts.values())) == 1:
            return "table"
        by_row: dict[Any, set[int]] = {}
        for (row, _), n in self.counts.items():
            by_row.setdefault(row, set()).add(n)
        return "row" if all(len(v) == 1 for v in by_row.values()) else "cell"

    def row_count(self, row: Any) -> int | str:
        """The item count of a row (the 'n' column where counts differ between rows only), "" if it has none."""
        return next((n for (r, _), n in self.counts.items() if r == row), "")

    def count_note(self) -> str | None:
        if self.count_mode() != "table":
            return None
        return f"n = {next(iter(self.counts.values()))} items per model and language behind every number."

    def extra_notes(self) -> list[str]:
        """What the intervals and the item counts are (Markdown notes, LaTeX comments)."""
        notes = [INTERVAL_NOTE] if self.intervals else []
        if self.intervals and any(isinstance(v, float) and k not in self.intervals for k, v in self.cells.items()):
            notes.append("Numbers without [lo, hi] are corpus BLEU: an item count, no interval.")
        return notes + ([self.count_note()] if self.count_note() else [])

    def frame(self, numeric: bool = True):
        """numeric: the CSV (values, then per column <label>_lo/_hi (95% interval) and <label>_n (items) where the
        table has them); else the displayed text, with an 'n' column where the counts differ between rows."""
        import pandas as pd

        extra = []
        if numeric:
            for col, label in self.columns:
                if any(c == col for _, c in self.intervals):
                    extra += [(col, f"{label}_lo", 0), (col, f"{label}_hi", 1)]
                if any(c == col for _, c in self.counts):
                    extra.append((col, f"{label}_n", None))
        by_row = numeric is False and self.count_mode() == "row"
        records = []
        for row, labels in self.rows:
            record = dict(zip(self.index, labels))
            for col, label in self.columns:
                value = self.cells.get((row, col))
                if numeric and isinstance(value, float):
                    record[label] = round(value, 6)
                elif numeric:
                    record[label] = value if value is not None else ""
                else:
                    record[label] = self.display(row, col)
            for col, label, end in extra:
                if end is None:
                    record[label] = self.counts.get((row, col), "")
                else:
                    bounds = self.intervals.get((row, col))
                    record[label] = round(bounds[end], 6) if bounds else ""
            if by_row:
                record["n"] = self.row_count(row)
            records.append(record)
        names = self.index + [label for _, label in self.columns] + [label for _, label, _ in extra]
        return pd.DataFrame.from_records(records, columns=names + (["n"] if by_row else []))

    def markdown(self, paper: bool = False) -> str:
        import pandas as pd

        lines = [f"# {self.title}", ""]
        if paper:
            records = []
            for row, labels in self.rows:
                record = dict(zip(self.index, labels))
                for col, label in self.columns:
                    ours = self.display(row, col)
                    ref = self.paper.get((row, col))
                    record[label] = f"{ours} ({self.fmt(row, ref)})" if ref is not None else ours
                if self.count_mode() == "row":
                    record["n"] = self.row_count(row)
                records.append(record)
            names = self.index + [lab for _, lab in self.columns] + (["n"] if self.count_mode() == "row" else [])
            frame = pd.DataFrame.from_records(records, columns=names)
            lines += [
                "Cells: ours [95% interval] (paper). The paper's numbers are Llama 3.1 8B, from "
                "layerswap/report/paper_results.yaml.",
                "",
            ]
        else:
            frame = self.frame(numeric=False)
        lines.append(self._md(frame))
        notes = self.notes + self.extra_notes()
        if notes:
            lines += [""] + [f"- {note}" for note in notes]
        return "\n".join(lines) + "\n"

    def grid(self) -> str:
        """The Markdown grid alone (no title, no notes): for a page that holds several tables."""
        return self._md(self.frame(numeric=False))

    def latex(self) -> str:
        frame = self.frame(numeric=False)
        cols = list(frame.columns)
        spec = "l" * len(self.index) + "r" * (len(cols) - len(self.index))
        out = [
            "% " + _latex_escape(self.title),
            "\\begin{tabular}{" + spec + "}",
            "\\toprule",
            " & ".join(_latex_escape(c) for c in cols) + " \\\\",
            "\\midrule",
        ]
        for _, rec in frame.iterrows():
            out.append(" & ".join(_latex_escape(str(rec[c])) for c in cols) + " \\\\")
        out += ["\\bottomrule", "\\end{tabular}"]
        out += [f"% {_latex_escape(note)}" for note in self.extra_notes()]
        return "\n".join(out) + "\n"

    def paper_frame(self, formatted: bool = False):
        """Long format: one record per cell with ours and/or the paper's number (and ours - paper)."""
        import pandas as pd

        records = []
        for row, labels in self.rows:
            for col, label in self.columns:
                ours = self.cells.get((row, col))
                ref = self.paper.get((row, col))
                if ref is None and not isinstance(ours, float):
                    continue
                record = dict(zip(self.index, labels))
                ours_num = ours if isinstance(ours, float) else None
                diff = ours_num - ref if ours_num is not None and ref is not None else None
                bounds = self.intervals.get((row, col))
                if formatted:
                    record.update(
                        column=label,
                        ours=self.display(row, col),
                        paper=self.fmt(row, ref) if ref is not None else "",
                        diff=f"{diff:+.{self._decimals(row)}f}" if diff is not None else "",
                        n=self.counts.get((row, col), ""),
                    )
                else:
                    record.update(
                        column=label,
                        ours=round(ours_num, 6) if ours_num is not None else (ours or ""),
                        ours_lo=round(bounds[0], 6) if bounds else "",
                        ours_hi=round(bounds[1], 6) if bounds else "",
                        n=self.counts.get((row, col), ""),
                        paper=ref if ref is not None else "",
                        diff=round(diff, 6) if diff is not None else "",
                    )
                records.append(record)
        names = (
            ["column", "ours", "paper", "diff", "n"]
            if formatted
            else ["column", "ours", "ours_lo", "ours_hi", "n", "paper", "diff"]
        )
        return pd.DataFrame.from_records(records, columns=self.index + names)

    def _md(self, frame, labels: int | None = None) -> str:
        labels = len(self.index) if labels is None else labels
        align = ["left"] * labels + ["right"] * (len(frame.columns) - labels)
        return frame.to_markdown(index=False, disable_numparse=True, colalign=align)

    def _decimals(self, row: Any) -> int:
        text = self.fmt(row, 0.0)
        return len(text.split(".", 1)[1]) if "." in text else 0

    def write(self, out_dir: Path, world: str, entry: TableEntry) -> list[Path]:
        """The table's files as its registry entry names them (layerswap/report/registry.py): `<name>.<format>`
        and, for one of the paper's tables in the paper world, `<name>_paper_vs_ours.{csv,md}`."""
        paper = entry.paper and world == "paper"
        text = {
            "csv": lambda: self.frame(numeric=True).to_csv(index=False),
            "md": lambda: self.markdown(paper=paper),
            "tex": self.latex,
        }
        written = [out_dir / f"{self.name}.{ext}" for ext in entry.formats]
        for path, ext in zip(written, entry.formats):
            write_text_atomic(path, text[ext]())
        if paper:
            extra = [out_dir / f"{paper_vs_ours(self.name)}.{ext}" for ext in PAPER_VS_OURS_FORMATS]
            write_text_atomic(extra[0], self.paper_frame().to_csv(index=False))
            frame = self.paper_frame(formatted=True)
            # the settings that differ from the paper's, under the numbers they qualify
            settings = [n for bench, n in PAPER_TASK_NOTES.items() if entry.every_setting or bench == MATH]
            notes = self.notes + self.extra_notes() + [n for n in settings if n not in self.notes]
            write_text_atomic(
                extra[1],
                f"# {self.title}: paper vs ours\n\n"
                + self._md(frame, labels=len(self.index) + 1)
                + "\n\n"
                + "".join(f"- {n}\n" for n in notes),
            )
            written += extra
        return written


def _latex_escape(text: str) -> str:
    repl = {
        "\\": r"\textbackslash{}",
        "&": r"\&",
        "%": r"\%",
        "$": r"\$",
        "#": r"\#",
        "_": r"\_",
        "{": r"\{",
        "}": r"\}",
        "~": r"\textasciitilde{}",
        "^": r"\textasciicircum{}",
        "→": r"$\rightarrow$",
        "—": "---",
        "×": r"$\times$",
    }
    return "".join(repl.get(ch, ch) for ch in text)


def fmt_pct(_row: Any, value: float) -> str:
    return f"{value:.1f}"
