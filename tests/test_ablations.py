"""Ablations (config/ablations/*.yaml): expansion to merge configs, the dry-run DAG, and one real run on micro."""

from __future__ import annotations

import copy
import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import MICRO, REPO, snakemake
from test_report import Scripts, decode, js_value

from layerswap.command_params import parse
from layerswap.config import load_config
from layerswap.errors import UserError
from layerswap.report import ablation_table
from layerswap.workflow import ablations as abl
from layerswap.workflow.variants import scale

ABL_DIR = REPO / "config" / "ablations"


def _config(path: Path, depth: int | None = None, default: dict | None = None, enabled="all") -> dict:
    config = load_config(path)
    if depth is not None:
        config["base"]["num_layers"] = depth
    if default is not None:
        config["merges"]["configs"][config["merges"]["default_swap"]].update(default)
    config["ablations"] = enabled
    return config


def _layers(out: dict, name: str, config: dict) -> list:
    configs = config["merges"]["configs"]
    res = []
    for v in out[name]["variants"]:
        c = configs.get(v["config"]) if v["config"] else None
        if c is None:
            res.append(None)
        elif c.get("lang_layers") is not None:
            res.append(c["lang_layers"])
        else:
            res.append((c["bottom"], c["top"], c["transition_bottom"], c["transition_top"]))
    return res


def test_scaling_rule():
    assert [scale(v, 32, 32) for v in (0, 3, 5, 8)] == [0, 3, 5, 8]
    assert [scale(v, 8, 32) for v in (0, 1, 2, 3, 4, 5, 8)] == [0, 1, 1, 1, 1, 1, 2]
    assert scale(1, 4, 32) == 1  # a requested swap never vanishes


@pytest.mark.parametrize(
    "depth, default, count, location, zone",
    [
        (
            8,
            {"bottom": 2, "top": 1},
            [(0, 0, 0, 0), (1, 1, 0, 0), (1, 1, 0, 0), (2, 1, 0, 0)],
            [(2, 1, 0, 0), [2, 3, 4], [0, 4, 6], [1, 5, 7], [3, 6, 7], [0, 2, 4], [0, 6, 7]],
            [(2, 1, tb, tu) for tb in (0, 1, 2) for tu in (0, 1, 2)],
        ),
        (
            32,
            {"bottom": 5, "top": 2},
            [(0, 0, 0, 0), (3, 1, 0, 0), (5, 2, 0, 0), (8, 4, 0, 0)],
            [
                (5, 2, 0, 0),
                [12, 13, 14, 15, 16, 17, 18],
                [2, 6, 10, 16, 20, 24, 28],
                [3, 7, 11, 17, 21, 25, 29],
                [1, 8, 13, 16, 24, 28, 31],
                [2, 8, 18, 24, 25, 27, 31],
                [2, 3, 5, 11, 23, 26, 30],
            ],
            [(5, 2, tb, tu) for tb in (0, 1, 2) for tu in (0, 1, 2)],
        ),
    ],
)
def test_ablations_expand_to_exact_layers(depth, default, count, location, zone):
    config = _config(REPO / "config" / "config.yaml", depth, default)
    before = copy.deepcopy(config)
    out, added = abl.plan(config, ABL_DIR)
    assert config == before  # the config is not changed: the added merge configs come back beside it
    config = abl.with_merge_configs(config, added)
    assert set(out) == {path.stem for path in ABL_DIR.glob("*.yaml")}  # every file of the folder, nothing else
    assert _layers(out, "layer_count", config) == count
    assert _layers(out, "layer_location", config) == location
    assert _layers(out, "transition_zone", config) == zone
    configs = config["merges"]["configs"]
    assert all(configs[k] == v for k, v in before["merges"]["configs"].items())  # main configs untouched
    assert added and set(configs) - set(before["merges"]["configs"]) == set(added)
    assert all(k.startswith("abl_") for k in added)
    # the default swap (b, u, no transition) is reused, not duplicated
    assert out["transition_zone"]["variants"][0]["config"] == config["merges"]["default_swap"]


def test_infeasible_variants_are_skipped_rows_and_config_stays_valid():
    from layerswap.config import check, validate_config

    config = _config(MICRO)  # 4 layers, default b1 u1
    out, added = abl.plan(config, ABL_DIR)
    zone = out["transition_zone"]["variants"]
    assert len(zone) == 9
    skipped = [v["label"] for v in zone if v["skipped"]]
    assert skipped == ["b1 u1 tb1 tu2", "b1 u1 tb2 tu1", "b1 u1 tb2 tu2"]
    assert all("exceeds the 4 layers" in v["skipped"] for v in zone if v["skipped"])
    check(validate_config(abl.with_merge_configs(config, added)))


def test_bad_ablation_names_and_files(tmp_path):
    with pytest.raises(UserError, match="unknown ablation 'nope'"):
        abl.enabled("layer_count,nope", abl.available(ABL_DIR))
    assert abl.enabled("layer_count, transition_zone", abl.available(ABL_DIR)) == ["layer_count", "transition_zone"]
    assert abl.enabled(None, abl.available(ABL_DIR)) == abl.available(ABL_DIR)  # key absent: all
    assert abl.enabled([], abl.available(ABL_DIR)) == abl.enabled("", abl.available(ABL_DIR)) == []
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"variants": [{"kind": "diagonal"}]}))
    with pytest.raises(UserError, match="needs kind"):
        abl.load(bad)
    bad.write_text(yaml.safe_dump({"variants": [{"kind": "bottom_top", "bottom": 3, "scaled": True}]}))
    with pytest.raises(UserError, match="reference_depth"):
        abl.load(bad)
    bad.write_text(yaml.safe_dump({"plan": "density in {0.1, 0.3}", "variants": [{"kind": "middle"}]}))
    with pytest.raises(UserError, match="plan: must not contain {name}"):
        abl.load(bad)


def test_missing_ablations_dir_is_one_line(tmp_path):
    config = _config(MICRO, enabled="layer_count")
    with pytest.raises(UserError, match=r"^config key 'ablations_dir': .*nowhere is not a directory$"):
        abl.plan(config, tmp_path / "nowhere")
    assert abl.plan(_config(MICRO, enabled=[]), tmp_path / "nowhere") == ({}, {})
    with pytest.raises(UserError, match="config key 'ablations': unknown ablation 'layer_count'"):
        abl.plan(_config(MICRO, enabled="layer_count"), tmp_path)  # an empty folder has none


@pytest.mark.workflow
def test_each_ablation_is_a_target_by_its_name_alone(tmp_path):
    # no `ablations` key: every file's target exists; the key only picks what the `ablations` target builds
    for name in abl.available(ABL_DIR):
        proc = snakemake(tmp_path, "-n", f"ablation_{name}")
        assert proc.returncode == 0, (name, proc.stderr[-2000:])
        assert f"rule ablation_table_{name}:" in proc.stdout
    proc = snakemake(tmp_path, "-n", "ablations", "--config", "ablations=layer_count,lora")
    assert proc.returncode == 0, proc.stderr[-2000:]
    tables = set(re.findall(r"rule (ablation_table_\w+):", proc.stdout))
    assert tables == {"ablation_table_layer_count", "ablation_table_lora"}
    assert not (tmp_path / "results").exists()


def test_table_from_eval_files(tmp_path):
    from test_tables import ITEMS, write_eval

    evals = tmp_path / "evals"
    for cfg, score in (("c1", 0.25), ("c2", 0.5)):
        for i, pair in enumerate(("l1m1", "l1m2", "l2m1", "l2m2")):
            write_eval(evals, f"merge/{cfg}/toy_swh/{pair}", "mgsm", {"toy_swh": score + 0.1 * i})
    variants = [
        {"label": "one", "config": "c1", "layers": "b=1", "n_lang_layers": 1, "skipped": ""},
        {"label": "two", "config": "c2", "layers": "lang 1", "n_lang_layers": 1, "skipped": ""},
        {"label": "too big", "config": "", "layers": "", "n_lang_layers": None, "skipped": "no fit"},
    ]
    given = {
        "name": "t",
        "title": "T",
        "metrics": ["mgsm"],
        "variants": variants,
        "languages": ["toy_swh"],
        "top_k": 2,
        "world": "toy",
    }
    params = parse(ablation_table.Params, json.dumps(given))
    rows = ablation_table.records(evals, params)
    assert [r["mgsm_avg"] for r in rows[:2]] == [40.0, 65.0] and [r["mgsm_max"] for r in rows[:2]] == [55.0, 80.0]
    assert rows[2]["mgsm_avg"] is None and "no fit" in rows[2]["note"]
    # intervals: around the value; avg (pairs 25..55% apart, pairs and items resampled) wider than max (items only)
    one = rows[0]
    assert one["mgsm_n"] == ITEMS and rows[2]["mgsm_n"] is None
    assert one["mgsm_avg_lo"] < 40.0 < one["mgsm_avg_hi"] and one["mgsm_max_lo"] < 55.0 < one["mgsm_max_hi"]
    assert one["mgsm_avg_hi"] - one["mgsm_avg_lo"] > one["mgsm_max_hi"] - one["mgsm_max_lo"]
    assert ablation_table.records(evals, params) == rows  # seeded
    reseeded = parse(ablation_table.Params, json.dumps({**given, "seed": 1}))
    assert ablation_table.records(evals, reseeded)[0]["mgsm_avg_lo"] != one["mgsm_avg_lo"]
    md = ablation_table.markdown(pd.DataFrame.from_records(rows, columns=ablation_table.COLUMNS), params)
    assert "TOY WORLD" in md and f"n per model and language: mgsm {ITEMS} items." in md
    grid = [[c.strip() for c in line.strip("|").split("|")] for line in md.splitlines() if line.startswith("| ")]
    assert grid[0] == ["variant", "layers", "mgsm_avg", "mgsm_max", "note"]  # the paper tables' renderer's grid
    assert grid[1] == [
        "one",
        "b=1",
        f"40.0 [{one['mgsm_avg_lo']:.1f}, {one['mgsm_avg_hi']:.1f}]",
        f"55.0 [{one['mgsm_max_lo']:.1f}, {one['mgsm_max_hi']:.1f}]",
        "",
    ]
    assert grid[3][:4] == ["too big", "", "", ""] and "no fit" in grid[3][4]


def _enabled_config(tmp_path: Path, names) -> Path:
    config = yaml.safe_load(MICRO.read_text())
    config["ablations"] = names
    path = tmp_path / "micro_ablations.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _jobs(stdout: str) -> dict[str, int]:
    if "Job stats:" not in stdout:
        return {}
    table = stdout.split("Job stats:")[1].split("total")[0]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)\s*$", table, re.M)}


@pytest.mark.workflow
def test_dry_run_lists_only_the_ablation_jobs(micro_run, tmp_path):
    # main jobs already stale without the ablation (code edited since the fixture ran, in a shared checkout)
    stale = set(_jobs(snakemake(micro_run.parent, "-n").stdout)) - {"all"}
    proc = snakemake(
        micro_run.parent, "-n", "ablation_layer_count", configfile=_enabled_config(tmp_path, ["layer_count"])
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    # micro (4 layers): (0,0) is new; (3,1), (5,2), (8,4) all scale to b1 u1 = swap_default, already evaluated
    jobs = _jobs(proc.stdout)
    assert not stale, f"main DAG stale before enabling the ablation: {sorted(stale)}"
    assert jobs == {
        "merge_recipes": 1,
        "evaluate_merges": 1,
        "ablation_table_layer_count": 1,
        "ablation_layer_count": 1,
    }
    assert "abl_b0u0t00" in proc.stdout


@pytest.mark.workflow
def test_layer_count_runs_on_micro(micro_run, tmp_path):
    # on a copy: the shared micro run stays as the other tests expect it
    work = tmp_path / "work"
    shutil.copytree(micro_run.parent, work, symlinks=True, ignore=shutil.ignore_patterns("locks"))
    proc = snakemake(work, "ablation_layer_count", configfile=_enabled_config(tmp_path, "layer_count"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = work / "results" / "ablations" / "layer_count"
    table = pd.read_csv(out / "table.csv")
    assert len(table) == 4 and list(table["config"]) == ["abl_b0u0t00"] + ["swap_default"] * 3
    numbers = table[["mgsm_avg", "mgsm_max"]].to_numpy().ravel()
    assert ((numbers >= 0) & (numbers <= 100)).all()
    assert (table["mgsm_max"] >= table["mgsm_avg"]).all()
    assert "TOY WORLD" in (out / "table.md").read_text()
    assert (out / "figure.svg").read_text().lstrip().startswith("<svg") and (out / "figure.png").stat().st_size
    # the report of `all` and `ablations` holds the table and the figure under "Ablations"
    report = tmp_path / "report.html"
    proc = snakemake(
        work, "all", "ablations", "--report", str(report), configfile=_enabled_config(tmp_path, "layer_count")
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    parser = Scripts()
    parser.feed(report.read_text(encoding="utf-8"))
    results = {
        Path(k).as_posix().split("results/", 1)[-1]: v
        for k, v in js_value(parser.scripts["results"], "results").items()
    }
    assert "Ablations" in js_value(parser.scripts["categories"], "categories")
    for file in ("table.csv", "table.md", "figure.svg", "figure.png"):
        assert decode(results[f"ablations/layer_count/{file}"]["data_uri"]) == (out / file).read_bytes(), file
    # adding one grid point (in a copy of the ablation files) adds only its merge and evaluation, and the table
    abl_dir = tmp_path / "my_ablations"
    shutil.copytree(ABL_DIR, abl_dir)
    spec = yaml.safe_load((abl_dir / "layer_count.yaml").read_text())
    spec["variants"].append({"kind": "bottom_top", "bottom": 2, "top": 0, "label": "b2 u0"})
    (abl_dir / "layer_count.yaml").write_text(yaml.safe_dump(spec))
    proc = snakemake(
        work,
        "-n",
        "ablation_layer_count",
        "--config",
        f"ablations_dir={abl_dir}",
        configfile=_enabled_config(tmp_path, "layer_count"),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _jobs(proc.stdout) == {
        "merge_recipes": 1,
        "evaluate_merges": 1,
        "ablation_table_layer_count": 1,
        "ablation_layer_count": 1,
    }, proc.stdout[-3000:]
    assert "abl_b2u0t00" in proc.stdout
    # the unchanged copy is up to date: the ablation's files reach its jobs as params, not their location
    shutil.copy(ABL_DIR / "layer_count.yaml", abl_dir / "layer_count.yaml")
    proc = snakemake(
        work,
        "-n",
        "ablation_layer_count",
        "--config",
        f"ablations_dir={abl_dir}",
        configfile=_enabled_config(tmp_path, "layer_count"),
    )
    assert proc.returncode == 0 and not _jobs(proc.stdout), proc.stdout[-3000:]
    # with the ablation enabled the main DAG reruns nothing more than without it, but the config record
    stale = set(_jobs(snakemake(work, "-n").stdout))
    proc = snakemake(work, "-n", configfile=_enabled_config(tmp_path, "layer_count"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    # the config record and the manifest (which hashes every result) are the only extra reruns
    assert set(_jobs(proc.stdout)) <= stale | {"config_used", "manifest", "all"}, proc.stdout[-3000:]


# ---------------------------------------------------------------------------------------------------------------
# expert-set ablations (divergence, lora, different_base): extra runs outside sft.runs


def _write(tmp_path: Path, name: str, spec: dict) -> Path:
    d = tmp_path / "abl"
    d.mkdir(exist_ok=True)
    (d / f"{name}.yaml").write_text(yaml.safe_dump(spec))
    return d


def test_expert_set_ablations_add_runs_outside_sft_runs():
    config = _config(MICRO, enabled="divergence,lora,different_base")
    before = copy.deepcopy(config)
    out, added = abl.plan(config, ABL_DIR)
    # the config is not changed; the expert-set ablations' runs and merges are in their specs, the merge-only
    # ablations' abl_* configs in `added`
    assert config == before
    assert added and all(name.startswith("abl_") for name in added)
    div = out["divergence"]
    assert sorted(div["runs"]) == sorted(
        f"ax_divergence_{s}_{r}" for s in ("lr2", "lr4", "long2") for r in ("math_1", "toy_swh_1")
    )  # joint runs are not copied
    assert div["runs"]["ax_divergence_lr4_math_1"]["lr"] == pytest.approx(4e-3)
    assert div["runs"]["ax_divergence_long2_toy_swh_1"]["num_samples"] == 64
    assert div["runs"]["ax_divergence_long2_toy_swh_1"]["scheduler"] == "wsd"  # the run's own settings kept
    assert [v["label"] for v in div["variants"][:2]] == ["lr x2 / default swap", "lr x2 / default swap, tb=tu=1"]
    assert div["merges"]["ax_divergence_lr2_swap_default"]["merge"]["bottom"] == 1
    assert div["merges"]["ax_divergence_lr2_abl_b1u1t11"]["merge"]["transition_top"] == 1
    assert div["selections"] == {"lr2": ["math", "toy_swh"], "lr4": ["math", "toy_swh"], "long2": ["math", "toy_swh"]}
    lora = out["lora"]["runs"]["ax_lora_lora_math_1"]
    assert lora["peft_method"] == "lora" and lora["lora"]["r"] == 16
    db = out["different_base"]
    assert db["bases"] == {"b2": {"model": config["base"]["toy_model"], "seed": 1}}
    assert set(db["run_base"].values()) == {"b2"}
    (m,) = db["merges"].values()
    assert m["lang_from"] == "main" and m["task_from"] == "set" and m["merge"]["allow_different_base"] is True


@pytest.mark.parametrize(
    "method, why",
    [("adapterfusion", "AdapterFusion needs a fusion layer"), ("prefix", "prefix tuning adds virtual tokens")],
)
def test_unsupported_peft_in_an_ablation_is_refused_in_one_line(tmp_path, method, why):
    spec = {
        "variants": [{"kind": "bottom_top"}],
        "expert_sets": [{"name": "p", "experts": ["math"], "lang_from": "main", "set": {"peft_method": method}}],
    }
    d = _write(tmp_path, "peft", spec)
    config = _config(MICRO, enabled="peft")
    with pytest.raises(UserError) as err:
        abl.plan(config, d)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(
        "ablation peft: expert_sets: config key 'sft.runs.ax_peft_p_math_1.peft_method'"
    )
    assert f"'{method}' is not supported ({why}" in msg and "allowed: full, lora" in msg


def test_second_base_of_another_shape_is_refused_naming_tensor_and_shapes(tmp_path):
    spec = yaml.safe_load((ABL_DIR / "different_base.yaml").read_text())
    spec["bases"]["b2"]["toy"]["model"] = {"hidden_size": 48}
    d = _write(tmp_path, "different_base", spec)
    with pytest.raises(
        UserError,
        match=r"bases\.b2: tensor lm_head\.weight has shape \[64, 48\] in this base but "
        r"\[64, 32\] in the main base",
    ):
        abl.plan(_config(MICRO, enabled="different_base"), d)


def test_experts_of_different_bases_need_the_opt_in():
    from types import SimpleNamespace

    from layerswap.merge.engine import check_bases

    fa, fb = "a" * 64, "b" * 64
    root = SimpleNamespace(
        experts=[SimpleNamespace(base_fingerprint=fa, path="lang"), SimpleNamespace(base_fingerprint=fb, path="math")]
    )
    with pytest.raises(UserError, match=f"base_sha256 {fb[:12]} differs from {fa[:12]} in lang .*allow_different_base"):
        check_bases(root, False)
    assert check_bases(root, True) is None


@pytest.mark.workflow
def test_expert_set_dry_runs_leave_the_main_selection_alone(micro_run, tmp_path):
    work = tmp_path / "work"
    shutil.copytree(micro_run.parent, work, symlinks=True, ignore=shutil.ignore_patterns("locks"))
    proc = snakemake(work, "-n", "ablation_divergence", configfile=_enabled_config(tmp_path, "divergence"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _jobs(proc.stdout) == {
        "sft": 6,
        "evaluate_checkpoints": 6,
        "ablation_evaluate_leaders": 3,  # the language selections' MGSM constraint, on their leaders
        "ablation_select": 6,
        "ablation_merge_recipes": 6,
        "evaluate_merges": 6,
        "evaluate_ablation_merges": 24,
        "ablation_table_divergence": 1,
        "ablation_divergence": 1,
    }
    assert "results/ablations/divergence/selection/lr4/toy_swh.json" in proc.stdout
    proc = snakemake(work, "-n", "ablation_different_base", configfile=_enabled_config(tmp_path, "different_base"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    # the base-B runs train from the second base; the swap reads the main language selection (already built); the
    # selection constraints of the base-B language expert (micro.yaml: MGSM) compare with base B, evaluated for it
    assert _jobs(proc.stdout) == {
        "ablation_toy_base": 1,
        "ablation_sft": 2,
        "evaluate_checkpoints": 2,
        "ablation_evaluate_leaders": 1,
        "ablation_select": 2,
        "ablation_merge_recipes": 1,
        "evaluate_merges": 1,
        "evaluate_ablation_merges": 2,
        "ablation_table_different_base": 1,
        "ablation_different_base": 1,
        "evaluate_ablation_base": 1,
    }
    assert "--base results/ablations/different_base/bases/b2 " in proc.stdout
    b2 = "--base-evals results/evals/ablations/different_base/bases/b2/mgsm.json"
    assert f"{b2} --expert toy_swh" in proc.stdout  # the leaders' constraint evaluations
    assert f"{b2} --leaders results/evals/leaders/ablations/different_base/b2/toy_swh.json --expert" in proc.stdout
    # enabling them changes no main job
    stale = set(_jobs(snakemake(work, "-n").stdout))
    proc = snakemake(work, "-n", configfile=_enabled_config(tmp_path, "divergence,lora,different_base"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert set(_jobs(proc.stdout)) <= stale | {"config_used", "manifest", "all"}, proc.stdout[-3000:]


def test_method_variants_sweep_the_params_of_any_registered_method(tmp_path):
    """Kind `method` (layerswap/workflow/sweeps.py): one merge config per combination, named after the params that
    differ from the method's defaults; an equal config of merges.configs is reused."""
    spec_file = tmp_path / "sweep.yaml"
    spec_file.write_text(
        yaml.safe_dump(
            {
                "title": "sweep",
                "variants": [
                    {"kind": "method", "method": "ties", "density": [0.2, 0.5]},
                    {"kind": "method", "method": "dare", "density": 0.3, "seed": [0, 1], "label": "DARE 0.3"},
                    {"kind": "method", "method": "layer_swap", "bottom": [1, 9], "top": 0},
                ],
            }
        )
    )
    config = _config(MICRO)
    spec = abl.load(spec_file)
    variants = abl.expand(spec, config)
    added = abl.assign_names(variants, dict(config["merges"]["configs"]))
    rows = [(v["label"], v["config"], bool(v["skipped"])) for v in variants]
    assert rows == [
        ("ties density=0.2", "abl_ties_density0p2", False),
        ("ties density=0.5", "ties_d05", False),
        ("DARE 0.3 seed=0", "abl_dare_density0p3", False),
        ("DARE 0.3 seed=1", "abl_dare_density0p3_seed1", False),
        ("layer_swap bottom=1 top=0", "abl_b1u0t00", False),
        ("layer_swap bottom=9 top=0", "", True),
    ]
    assert added["abl_ties_density0p2"] == {"method": "ties", "density": 0.2, "lam": 1.0, "allow_different_base": False}
    assert added["abl_dare_density0p3_seed1"]["seed"] == 1 and "exceeds the 4 layers" in variants[-1]["skipped"]
    assert abl.describe(added["abl_ties_density0p2"], 4) == "" and abl.describe(added["abl_b1u0t00"], 4)


@pytest.mark.parametrize(
    "variant, message",
    [
        ({"kind": "method", "method": "slerp"}, "kind method needs method; allowed: layer_swap, soup, ties"),
        ({"kind": "method", "method": "ties", "density": 0.5, "bottom": 2}, "unknown key 'bottom' for kind method"),
        ({"kind": "method", "method": "ties", "density": [0.5, 2]}, r"variants\[0\]: ties density=2: 2 is greater"),
        ({"kind": "method", "method": "dare"}, r"variants\[0\]: dare: 'density' is a required property"),
    ],
)
def test_bad_method_variants_name_the_file_and_variant(tmp_path, variant, message):
    spec_file = tmp_path / "bad.yaml"
    spec_file.write_text(yaml.safe_dump({"variants": [variant]}))
    with pytest.raises(UserError, match=message):
        abl.expand(abl.load(spec_file), _config(MICRO))


@pytest.mark.workflow
def test_the_dare_and_ties_sweeps_run_through_the_generic_merge_jobs(tmp_path):
    proc = snakemake(tmp_path, "-n", "ablation_dare_density", "ablation_ties_density")
    assert proc.returncode == 0, proc.stderr[-2000:]
    for cfg in ("abl_dare_density0p1", "abl_dare_ties_density0p9", "abl_ties_density0p2"):
        for rule in ("merge_recipes", "evaluate_merges"):
            job = rf"rule {rule}:\n(?:    .*\n)*?    wildcards: cfg={cfg}, lang=toy_swh"
            assert re.search(job, proc.stdout), (rule, cfg)
    assert "cfg=ties_d05, lang=toy_swh" in proc.stdout  # the sweep's density 0.5 is micro.yaml's ties_d05


def test_counts_and_seeds_of_an_ablation_file_are_bounded(tmp_path):
    """As the config's: a seed that numpy cannot take and a draw count that would plan a billion merge configs are
    refused in one line naming the file's key and the limit."""
    spec = {"variants": [{"kind": "random", "seed": 0, "draws": 10**9}]}
    spec_file = tmp_path / "draws.yaml"
    spec_file.write_text(yaml.safe_dump(spec))
    with pytest.raises(UserError, match=r"variants\[0\]\.draws: must be from 1 to 1000"):
        abl.expand(abl.load(spec_file), _config(MICRO))
    base = {"variants": [{"kind": "bottom_top"}], "bases": {"b2": {"toy": {"seed": 10**29}}}}
    base["expert_sets"] = [{"name": "b2", "experts": ["math", "languages"], "base": "b2", "lang_from": "main"}]
    d = _write(tmp_path, "seeds", base)
    with pytest.raises(UserError, match=r"bases\.b2\.toy\.seed: expected an integer from 0 to 4294967295"):
        abl.plan(_config(MICRO, enabled="seeds"), d)
