"""The drills of issue 43 (docs/SECURITY.md): an edited result, a forged record, a hostile manifest and bad config
values, each ending with the clean run's result or one line naming the file and the repair."""

from __future__ import annotations

import json
import re
import shutil
import sys
import time
from pathlib import Path

from layerswap.contracts import merge_model_id
from scripts.tools.fault_drill.runs import (
    LAYOUT,
    SNAKEMAKE,
    audit_against,
    edited_config,
    first_score,
    last_line,
    layerswap,
    logged,
    say,
    snakemake,
    with_config,
)

# ------------------------------------------------------------------------------------------------- issue 43
EDITED = LAYOUT.eval_file(merge_model_id("swap_default", "toy_swh", "l1m1"), "mgsm")


def edit_and_launder(reference: Path, work: Path) -> tuple[bool, str]:
    """One score of a merge evaluation changed by hand: the run stops naming it, the manifest job refuses to record
    it, the repair restores the uninterrupted run's results."""
    path = work / EDITED
    data = json.loads(path.read_text())
    where = first_score(data)
    node = data
    for key in where[:-1]:
        node = node[key]
    old = node[where[-1]]
    node[where[-1]] = 0.75 if old != 0.75 else 0.25
    time.sleep(0.05)
    path.write_text(json.dumps(data, indent=1))
    say(f"edit-and-launder: {EDITED} {'/'.join(map(str, where))}: {old} -> {node[where[-1]]}; plain snakemake")
    code, text = snakemake(work)
    line = last_line(text)
    stopped = code != 0 and "changed after the job that wrote them" in line and EDITED in line and "--repair" in line
    table = (work / LAYOUT.table("table1", "csv")).read_bytes() == (
        reference / LAYOUT.table("table1", "csv")
    ).read_bytes()
    say(f"edit-and-launder: the run exited {code}: {line}")
    manifest = layerswap(
        work,
        "manifest",
        "--root",
        LAYOUT.root,
        "--out",
        str(work / "relaundered.json"),
        "--metadata-dir",
        ".snakemake/metadata",
        "--previous",
        LAYOUT.manifest(),
    )
    mline = last_line(manifest.stderr)
    refused = manifest.returncode == 1 and EDITED in mline and not (work / "relaundered.json").exists()
    say(f"edit-and-launder: the manifest job by hand exited {manifest.returncode}: {mline}")
    code, _ = logged(work, [sys.executable, "-m", "layerswap.cli", "audit", "--repair", "--run", "--", *SNAKEMAKE[3:]])
    if code:
        return False, f"the repair exited {code} (see {work / 'snakemake.log'})"
    same, audit = audit_against(reference, work)
    return stopped and table and refused and same, (
        f"a score of {EDITED} edited; the run stopped in one line naming it and the repair: {stopped}; Table 1 "
        f"untouched meanwhile: {table}; the manifest job refused to record it: {refused}; after `layerswap audit "
        f"--repair --run`, every result vs the uninterrupted run: {audit}"
    )


def forged_record(reference: Path, work: Path) -> tuple[bool, str]:
    """results/ moved alone, the manifest's record of swap_default's recipes edited to the bottom-2 config's params:
    the run stops naming those recipes; the repair it names rebuilds them with bottom 2."""
    shutil.copytree(reference / LAYOUT.root, work / LAYOUT.root, symlinks=True)
    mpath = work / LAYOUT.manifest()
    manifest = json.loads(mpath.read_text())
    forged = []
    for job in manifest["jobs"].values():
        if job["rule"] == "merge_recipes" and any("/swap_default/" in o for o in job["outputs"]):
            for key in ("params", "shellcmd"):
                text = json.dumps(job[key])
                job[key] = json.loads(re.sub(r'(\\*"bottom\\*": )1\b', r"\g<1>2", text))
            forged += job["outputs"]
    mpath.write_text(json.dumps(manifest, indent=1, sort_keys=True))
    edit = edited_config(work / "bottom2.yaml", lambda c: c["merges"]["configs"]["swap_default"].update(bottom=2))
    say(f"forged-record: {len(forged)} recipes' record forged to bottom 2 in the moved manifest; running bottom 2")
    code, text = logged(work, [*with_config(edit), "--directory", str(work)])
    line = last_line(text)
    named = code != 0 and "does not describe it" in line and all(f in line for f in forged) and bool(forged)
    say(f"forged-record: the run exited {code}: {line}")
    for f in forged:
        (work / f).unlink()
    code, _ = logged(work, [*with_config(edit), "--directory", str(work)])
    if code:
        return False, f"the run after the repair exited {code} (see {work / 'snakemake.log'})"
    bottom2 = all('"bottom": 2' in json.dumps(json.loads((work / f).read_text())) for f in forged)
    own = layerswap(work, "audit")
    return named and bottom2 and own.returncode == 0, (
        f"the forged record of {len(forged)} recipes named, not put back: {named}; after `rm` of them and "
        f"snakemake, every recipe has bottom 2: {bottom2}; the run's own audit: {last_line(own.stdout)}"
    )


def hostile_manifest(reference: Path, work: Path) -> tuple[bool, str]:
    """Five hostile manifests, one case each: every audit command refuses in one line; the victims stay (issue 49:
    a root of `.`, a root reached through a symbolic link inside results/)."""
    victim, victims = work.parent / "victim.txt", work.parent / "victimdir"
    victim.write_text("precious\n")
    victims.mkdir(exist_ok=True)
    (victims / "model.safetensors").write_text("precious too\n")
    here = work / "victim.txt"  # a file of the working directory (the checkout, in normal use)
    here.write_text("precious\n")
    (work / LAYOUT.root / "evil").unlink(missing_ok=True)
    (work / LAYOUT.root / "evil").symlink_to(victims)
    clean = json.loads((work / LAYOUT.manifest()).read_text())
    sha = {"size": 9, "sha256": "0" * 64}
    sft = next(j for j, job in clean["jobs"].items() if job["rule"] == "sft")

    def hostile(edit) -> dict:
        m = json.loads(json.dumps(clean))
        edit(m)
        return m

    cases = {
        "foreign ../victim.txt": (
            hostile(lambda m: m["foreign"].update({"../victim.txt": sha})),
            ["--remove-foreign"],
        ),
        "files under ../victimdir/": (
            hostile(
                lambda m: m["files"].update(
                    {f"../victimdir/{n}": {**sha, "job": sft} for n in ("model.safetensors", "layerswap_meta.json")}
                )
            ),
            ["--repair", "--run", "--", *SNAKEMAKE[3:]],
        ),
        "../../../../etc/passwd in files": (
            hostile(lambda m: m["files"].update({"../../../../etc/passwd": {**sha, "job": None}})),
            [],
        ),
        "root '.', foreign victim.txt": (
            hostile(lambda m: m.update(root=".", foreign={"victim.txt": sha})),
            ["--remove-foreign"],
        ),
        "root results/evil -> ../victimdir": (
            hostile(
                lambda m: m.update(root=f"{LAYOUT.root}/evil", foreign={f"{LAYOUT.root}/evil/model.safetensors": sha})
            ),
            ["--remove-foreign"],
        ),
    }
    outcomes = []
    for name, (m, args) in cases.items():
        (work / LAYOUT.manifest()).write_text(json.dumps(m))
        proc = layerswap(work, "audit", *args)
        err = proc.stderr.strip().splitlines()
        ok = proc.returncode == 1 and len(err) == 1 and "refused" in err[0] and not proc.stdout.strip()
        say(f"hostile-manifest: {name}: audit {' '.join(args[:2])} exited {proc.returncode}: {last_line(proc.stderr)}")
        outcomes.append((name, ok))
    intact = victim.read_text() == "precious\n" and (victims / "model.safetensors").read_text() == "precious too\n"
    intact = intact and here.read_text() == "precious\n"
    (work / LAYOUT.root / "evil").unlink()
    (work / LAYOUT.manifest()).write_text(json.dumps(clean))
    return all(ok for _, ok in outcomes) and intact, (
        "; ".join(f"{n}: refused in one line: {ok}" for n, ok in outcomes) + f"; the victims untouched: {intact}"
    )


def bad_config(reference: Path, work: Path) -> tuple[bool, str]:
    """Config values that broke jobs later: each refused by check-config in one line naming its key, < 1 s."""
    cases = {
        "lr: .nan": (lambda c: c["sft"]["defaults"].update(lr=float("nan")), "sft.defaults.lr"),
        "num_samples: 1e15": (lambda c: c["sft"]["defaults"].update(num_samples=1e15), "sft.defaults.num_samples"),
        "file: /etc/passwd": (
            lambda c: c["data_sources"]["toy_orca_math"].update(file="/etc/passwd"),
            "data_sources.toy_orca_math.file",
        ),
    }
    work.mkdir(parents=True, exist_ok=True)
    outcomes = []
    for name, (edit, key) in cases.items():
        path = edited_config(work / "bad.yaml", edit)
        start = time.monotonic()
        proc = layerswap(work, "check-config", str(path))
        seconds = time.monotonic() - start
        err = proc.stderr.strip().splitlines()
        ok = proc.returncode == 1 and len(err) == 1 and f"config key '{key}'" in err[0]
        outcomes.append((name, ok, seconds))
        say(f"bad-config: {name}: exit {proc.returncode} in {seconds:.2f} s: {last_line(proc.stderr)}")
    return all(ok for _, ok, _ in outcomes), "; ".join(
        f"{n}: refused naming its key: {ok} ({s:.2f} s with the interpreter's start)" for n, ok, s in outcomes
    )
