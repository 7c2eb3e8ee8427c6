"""`layerswap tables`: the paper's Tables 1, 2, 5 and 6 from selection and evaluation files only.

Inputs (all through arguments, never the workflow config):
  --selection-dir DIR   <DIR>/<expert_type>.json (math, each target language, joint_<lang>)
  --evals-dir DIR       <DIR>/<model_id>/<benchmark>.json (docs/ARCHITECTURE.md, "Evaluation file")
  --params-json JSON    {"languages", "mgsm_languages", "top_k", "best_of": {<merge method>: [config, ...]},
                         "default_swap", "table2_language", "world": "toy"|"hf" ("paper" is an alias of
                         "hf": real models, the paper's numbers shown beside ours), "language_names" (optional),
                         "benchmarks" (optional, Table 5; default mgsm belebele flores mbpp mmlu)}
  --out-dir DIR         written: each table of layerswap/report/registry.py as <name>.<format> (today
                        table{1,2,5,6}.{csv,md,tex}, table{1,2}_best_configs.{csv,md}), and summary.md
                        (layerswap.report.summary: what the tables show, claims only where 95% intervals separate);
                        world "hf"/"paper" also each of the paper's tables as <name>_paper_vs_ours.{csv,md}

Model ids (layerswap/contracts.py): base; ckpt/<run>/<checkpoint> (a selected expert); merge/<config>/<lang>/l<i>m<j>
(i = language expert rank, j = math expert rank); the soup-then-swap merges merge/<SOUP_SWAP>/<lang>/<one of SOUPS>.

Which tables exist: layerswap/report/registry.py. Each is defined in its module of layerswap/report/builders/ (with
layerswap/report/paper_tables.py's `Builder`: columns, best configs), reads its inputs through
layerswap/report/workspace.py (selections, the models of each column) and layerswap/report/evals.py (scores), and is
written by layerswap/report/render.py. This command's params, and the
Table 1 figure's (`layerswap charts table1-bars`): `Params`, layerswap/report/table_params.py.

A cell whose evaluation file is missing, unreadable or skipped (where a score is needed) is an error naming the
file, never a blank. Table 5 is the exception for skipped benchmarks (MBPP without opt-in), shown as "skipped".
"""

from __future__ import annotations

import argparse
from pathlib import Path

from layerswap.contracts import write_text_atomic
from layerswap.errors import UserError
from layerswap.report import builders, summary
from layerswap.report.evals import Evals
from layerswap.report.paper_tables import Builder
from layerswap.report.registry import TABLES
from layerswap.report.render import Table
from layerswap.report.table_params import Params
from layerswap.report.workspace import Workspace

RESOURCES = ("report/paper_results.yaml",)  # read at run time (layerswap.fingerprint hashes it with this module)
PAPER_RESULTS = Path(__file__).with_name("paper_results.yaml")


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


def build_tables(
    selection_dir: str | Path,
    evals_dir: str | Path,
    params: Params,
    paper_results: str | Path | None = None,
    evals: Evals | None = None,
) -> dict[str, Table]:
    """All tables, keyed by file stem. Raises UserError on any missing input. `evals`: the reader of `evals_dir`
    (default Evals; `layerswap audit --trace` passes one that records which files each score came from)."""
    paper = load_paper_results(paper_results or PAPER_RESULTS) if params.world == "paper" else None
    builder = Builder(Workspace(selection_dir, evals or Evals(evals_dir), params), paper)
    return {t.name: builders.build(t, builder) for t in TABLES}


# ----------------------------------------------------------------------------------------------------------------
# CLI


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--selection-dir", required=True, help="directory of <expert_type>.json selection files")
    parser.add_argument("--evals-dir", required=True, help="directory of <model_id>/<benchmark>.json evaluations")
    parser.add_argument("--params-json", required=True, help="JSON object of table parameters (see module doc)")
    parser.add_argument("--out-dir", required=True, help="where the tables and summary.md are written")
    parser.add_argument(
        "--paper-results",
        default=None,
        help="YAML of the paper's numbers (default: layerswap/report/paper_results.yaml)",
    )


def run(args: argparse.Namespace) -> None:
    params = Params.from_json(args.params_json)
    tables = build_tables(args.selection_dir, args.evals_dir, params, args.paper_results)
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for entry in TABLES:
        tables[entry.name].write(out_dir, params.world, entry)
    text = summary.summary(tables, params.languages, params.language_names)
    write_text_atomic(out_dir / "summary.md", summary.markdown(text, params.world))
