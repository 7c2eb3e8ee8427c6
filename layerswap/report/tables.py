"""`layerswap tables`: the paper's Tables 1, 2, 5 and 6 from selection and evaluation files only.

Inputs (all through arguments, never the workflow config):
  --selection-dir DIR   <DIR>/<expert_type>.json (math, each target language, joint_<lang>)
  --evals-dir DIR       <DIR>/<model_id>/<benchmark>.json (docs/ARCHITECTURE.md, "Evaluation file")
  --params-json JSON    {"languages", "mgsm_languages", "top_k", "best_of": {<merge method>: [config, ...]},
                         "default_swap", "table2_language", "world": "toy"|"hf" ("paper" is an alias of
                         "hf": real models, the paper's numbers shown beside ours), "language_names" (optional),
                         "benchmarks" (optional, Table 5; default mgsm belebele flores mbpp mmlu)}
  --out-dir DIR         written: table{1,2,5,6}.{csv,md,tex}, table{1,2}_best_configs.{csv,md}, summary.md
                        (layerswap.report.summary: what the tables show, claims only where 95% intervals separate);
                        world "hf"/"paper" also: table{1,2,5,6}_paper_vs_ours.{csv,md}

Model ids: base; ckpt/<run>/<checkpoint> (a selected expert); merge/<config>/<lang>/l<i>m<j> (i = language
expert rank, j = math expert rank); merge/soupswap/<lang>/{langsoup,multisoup}.

"Best config" of a merge method (a key of params.best_of: layer_swap, soup, ties, ...; layerswap/merge/registry.py):
per pair (i, j), the config of params.best_of[method] whose merged model scores highest on MGSM in the target
language (ties go to the earlier config in the list); the English and all-languages rows of Table 2 use the same
winning model. Avg/min/max are then over the pairs. Each method listed gets a best-config column in the tables its
declaration names (`Method.tables`): the rivals in registry order, then the layer swap's.
Tables 1, 2, 6 show MGSM in percent with one decimal, as the paper does; Table 5 keeps the paper's units
(fractions with three decimals, FLORES BLEU with one).

A cell whose evaluation file is missing, unreadable or skipped (where a score is needed) is an error naming the
file, never a blank. Table 5 is the exception for skipped benchmarks (MBPP without opt-in), shown as "skipped".
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from layerswap.benchmarks import BENCHMARKS
from layerswap.report import intervals, summary
from layerswap.contracts import pair_ids, read_selection, write_text_atomic
from layerswap.errors import UserError
from layerswap.report.intervals import DEFAULT_DRAWS
from layerswap.jsonl import json_object, read_rows
from layerswap.merge.params import Method
from layerswap.merge.registry import METHODS, SWAP, best_of_methods

TOY_LABEL = "TOY WORLD — synthetic languages"
RESOURCES = ("report/paper_results.yaml",)  # read at run time (layerswap.fingerprint hashes it with this module)
PAPER_RESULTS = Path(__file__).with_name("paper_results.yaml")
#: What the paper config runs where the paper names no set or setting (docs/PAPER_DIFFERENCES.md).
PAPER_TASK_NOTES = [
    "MGSM: 8-shot native chain of thought (lm-eval mgsm_native_cot_*, MGSM's own exemplars in the target language), "
    "greedy, the final number of the generation (flexible-extract), up to evaluation.tasks.mgsm.max_new_tokens new "
    "tokens (512 in config/paper.yaml; each evaluation file records its budget).",
    "FLORES: FLORES+ devtest, 0-shot, sacreBLEU corpus BLEU with tokenizer ja-mecab for Japanese targets and 13a for "
    "the others (the paper names none).",
    "MMLU: Global-MMLU (full, lm-eval global_mmlu_full_*), 5-shot, instead of the paper's unnamed translated MMLU.",
    "MBPP: English MBPP (google-research-datasets/mbpp), 0-shot pass@1, recorded under every language key: the "
    "paper's translated MBPP is not named and none is loadable.",
]
MISSING = "n/a"
SKIPPED = "skipped"
INTERVAL_NOTE = ("[lo, hi]: 95% interval, seeded bootstrap (layerswap/report/intervals.py): an avg resamples the items "
                 "(the same draw for every model) and the experts / pairs; a min, max or single model resamples the "
                 "items only; a best-config winner is kept as chosen. Where every item is wrong the interval is "
                 "[0, 0]: the bootstrap sees only the observed items (0 of n still allows a rate up to about 3/n).")


# ----------------------------------------------------------------------------------------------------------------
# inputs


@dataclass
class Params:
    languages: list[str]
    mgsm_languages: list[str]
    top_k: int
    best_of: dict[str, list[str]]
    default_swap: str
    table2_language: str | None  # None where only Table 1 is built (the table1-bars figure)
    world: str
    language_names: dict[str, str] = field(default_factory=dict)
    benchmarks: list[str] = field(default_factory=lambda: list(BENCHMARKS))
    seed: int = 0  # of the bootstrap intervals (layerswap.report.intervals)
    bootstrap_draws: int = DEFAULT_DRAWS

    @classmethod
    def from_json(cls, text: str, table2: bool = True) -> "Params":
        """Checked params; table2=False: 'table2_language' may be left out (Table 1 alone)."""
        raw = json_object(text, "--params-json")
        required = ("languages", "mgsm_languages", "top_k", "default_swap", "world")
        for key in required + (("table2_language",) if table2 else ()):
            if raw.get(key) in (None, "", []):
                raise UserError(f"--params-json: missing key '{key}'")
        for key in ("languages", "mgsm_languages"):
            if not isinstance(raw[key], list) or not all(isinstance(x, str) for x in raw[key]):
                raise UserError(f"--params-json: '{key}' must be a list of language codes")
        if not isinstance(raw["top_k"], int) or isinstance(raw["top_k"], bool) or raw["top_k"] < 1:
            raise UserError("--params-json: 'top_k' must be a positive integer")
        best_of = raw.get("best_of") or {}
        if not isinstance(best_of, dict):
            raise UserError("--params-json: 'best_of' must map merge methods to lists of config names")
        for method, names in best_of.items():
            if method not in METHODS:
                raise UserError(f"--params-json: 'best_of.{method}': unknown merge method; known: {', '.join(METHODS)}")
            if not names or not isinstance(names, list) or not all(isinstance(x, str) for x in names):
                raise UserError(f"--params-json: 'best_of.{method}' must be a non-empty list of config names")
        if raw["world"] not in ("toy", "hf", "paper"):
            raise UserError(f"--params-json: 'world' must be 'toy' or 'hf' (alias 'paper'), not {raw['world']!r}")
        if raw.get("table2_language") is not None and raw["table2_language"] not in raw["languages"]:
            raise UserError(f"--params-json: 'table2_language' {raw['table2_language']!r} is not in 'languages'")
        names = raw.get("language_names") or {}
        if not isinstance(names, dict):
            raise UserError("--params-json: 'language_names' must map language codes to names")
        benchmarks = raw.get("benchmarks") or list(BENCHMARKS)
        unknown = [b for b in benchmarks if b not in BENCHMARKS] if isinstance(benchmarks, list) else [benchmarks]
        if unknown:
            raise UserError(f"--params-json: 'benchmarks' has unknown entries {unknown}; known: {list(BENCHMARKS)}")
        for key, low in (("seed", 0), ("bootstrap_draws", 100)):
            value = raw.get(key)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < low):
                raise UserError(f"--params-json: '{key}' must be an integer >= {low}")
        return cls(
            languages=list(raw["languages"]),
            mgsm_languages=list(raw["mgsm_languages"]),
            top_k=raw["top_k"],
            best_of={m: list(names) for m, names in best_of.items()},
            default_swap=raw["default_swap"],
            table2_language=raw.get("table2_language"),
            world="toy" if raw["world"] == "toy" else "paper",
            language_names={str(k): str(v) for k, v in names.items()},
            benchmarks=list(benchmarks),
            seed=raw.get("seed") or 0,
            bootstrap_draws=raw.get("bootstrap_draws") or DEFAULT_DRAWS,
        )


def _read_json(path: Path, kind: str) -> Any:
    """A JSON file the workflow wrote (`kind`: evaluation, selection); missing or unreadable is a one-line error."""
    if not path.is_file():
        raise UserError(f"missing {kind} file {path}")
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise UserError(f"{path}: not a readable JSON {kind} file ({err})") from None


class Evals:
    """Evaluation files under one directory, loaded once each.

    A score for (model, benchmark, key) is in the model's file for the benchmark (<root>/<model>/<bench>.json) or,
    when that file lacks the key, in a file of that language alone (<root>/by_language/<key>/<model>/<bench>.json:
    Table 2's extra languages, evaluated in jobs of their own so that adding one reruns nothing that exists)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self._cache: dict[Path, dict] = {}
        self._samples: dict[Path, list[dict]] = {}

    def path(self, model_id: str, bench: str) -> Path:
        return self.root / model_id / f"{bench}.json"

    def language_path(self, model_id: str, bench: str, key: str) -> Path:
        return self.root / "by_language" / key / model_id / f"{bench}.json"

    def _load(self, path: Path) -> dict:
        if path not in self._cache:
            data = _read_json(path, "evaluation")
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
        """The per-item log beside the file that holds this score (layerswap.evaluation.evaluate.write_outputs)."""
        path = self.source(model_id, bench, key)
        return path.with_name(f"{path.name[:-len('.json')]}.samples.jsonl")

    def _records(self, path: Path) -> list[dict]:
        if path not in self._samples:
            if not path.is_file():
                raise UserError(f"missing per-item file {path} (the tables' 95% intervals read it; the evaluation "
                                "job writes it beside its JSON)")
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


def load_selection(selection_dir: str | Path, expert_type: str, top_k: int) -> list[str]:
    """Model ids (ckpt/<run>/<checkpoint>) of the top-k selected experts, by rank."""
    path = Path(selection_dir) / f"{expert_type}.json"
    entries = read_selection(path, ("run", "checkpoint"))
    if len(entries) < top_k:
        raise UserError(f"{path}: {len(entries)} selected experts, top_k is {top_k}")
    return [f"ckpt/{e['run']}/{e['checkpoint']}" for e in entries[:top_k]]


def selection_rule(selection_dir: str | Path, expert_type: str) -> str:
    """How a selection file chose: '<w>·<metric> + ...', then the constraints and their margins (if any)."""
    path = Path(selection_dir) / f"{expert_type}.json"
    data = _read_json(path, "selection")
    weights, constraints = data.get("weights") or {}, data.get("constraints") or {}
    text = "ranked by " + " + ".join(f"{w:g}·{m}" for m, w in weights.items())
    if constraints:
        text += ", rejected if below the base model by more than a margin on " + ", ".join(
            f"{m} (margin {margin:g})" for m, margin in constraints.items())
    return text


def load_paper_results(path: str | Path = PAPER_RESULTS) -> dict:
    import yaml

    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as err:
        raise UserError(f"{path}: cannot read the paper's numbers ({err})") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping")
    return data


# ----------------------------------------------------------------------------------------------------------------
# numbers


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


def pct(x: float) -> float:
    return 100.0 * x


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
        return [f"merge/{config}/{lang}/{pair}" for pair in self.pairs()]

    def mgsm(self, model_id: str, lang: str) -> float:
        return self.evals.score(model_id, "mgsm", lang)

    def mgsm_all(self, model_id: str) -> float:
        return mean([self.mgsm(model_id, lang) for lang in self.p.mgsm_languages])

    def best(self, method: str, lang: str) -> list[BestChoice]:
        choices = []
        for pair in self.pairs():
            candidates = {
                config: self.mgsm(f"merge/{config}/{lang}/{pair}", lang) for config in self.p.best_of[method]
            }
            winner = max(candidates, key=lambda c: candidates[c])  # first of equal maxima
            choices.append(
                BestChoice(lang, method, pair, winner, f"merge/{winner}/{lang}/{pair}", candidates[winner], candidates)
            )
        return choices


# ----------------------------------------------------------------------------------------------------------------
# table objects and rendering


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
            lines += ["Cells: ours [95% interval] (paper). The paper's numbers are Llama 3.1 8B, from "
                      "layerswap/report/paper_results.yaml.", ""]
        else:
            frame = self.frame(numeric=False)
        lines.append(self._md(frame))
        notes = self.notes + self.extra_notes()
        if notes:
            lines += [""] + [f"- {note}" for note in notes]
        return "\n".join(lines) + "\n"

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
        names = ["column", "ours", "paper", "diff", "n"] if formatted else \
            ["column", "ours", "ours_lo", "ours_hi", "n", "paper", "diff"]
        return pd.DataFrame.from_records(records, columns=self.index + names)

    def _md(self, frame, labels: int | None = None) -> str:
        labels = len(self.index) if labels is None else labels
        align = ["left"] * labels + ["right"] * (len(frame.columns) - labels)
        return frame.to_markdown(index=False, disable_numparse=True, colalign=align)

    def _decimals(self, row: Any) -> int:
        text = self.fmt(row, 0.0)
        return len(text.split(".", 1)[1]) if "." in text else 0

    def write(self, out_dir: Path, world: str) -> list[Path]:
        written = [out_dir / f"{self.name}.csv", out_dir / f"{self.name}.md", out_dir / f"{self.name}.tex"]
        write_text_atomic(written[0], self.frame(numeric=True).to_csv(index=False))
        write_text_atomic(written[1], self.markdown(paper=world == "paper"))
        write_text_atomic(written[2], self.latex())
        if world == "paper":
            extra = [out_dir / f"{self.name}_paper_vs_ours.csv", out_dir / f"{self.name}_paper_vs_ours.md"]
            write_text_atomic(extra[0], self.paper_frame().to_csv(index=False))
            frame = self.paper_frame(formatted=True)
            # the settings that differ from the paper's, under the numbers they qualify
            settings = PAPER_TASK_NOTES if self.name == "table5" else PAPER_TASK_NOTES[:1]  # others: MGSM only
            notes = self.notes + self.extra_notes() + [n for n in settings if n not in self.notes]
            write_text_atomic(
                extra[1], f"# {self.title}: paper vs ours\n\n" + self._md(frame, labels=len(self.index) + 1) + "\n\n"
                + "".join(f"- {n}\n" for n in notes)
            )
            written += extra
        return written


def _latex_escape(text: str) -> str:
    repl = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
            "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
            "→": r"$\rightarrow$", "—": "---", "×": r"$\times$"}
    return "".join(repl.get(ch, ch) for ch in text)


def fmt_pct(_row: Any, value: float) -> str:
    return f"{value:.1f}"


# ----------------------------------------------------------------------------------------------------------------
# the tables


class Builder:
    def __init__(self, ws: Workspace, paper: dict | None):
        self.ws = ws
        self.p = ws.p
        self.paper = paper or {}
        self.best_cache: dict[tuple[str, str], list[BestChoice]] = {}
        self._aliases = {}
        for code, info in (self.paper.get("languages") or {}).items():
            self._aliases[code] = code
            for alias in (info or {}).get("aliases") or []:
                self._aliases[alias] = code

    # names ---------------------------------------------------------------------------------------------------
    def paper_code(self, lang: str) -> str | None:
        return self._aliases.get(lang)

    def name(self, lang: str) -> str:
        if lang in self.p.language_names:
            return self.p.language_names[lang]
        if lang == "en":
            return "English"
        code = self.paper_code(lang)
        if self.p.world == "paper" and code:
            return self.paper["languages"][code].get("name", lang)
        return lang

    def title(self, text: str) -> str:
        return f"{text} — {TOY_LABEL}" if self.p.world == "toy" else text

    def best(self, method: str, lang: str) -> list[BestChoice]:
        if (method, lang) not in self.best_cache:
            self.best_cache[(method, lang)] = self.ws.best(method, lang)
        return self.best_cache[(method, lang)]

    # columns of Tables 1 and 2 --------------------------------------------------------------------------------
    T1_EXPERTS = [
        ("base", "base model"),
        ("language_expert", "language expert (top {k} training runs)"),
        ("math_expert", "math expert (top {k} training runs)"),
    ]
    T2_EXPERTS = [
        ("base", "base model"),
        ("language_expert", "{lang} expert (top {k} training runs)"),
        ("math_expert", "math expert (top {k} training runs)"),
        ("joint_sft", "{lang} & math joint SFT (top {k} training runs)"),
    ]

    def best_of_methods(self, table: int) -> list[Method]:
        """The merge methods with a best-config column in Table `table` (layerswap.merge.registry)."""
        return best_of_methods(self.p.best_of, table)

    def merge_columns(self, table: int) -> list[tuple[str, str]]:
        """The rivals' best configs, the default layer swap, the layer swap's best config (if best_of lists it)."""
        cols = [(m.best_column, f"{m.label} (best config, {{n}} pairs)") for m in self.best_of_methods(table)
                if m.name != SWAP]
        cols.append(("swap_default", f"{METHODS[SWAP].label} (default config, {{n}} pairs)"))
        if self.p.best_of.get(SWAP):
            cols.append((METHODS[SWAP].best_column, f"{METHODS[SWAP].label} (best config, {{n}} pairs)"))
        return cols

    def table_columns(self, table: int) -> list[tuple[str, str]]:
        return (self.T1_EXPERTS if table == 1 else self.T2_EXPERTS) + self.merge_columns(table)

    def best_note(self, table: int, target: str) -> str:
        """'Best config = per pair, the best on <target> MGSM among soup [...] / swap [...]' for the table's methods."""
        among = " / ".join(f"{m.note} {self.p.best_of[m.name]}" for m in self.best_of_methods(table))
        return f"Best config = per pair, the best on {target} MGSM among {among}" if among else ""

    def columns(self, spec: list[tuple[str, str]], **extra: str) -> list[tuple[str, str]]:
        k = self.p.top_k
        return [(key, label.format(k=k, n=k * k, **extra)) for key, label in spec]

    def interval(self, models: list[str], langs: list[str], stat: str, bench: str = "mgsm",
                 scale: float = 100.0) -> tuple[float, float] | None:
        """95% bootstrap interval of a cell (layerswap.report.intervals); None for a corpus metric (no per-item scores)."""
        return intervals.cell_interval(self.ws.evals.items, models, langs, stat, bench=bench, seed=self.p.seed,
                                       draws=self.p.bootstrap_draws, scale=scale)

    def count(self, models: list[str], langs: list[str], bench: str = "mgsm") -> int | None:
        """Items per model and language behind a cell (the smallest, should they differ); None if not recorded."""
        counts = [self.ws.evals.count(m, bench, lang) for m in models for lang in langs]
        return None if None in counts else min(counts)

    def fill(self, cells: dict, bounds: dict, counts: dict, key: tuple, value: float, models: list[str],
             langs: list[str], stat: str, bench: str = "mgsm", scale: float = 100.0) -> None:
        """One numeric cell with its interval and item count."""
        cells[key] = value
        interval = self.interval(models, langs, stat, bench, scale)
        if interval is not None:
            bounds[key] = interval
        n = self.count(models, langs, bench)
        if n is not None:
            counts[key] = n

    def mgsm_stats(self, models: list[str], lang: str) -> Stats:
        return Stats.of([pct(self.ws.mgsm(m, lang)) for m in models])

    def column_models(self, col: str, lang: str) -> list[str]:
        ws, p = self.ws, self.p
        if col == "base":
            return ["base"]
        if col == "language_expert":
            return ws.experts(lang)
        if col == "math_expert":
            return ws.experts("math")
        if col == "joint_sft":
            return ws.experts(f"joint_{lang}")
        if col == "swap_default":
            return ws.merge_models(p.default_swap, lang)
        return [c.model_id for c in self.best(self.method_of(col), lang)]

    @staticmethod
    def method_of(col: str) -> str:
        """The merge method of a best-config column (`<column>_best`)."""
        return next(name for name, m in METHODS.items() if m.best_column == col)

    def table1(self) -> Table:
        cols = self.columns(self.table_columns(1))
        rows, cells, paper, bounds, counts = [], {}, {}, {}, {}
        for lang in self.p.languages:
            models = {col: self.column_models(col, lang) for col, _ in cols}
            stats = {col: self.mgsm_stats(models[col], lang) for col, _ in cols}
            for stat in ("avg", "max"):
                key = (lang, stat)
                rows.append((key, (f"{self.name(lang)} {stat}",)))
                for col, _ in cols:
                    self.fill(cells, bounds, counts, (key, col), getattr(stats[col], stat), models[col], [lang], stat)
                    ref = self._paper_get("table1", self.paper_code(lang), stat, col)
                    if ref is not None:
                        paper[(key, col)] = ref
        k = self.p.top_k
        notes = [
            f"MGSM exact match (%) in the target language. Experts: the top {k} selected checkpoints; merges: the "
            f"{k}x{k} pairs (language expert rank x math expert rank).",
            f"Default layer-swap config: {self.p.default_swap}."
            + (f" {best}; winners in table1_best_configs.csv." if (best := self.best_note(1, "target-language"))
               else ""),
        ]
        return Table("table1", self.title("Table 1: MGSM results of layer swapping"), ["Setting"], rows, cols,
                     cells, fmt_pct, notes, paper, bounds, counts)

    # Table 2 --------------------------------------------------------------------------------------------------
    def table2(self) -> Table:
        lang = self.p.table2_language
        cols = self.columns(self.table_columns(2), lang=self.name(lang))
        name = self.name(lang)
        row_spec = [("min", f"{name} min"), ("avg", f"{name} avg"), ("max", f"{name} max"),
                    ("en_avg", "English avg"), ("all_avg", "All langs avg")]
        paper_lang = (self.paper.get("table2") or {}).get("language")
        use_paper = paper_lang is not None and self.paper_code(lang) == paper_lang
        cells, paper, bounds, counts = {}, {}, {}, {}
        for col, _ in cols:
            models = self.column_models(col, lang)
            target = self.mgsm_stats(models, lang)
            values = {
                "min": target.min, "avg": target.avg, "max": target.max,
                "en_avg": mean([pct(self.ws.mgsm(m, "en")) for m in models]),
                "all_avg": mean([pct(self.ws.mgsm_all(m)) for m in models]),
            }
            langs = {"en_avg": ["en"], "all_avg": list(self.p.mgsm_languages)}
            for row, _ in row_spec:
                self.fill(cells, bounds, counts, (row, col), values[row], models, langs.get(row, [lang]),
                          row if row in ("min", "max") else "avg")
                if use_paper:
                    ref = self._paper_get("table2", "rows", row, col)
                    if ref is not None:
                        paper[(row, col)] = ref
        rows = [(key, (label,)) for key, label in row_spec]
        notes = [f"MGSM exact match (%). 'All langs avg' = mean over {', '.join(self.p.mgsm_languages)}."]
        if best := self.best_note(2, name):
            notes.append(f"{best}; the English and all-languages rows use the same winning models; winners in "
                         "table2_best_configs.csv.")
        notes.append(f"Joint SFT: the top {self.p.top_k} checkpoints of selection joint_{lang}.")
        if self.p.world == "paper" and paper:
            notes.append("The paper's 'All langs avg' (beside ours) is over the languages of its MGSM evaluation "
                         "('all 9 languages', Table 2 caption).")
        return Table("table2", self.title(f"Table 2: MGSM results of layer swapping for {name}"), ["Setting"],
                     rows, cols, cells, fmt_pct, notes, paper, bounds, counts)

    # Table 5 --------------------------------------------------------------------------------------------------
    def table5_rows(self) -> list[tuple[str, str]]:
        """(benchmark, key) per row, benchmarks in registry order, each in its row shape (layerswap/benchmarks.py):
        en, the target languages, the avg over mgsm_languages, or both directions per target language."""
        targets = [l for l in self.p.languages if l != "en"]
        rows = []
        for name, bench in BENCHMARKS.items():
            for part in bench.table5:
                keys = {"en": ["en"], "avg": ["avg"], "targets": targets,
                        "directions": [k for l in targets for k in bench.keys(l)]}[part]
                rows += [(name, key) for key in keys]
        return rows

    def table5(self) -> Table:
        ws = self.ws
        cols = [("base", "base model"), ("math", "math experts")]
        cols += [(lang, f"{self.name(lang)} experts") for lang in self.p.languages]
        models = {"base": ["base"], "math": ws.experts("math")}
        models.update({lang: ws.experts(lang) for lang in self.p.languages})
        cells, paper, rows, bounds, counts = {}, {}, [], {}, {}
        for bench, key in self.table5_rows():
            if bench not in self.p.benchmarks:
                continue
            row = (bench, key)
            for col, _ in cols:
                if key == "avg":
                    per_model = []
                    for m in models[col]:
                        vals = [ws.evals.maybe_score(m, bench, l) for l in self.p.mgsm_languages]
                        if SKIPPED in vals:
                            per_model.append(SKIPPED)
                        elif MISSING in vals:
                            per_model.append(MISSING)
                        else:
                            per_model.append(mean(vals))
                else:
                    per_model = [ws.evals.maybe_score(m, bench, key) for m in models[col]]
                if SKIPPED in per_model:
                    cells[(row, col)] = SKIPPED
                elif MISSING in per_model:
                    cells[(row, col)] = MISSING
                else:
                    langs = list(self.p.mgsm_languages) if key == "avg" else [key]
                    self.fill(cells, bounds, counts, (row, col), mean(per_model), models[col], langs, "avg", bench,
                              scale=1.0)
                ref = self._paper_table5(bench, key, col)
                if ref is not None:
                    paper[(row, col)] = ref
            if all(cells[(row, col)] == MISSING for col, _ in cols):
                for col, _ in cols:
                    del cells[(row, col)]
                    paper.pop((row, col), None)
                    bounds.pop((row, col), None)
                    counts.pop((row, col), None)
                continue
            if key == "avg":
                label = f"{len(self.p.mgsm_languages)}-lang avg"
            elif "-" in key:
                src, tgt = key.split("-", 1)
                label = f"{self.name(src)} → {self.name(tgt)}"
            else:
                label = self.name(key)
            rows.append((row, (BENCHMARKS[bench].label, label)))
        notes = [
            f"Each expert column is the average over the top {self.p.top_k} selected checkpoints of that expert type.",
            "Accuracy / exact match / pass@1 as fractions, FLORES as BLEU (0-100); 'skipped' = benchmark not run "
            "(see the evaluation file's 'skipped' reason); 'n/a' = no score for that language in the file.",
            f"'{len(self.p.mgsm_languages)}-lang avg' = mean over {', '.join(self.p.mgsm_languages)}.",
            f"Selection (section 3.1): math experts {selection_rule(ws.selection_dir, 'math')}; language experts "
            f"(each in its language) {selection_rule(ws.selection_dir, self.p.languages[0])}.",
        ]

        if self.p.world == "paper":
            notes.append("The paper's MGSM avg (beside ours) is its 10-language average (English, German, French, "
                         "Chinese, Russian, Spanish, Japanese, Bengali, Swahili, Telugu).")
            notes += PAPER_TASK_NOTES

        def fmt(row: Any, value: float) -> str:
            return f"{value:.1f}" if BENCHMARKS[row[0]].unit == "bleu" else f"{value:.3f}"

        return Table("table5", self.title("Table 5: results of each set of experts"), ["Task", "Language"], rows,
                     cols, cells, fmt, notes, paper, bounds, counts)

    def _paper_table5(self, bench: str, key: str, col: str) -> float | None:
        if key == "avg":
            pkey = "avg"
        elif "-" in key:
            src, tgt = key.split("-", 1)
            a, b = self.paper_code(src), self.paper_code(tgt)
            pkey = f"{a}-{b}" if a and b else None
        else:
            pkey = self.paper_code(key)
        pcol = col if col in ("base", "math") else self.paper_code(col)
        if pkey is None or pcol is None:
            return None
        return self._paper_get("table5", bench, pkey, pcol)

    # Table 6 --------------------------------------------------------------------------------------------------
    def table6(self) -> Table:
        k = self.p.top_k
        cols = [
            ("soup_pairwise", f"model soup, pairwise (best config, avg of {k * k} pairs)"),
            ("swap_pairwise", f"layer swap, pairwise (default config, avg of {k * k} pairs)"),
            ("swap_langsoup", "layer swap, language soup w/ math soup (1 version)"),
            ("swap_multisoup", "layer swap, multilingual soup w/ math soup (1 version)"),
        ]
        soup = METHODS["soup"]
        if not self.p.best_of.get(soup.name):  # no soup configs to pick the best from: no pairwise soup column
            cols = cols[1:]
        cells, paper, rows, bounds, counts = {}, {}, [], {}, {}
        for lang in self.p.languages:
            models = {
                "soup_pairwise": self.column_models(soup.best_column, lang) if self.p.best_of.get(soup.name) else [],
                "swap_pairwise": self.column_models("swap_default", lang),
                "swap_langsoup": [f"merge/soupswap/{lang}/langsoup"],
                "swap_multisoup": [f"merge/soupswap/{lang}/multisoup"],
            }
            rows.append((lang, (self.name(lang),)))
            for col, _ in cols:
                self.fill(cells, bounds, counts, (lang, col), self.mgsm_stats(models[col], lang).avg, models[col],
                          [lang], "avg")
                ref = self._paper_get("table6", self.paper_code(lang), col)
                if ref is not None:
                    paper[(lang, col)] = ref
        notes = [
            "MGSM exact match (%) in the target language. Language soup: uniform soup of the language's top "
            f"{k} experts; multilingual soup: uniform soup of all language experts; each swapped with the math soup.",
        ]
        return Table("table6", self.title("Table 6: layer swapping combined with model souping"), ["Setting"],
                     rows, cols, cells, fmt_pct, notes, paper, bounds, counts)

    # helpers --------------------------------------------------------------------------------------------------
    def _paper_get(self, *keys: Any) -> float | None:
        node: Any = self.paper
        for key in keys:
            if key is None or not isinstance(node, dict) or key not in node:
                return None
            node = node[key]
        return float(node) if isinstance(node, (int, float)) and not isinstance(node, bool) else None

    def best_configs(self, table: int, langs: list[str], name: str) -> Table:
        """Each pair's winning config of every method with a best-config column in Table `table`."""
        rows, cells = [], {}
        cols = [("config", "winning config"), ("score", "MGSM target (%)"), ("candidates", "candidates (%)")]
        for lang in langs:
            for method in self.best_of_methods(table):
                for choice in self.best(method.name, lang):
                    key = (lang, method.name, choice.pair)
                    rows.append((key, (lang, method.label, choice.pair)))
                    cells[(key, "config")] = choice.config
                    cells[(key, "score")] = pct(choice.score)
                    cells[(key, "candidates")] = "; ".join(
                        f"{c}={pct(v):.1f}" for c, v in choice.candidates.items()
                    )
        return Table(name, self.title(f"Table {name[len('table')]}: best config per pair"),
                     ["language", "method", "pair"], rows, cols, cells, fmt_pct,
                     ["pair l<i>m<j>: language expert rank i, math expert rank j."])


def build_tables(selection_dir: str | Path, evals_dir: str | Path, params: Params,
                 paper_results: str | Path | None = None, evals: Evals | None = None) -> dict[str, Table]:
    """All tables, keyed by file stem. Raises UserError on any missing input. `evals`: the reader of `evals_dir`
    (default Evals; `layerswap audit --trace` passes one that records which files each score came from)."""
    paper = load_paper_results(paper_results or PAPER_RESULTS) if params.world == "paper" else None
    builder = Builder(Workspace(selection_dir, evals or Evals(evals_dir), params), paper)
    tables = {
        "table1": builder.table1(),
        "table2": builder.table2(),
        "table5": builder.table5(),
        "table6": builder.table6(),
    }
    tables["table1_best_configs"] = builder.best_configs(1, params.languages, "table1_best_configs")
    tables["table2_best_configs"] = builder.best_configs(2, [params.table2_language], "table2_best_configs")
    return tables


# ----------------------------------------------------------------------------------------------------------------
# CLI


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--selection-dir", required=True, help="directory of <expert_type>.json selection files")
    parser.add_argument("--evals-dir", required=True, help="directory of <model_id>/<benchmark>.json evaluations")
    parser.add_argument("--params-json", required=True, help="JSON object of table parameters (see module doc)")
    parser.add_argument("--out-dir", required=True, help="where table{1,2,5,6}.{csv,md,tex} are written")
    parser.add_argument("--paper-results", default=None,
                        help="YAML of the paper's numbers (default: layerswap/report/paper_results.yaml)")


def run(args: argparse.Namespace) -> None:
    params = Params.from_json(args.params_json)
    tables = build_tables(args.selection_dir, args.evals_dir, params, args.paper_results)
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, table in tables.items():
        if name.endswith("_best_configs"):
            write_text_atomic(out_dir / f"{name}.csv", table.frame(numeric=True).to_csv(index=False))
            write_text_atomic(out_dir / f"{name}.md", table.markdown())
        else:
            table.write(out_dir, params.world)
    text = summary.summary(tables, params.languages, params.language_names)
    write_text_atomic(out_dir / "summary.md", summary.markdown(text, params.world))
