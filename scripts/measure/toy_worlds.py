"""Run one world of the toy-transfer study and score issue 21's questions (a), (b), (c) on it.

    python -m scripts.measure.toy_worlds --levers relex parallel --workdir DIR [--cores 2] [--record]

A world is config/toy_transfer.yaml with the overlays config/worlds/<lever>.yaml stacked in the order given (no
lever: the default world's knobs). The script runs the whole DAG there (`snakemake --configfile ...`), then reads
the run's tables and parameter-change profile (layerswap/report/transfer.py) and prints (a), (b), (c); the scores
go to <workdir>/transfer.json. --record adds (or replaces) the world's record in docs/toy_worlds.json and rewrites
the table of docs/toy_worlds.md from every record. --score-only scores a finished run without running Snakemake. The
wall time is Snakemake's own (its logs' `Elapsed time`), summed over the invocations that built the workdir.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

from layerswap.audit.trace import tables_params
from layerswap.layout import Layout, R
from layerswap.machine import hardware
from layerswap.report import tables, transfer
from scripts.measure.common import snakemake_command

REPO = Path(__file__).resolve().parents[2]

RECORDS = REPO / "docs" / "toy_worlds.json"
PAGE = REPO / "docs" / "toy_worlds.md"
BEGIN, END = "<!-- BEGIN worlds: scripts/measure/toy_worlds.py --record -->", "<!-- END worlds -->"
MIN_LANGUAGES = 3  # (b): the swap must win in at least 3 of the 4 target languages (the bar)


def configfiles(levers: list[str]) -> list[Path]:
    files = [REPO / "config" / "toy_transfer.yaml"]
    for lever in levers:
        path = REPO / "config" / "worlds" / f"{lever}.yaml"
        if not path.is_file():
            known = sorted(p.stem for p in (REPO / "config" / "worlds").glob("*.yaml"))
            raise SystemExit(f"config/worlds/{lever}.yaml: no such lever; known: {', '.join(known)}")
        files.append(path)
    return files


def run_dag(work: Path, files: list[Path], cores: int) -> None:
    cmd = [*snakemake_command(work, *files), "--cores", str(cores)]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(cmd, cwd=REPO, env=env)  # Snakemake's own progress lines go to the terminal
    if proc.returncode:
        raise SystemExit(f"snakemake failed (exit {proc.returncode}) in {work}; see its log above")


def dag_wall(work: Path) -> tuple[float, int]:
    """(seconds, invocations): the wall time of every Snakemake invocation that built the workdir (each log's
    `Elapsed time`), so a run that failed and was continued counts both parts."""
    total, runs = 0.0, 0
    for log in sorted((work / ".snakemake" / "log").glob("*.snakemake.log")):
        found = re.search(r"Elapsed time: (?:(\d+) days?, )?(\d+):(\d+):([\d.]+)", log.read_text(errors="replace"))
        if found:
            days, h, m, sec = found.groups()
            total += int(days or 0) * 86400 + int(h) * 3600 + int(m) * 60 + float(sec)
            runs += 1
    return total, runs


def score(results: Path) -> dict:
    """(a), (b), (c) of a finished run, with the Table 1 cells they rest on."""
    layout = Layout.at(results)
    config = yaml.safe_load(Path(layout.config_used("yaml")).read_text())
    params = tables.Params.from_json(tables_params(json.loads(Path(layout.manifest()).read_text())))
    built = tables.build_tables(layout.selection_dir(), layout.evals(), params)
    langs = list(config["languages"])
    swap = config["merges"]["configs"][config["merges"]["default_swap"]]
    middle = range(swap["bottom"], config["base"]["num_layers"] - swap["top"])
    t1 = built["table1"]
    cells = {
        lang: {
            col: [round(t1.cells[((lang, "avg"), col)], 1), *(round(v, 1) for v in t1.intervals[((lang, "avg"), col)])]
            for col, _ in t1.columns
        }
        for lang in langs
    }
    return {
        "a": transfer.skills(built["table5"], langs),
        "b": transfer.transfer(t1, langs, MIN_LANGUAGES),
        "c": transfer.layer_profile(Path(layout.figure("param_change_mean", "csv")), middle),
        "table1_avg": cells,
        "middle_layers": [middle.start, middle.stop - 1],
    }


def _cell(values: list[float]) -> str:
    return f"{values[0]:.1f} [{values[1]:.1f}, {values[2]:.1f}]"


def row(record: dict) -> str:
    s = record["scores"]
    en = s["a"].get("mgsm_en", {})
    misses = (
        []
        if s["a"]["math_en_above_base"]
        else ["math on English MGSM" + (f" ({en['math']} vs base {en['base']})" if en else "")]
    )
    misses += [f"{lang} {k}" for lang, v in s["a"]["languages"].items() for k, ok in v.items() if not ok]
    a = "yes" if s["a"]["holds"] else "no: " + ", ".join(misses)
    won = s["b"]["languages_won"]
    b = ("yes" if s["b"]["holds"] else "no") + f", {len(won)}/{len(s['table1_avg'])}"
    swaps = "; ".join(
        f"{lang}: {_cell(v['swap_default'])} vs best rival "
        + _cell(max((v[r] for r in transfer.RIVALS), key=lambda x: x[0]))
        for lang, v in s["table1_avg"].items()
    )
    c = s["c"]
    c_text = (
        f"math {c['math']['middle_share']:.3f} / lang {c['language']['middle_share']:.3f} (flat "
        f"{c['flat_share']:.3f}): " + ("paper-like" if c.get("paper_pattern") else "not paper-like")
    )
    levers = " + ".join(record["levers"]) or "(none: default knobs)"
    runs = record.get("invocations", 1)
    wall = f"{record['wall_s'] / 60:.1f} min" + (f" ({runs} invocations)" if runs != 1 else "")
    return f"| {record['world']} | {levers} | {a} | {b} | {swaps} | {c_text} | {wall} | `{record['command']}` |"


def write_page(records: list[dict]) -> None:
    head = (
        "| world | levers | (a) skills learned | (b) swap beats base, both experts, best soup "
        "(intervals separate) | Table 1 avg, swap (default) vs the best of the four, per language | "
        "(c) share of change in the middle layers | DAG wall time | reproduce |\n"
        "|---|---|---|---|---|---|---|---|\n"
    )
    table = head + "\n".join(row(r) for r in records) + "\n"
    text = PAGE.read_text()
    start, stop = text.index(BEGIN) + len(BEGIN), text.index(END)
    PAGE.write_text(text[:start] + "\n" + table + text[stop:])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--levers", nargs="*", default=[], help="overlays of config/worlds/, stacked in this order")
    parser.add_argument("--workdir", type=Path, required=True, help="where results/ goes")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--score-only", action="store_true", help="score a finished run, run nothing")
    parser.add_argument("--record", action="store_true", help="add the world to docs/toy_worlds.{json,md}")
    args = parser.parse_args(argv)
    files = configfiles(args.levers)
    args.workdir.mkdir(parents=True, exist_ok=True)
    if not args.score_only:
        run_dag(args.workdir, files, args.cores)
    wall, invocations = dag_wall(args.workdir)
    scores = score(args.workdir / R)
    world = "+".join(args.levers) or "default"
    command = "python -m scripts.measure.toy_worlds --workdir DIR" + (
        " --levers " + " ".join(args.levers) if args.levers else ""
    )
    record = {
        "world": world,
        "levers": args.levers,
        "command": command,
        "wall_s": wall,
        "invocations": invocations,
        "machine": hardware(),
        "scores": scores,
    }
    (args.workdir / "transfer.json").write_text(json.dumps(record, indent=1))
    print(json.dumps({k: scores[k] for k in ("a", "b", "c")}, indent=1))
    if args.record:
        records = json.loads(RECORDS.read_text()) if RECORDS.is_file() else []
        at = next((i for i, r in enumerate(records) if r["world"] == world), len(records))  # a rerun keeps its row
        records[at : at + 1] = [record]
        RECORDS.write_text(json.dumps(records, indent=1) + "\n")
        write_page(records)
        print(row(record))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
