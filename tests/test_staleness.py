"""Exact staleness (issue 11): after an edit, a dry run on the finished micro workflow schedules exactly the jobs
whose inputs, params or code the edit changes, and nothing else.

Expected sets are written from the DAG's meaning (what each job reads), not recorded. Job ids are
`rule[wildcard=value,...]` as `layerswap plan` parses them from `snakemake --dry-run`. Every edit is a dry run
(nothing is written), so all edits share the micro workdir; the code edit (7) runs a copy of the repository with a
changed merge module, and the single-task-per-job edit runs on a copy of the workdir converted to that mode.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml
from conftest import MICRO, REPO

from layerswap.layout import Layout
from layerswap.workflow.plan import parse_dry_run

pytestmark = pytest.mark.workflow

RUNS = ["math_1", "toy_swh_1", "joint_toy_swh_1"]
CONFIGS = ["swap_default", "soup_uniform", "ties_d05"]
# Aggregates: what each reads. tables: selections, every checkpoint/base/merge evaluation; table_pages: the
# tables' Markdown; table1_bars: selections, MGSM of checkpoints/base and of the Table 1 configs (best_of soup and
# swap + default_swap); swap_grid: the layer_swap configs' MGSM; heatmap: base + selections (math, languages);
# config_used: the whole config (the report's record of it), so every config edit reruns it.
REPORT_PAGES = {"tables", "table_pages"}


def merge_jobs(cfg: str) -> set[str]:
    return {f"merge_recipes[cfg={cfg},lang=toy_swh]", f"evaluate_merges[cfg={cfg},lang=toy_swh]"}


SOUPSWAP = {"soup_then_swap_recipes[lang=toy_swh]", "evaluate_soup_then_swap[lang=toy_swh]"}
# Table 2's extra MGSM languages of the toy_swh merges (English; micro.yaml's MGSM languages are en + toy_swh): the
# list of the models it reads (table2_models: the winners, chosen on the toy_swh merge evaluations) and their
# evaluation; reruns when a Table 2 merge config, a toy_swh merge or the merge evaluation code changes.
TABLE2 = {"table2_models", "evaluate_table2[lang=en]"}
# Table 5's evaluations of a run's selected checkpoints (rules/select.smk: evaluate_checkpoints_other), grouped
# layout: the benchmarks selection does not read (part `other`) and, for a language run, the languages of the
# selection benchmarks that selection does not read (English MGSM and Belebele, part `other_en`). Joint runs: none.
TABLE5 = {"math_1": ["other"], "toy_swh_1": ["other", "other_en"], "joint_toy_swh_1": []}


def table5_jobs(run: str) -> set[str]:
    return {f"evaluate_checkpoints_other[part={part},run={run}]" for part in TABLE5[run]}


def run_snakemake(
    snakefile: Path, workdir: Path, configfile: Path, *args: str, env_extra: dict | None = None
) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", **(env_extra or {})}
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(snakefile),
        "--directory",
        str(workdir),
        "--configfile",
        str(configfile),
        *args,
    ]
    if "--cores" not in args:
        cmd += ["--cores", "1"]
    # cwd: the Snakefile's repository, since `python -m` puts the cwd first on sys.path
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, cwd=snakefile.parent)


def planned(snakefile: Path, workdir: Path, configfile: Path, env_extra: dict | None = None) -> set[str]:
    proc = run_snakemake(snakefile, workdir, configfile, "--dry-run", env_extra=env_extra)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # the manifest (rules/audit.smk) hashes every result, so it reruns after any job by design
    return {job.name for job in parse_dry_run(proc.stdout + "\n" + proc.stderr) if job.rule not in ("all", "manifest")}


def write_config(path: Path, edit) -> Path:
    config = yaml.safe_load(MICRO.read_text())
    edit(config)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def same_meaning(path: Path, source: Path = MICRO) -> Path:
    """micro.yaml (or `source`) rewritten without changing what it means: every mapping's keys in reverse order at
    every level, every schema default written out, numbers re-spelled by the YAML dumper (1.0e-3 -> 0.001), comments
    gone."""
    from layerswap.config import validate_config

    def reverse(value):
        if isinstance(value, dict):
            return {k: reverse(value[k]) for k in reversed(list(value))}
        return [reverse(v) for v in value] if isinstance(value, list) else value

    config = validate_config(yaml.safe_load(source.read_text()))  # fills the defaults in place
    path.write_text(yaml.safe_dump(reverse(config), sort_keys=False))
    assert path.read_text() != source.read_text()
    return path


def set_in(keys: list, value):
    def edit(config):
        node = config
        for k in keys[:-1]:
            node = node[k]
        node[keys[-1]] = value

    return edit


def add_grid_point(config):
    config["merges"]["configs"]["swap_b2u0"] = {
        "method": "layer_swap",
        "bottom": 2,
        "top": 0,
        "transition_bottom": 0,
        "transition_top": 0,
    }
    config["merges"]["best_of"]["layer_swap"].append("swap_b2u0")


def single(edit=None):
    def both(config):
        config["evaluation"]["tasks_per_job"] = "single"
        if edit:
            edit(config)

    return both


def to_single_task_jobs(workdir: Path, configfile: Path) -> None:
    """Convert a finished grouped-mode workdir to single mode. The evaluation files have the same paths in both
    modes; the per-benchmark checkpoint indexes are split from the grouped ones. Written by hand, they have no
    provenance record, so the workflow refuses to run until `--touch --forcerun` records them as this config's
    (layerswap/audit/provenance.py); without a record Snakemake could not see a params change either. The jobs the
    MMLU edit must rerun (MMLU on each run's checkpoints) really run once here; then --touch marks the rest done."""
    written, layout = [], Layout()
    for run_dir in (workdir / layout.checkpoint_index("x")).parents[1].iterdir():
        indexes = (layout.checkpoint_index(run_dir.name), layout.checkpoint_index(run_dir.name, "*"))
        for path in sorted(p for i in indexes for p in workdir.glob(i)):
            part = json.loads(path.read_text())
            # grouped -> single: index.json -> index.<b>.json; index.other.json -> index.other_<b>.json;
            # index.other_<lang>.json -> index.other_<b>_<lang>.json
            name = path.name.removeprefix("index").removesuffix(".json").lstrip(".")
            for b in sorted({b for files in part["files"].values() for b in files}):
                single_name = b if not name else f"other_{b}" if name == "other" else f"other_{b}_{name[6:]}"
                files = {mid: {b: fs[b]} for mid, fs in part["files"].items()}
                keep = {f for fs in files.values() for f in fs.values()}
                index = {**part, "files": files, "sha256": {f: h for f, h in part["sha256"].items() if f in keep}}
                written.append(layout.checkpoint_index(run_dir.name, single_name))
                (workdir / written[-1]).write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")
    mmlu = [layout.checkpoint_index(r, "other_mmlu") for r in RUNS if TABLE5[r]]
    for args in (["--touch", "--forcerun", *written], ["--cores", "2", "--force", *mmlu], ["--touch"]):
        proc = run_snakemake(REPO / "Snakefile", workdir, configfile, *args)
        assert proc.returncode == 0, proc.stderr[-3000:]


def repo_copy(dest: Path) -> Path:
    """The repository's files (tracked and untracked, not ignored): another checkout of the same code."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\0")
    for rel in filter(None, listed):
        src = REPO / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


def repo_copy_with_merge_edit(dest: Path) -> Path:
    """The repository's files with a comment appended to the merge engine."""
    repo_copy(dest)
    methods = dest / "layerswap" / "merge" / "engine.py"
    methods.write_text(methods.read_text() + "\n# edited by test_staleness\n")
    return dest


@pytest.fixture(scope="module")
def plans(micro_run, tmp_path_factory) -> dict[str, set[str]]:
    work = micro_run.parent
    tmp = tmp_path_factory.mktemp("staleness")
    snakefile = REPO / "Snakefile"
    edits = {
        "nothing": MICRO,
        "same_meaning": same_meaning(tmp / "same_meaning.yaml"),
        "mgsm_size": write_config(tmp / "mgsm_size.yaml", set_in(["toy_world", "sizes", "mgsm"], 20)),
        "swap_bottom": write_config(
            tmp / "swap_bottom.yaml", set_in(["merges", "configs", "swap_default", "bottom"], 2)
        ),
        "grid_point": write_config(tmp / "grid_point.yaml", add_grid_point),
        "lr": write_config(tmp / "lr.yaml", set_in(["sft", "runs", "toy_swh_1", "lr"], 3.0e-3)),
        "mmlu_grouped": write_config(tmp / "mmlu.yaml", set_in(["evaluation", "tasks", "mmlu", "shots"], 1)),
        "on_no_pass": write_config(tmp / "on_no_pass.yaml", set_in(["selection", "on_no_pass"], "stop")),
        "heatmap_option": write_config(
            tmp / "heatmap.yaml", set_in(["analysis", "heatmap_thresholds", "language"], 2.0e-3)
        ),
    }
    jobs = {name: (snakefile, work, cfg, None) for name, cfg in edits.items()}
    # (7) the merge module's source edited, in a copy of the repository whose package comes first on sys.path
    # (command_hash fingerprints the imported package's files).
    copy_repo = repo_copy_with_merge_edit(tmp / "repo")
    jobs["merge_code"] = (copy_repo / "Snakefile", work, MICRO, {"PYTHONPATH": str(copy_repo)})
    # (5, single) one job per task: a copy of the workdir converted to that mode.
    single_cfg = write_config(tmp / "single.yaml", single())
    single_work = tmp / "single_work"
    shutil.copytree(work, single_work, symlinks=True, ignore=shutil.ignore_patterns("locks"))
    to_single_task_jobs(single_work, single_cfg)
    jobs["single_nothing"] = (snakefile, single_work, single_cfg, None)
    jobs["mmlu_single"] = (
        snakefile,
        single_work,
        write_config(tmp / "mmlu_single.yaml", single(set_in(["evaluation", "tasks", "mmlu", "shots"], 1))),
        None,
    )
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(planned, *args) for name, args in jobs.items()}
        return {name: f.result() for name, f in futures.items()}


def test_package_copy_is_the_one_fingerprinted(tmp_path):
    """Guard for (7): with PYTHONPATH set, `layerswap` resolves to the copy, not the editable install."""
    (tmp_path / "layerswap").mkdir()
    (tmp_path / "layerswap" / "__init__.py").write_text("")
    (tmp_path / "layerswap" / "fingerprint.py").write_text("print(__file__)")
    out = subprocess.run(
        [sys.executable, "-m", "layerswap.fingerprint"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
    )
    assert out.stdout.strip().startswith(str(tmp_path))


def test_nothing_changed_runs_nothing(plans):
    assert plans["nothing"] == set()
    assert plans["single_nothing"] == set()


def test_a_config_rewritten_with_the_same_meaning_runs_nothing(plans):
    """Params are canonical: key order, defaults written out or left out, number spelling and comments do not reach
    them (mapping keys sorted in every JSON param; languages and mix sources in a canonical order)."""
    assert plans["same_meaning"] == set()


def test_a_bigger_toy_evaluation_set_reruns_its_evaluations_not_pretraining_or_sft(plans):
    """One job per toy dataset, each with only its own size and languages: a bigger MGSM regenerates the MGSM files
    and reruns what reads them; no other dataset, no pretraining, no SFT mix, no SFT run."""
    planned = plans["mgsm_size"]
    assert {j for j in planned if j.startswith("toy_")} == {
        "toy_eval[dataset=mgsm_en]",
        "toy_eval[dataset=mgsm_toy_swh]",
    }
    assert not {j for j in planned if j.split("[")[0] in ("toy_base", "sft_mix", "sft")}, planned
    assert any(j.startswith("evaluate_") for j in planned)


def dry_run_commands(workdir: Path, configfile: Path) -> list[str]:
    """The shell command of every job a dry run from scratch plans (each config value a job uses is in its
    command, so equal commands mean a finished run would rerun nothing)."""
    from conftest import snakemake

    proc = snakemake(workdir, "-n", "-p", configfile=configfile)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return sorted(line.strip() for line in proc.stdout.splitlines() if "layerswap " in line)


def test_the_default_config_rewritten_gives_the_same_commands(tmp_path):
    """The embedded default has 4 toy languages (micro.yaml one): rewritten with the same meaning, its dry run from
    scratch gives every job the same shell command."""
    default = REPO / "config" / "config.yaml"
    as_written = dry_run_commands(tmp_path / "as_written", default)
    rewritten = dry_run_commands(tmp_path / "rewritten", same_meaning(tmp_path / "rewritten.yaml", default))
    assert len(as_written) > 100 and as_written == rewritten


def test_another_table2_language_adds_its_evaluations_and_changes_no_other_job(tmp_path):
    """analysis.table2_language only picks what Table 2 shows: on the default config, every job keeps its command
    except the tables, the list of Table 2's models, the record of the config and the manifest, and the evaluation of
    the methods only Table 2 shows (TIES: evaluated in the Table 2 language alone); the Table 2 language's extra MGSM
    languages are evaluation jobs of their own (evals/by_language/<lang>/table2_<language>.json) that replace the old
    ones.
    Table 2 needs the language's joint expert, so both configs carry a joint run for toy_jpn besides toy_swh's."""
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    runs = config["sft"]["runs"]
    for name in [r for r, spec in runs.items() if spec["expert"] == "joint_toy_swh"]:
        runs[name.replace("swh", "jpn")] = {**runs[name], "expert": "joint_toy_jpn"}
    default, edited = tmp_path / "table2_swh.yaml", tmp_path / "table2_jpn.yaml"
    default.write_text(yaml.safe_dump(config, sort_keys=False))
    config["analysis"]["table2_language"] = "toy_jpn"
    edited.write_text(yaml.safe_dump(config, sort_keys=False))
    before = set(dry_run_commands(tmp_path / "swh", default))
    after = set(dry_run_commands(tmp_path / "jpn", edited))

    def kind(command: str) -> str:
        by_language = Layout().language_evals("")  # the folder of every language's own evaluations
        if f"--index {by_language}" in command:
            return "table2 " + command.split(f"--index {by_language}")[1].split()[0]
        words = command.split()
        return " ".join(words[words.index("layerswap") + 1 :][:2])  # "<cmd> <first argument>"

    # TIES (a method only Table 2 shows) is evaluated in the Table 2 language alone: its merge evaluation job moves
    common = ["charts config-html", "manifest --root", "tables --selection-dir", "table2-models --selection-dir"]
    common += ["evaluate-merges --data-dir"] * len(config["merges"]["best_of"]["ties"])
    assert sorted(kind(c) for c in before - after) == sorted(
        common + [f"table2 {lang}/table2_toy_swh.json" for lang in ("en", "toy_ben", "toy_jpn", "toy_tel")]
    )
    assert sorted(kind(c) for c in after - before) == sorted(
        common + [f"table2 {lang}/table2_toy_jpn.json" for lang in ("en", "toy_ben", "toy_swh", "toy_tel")]
    )


def test_an_added_target_language_changes_only_what_spans_languages(tmp_path):
    """Adding a target language (toy_ben and its runs, to the default config without it) adds that language's jobs;
    of the jobs that exist, only those whose meaning spans every target language change their command: the
    tables and figures, the heatmap, the multi-language soups of soup-then-swap, and the config record. No SFT,
    checkpoint evaluation, selection or merge of another language."""
    default = REPO / "config" / "config.yaml"
    config = yaml.safe_load(default.read_text())
    config["languages"].remove("toy_ben")
    for run in [r for r, spec in config["sft"]["runs"].items() if spec["expert"].endswith("toy_ben")]:
        del config["sft"]["runs"][run]
    without = tmp_path / "without_ben.yaml"
    without.write_text(yaml.safe_dump(config, sort_keys=False))
    before = set(dry_run_commands(tmp_path / "without", without))
    after = set(dry_run_commands(tmp_path / "with", default))
    changed = sorted(" ".join(c.split()[c.split().index("layerswap") + 1 :][:2]) for c in before - after)
    assert changed == sorted(
        [
            "charts config-html",
            "charts swap-grid",
            "charts table1-bars",
            "heatmap --base",
            "manifest --root",
            "tables --selection-dir",
        ]
        + ["recipes --soup-then-swap"] * 3
    )
    assert any("--run toy_ben_1" in c for c in after - before)


def test_swap_config_edit_reruns_only_its_merges(plans):
    # swap_default is also the soup-then-swap config (Table 6) and the default swap (Table 1, the swap grid).
    assert plans["swap_bottom"] == merge_jobs("swap_default") | SOUPSWAP | TABLE2 | REPORT_PAGES | {
        "swap_grid",
        "table1_bars",
        "config_used",
    }


def test_new_grid_point_runs_only_its_jobs(plans):
    assert plans["grid_point"] == merge_jobs("swap_b2u0") | TABLE2 | REPORT_PAGES | {
        "swap_grid",
        "table1_bars",
        "config_used",
    }


def test_language_run_lr_reruns_that_language_only(plans):
    expected = {
        "sft[run=toy_swh_1]",
        "evaluate_checkpoints[run=toy_swh_1]",
        "evaluate_checkpoint_leaders[expert=toy_swh]",  # micro.yaml's MGSM constraint, on the leaders
        *table5_jobs("toy_swh_1"),
        "select[expert=toy_swh]",
    }
    expected |= {j for cfg in CONFIGS for j in merge_jobs(cfg)} | SOUPSWAP | TABLE2
    expected |= REPORT_PAGES | {"swap_grid", "table1_bars", "heatmap", "config_used"}
    assert plans["lr"] == expected


def test_on_no_pass_reruns_the_constrained_selection_not_its_evaluations(plans):
    """selection.on_no_pass changes which candidates are taken where too few pass, not which are evaluated: the
    language selection (the one with constraints) and what reads it rerun; no checkpoint or leaders evaluation, and
    not the math or joint selections (no constraints: on_no_pass is not in their params)."""
    expected = {"select[expert=toy_swh]", *table5_jobs("toy_swh_1")}
    expected |= {j for cfg in CONFIGS for j in merge_jobs(cfg)} | SOUPSWAP | TABLE2
    expected |= REPORT_PAGES | {"swap_grid", "table1_bars", "heatmap", "config_used"}
    assert plans["on_no_pass"] == expected


def test_task_selection_does_not_read_reruns_no_selection_or_merge(plans):
    # grouped: the jobs that evaluate MMLU (the base job, and per run the job of the tasks selection does not
    # read) and what reads them. micro.yaml constrains language experts on MGSM: the base's MGSM (evaluate_base_select)
    # and the language checkpoints' (index.json) are evaluated apart from MMLU, so table1_bars, which reads them,
    # does not rerun.
    assert plans["mmlu_grouped"] == {"evaluate_base", "config_used"} | REPORT_PAGES | {
        f"evaluate_checkpoints_other[part=other,run={r}]" for r in RUNS if TABLE5[r]
    }
    # single: only MMLU evaluations (Table 5's, on the selected checkpoints) and the tables that read them.
    assert plans["mmlu_single"] == {"evaluate_base[benchmark=mmlu]", "config_used"} | REPORT_PAGES | {
        f"evaluate_checkpoints_other[part=other_mmlu,run={r}]" for r in RUNS if TABLE5[r]
    }


def test_figure_option_reruns_only_that_figure(plans):
    assert plans["heatmap_option"] == {"heatmap", "config_used"}


def test_merge_code_edit_reruns_merges_and_aggregates(plans):
    # the merge engine (merge/engine.py) runs in merge evaluations, not in writing recipes: those stay
    evaluations = {f"evaluate_merges[cfg={cfg},lang=toy_swh]" for cfg in CONFIGS} | {
        "evaluate_soup_then_swap[lang=toy_swh]"
    }
    expected = evaluations | TABLE2
    assert plans["merge_code"] == expected | REPORT_PAGES | {"swap_grid", "table1_bars"}
