"""`layerswap table2-models`: the models Table 2 reads, per extra MGSM language, chosen as Table 2 chooses them.

Table 2 shows, for its language, the base, the top-k selected language, math and joint experts, the default layer
swap's pairs and each method's best config per pair (the winner on MGSM in the table's language; layerswap/report/
paper_tables.py, `Builder.column_models`, used here as is). Its English and all-languages rows need MGSM in every
MGSM language; a model's own evaluation files hold only some (`--covered-json`: per column, the languages its own
files hold), the others are evaluated by `evaluate_table2` (rules/evaluate.smk), one job per extra language, on the
models this command names for it, and on no other.

Inputs (all through arguments): --selection-dir and --evals-dir as `layerswap tables`, --params-json its params
(layerswap.report.table_params.Params), --covered-json {column: [languages its own files hold]}, --languages (the
extra languages) and --out (one JSON file per extra language, in the order given: {"language", "models": [ids]}).
A changed winner changes the files, so the evaluation jobs rerun; their store keeps every model already evaluated.
"""

from __future__ import annotations

import argparse
import json

from layerswap.contracts import write_text_atomic
from layerswap.errors import UserError
from layerswap.report.evals import Evals
from layerswap.report.paper_tables import Builder
from layerswap.report.table_params import Params
from layerswap.report.workspace import Workspace


def table2_models(selection_dir, evals_dir, params: Params, covered: dict[str, list[str]]) -> dict[str, list[str]]:
    """{column key: its models} of Table 2, in column order (the winners as Table 2 picks them)."""
    builder = Builder(Workspace(selection_dir, Evals(evals_dir), params), None)
    cols = [key for key, _ in builder.table_columns(2)]
    unknown = sorted(set(cols) - set(covered))
    if unknown:
        raise UserError(f"--covered-json: no entry for Table 2 column(s) {', '.join(unknown)}")
    return {col: builder.column_models(col, params.table2_language) for col in cols}


def models_lacking(columns: dict[str, list[str]], covered: dict[str, list[str]], lang: str) -> list[str]:
    """The models of the columns whose own evaluation files lack MGSM in `lang`, once each, in column order."""
    return list(dict.fromkeys(m for col, models in columns.items() if lang not in covered[col] for m in models))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--selection-dir", required=True, help="directory of <expert_type>.json selection files")
    parser.add_argument("--evals-dir", required=True, help="directory of <model_id>/<benchmark>.json evaluations")
    parser.add_argument("--params-json", required=True, help="the params of `layerswap tables`")
    parser.add_argument(
        "--covered-json", required=True, help="JSON {Table 2 column: [languages its models' own files hold]}"
    )
    parser.add_argument("--languages", nargs="+", required=True, help="the extra MGSM languages, one file each")
    parser.add_argument("--out", nargs="+", required=True, help="the model lists, one per --languages entry")


def run(args: argparse.Namespace) -> None:
    if len(args.languages) != len(args.out):
        raise UserError(f"--out: {len(args.out)} files for {len(args.languages)} --languages")
    params = Params.from_json(args.params_json)
    try:
        covered = json.loads(args.covered_json)
    except json.JSONDecodeError as err:
        raise UserError(f"--covered-json: not JSON ({err})") from None
    if not isinstance(covered, dict) or not all(isinstance(v, list) for v in covered.values()):
        raise UserError("--covered-json: expected an object {column: [languages]}")
    columns = table2_models(args.selection_dir, args.evals_dir, params, covered)
    lists = {lang: models_lacking(columns, covered, lang) for lang in args.languages}  # all computed before writing
    for lang, out in zip(args.languages, args.out):
        write_text_atomic(out, json.dumps({"language": lang, "models": lists[lang]}, indent=1) + "\n")
