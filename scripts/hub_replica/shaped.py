"""The paper-shaped config: `config/paper.yaml` with only its sizes changed (model, rows, samples, limits, counts).

Same sources, normalisers, rules, `paper` task set (lm-eval's built-in tasks), `tasks_per_job: single` and the
`accelerate launch` SFT launcher; what changes is listed in SIZES, and `tests/test_hub_replica.py` asserts that no
other key differs. Used by the paper-shaped run against the Hub replica (tests and scripts/measure/paper_shaped.py).
"""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
PAPER = REPO / "config" / "paper.yaml"

#: Layers of the replica's tiny Llama (hub_replica.repos.BASE_LAYERS).
LAYERS = 12
#: One run per expert type (top-1 selection): the first run of each type in paper.yaml.
RUNS = ["math_1", "swh_1", "tel_1", "ben_1", "jpn_1", "joint_swh_1"]
#: The default swap, one soup and one TIES config (Tables 1, 2 and 6 have a column for each method).
MERGES = ["swap_b5u2t00", "soup_uniform", "ties_d05"]
#: One checkpoint per run (4 samples), 4 rows per source, 1 item per evaluation task, 16 new tokens per generation
#: (an untrained model never stops by itself).
SAMPLES, EVERY, ROWS, LIMIT, NEW_TOKENS = 4, 4, 4, 1, 16


def _scale_mix(mix: dict) -> dict:
    return {name: ROWS for name in mix}


def shaped(paper: dict) -> dict:
    cfg = copy.deepcopy(paper)
    cfg["base"]["num_layers"] = LAYERS
    mixes = cfg["mixes"]
    mixes["math"] = _scale_mix(mixes["math"])
    mixes["language"] = {lang: _scale_mix(mix) for lang, mix in mixes["language"].items()}
    sft = cfg["sft"]
    sft["accelerate_config"] = "cluster/accelerate_cpu.yaml"  # 2 CPU processes instead of a GPU node
    sft["defaults"].update(num_samples=SAMPLES, checkpoint_every=EVERY, threads=1)
    runs = {}
    for name in RUNS:
        run = dict(sft["runs"][name])
        run.update(batch_size=2, seq_len=64)
        run.pop("num_samples", None)
        runs[name] = run
    sft["runs"] = runs
    cfg["selection"]["top_k"] = 1
    # the constraints run (base and candidates compared, recorded) with the widest margin: the one candidate of a
    # 4-sample run of a random model, scored on 1 item per task, is noise against the base
    for kind, constraints in cfg["selection"]["constraints"].items():
        constraints.update({metric: 1.0 for metric in constraints})
    merges = cfg["merges"]
    merges["configs"] = {k: v for k, v in merges["configs"].items() if k in MERGES}
    merges["best_of"] = {kind: [c for c in names if c in MERGES] for kind, names in merges["best_of"].items()}
    ev = cfg["evaluation"]
    ev.update(threads=1, limit=LIMIT)
    for name in ("mgsm", "flores", "mbpp"):
        ev["tasks"][name]["max_new_tokens"] = NEW_TOKENS
    ev["backend"] = "hf"  # the test environment's (no vLLM); a backend per benchmark: tests/test_vllm_dag.py
    return cfg


#: Leaf keys (dotted; * is any one key) in which the paper-shaped config may differ from config/paper.yaml: sizes,
#: plus four that are not: the accelerate config (2 CPU processes, no GPU node), where the files of allenai/nllb's
#: loading script live (the replica serves them on loopback instead of AllenNLP's bucket), the selection
#: constraints' margins (1 item per task makes every score noise) and the evaluation backend (hf: the run is on a CPU
#: in the test environment, which has no vLLM).
ALLOWED = [
    "base.num_layers",
    "mixes.*",
    "mixes.language.*.*",
    "sft.defaults.num_samples",
    "sft.defaults.checkpoint_every",
    "sft.defaults.threads",
    "sft.runs.*",
    "sft.runs.*.batch_size",
    "sft.runs.*.seq_len",
    "sft.runs.*.num_samples",
    "selection.top_k",
    "merges.configs.*",
    "merges.best_of.*",
    "evaluation.batch_size",
    "evaluation.threads",
    "evaluation.limit",
    "evaluation.tasks.*.max_new_tokens",
    "sft.accelerate_config",
    "data_sources.nllb.data_files",
    "selection.constraints.*.*",
    "evaluation.backend",
]


def external(cfg: dict, replica_url: str) -> None:
    """Point the external files of a loading script at the replica. Another host name than HF_ENDPOINT's (localhost
    for 127.0.0.1): `datasets` treats URLs under HF_ENDPOINT as hub files."""
    nllb = cfg["data_sources"]["nllb"]
    external_url = replica_url.replace("127.0.0.1", "localhost") + "/external"
    nllb["data_files"] = nllb["data_files"].replace("https://storage.googleapis.com", external_url)


def differences(a, b, prefix: str = "") -> set[str]:
    """Dotted paths of the leaves (or whole keys, where one side lacks them) in which a and b differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = set()
        for key in set(a) | set(b):
            path = f"{prefix}{key}"
            if key not in a or key not in b:
                out.add(path)
            else:
                out |= differences(a[key], b[key], path + ".")
        return out
    return set() if a == b else {prefix.rstrip(".")}


def write_shaped(out: Path, replica_url: str) -> Path:
    cfg = shaped(yaml.safe_load(PAPER.read_text()))
    external(cfg, replica_url)
    out.write_text(yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True))
    return out
