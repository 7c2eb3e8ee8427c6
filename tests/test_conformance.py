"""One entry each: a new benchmark, merge method or target language, added to a copy of the repository as
docs/EXTENDING.md says, goes through check-config, `layerswap cost` and the dry runs, and the plan evaluates it; the
new method's, the new benchmark's and a new table's micro configs also run end to end (the toy language's run:
tests/test_extending.py).
(Issue 50: a benchmark whose item counts or costs lived outside its entry passed every test, and then the paper
config stopped with a KeyError at parse time and `layerswap cost` in a traceback; a new language was accepted by every
check and then could not run.) A table is also held to its declared inputs in tests/test_table_registry.py."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from conftest import HANG_GUARD, REPO

from layerswap.config import effective_runs

#: a paper benchmark scored by log-likelihood (an lm-eval task per language), declared as docs/EXTENDING.md says
ENTRY = """
    Benchmark(
        "xstory",
        "XStoryCloze",
        "XStoryCloze (accuracy)",
        "fraction",
        40,
        (("{lang}", "belebele.yaml"),),
        LmEvalTask(
            "acc",
            "none",
            "none (argmax loglikelihood over the two endings)",
            0,
            task="xstorycloze_{code}",
            folder="xstorycloze",
            marker="{task}.yaml",
            missing="XStoryCloze has no {code} ({task} not in lm-eval)",
            code="mgsm",
            hub=HubSplits("juletxara/xstory_cloze", "{code}", ("eval",), ("input_sentence_1", "sentence_quiz1")),
            work=ItemWork(1511, 2, 80, 80, 1.5, 1.0, True, 10, 0, "synthetic: a story and an ending ~80 tokens"),
        ),
        table5=("en", "targets"),
        selection=(("xstory", "{lang}"),),
    ),
"""


def _copy(tmp: Path) -> Path:
    """A copy of the repository's code, rules and configs."""
    copy = tmp / "repo"
    skip = shutil.ignore_patterns(".venv*", ".git", "results", ".snakemake", "__pycache__", "*.egg-info", "tests")
    shutil.copytree(REPO, copy, ignore=skip)
    return copy


def _with_benchmark(tmp: Path) -> Path:
    """A copy of the repository whose registry holds ENTRY, its schema block regenerated."""
    copy = _copy(tmp)
    registry = copy / "layerswap" / "benchmarks.py"
    text = registry.read_text()
    head, tail = text.split("\n)\n\n\ndef by_name(", 1)
    registry.write_text(head + ENTRY.rstrip("\n") + "\n)\n\n\ndef by_name(" + tail)
    _run(copy, "-m", "layerswap.schema_blocks")
    return copy


def _run(copy: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHONPATH": str(copy),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    done = subprocess.run(
        [sys.executable, *args], cwd=copy, env=env, capture_output=True, text=True, timeout=HANG_GUARD
    )
    assert done.returncode == 0 or not check, (args, done.stderr[-3000:])
    return done


def test_a_new_lm_eval_benchmark_is_checked_costed_and_planned_from_its_entry(tmp_path):
    copy = _with_benchmark(tmp_path)
    config = yaml.safe_load((copy / "config" / "paper.yaml").read_text())
    evaluation = config["evaluation"]
    evaluation["tasks"]["xstory"] = {"shots": 0, "languages": ["en", *config["languages"]]}
    evaluation["checkpoint_tasks"].append("xstory")
    config["selection"]["weights"]["language"]["xstory"] = 0.5  # its selection metric, declared by the entry
    path = copy / "config" / "xstory.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))

    assert _run(copy, "-m", "layerswap.cli", "check-config", str(path)).stdout.strip() == "ok"
    cost = _run(copy, "-m", "layerswap.cli", "cost", "--configfile", str(path)).stdout
    assert "evaluation" in cost and "total" in cost
    dry = _run(copy, "-m", "snakemake", "-n", "--configfile", str(path), "--cores", "2", "--printshellcmds").stdout
    # the base is evaluated on it; every checkpoint of a language expert too (its selection reads the metric), the
    # math experts' selected checkpoints after selection (Table 5)
    assert "results/evals/base/xstory.json" in dry
    runs = effective_runs(config)
    for run, spec in runs.items():
        index = f"results/evals/ckpt/{run}/index.xstory.json"
        if spec["expert"] in config["languages"]:
            assert index in dry, run
        elif spec["expert"] == "math":
            assert index not in dry and f"results/evals/ckpt/{run}/index.other_xstory.json" in dry, run


def test_a_new_benchmark_runs_end_to_end_on_the_toy_world(tmp_path):
    """ENTRY with its toy data writer (a Belebele-shaped set, its template belebele.yaml), as docs/EXTENDING.md's
    benchmark steps say, in the micro config: checked, costed, planned, and the whole DAG runs: the language expert
    is selected on it and Table 5 shows it."""
    copy = _with_benchmark(tmp_path)
    writers = copy / "layerswap" / "data" / "toy_writers.py"
    # its writer, and its fields no prompt shows (the toy data check names the first such field left out)
    text = writers.read_text() + '\nWRITERS["xstory"] = _belebele\nMETADATA["xstory"] = METADATA["belebele"]\n'
    writers.write_text(text)

    def edit(config):
        config["evaluation"]["tasks"]["xstory"] = {"shots": 0}
        config["evaluation"]["checkpoint_tasks"].append("xstory")
        config["selection"]["weights"]["language"]["xstory"] = 0.5

    path = _config(copy, "micro.yaml", "xstory_micro.yaml", edit)
    dry = _checked_costed_dry(copy, path)
    assert "results/data/eval/xstory_toy_swh.jsonl" in dry
    _run(copy, "-m", "snakemake", "--configfile", str(path), "--cores", "2")
    results = copy / "results"
    selection = (results / "selection" / "toy_swh.json").read_text()
    assert '"xstory"' in selection
    assert "XStoryCloze (accuracy)" in (results / "tables" / "table5.csv").read_text()


def _config(copy: Path, base: str, name: str, edit) -> Path:
    config = yaml.safe_load((copy / "config" / base).read_text())
    edit(config)
    path = copy / "config" / name
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _checked_costed_dry(copy: Path, path: Path) -> str:
    """check-config says ok, `layerswap cost` plans it, and the dry run's shell commands (returned) are made."""
    assert _run(copy, "-m", "layerswap.cli", "check-config", str(path)).stdout.strip() == "ok"
    cost = _run(copy, "-m", "layerswap.cli", "cost", "--configfile", str(path)).stdout
    assert "evaluation" in cost and "total" in cost
    return _run(copy, "-m", "snakemake", "-n", "--configfile", str(path), "--cores", "2", "--printshellcmds").stdout


#: plain task arithmetic (the shared core as it is), a method module as docs/EXTENDING.md says
METHOD = """from layerswap.merge.params import Method, Param
from layerswap.merge.task_arithmetic import TaskArithmetic

PARAMS = {"lam": Param(1.0, "number", "scale of the summed task vectors", {"exclusiveMinimum": 0})}
METHOD = Method("task_arithmetic", "task arithmetic", "TA", PARAMS, ("models",), TaskArithmetic)
METHODS = (METHOD,)
"""


def test_a_new_merge_method_is_checked_costed_and_planned_from_its_module(tmp_path):
    copy = _copy(tmp_path)
    (copy / "layerswap" / "merge" / "methods" / "task_arithmetic.py").write_text(METHOD)
    registry = copy / "layerswap" / "merge" / "registry.py"
    text = registry.read_text().replace(
        "import dare, layer_swap, soup, ties", "import dare, layer_swap, soup, task_arithmetic, ties"
    )
    registry.write_text(text.replace("    dare,\n)", "    dare,\n    task_arithmetic,\n)"))
    _run(copy, "-m", "layerswap.schema_blocks")

    def edit(config):
        config["merges"]["configs"]["ta_l05"] = {"method": "task_arithmetic", "lam": 0.5}
        config["merges"]["best_of"]["task_arithmetic"] = ["ta_l05"]

    for base in ("micro.yaml", "paper.yaml"):
        config = yaml.safe_load((copy / "config" / base).read_text())
        dry = _checked_costed_dry(copy, _config(copy, base, f"ta_{base}", edit))
        # its recipes are written and evaluated for every target language (a best-config column of Tables 1 and 2)
        for lang in config["languages"]:
            assert f"merge/ta_l05/{lang}/" in dry, (base, lang)
    # and the micro config naming it runs end to end: its merges made and evaluated, its column in Tables 1 and 2
    _run(copy, "-m", "snakemake", "--configfile", str(copy / "config" / "ta_micro.yaml"), "--cores", "2")
    results = copy / "results"
    assert list((results / "evals" / "merge" / "ta_l05" / "toy_swh").rglob("mgsm.json"))
    for table in ("table1", "table2"):
        header = (results / "tables" / f"{table}.csv").read_text().splitlines()[0]
        assert "task arithmetic (best config" in header, (table, header)


def _add_language(lang: str, name: str, nllb: str):
    """docs/EXTENDING.md's paper-world edits of config/paper.yaml for a language with a layerswap/languages.py entry."""

    def edit(config):
        config["languages"].append(lang)
        config["language_names"][lang] = name
        config["data_sources"]["aya"]["languages"][lang] = name
        config["data_sources"]["nllb"]["languages"][lang] = nllb
        config["mixes"]["language"][lang] = {"aya": 3000, "nllb": 12000}
        for i in (1, 2, 3):
            config["sft"]["runs"][f"{lang}_{i}"] = {**config["sft"]["runs"][f"swh_{i}"], "expert": lang}
        for task in config["evaluation"]["tasks"].values():
            if "languages" in task:
                task["languages"].append(lang)

    return edit


def test_a_new_paper_target_language_is_checked_costed_and_planned_from_config_edits(tmp_path):
    """Yoruba, which MGSM lacks, as docs/EXTENDING.md's paper-world steps add it (its layerswap/languages.py entry and
    FLORES task YAMLs exist; its math benchmark is AfriMGSM): its expert runs, its merges and its evaluations on
    every benchmark are planned, its selection and Table 1 read its math score."""
    copy = _copy(tmp_path)
    dry = _checked_costed_dry(
        copy, _config(copy, "paper.yaml", "yor.yaml", _add_language("yor", "Yoruba", "eng_Latn-yor_Latn"))
    )
    for i in (1, 2, 3):
        assert f"results/evals/ckpt/yor_{i}/" in dry
    assert "results/evals/merge/swap_b5u2t00/yor/" in dry
    # the joint expert's selection (mgsm_target) and the merges' evaluation score yor on the math benchmark
    assert re.search(r'"mgsm": \{[^}]*"languages": \[[^]]*"yor"', dry)


def test_a_new_table_runs_end_to_end_on_the_toy_world(tmp_path):
    """A table added as docs/EXTENDING.md says (its builder module listed in MODULES, its TableEntry, its report
    caption): the micro config's run writes it in every format its entry names. Its builder is Table 1's with another
    title, reading what Table 1's entry declares, so its numbers are Table 1's."""
    copy = _copy(tmp_path)
    builders = copy / "layerswap" / "report" / "builders"
    text = (builders / "table1.py").read_text()
    (builders / "table7.py").write_text(
        text.replace('"table1",', '"table7",').replace("Table 1: MGSM", "Table 7: MGSM")
    )
    init = (builders / "__init__.py").read_text()
    (builders / "__init__.py").write_text(init.replace("table5, table6", "table5, table6, table7"))
    registry = copy / "layerswap" / "report" / "registry.py"
    entry = '    TableEntry("table7", 7, "../report/table7.rst", "table7", _EXPERTS, _TABLE1),\n'
    text = registry.read_text()
    registry.write_text(
        text.replace("TABLES: tuple[TableEntry, ...] = (\n", "TABLES: tuple[TableEntry, ...] = (\n" + entry)
    )
    (copy / "report" / "table7.rst").write_text("Table 7: Table 1's numbers under another name (a conformance test).\n")
    path = copy / "config" / "micro.yaml"
    assert "results/tables/table7.csv" in _checked_costed_dry(copy, path)
    _run(copy, "-m", "snakemake", "--configfile", str(path), "--cores", "2")
    tables = copy / "results" / "tables"
    assert (tables / "table7.csv").read_bytes() == (tables / "table1.csv").read_bytes()
    assert (tables / "table7.md").read_text().startswith("# Table 7: MGSM") and (tables / "table7.tex").is_file()
