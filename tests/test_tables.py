"""Tables 1, 2, 5, 6 from synthetic selection/evaluation files with hand-checked numbers."""

from __future__ import annotations

import argparse
import json
import os
import re
from pathlib import Path

import pandas as pd
import pytest
import yaml

from layerswap.benchmarks import BENCHMARKS
from layerswap.errors import UserError
from layerswap.report import tables
from layerswap.report.render import Table

# the paper's text, as the project's shared folder holds it beside the repository (or where LAYERSWAP_PAPER_TEXT says)
SEED = Path(
    os.environ.get(
        "LAYERSWAP_PAPER_TEXT", Path(__file__).resolve().parents[2] / "shared" / "seeds" / "003_bd5c3fc342042dce.txt"
    )
)
SWH, TEL = "toy_swh", "toy_tel"

# MGSM per model: {lang: score}; experts are (run, checkpoint) by rank
BASE = {"en": 0.50, SWH: 0.20, TEL: 0.10}
EXPERTS = {
    "math": [
        ("math_a", "s1", {"en": 0.70, SWH: 0.30, TEL: 0.20}),
        ("math_b", "s2", {"en": 0.60, SWH: 0.26, TEL: 0.16}),
    ],
    SWH: [("swh_a", "s1", {"en": 0.52, SWH: 0.24, TEL: 0.11}), ("swh_b", "s2", {"en": 0.48, SWH: 0.22, TEL: 0.09})],
    TEL: [("tel_a", "s1", {"en": 0.51, SWH: 0.21, TEL: 0.14}), ("tel_b", "s2", {"en": 0.49, SWH: 0.19, TEL: 0.12})],
    f"joint_{SWH}": [
        ("joint_a", "s1", {"en": 0.55, SWH: 0.33, TEL: 0.12}),
        ("joint_b", "s2", {"en": 0.57, SWH: 0.31, TEL: 0.14}),
    ],
}
PAIRS = ["l1m1", "l1m2", "l2m1", "l2m2"]
# target-language MGSM of each merge config per pair; English 0.60 and the other language 0.10 for every merge
MERGES = {
    SWH: {
        "soup_u": [0.25, 0.29, 0.21, 0.23],
        "soup_m": [0.26, 0.24, 0.22, 0.20],
        "swap_def": [0.31, 0.33, 0.29, 0.35],
        "swap_alt": [0.30, 0.36, 0.28, 0.38],
        "ties_d": [0.24, 0.25, 0.26, 0.21],
    },
    TEL: {
        "soup_u": [0.15, 0.15, 0.15, 0.15],
        "soup_m": [0.17, 0.13, 0.13, 0.13],
        "swap_def": [0.18, 0.20, 0.22, 0.28],
        "swap_alt": [0.195, 0.195, 0.195, 0.195],
        "ties_d": [0.14, 0.14, 0.14, 0.14],
    },
}
SOUPSWAP = {SWH: {"langsoup": 0.34, "multisoup": 0.27}, TEL: {"langsoup": 0.23, "multisoup": 0.21}}

PARAMS = {
    "languages": [SWH, TEL],
    "mgsm_languages": ["en", SWH, TEL],
    "top_k": 2,
    "best_of": {"soup": ["soup_u", "soup_m"], "layer_swap": ["swap_def", "swap_alt"], "ties": ["ties_d"]},
    "default_swap": "swap_def",
    "table2_language": SWH,
    "world": "toy",
    "language_names": {SWH: "toy-Swahili (synthetic)", TEL: "toy-Telugu (synthetic)"},
}


ITEMS = 200  # per-item records per language of every synthetic evaluation


def write_eval(
    root: Path, model_id: str, bench: str, scores: dict, skipped: str | None = None, items: int = ITEMS
) -> None:
    """An evaluation file and its per-item log beside it, as layerswap.evaluation.evaluate writes them: `items` records
    per key, the first round(score * items) of them correct (a corpus metric such as FLORES' BLEU: no per-item
    correctness)."""
    path = root / model_id / f"{bench}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    scores = {} if skipped else scores
    records = []
    for key, score in scores.items():
        for doc in range(items):
            correct = None if BENCHMARKS[bench].corpus else doc < round(score * items)
            records.append({"key": key, "task": f"toy_{bench}_{key}", "doc_id": doc, "correct": correct})
    path.with_name(f"{bench}.samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    path.write_text(
        json.dumps(
            {
                "model_id": model_id,
                "benchmark": bench,
                "metric": "m",
                "scores": scores,
                "n": {key: items for key in scores},
                "skipped": skipped,
            }
        )
    )


def other_benchmarks(root: Path, model_id: str, offset: float, swh: str = SWH, tel: str = TEL) -> None:
    """Every registered benchmark besides MGSM (Table 5 shows them all): Belebele / FLORES / MMLU with simple known
    numbers, one that runs code (MBPP) skipped, any other 0.5 + offset per task key (BLEU: 50 + 100 * offset)."""
    known = {
        "belebele": {"en": 0.80 + offset, swh: 0.50 + offset, tel: 0.40 + offset},
        "flores": {
            f"en-{swh}": 10.0 + 100 * offset,
            f"{swh}-en": 20.0,
            f"en-{tel}": 5.0,
            f"{tel}-en": 15.0 + 100 * offset,
        },
        "mmlu": {swh: 0.30 + offset, tel: 0.28},
    }
    for name, bench in BENCHMARKS.items():
        if bench.unsafe:
            write_eval(root, model_id, name, {}, skipped="code execution not enabled")
        elif name != "mgsm":
            scale = 100 if bench.unit == "bleu" else 1
            write_eval(
                root,
                model_id,
                name,
                known.get(name)
                or {key: scale * (0.5 + offset) for lang in ("en", swh, tel) for key in bench.keys(lang)},
            )


def make_world(tmp: Path, langs=(SWH, TEL)) -> tuple[Path, Path]:
    """Selection and evaluation files; `langs` renames the two target languages (e.g. to swh/tel)."""
    ren = dict(zip((SWH, TEL), langs))

    def r(scores: dict) -> dict:
        return {ren.get(k, k): v for k, v in scores.items()}

    sel, ev = tmp / "selection", tmp / "evals"
    sel.mkdir()
    write_eval(ev, "base", "mgsm", r(BASE))
    other_benchmarks(ev, "base", 0.0, *langs)
    for etype, entries in EXPERTS.items():
        etype = ren.get(etype, etype) if not etype.startswith("joint_") else f"joint_{ren[SWH]}"
        selected = []
        for rank, (run, ckpt, mgsm) in enumerate(entries, start=1):
            selected.append(
                {
                    "rank": rank,
                    "run": run,
                    "checkpoint": ckpt,
                    "path": f"results/experts/{run}/{ckpt}",
                    "score": 1.0,
                    "metrics": {},
                }
            )
            write_eval(ev, f"ckpt/{run}/{ckpt}", "mgsm", r(mgsm))
            other_benchmarks(ev, f"ckpt/{run}/{ckpt}", 0.01 * rank, *langs)
        # a rank-3 candidate that top_k=2 must ignore
        selected.append({"rank": 3, "run": "ignored", "checkpoint": "s9", "path": "x", "score": 0.0, "metrics": {}})
        (sel / f"{etype}.json").write_text(json.dumps({"expert_type": etype, "selected": selected[::-1]}))
    for lang, configs in MERGES.items():
        other = TEL if lang == SWH else SWH
        for config, values in configs.items():
            for pair, value in zip(PAIRS, values):
                write_eval(ev, f"merge/{config}/{ren[lang]}/{pair}", "mgsm", r({"en": 0.60, lang: value, other: 0.10}))
        for kind, value in SOUPSWAP[lang].items():
            write_eval(ev, f"merge/soupswap/{ren[lang]}/{kind}", "mgsm", r({"en": 0.6, lang: value, other: 0.1}))
    return sel, ev


def write_tables(sel: Path, ev: Path, params: dict, out: Path) -> None:
    """`layerswap tables` on these folders and params, written to `out`."""
    args = argparse.Namespace(
        selection_dir=str(sel), evals_dir=str(ev), params_json=json.dumps(params), out_dir=str(out), paper_results=None
    )
    tables.run(args)


def build(tmp_path, **overrides):
    sel, ev = make_world(tmp_path)
    params = tables.Params.from_json(json.dumps({**PARAMS, **overrides}))
    return tables.build_tables(sel, ev, params), sel, ev


def cell(table: Table, row, col) -> str:
    """The number as displayed, without its interval."""
    return table.display(row, col).split(" [", 1)[0]


def test_table1_cells(tmp_path):
    t = build(tmp_path)[0]["table1"]
    expected = {
        # toy_swh: base 20; lang experts .24/.22; math .30/.26
        ((SWH, "avg"), "base"): "20.0",
        ((SWH, "max"), "base"): "20.0",
        ((SWH, "avg"), "language_expert"): "23.0",
        ((SWH, "max"), "language_expert"): "24.0",
        ((SWH, "avg"), "math_expert"): "28.0",
        ((SWH, "max"), "math_expert"): "30.0",
        # soup best per pair: .26 (m), .29 (u), .22 (m), .23 (u)
        ((SWH, "avg"), "soup_best"): "25.0",
        ((SWH, "max"), "soup_best"): "29.0",
        ((SWH, "avg"), "swap_default"): "32.0",
        ((SWH, "max"), "swap_default"): "35.0",
        # swap best per pair: .31 (def), .36 (alt), .29 (def), .38 (alt)
        ((SWH, "avg"), "swap_best"): "33.5",
        ((SWH, "max"), "swap_best"): "38.0",
        ((TEL, "avg"), "language_expert"): "13.0",
        ((TEL, "avg"), "soup_best"): "15.5",  # .17, .15, .15, .15
        ((TEL, "max"), "swap_best"): "28.0",
        ((TEL, "avg"), "swap_best"): "22.4",  # .195, .20, .22, .28
    }
    for (row, col), value in expected.items():
        assert cell(t, row, col) == value, (row, col)
    labels = [labels[0] for _, labels in t.rows]
    assert labels == [
        "toy-Swahili (synthetic) avg",
        "toy-Swahili (synthetic) max",
        "toy-Telugu (synthetic) avg",
        "toy-Telugu (synthetic) max",
    ]
    assert t.cells[((SWH, "avg"), "swap_best")] == pytest.approx(33.5)


def test_best_configs_per_pair(tmp_path):
    tabs = build(tmp_path)[0]
    b1 = tabs["table1_best_configs"]
    winners = {key: b1.cells[(key, "config")] for key, _ in b1.rows}
    assert winners[(SWH, "soup", "l1m1")] == "soup_m"
    assert winners[(SWH, "soup", "l1m2")] == "soup_u"
    assert winners[(SWH, "soup", "l2m1")] == "soup_m"
    assert winners[(SWH, "soup", "l2m2")] == "soup_u"
    assert [winners[(SWH, "layer_swap", p)] for p in PAIRS] == ["swap_def", "swap_alt", "swap_def", "swap_alt"]
    # equal scores: the first config of best_of wins
    assert winners[(TEL, "soup", "l2m2")] == "soup_u"
    assert len(b1.rows) == 2 * 2 * 4
    b2 = tabs["table2_best_configs"]
    assert {key[1] for key, _ in b2.rows} == {"soup", "ties", "layer_swap"}
    assert {key[0] for key, _ in b2.rows} == {SWH}


def test_table2_cells(tmp_path):
    t = build(tmp_path)[0]["table2"]
    expected = {
        ("min", "base"): "20.0",
        ("all_avg", "base"): "26.7",  # (.5 + .2 + .1) / 3
        ("min", "language_expert"): "22.0",
        ("en_avg", "language_expert"): "50.0",
        ("avg", "math_expert"): "28.0",
        ("en_avg", "math_expert"): "65.0",
        ("all_avg", "math_expert"): "37.0",
        ("min", "joint_sft"): "31.0",
        ("avg", "joint_sft"): "32.0",
        ("max", "joint_sft"): "33.0",
        ("en_avg", "joint_sft"): "56.0",
        ("all_avg", "joint_sft"): "33.7",
        ("min", "soup_best"): "22.0",
        ("avg", "soup_best"): "25.0",
        ("min", "ties_best"): "21.0",
        ("avg", "ties_best"): "24.0",
        ("max", "ties_best"): "26.0",
        ("min", "swap_default"): "29.0",
        ("en_avg", "swap_default"): "60.0",
        ("all_avg", "swap_default"): "34.0",  # (.6 + .32 + .1) / 3
        ("max", "swap_best"): "38.0",
        ("all_avg", "swap_best"): "34.5",  # (.6 + .335 + .1) / 3
    }
    for (row, col), value in expected.items():
        assert cell(t, row, col) == value, (row, col)
    assert [labels[0] for _, labels in t.rows] == [
        "toy-Swahili (synthetic) min",
        "toy-Swahili (synthetic) avg",
        "toy-Swahili (synthetic) max",
        "English avg",
        "All langs avg",
    ]


def test_table2_reads_its_extra_languages_from_files_of_their_own(tmp_path):
    """The workflow evaluates the Table 2 language's checkpoints in English + that language and its merges in that
    language; the other MGSM languages are files of their own (evals/by_language/<lang>/<model>/mgsm.json). Table 2
    is the same either way, and a score found in neither file is one error naming the model's own file."""
    (tmp_path / "whole").mkdir()
    (tmp_path / "split").mkdir()
    whole = build(tmp_path / "whole")[0]["table2"]
    sel, ev = make_world(tmp_path / "split")
    moved = 0
    for path in sorted(ev.glob("*/**/mgsm.json")):
        model = path.parent.relative_to(ev).as_posix()
        if model.startswith("merge/") and f"/{SWH}/" in model:
            keep = {SWH}
        elif model.startswith(("ckpt/swh_", "ckpt/joint_")):
            keep = {"en", SWH}
        else:
            continue
        doc = json.loads(path.read_text())
        for lang in [l for l in doc["scores"] if l not in keep]:
            write_eval(ev / "by_language" / lang, model, "mgsm", {lang: doc["scores"].pop(lang)})
            moved += 1
        path.write_text(json.dumps(doc))
    assert moved > 20
    params = tables.Params.from_json(json.dumps(PARAMS))
    split = tables.build_tables(sel, ev, params)["table2"]
    assert split.cells == whole.cells and split.cells
    (ev / "by_language" / TEL / "merge" / "swap_def" / SWH / "l1m1" / "mgsm.json").unlink()
    with pytest.raises(
        UserError,
        match=rf"{ev / 'merge' / 'swap_def' / SWH / 'l1m1' / 'mgsm.json'}: no numeric "
        rf"score for '{TEL}'",
    ):
        tables.build_tables(sel, ev, params)


def test_table5_cells(tmp_path):
    t = build(tmp_path)[0]["table5"]
    # math experts: rank 1 offset .01, rank 2 offset .02 -> mean offset .015
    assert cell(t, ("belebele", SWH), "math") == "0.515"
    assert cell(t, ("belebele", "en"), "base") == "0.800"
    assert cell(t, ("flores", f"en-{SWH}"), SWH) == "11.5"
    assert cell(t, ("flores", f"{TEL}-en"), "base") == "15.0"
    assert cell(t, ("mmlu", TEL), TEL) == "0.280"
    assert cell(t, ("mbpp", SWH), "math") == "skipped"
    assert cell(t, ("mgsm", "en"), "math") == "0.650"
    assert cell(t, ("mgsm", SWH), SWH) == "0.230"
    assert cell(t, ("mgsm", "avg"), "base") == "0.267"
    assert cell(t, ("mgsm", "avg"), "math") == "0.370"
    # MMLU has no English score anywhere: no row; Belebele has
    keys = [key for key, _ in t.rows]
    assert ("mmlu", "en") not in keys and ("belebele", "en") in keys
    assert keys[0] == ("mgsm", "en")
    assert {bench for bench, _ in keys} == set(BENCHMARKS)  # every registered benchmark has its rows


def test_table6_cells(tmp_path):
    t = build(tmp_path)[0]["table6"]
    assert cell(t, SWH, "soup_pairwise") == "25.0"
    assert cell(t, SWH, "swap_pairwise") == "32.0"
    assert cell(t, SWH, "swap_langsoup") == "34.0"
    assert cell(t, SWH, "swap_multisoup") == "27.0"
    assert cell(t, TEL, "swap_pairwise") == "22.0"


def test_missing_eval_file_names_it(tmp_path):
    sel, ev = make_world(tmp_path)
    missing = ev / "merge" / "swap_alt" / SWH / "l2m2" / "mgsm.json"
    missing.unlink()
    with pytest.raises(UserError, match="missing evaluation file .*swap_alt/toy_swh/l2m2/mgsm.json"):
        tables.build_tables(sel, ev, tables.Params.from_json(json.dumps(PARAMS)))


def test_missing_expert_eval_and_score_key(tmp_path):
    sel, ev = make_world(tmp_path)
    (ev / "ckpt" / "swh_b" / "s2" / "mgsm.json").unlink()
    with pytest.raises(UserError, match="ckpt/swh_b/s2/mgsm.json"):
        tables.build_tables(sel, ev, tables.Params.from_json(json.dumps(PARAMS)))
    write_eval(ev, "ckpt/swh_b/s2", "mgsm", {"en": 0.5})
    with pytest.raises(UserError, match=r"ckpt/swh_b/s2/mgsm.json: no numeric score for 'toy_swh'"):
        tables.build_tables(sel, ev, tables.Params.from_json(json.dumps(PARAMS)))


def test_skipped_mgsm_is_an_error_outside_table5(tmp_path):
    sel, ev = make_world(tmp_path)
    write_eval(ev, "merge/soupswap/toy_tel/multisoup", "mgsm", {}, skipped="no time")
    with pytest.raises(UserError, match="soupswap/toy_tel/multisoup/mgsm.json: benchmark skipped"):
        tables.build_tables(sel, ev, tables.Params.from_json(json.dumps(PARAMS)))


def test_missing_joint_selection(tmp_path):
    sel, ev = make_world(tmp_path)
    (sel / f"joint_{SWH}.json").unlink()
    with pytest.raises(UserError, match="missing selection file .*joint_toy_swh.json"):
        tables.build_tables(sel, ev, tables.Params.from_json(json.dumps(PARAMS)))


def test_too_few_selected(tmp_path):
    sel, ev = make_world(tmp_path)
    with pytest.raises(UserError, match="json: 3 selected experts, top_k is 4"):
        tables.build_tables(sel, ev, tables.Params.from_json(json.dumps({**PARAMS, "top_k": 4})))


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"languages": None}, "'languages' must be a non-empty list of strings, got None"),
        ({"top_k": True}, "'top_k' must be an integer >= 1, got True"),
        ({"best_of": {"soup": ["a"], "swap": ["b"]}}, "best_of.swap': unknown merge method"),
        ({"best_of": {"soup": []}}, "best_of.soup' must be a non-empty list"),
        ({"world": "moon"}, "'world'"),
        ({"table2_language": "toy_xx"}, "table2_language"),
    ],
)
def test_bad_params(bad, message):
    with pytest.raises(UserError, match=message):
        tables.Params.from_json(json.dumps({**PARAMS, **bad}))


def test_cli_writes_files_toy(tmp_path):
    sel, ev = make_world(tmp_path)
    out = tmp_path / "out"
    write_tables(sel, ev, PARAMS, out)
    for name in ("table1", "table2", "table5", "table6"):
        for ext in ("csv", "md", "tex"):
            assert (out / f"{name}.{ext}").is_file()
        assert "TOY WORLD — synthetic languages" in (out / f"{name}.md").read_text()
        assert not (out / f"{name}_paper_vs_ours.md").exists()
    t1 = pd.read_csv(out / "table1.csv")
    row = t1[t1["Setting"] == "toy-Swahili (synthetic) avg"].iloc[0]
    assert row["layer swap (best config, 4 pairs)"] == pytest.approx(33.5)
    assert "| toy-Swahili (synthetic) avg |" in (out / "table1.md").read_text()
    best = pd.read_csv(out / "table1_best_configs.csv")
    assert set(best["winning config"]) == {"soup_u", "soup_m", "swap_def", "swap_alt"}
    assert (out / "table2_best_configs.md").is_file()
    t5 = pd.read_csv(out / "table5.csv")
    assert "skipped" in set(t5["math experts"].astype(str))


def _paper_params(first: str, second: str, names: dict[str, str]) -> dict:
    """PARAMS for the paper world (world: hf) with the two target languages of make_world(langs=(first, second))."""
    langs = [first, second]
    paper = {"world": "hf", "languages": langs, "mgsm_languages": ["en", *langs], "table2_language": first}
    return {**PARAMS, **paper, "language_names": names}


def test_paper_world_shows_paper_numbers(tmp_path):
    sel, ev = make_world(tmp_path, langs=("swh", "tel"))
    params = _paper_params("swh", "tel", {})
    out = tmp_path / "out"
    write_tables(sel, ev, params, out)
    md = (out / "table1.md").read_text()
    assert "TOY WORLD" not in md
    assert "| Swahili avg " in md and re.search(r"\| 20\.0 \[1\d\.\d, 2\d\.\d\] \(24\.8\) \|", md)  # ours [95%] (paper)
    vs = pd.read_csv(out / "table1_paper_vs_ours.csv")
    row = vs[(vs["Setting"] == "Swahili avg") & (vs["column"].str.startswith("layer swap (best"))].iloc[0]
    assert row["paper"] == pytest.approx(32.8) and row["ours"] == pytest.approx(33.5)
    assert row["diff"] == pytest.approx(0.7)
    assert row["ours_lo"] < row["ours"] < row["ours_hi"] and row["n"] == ITEMS
    vs2 = pd.read_csv(out / "table2_paper_vs_ours.csv")
    assert vs2[(vs2["Setting"] == "English avg") & (vs2["column"].str.contains("joint"))]["paper"].iloc[0] == 64.3
    vs5 = pd.read_csv(out / "table5_paper_vs_ours.csv")
    flores = vs5[(vs5["Language"] == "Telugu → English") & (vs5["column"] == "Telugu experts")].iloc[0]
    assert flores["paper"] == pytest.approx(27.6)
    vs6 = pd.read_csv(out / "table6_paper_vs_ours.csv")
    assert vs6[(vs6["Setting"] == "Telugu") & (vs6["column"].str.contains("multilingual"))]["paper"].iloc[0] == 21.2
    # the settings the paper does not name, each from its benchmark's entry: all under Table 5, MGSM's under the others
    notes = {b.name: f"- {b.paper.note}\n" for b in BENCHMARKS.values() if b.paper and b.paper.note}
    assert set(notes) == {"mgsm", "flores", "mbpp", "mmlu"}
    table5 = (out / "table5_paper_vs_ours.md").read_text()
    assert all(table5.count(n) == 1 for n in notes.values())
    for name in ("table1", "table2", "table6"):
        vs_md = (out / f"{name}_paper_vs_ours.md").read_text()
        assert [b for b, n in notes.items() if n in vs_md] == ["mgsm"], name


def test_a_language_scored_on_a_translation_of_mgsm_is_named_in_the_notes(tmp_path):
    """Paper world, Yoruba as a target (MGSM lacks it; its math benchmark is AfriMGSM, scored under MGSM's key): the
    tables that show its MGSM say, under the numbers, that they are AfriMGSM's; Swahili's are MGSM's own."""
    sel, ev = make_world(tmp_path, langs=("swh", "yor"))
    params = _paper_params("swh", "yor", {"swh": "Swahili", "yor": "Yoruba"})
    out = tmp_path / "out"
    write_tables(sel, ev, params, out)
    note = "- yor: AfriMGSM (masakhane/afrimgsm, lm-eval afrimgsm_cot_yor_prompt_1), the human translation of MGSM's"
    for name in ("table1", "table2", "table5", "table6"):
        md = (out / f"{name}.md").read_text()
        assert md.count(note) == 1, name
        assert "swh: AfriMGSM" not in md and "Swahili: " not in md
    assert "| Yoruba avg " in (out / "table1.md").read_text()
    toy = tmp_path / "toy"
    toy.mkdir()
    write_tables(*make_world(toy), PARAMS, toy / "out")  # the toy world's languages stand for none: no such note
    assert "AfriMGSM" not in (toy / "out" / "table1.md").read_text()


def test_paper_numbers_spot_cells():
    data = yaml.safe_load(tables.PAPER_RESULTS.read_text())
    assert data["table1"]["swh"]["avg"]["swap_best"] == 32.8
    assert data["table1"]["tel"]["max"]["soup_best"] == 26.4
    assert data["table1"]["jpn"]["max"]["math_expert"] == 44.8
    assert data["table2"]["language"] == "swh"
    assert data["table2"]["rows"]["min"]["ties_best"] == 25.2
    assert data["table2"]["rows"]["all_avg"]["joint_sft"] == 46.0
    assert data["table5"]["mgsm"]["avg"] == {"base": 0.311, "math": 0.454}
    assert data["table5"]["belebele"]["tel"]["tel"] == 0.602
    assert data["table5"]["flores"]["en-swh"] == {"base": 12.5, "math": 12.9, "swh": 13.0}
    assert data["table5"]["mbpp"]["ben"]["ben"] == 0.462
    assert data["table6"]["ben"]["swap_langsoup"] == 40.4


def _seed_rows(lines: list[str], caption: str) -> list[list[str]]:
    start = next(i for i, line in enumerate(lines) if line.startswith(caption))
    rows = []
    for line in lines[start + 2 :]:
        if "\t" not in line:
            break
        rows.append(line.split("\t"))
    return rows[2:]  # drop the Setting / Details header rows


@pytest.mark.skipif(not SEED.is_file(), reason="seed text not available")
def test_paper_numbers_match_seed_tables_1_2_6():
    lines = SEED.read_text().splitlines()
    data = yaml.safe_load(tables.PAPER_RESULTS.read_text())
    names = {"Swahili": "swh", "Telugu": "tel", "Bengali": "ben", "Japanese": "jpn"}
    t1 = ["base", "language_expert", "math_expert", "soup_best", "swap_default", "swap_best"]
    for row in _seed_rows(lines, "Table 1:"):
        lang, stat = row[0].split()
        assert [data["table1"][names[lang]][stat][c] for c in t1] == [float(v) for v in row[1:]], row
    t2 = ["base", "language_expert", "math_expert", "joint_sft", "soup_best", "ties_best", "swap_default", "swap_best"]
    keys = ["min", "avg", "max", "en_avg", "all_avg"]
    for key, row in zip(keys, _seed_rows(lines, "Table 2:"), strict=True):
        assert [data["table2"]["rows"][key][c] for c in t2] == [float(v) for v in row[1:]], row
    t6 = ["soup_pairwise", "swap_pairwise", "swap_langsoup", "swap_multisoup"]
    for row in _seed_rows(lines, "Table 6:"):
        assert [data["table6"][names[row[0]]][c] for c in t6] == [float(v) for v in row[1:]], row


def test_an_evaluation_file_changed_after_its_index_is_refused(tmp_path, monkeypatch):
    """The tables read checkpoint evaluation files through their index's sha256: a file edited after the evaluation
    (valid JSON, other scores) is one error naming it and the index, not a table of numbers nobody computed."""
    from layerswap.fingerprint import file_sha256
    from layerswap.report.evals import Evals

    monkeypatch.chdir(tmp_path)  # the index names files as the job did, relative to the working directory
    write_eval(Path("evals"), "ckpt/math_1/s0000016", "mgsm", {"en": 0.5})
    name = "evals/ckpt/math_1/s0000016/mgsm.json"
    index = Path("evals/ckpt/math_1/index.json")
    index.write_text(json.dumps({"run": "math_1", "checkpoints": [], "files": {}, "sha256": {name: file_sha256(name)}}))
    assert Evals("evals").score("ckpt/math_1/s0000016", "mgsm", "en") == 0.5
    data = json.loads(Path(name).read_text())
    data["scores"]["en"] = 0.9
    Path(name).write_text(json.dumps(data))
    with pytest.raises(UserError, match=f"evaluation file {name}: sha256 differs from the one {index} records"):
        Evals("evals").score("ckpt/math_1/s0000016", "mgsm", "en")
