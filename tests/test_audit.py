"""Reproducibility audits: the manifest of a micro run, `layerswap audit` drift and cell tracing, no secrets in
manifests or logs, and determinism (two micro runs from scratch give byte-identical tables and merged weights)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from layerswap.cli import main
from layerswap.contracts import checkpoint_model_id, merge_model_id
from layerswap.fingerprint import file_sha256 as sha256_file
from layerswap.layout import LOGS, STORE, Layout, R
from layerswap.machine import cpu_info, hardware

try:
    from conftest import MICRO, REPO, snakemake
    from test_staleness import repo_copy, run_snakemake
except ImportError:  # tests/ made a package
    from tests.conftest import MICRO, REPO, snakemake
    from tests.test_staleness import repo_copy, run_snakemake

FAKE_TOKEN = "hf_FAKEtokenForTheAuditTest0123456789"
L = Layout()


def manifest_of(results: Path) -> dict:
    return json.loads(Path(Layout.at(results).manifest()).read_text())


@pytest.fixture
def run_copy(micro_run, tmp_path, monkeypatch) -> Path:
    """A copy of the micro run's workdir (results + Snakemake records) as the current directory."""
    work = tmp_path / "work"
    shutil.copytree(micro_run.parent / R, work / R, symlinks=True)
    shutil.copytree(micro_run.parent / ".snakemake" / "metadata", work / ".snakemake" / "metadata")
    monkeypatch.chdir(work)
    return work


def test_manifest_covers_every_result_with_its_job(micro_run):
    m = manifest_of(micro_run)
    files = m["files"]
    on_disk = {str(p.relative_to(micro_run.parent)) for p in micro_run.rglob("*") if p.is_file()}
    # logs/ and the evaluation store (a cache whose files are copied into the results) are not the run's results
    expected = {p for p in on_disk if Path(p).parts[1] not in (LOGS, ".snakemake", STORE)} - {L.manifest()}
    assert any(p.startswith(L.store() + "/") for p in on_disk)
    assert not m["foreign"]
    # the training logs (wall-clock timings) are listed apart from the results
    assert set(m["run_logs"]) == {f"{L.base()}.work/log.jsonl"} | {
        f"{L.run_dir(r)}/log.jsonl" for r in ("math_1", "toy_swh_1", "joint_toy_swh_1")
    }
    assert set(files) == expected - set(m["run_logs"])
    for path in [L.table("table1", "csv"), L.eval_file("base", "mgsm"), L.selection("math")]:
        assert files[path]["sha256"] == sha256_file(micro_run.parent / path)
        assert files[path]["size"] == (micro_run.parent / path).stat().st_size
    # rule and params of each file, from Snakemake's own records; undeclared files point to their directory's job
    table = m["jobs"][files[L.table("table1", "csv")]["job"]]
    assert table["rule"] == "tables" and "--params-json" in table["shellcmd"]
    assert table["inputs"][L.selection("math")] == files[L.selection("math")]["sha256"]
    weights = [p for p in files if p.startswith(L.checkpoint("math_1", "s")) and p.endswith("model.safetensors")]
    assert weights and all(m["jobs"][files[w]["job"]]["rule"] == "sft" for w in weights)
    # hashed from the bytes on disk (issue 49: no recorded or cached hash), equal to what sft recorded
    assert all(files[w]["sha256"] == sha256_file(micro_run.parent / w) for w in weights)
    recorded = json.loads((micro_run.parent / L.checkpoints_record("math_1")).read_text())["checkpoints"]
    assert {files[f"{c['path']}/model.safetensors"]["sha256"] for c in recorded} == {c["sha256"] for c in recorded}
    # an undeclared evaluation file and its sample log: the job of the index that lists it (not of its neighbour)
    evaluation = Path(L.eval_file(checkpoint_model_id("math_1", "s0000016"), "mmlu"))
    for path in (evaluation, evaluation.with_name("mmlu.samples.jsonl")):
        assert files[str(path)]["job"] == f"evaluate_checkpoints_other:{L.checkpoint_index('math_1', 'other')}"
    assert all(e["job"] for e in files.values())
    # environment of the run
    assert m["software"]["packages"]["torch"] and m["software"]["packages"]["snakemake"].startswith("9.")
    assert {"lm-eval", "transformers", "accelerate", "safetensors", "peft"} <= set(m["software"]["packages"])
    assert m["hardware"]["cpu_count"] >= 1 and isinstance(m["hardware"]["gpus"], list)
    assert m["hardware"] == {**m["hardware"], **hardware()}  # cpu model, flags and torch's kernel level recorded
    assert {"cpu_model", "cpu_flags", "cpu_source", "torch_cpu_capability"} <= set(m["hardware"])
    assert m["seeds"]["seed"] == 0 and m["seeds"]["toy_world_seed"] == 1234
    assert set(m["workflow"]) >= {"commit", "dirty"}


def test_audit_clean_then_every_drift(run_copy, capsys):
    assert main(["audit", "--manifest", L.manifest()]) == 0
    assert "match" in capsys.readouterr().out
    (run_copy / L.table("table1", "csv")).write_text("tampered\n")
    (run_copy / L.eval_file("base", "mgsm")).unlink()
    (run_copy / L.table("extra", "csv")).write_text("x\n")
    (run_copy / L.log("new")).write_text("logs are not audited\n")
    assert main(["audit", "--manifest", L.manifest()]) == 1
    captured = capsys.readouterr()
    lines = captured.out.strip().splitlines()
    assert any(l.startswith("changed: results/tables/table1.csv") for l in lines)
    assert "missing: results/evals/base/mgsm.json" in lines
    assert "extra: results/tables/extra.csv" in lines
    assert len(lines) == 3, lines
    assert captured.err.strip() == "layerswap audit: error: 3 drift(s) against results/manifest.json"


def test_audit_reports_another_machine_first_and_informational(run_copy, capsys, monkeypatch):
    """A manifest written on another machine: one `hardware:` line per difference, before any drift line; the
    hardware difference alone does not fail the audit, and only file drift counts in the error."""
    assert main(["audit", "--manifest", L.manifest()]) == 0
    assert "hardware" not in capsys.readouterr().out  # same machine: no hardware line
    path = run_copy / L.manifest()
    m = json.loads(path.read_text())
    m["hardware"] |= {
        "cpu_model": "Intel(R) Xeon(R) Platinum 8480+",
        "torch_cpu_capability": "AVX512",
        "cpu_flags": ["amx_tile", "avx", "avx2", "avx512bw", "avx512f", "fma", "hypervisor", "sse2"],
        "gpus": ["NVIDIA H100 80GB HBM3"],
        "cpu_count": 64,
    }
    path.write_text(json.dumps(m))
    here = {
        **m["hardware"],
        "cpu_model": "AMD EPYC",
        "torch_cpu_capability": "AVX2",
        "gpus": [],
        "cpu_count": 2,
        "cpu_flags": ["avx", "avx2", "fma", "sse2", "sse4a"],
    }  # this machine, made explicit
    monkeypatch.setattr("layerswap.audit.check.hardware", lambda: here)
    expected = [
        "hardware: cpu model: manifest Intel(R) Xeon(R) Platinum 8480+; here AMD EPYC",
        "hardware: cpu flags: 4 (avx512f, amx_tile, avx512bw, hypervisor) only in manifest; 1 (sse4a) only here",
        "hardware: torch CPU kernels: manifest AVX512; here AVX2",
        "hardware: gpus: manifest NVIDIA H100 80GB HBM3; here none",
        "hardware: cpu_count: manifest 64; here 2",
    ]
    assert main(["audit", "--manifest", L.manifest()]) == 0  # informational: a clean audit stays clean
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[:5] == expected
    assert lines[5].startswith("hardware: the lines above are informational, not drift")
    assert lines[6].startswith("audit:") and len(lines) == 7
    (run_copy / L.table("table1", "csv")).write_text("tampered\n")
    assert main(["audit", "--manifest", L.manifest()]) == 1
    captured = capsys.readouterr()
    lines = captured.out.strip().splitlines()
    assert lines[:5] == expected and lines[6].startswith("changed: results/tables/table1.csv") and len(lines) == 7
    assert captured.err.strip() == "layerswap audit: error: 1 drift(s) against results/manifest.json"


def test_cpu_info_from_proc_cpuinfo_or_platform(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text(
        "processor\t: 0\nmodel name\t: Some CPU 9000\nflags\t\t: sse2 avx2 fma avx2\n\n"
        "processor\t: 1\nmodel name\t: Other\nflags\t\t: avx512f\n"
    )
    assert cpu_info(info) == {
        "cpu_model": "Some CPU 9000",
        "cpu_flags": ["avx2", "fma", "sse2"],
        "cpu_source": str(info),
    }
    info.write_text("processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd sve\nCPU part\t: 0xd40\n")
    assert cpu_info(info)["cpu_flags"] == ["asimd", "fp", "sve"]  # ARM Linux
    missing = cpu_info(tmp_path / "none")
    assert missing["cpu_flags"] is None and missing["cpu_source"].startswith("platform (no readable")


def test_trace_one_cell_to_evaluations_recipes_and_checkpoints(run_copy, capsys):
    args = [
        "audit",
        "--manifest",
        L.manifest(),
        "--json",
        "--trace",
        L.table("table1", "csv"),
        "toy-Swahili (synthetic) avg",
        "layer swap (default config, 4 pairs)",
    ]
    assert main(args) == 0
    t = json.loads(capsys.readouterr().out)
    pairs = ["l1m1", "l1m2", "l2m1", "l2m2"]
    assert [e["path"] for e in t["evaluations"]] == [
        f"results/evals/merge/swap_default/toy_swh/{p}/mgsm.json" for p in pairs
    ]
    assert [e["path"] for e in t["recipes"]] == [f"results/merges/swap_default/toy_swh/{p}.json" for p in pairs]
    assert all(e["status"] == "ok" for e in t["evaluations"] + t["recipes"] + t["samples"])
    assert {c["path"] for c in t["checkpoints"]} >= {"results/base"}
    assert any(c["path"].startswith("results/experts/math_") for c in t["checkpoints"])
    # the value is what the table shows, recomputed from those files
    scores = [json.loads(Path(e["path"]).read_text())["scores"]["toy_swh"] for e in t["evaluations"]]
    assert t["value"] == pytest.approx(100 * sum(scores) / len(scores))
    # a changed evaluation file shows up in the trace; a row that does not exist is one clear line
    p = Path(t["evaluations"][0]["path"])
    p.write_text(p.read_text().replace('"benchmark"', '"benchmark" ', 1))
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["evaluations"][0]["status"] == "changed"
    assert main(["audit", "--trace", L.table("table5", "csv"), "MGSM (exact match)/English", "math"]) == 0
    assert "results/evals/ckpt/math_1/" in capsys.readouterr().out
    # Table 2's English row of a merge: the score is in the file of that language alone, recipes still found
    assert (
        main(
            [
                "audit",
                "--json",
                "--trace",
                L.table("table2", "csv"),
                "English avg",
                "layer swap (default config, 4 pairs)",
            ]
        )
        == 0
    )
    t2 = json.loads(capsys.readouterr().out)
    assert [e["path"] for e in t2["evaluations"]] == [
        f"results/evals/by_language/en/merge/swap_default/toy_swh/{p}/mgsm.json" for p in pairs
    ]
    assert all(e["status"] == "ok" for e in t2["evaluations"]) and len(t2["recipes"]) == 4
    assert main(["audit", "--trace", L.table("table1", "csv"), "nope", "base"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no row 'nope'" in err[0]


def test_manifest_writes_no_secret_and_tolerates_no_git(run_copy, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_TOKEN", FAKE_TOKEN)
    monkeypatch.setenv("MY_API_KEY", "sk-fake-0123456789")
    config = {"seed": 0, "hub": {"token": FAKE_TOKEN, "hf_token_file": "x"}, "storage": {"hf_home": "/hf"}}
    no_git = tmp_path / "not_a_checkout"
    no_git.mkdir()
    assert (
        main(
            [
                "manifest",
                "--root",
                L.root,
                "--out",
                L.manifest(),
                "--workflow-dir",
                str(no_git),
                "--config-json",
                json.dumps(config),
            ]
        )
        == 0
    )
    text = Path(L.manifest()).read_text()
    assert FAKE_TOKEN not in text and "sk-fake-0123456789" not in text
    m = json.loads(text)
    assert m["config"] == {"seed": 0, "hub": {}, "storage": {"hf_home": "/hf"}}
    assert not any("TOKEN" in k or "KEY" in k for k in m["environment"])
    assert m["workflow"]["commit"] is None and m["workflow"]["note"]
    assert main(["audit", "--manifest", L.manifest()]) == 0


def test_repair_prints_then_runs_what_rebuilds_the_drift(run_copy, tmp_path, capsys, monkeypatch):
    """Four faults of different kinds: a flipped byte in an expert's weights, a deleted selection, a truncated
    evaluation file, a deleted checkpoint evaluation (a file no rule declares). `audit --repair` names the job that
    rebuilds each and prints one command (changing nothing); with --run the rebuilt results match the old manifest."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    old = shutil.copy(run_copy / L.manifest(), tmp_path / "old_manifest.json")
    weights = run_copy / L.checkpoint("toy_swh_1", "s0000016") / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-100] ^= 1
    weights.write_bytes(bytes(data))
    (run_copy / L.selection("math")).unlink()
    evaluation = run_copy / L.eval_file(merge_model_id("ties_d05", "toy_swh", "l1m1"), "mgsm")
    evaluation.write_text(evaluation.read_text()[:50])
    (run_copy / L.eval_file(checkpoint_model_id("math_1", "s0000032"), "mmlu")).unlink()
    options = ["-s", str(REPO / "Snakefile"), "--configfile", str(MICRO), "--cores", "2"]
    assert main(["audit", "--repair", "--", *options]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[4:8] == [
        "repair: missing results/evals/ckpt/math_1/s0000032/mmlu.json: rule evaluate_checkpoints_other "
        "(results/evals/ckpt/math_1/index.other.json) wrote it",
        "repair: changed results/evals/merge/ties_d05/toy_swh/l1m1/mgsm.json: rule evaluate_merges writes it "
        "(the changed file is removed first)",
        "repair: changed results/experts/toy_swh_1/s0000016/model.safetensors: rule sft "
        "(results/experts/toy_swh_1/checkpoints.json) wrote it in the export results/experts/toy_swh_1/s0000016, "
        "which is removed first",
        "repair: missing results/selection/math.json: rule select writes it",
    ]
    assert out[-1].startswith(
        "rm results/evals/merge/ties_d05/toy_swh/l1m1/mgsm.json && rm -r results/experts/toy_swh_1/s0000016 && "
    )
    assert out[-1].endswith(
        " ".join(options) + " --forcerun results/evals/ckpt/math_1/index.other.json "
        "results/evals/merge/ties_d05/toy_swh/l1m1/mgsm.json "
        "results/experts/toy_swh_1/checkpoints.json results/selection/math.json"
    )
    assert weights.read_bytes() == bytes(data)  # printing changes nothing
    assert main(["audit", "--repair", "--run", "--", *options]) == 0
    assert main(["audit", "--manifest", str(old)]) == 0, capsys.readouterr().out[-3000:]


def test_another_checkout_of_the_same_code_reruns_nothing(micro_run, tmp_path):
    """No param holds a path of this machine: the finished results, run from another checkout of the same code (a
    colleague's clone, a copied results folder), are up to date, the manifest included."""
    work = tmp_path / "work"
    shutil.copytree(micro_run.parent, work, symlinks=True, ignore=shutil.ignore_patterns("locks"))
    clone = repo_copy(tmp_path / "clone")
    proc = run_snakemake(clone / "Snakefile", work, MICRO, "--dry-run")
    assert proc.returncode == 0 and "Nothing to be done" in proc.stdout + proc.stderr, proc.stdout[-3000:]


def test_bad_manifest_is_one_line(tmp_path, capsys):
    (tmp_path / "m.json").write_text("{not json")
    assert main(["audit", "--manifest", str(tmp_path / "m.json")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a JSON manifest" in err[0]
    assert main(["audit", "--manifest", str(tmp_path / "none.json")]) == 1
    assert "cannot read manifest" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------ determinism
# Files allowed to differ between two runs from scratch: wall-clock timings and throughput in training logs,
# and the trainer's resumable state (it records timings too). Everything else must be byte-identical.
NONDETERMINISTIC = ("/log.jsonl", "/trainer_state.json")


def _differing(a: dict, b: dict) -> list[str]:
    return sorted(p for p in set(a) | set(b) if (a.get(p) or {}).get("sha256") != (b.get(p) or {}).get("sha256"))


def test_two_runs_from_scratch_are_byte_identical(micro_run, tmp_path_factory, monkeypatch, capsys):
    """A second micro run from scratch (with a hub token in its environment) gives the same bytes: tables,
    evaluations and sample logs, selections, recipes, checkpoint weights, and a merge written by `layerswap merge`.
    No file of the run (logs and report pages included) contains the token."""
    work = tmp_path_factory.mktemp("micro_again")
    monkeypatch.setenv("HF_TOKEN", FAKE_TOKEN)
    proc = snakemake(work)
    assert proc.returncode == 0, proc.stderr[-3000:]
    first, second = manifest_of(micro_run)["files"], manifest_of(work / R)["files"]
    differ = [p for p in _differing(first, second) if not p.endswith(NONDETERMINISTIC)]
    assert not differ, differ
    # so the second run passes an audit against the first run's manifest; only run logs differ, compared on request
    monkeypatch.chdir(work)
    assert main(["audit", "--manifest", str(micro_run / "manifest.json")]) == 0
    assert main(["audit", "--logs", "--manifest", str(micro_run / "manifest.json")]) in (0, 1)
    drifted = [
        line for line in capsys.readouterr().out.splitlines() if line.startswith(("changed", "missing", "extra"))
    ]
    assert all(line.split()[1].endswith("/log.jsonl") for line in drifted), drifted
    for p in first:
        if p.startswith(("results/tables/", "results/evals/", "results/merges/", "results/selection/")):
            assert (micro_run.parent / p).read_bytes() == (work / p).read_bytes(), p
    # one merge recipe of each run written to disk: identical safetensors bytes
    recipe = L.recipe("swap_default", "toy_swh", "l1m2")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    shards = []
    for root in (micro_run.parent, work):
        out = tmp_path_factory.mktemp("merged") / "m"
        run = subprocess.run(
            [sys.executable, "-m", "layerswap.cli", "merge", "--recipe", recipe, "--out", str(out)],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert run.returncode == 0, run.stderr
        shards.append({p.name: p.read_bytes() for p in sorted(out.glob("*.safetensors"))})
    assert shards[0] and shards[0] == shards[1]
    leaked = [str(p) for p in (work / R).rglob("*") if p.is_file() and FAKE_TOKEN.encode() in p.read_bytes()]
    leaked += [str(p) for p in (work / ".snakemake" / "log").glob("*") if FAKE_TOKEN in p.read_text(errors="ignore")]
    assert not leaked, leaked


def test_the_checkout_is_the_repository_the_package_runs_from():
    """`machine.checkout()` (the manifest's git commit; the ablations folder the manifest reads) is the repository
    holding the running package, wherever the module sits in it."""
    from layerswap.machine import checkout

    assert checkout() == Path(__file__).resolve().parents[1] and (checkout() / "Snakefile").is_file()
