"""Token counts per (benchmark, language key): how long the prompts an evaluation job sends are, in the base's tokens.

Two sources, the first that is there:

- **counted** (`layerswap token-counts`, which `layerswap prestage` runs after its downloads): lm-eval builds every
  request of every task exactly as an evaluation job does (the same task plans, few-shot samplers and seed), from the
  pre-staged datasets (paper) or the toy world's files, and the base's own tokenizer counts them. Per key: items,
  requests per item, mean and longest prompt, the prompt prefix all items share (a few-shot block that a prefix cache
  could serve once: only where the sampler gives every item the same shots in the same order), mean continuation and
  the generation budget. Written to `<HF cache>/layerswap/token_counts.json` (COUNTS_FILE) with what they were counted
  for (tokenizer, task set, each benchmark's settings); the plan takes a benchmark's counts only where they match the
  config's.
- **length factors** (LENGTH_FACTORS): English token counts of each benchmark (its entry's `work` in
  layerswap/benchmarks.py: estimates, reasoned there) x the language's Llama 3 tokens per English token of the same
  text, each factor with its source.

`Lengths` is what the plan (layerswap/workflow/eval_plan.py) and the batch fit (layerswap/workflow/batch_fit.py) read.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

from layerswap.benchmarks import BENCHMARKS, MATH, ItemWork
from layerswap.errors import UserError

log = logging.getLogger("layerswap.token_counts")

VERSION = 1
COUNTS_FILE = Path("layerswap") / "token_counts.json"  # under the HF cache the jobs read (storage.hf_home)


@dataclasses.dataclass(frozen=True)
class Lengths:
    """One language key of one benchmark, in the base's tokens."""

    items: int  # scored items (before the config's `limit`)
    requests: int  # forward passes per item as lm-eval sends them (multiple choice: one per choice)
    prompt: float  # mean prompt (context) tokens of an item, the few-shot block included
    prompt_max: int  # the longest prompt
    shared: int  # prompt tokens every item shares at its start (a few-shot block in a fixed order), else 0
    continuation: float  # mean continuation tokens of a log-likelihood request (0: generation)
    new_tokens: int  # generation budget (0: log-likelihood)
    source: str


#: Per paper benchmark, its items' work in English (layerswap/benchmarks.py: each entry's `LmEvalTask.work`, its
#: estimates reasoned there; `layerswap token-counts` counts them on the pre-staged data).
ENGLISH: dict[str, ItemWork] = {b.name: b.paper.work for b in BENCHMARKS.values() if b.paper is not None}

#: Llama 3 tokens per English token of the same text, per language, with the source of each. The paper's four
#: targets: the figures issue 48 cites as published fertility of Llama 3's tokenizer on FLORES-200 (Telugu ~7-10x
#: English, Bengali ~6x, Swahili and Japanese ~1.7x; the issue does not name the publication), at the upper end
#: where it gives a range (memory must not be underestimated). The other MGSM languages: estimates.
ISSUE_48 = "issue 48: published Llama 3 fertility on FLORES-200, as cited there (upper end)"
LENGTH_FACTORS: dict[str, tuple[float, str]] = {
    "en": (1.0, "English: the unit"),
    "swh": (1.7, ISSUE_48),
    "jpn": (1.7, ISSUE_48),
    "ben": (6.0, ISSUE_48),
    "tel": (10.0, ISSUE_48),
    "deu": (1.5, "estimate: Latin-script European language in a cl100k-based vocabulary, upper end"),
    "fra": (1.5, "estimate: Latin-script European language in a cl100k-based vocabulary, upper end"),
    "spa": (1.5, "estimate: Latin-script European language in a cl100k-based vocabulary, upper end"),
    "rus": (2.0, "estimate: Cyrillic, fewer merges than Latin-script languages in a cl100k-based vocabulary"),
    "zho": (1.5, "estimate: CJK characters mostly single tokens, ~1.5 per English token of the same content"),
    "tha": (3.0, "estimate: Thai script, few merges"),
    "yor": (3.0, "estimate: Latin script with tone diacritics (combining marks split words), few Yoruba merges"),
}


def factor(lang: str) -> float:
    if lang not in LENGTH_FACTORS:
        raise UserError(f"layerswap/workflow/token_counts.py: no length factor for language {lang!r}")
    return LENGTH_FACTORS[lang][0]


def prompt_language(benchmark: str, key: str) -> str:
    """The language a key's prompt is written in: the language, a FLORES direction's source, English for MBPP."""
    if BENCHMARKS[benchmark].unsafe:
        return "en"  # MBPP_VARIANT: English prompts under every language key
    return key.split("-")[0] if BENCHMARKS[benchmark].directions else key


def from_factors(benchmark: str, key: str, task: dict) -> Lengths:
    """A key's lengths from ENGLISH and the prompt language's factor; `task`: evaluation.tasks.<benchmark>."""
    e, lang = ENGLISH[benchmark], prompt_language(benchmark, key)
    f, shots = factor(lang), int(task.get("shots", 0))
    prompt = (e.prompt + shots * e.per_shot) * f
    longest = (e.prompt * e.spread + shots * e.per_shot * e.shot_spread) * f
    shared = int(shots * e.per_shot * f) if e.shared_shots else 0
    new = int(task.get("max_new_tokens") or e.new_tokens) if e.new_tokens else 0
    src = f"{e.source} x {f:g} ({lang}: {LENGTH_FACTORS[lang][1]})"
    return Lengths(e.items, e.requests, prompt, int(longest), shared, e.continuation, new, src)


# --- counted ---------------------------------------------------------------------------------------------------------
def settings_key(task: dict) -> dict:
    """What a benchmark's counts depend on in its config entry (the batch size does not change a prompt)."""
    return {k: task.get(k) for k in ("shots", "max_new_tokens")}


def counts_path(hf_home: str | None) -> Path | None:
    """The counts file in the HF cache `hf_home`. The plan passes storage.hf_home (the config's, else the site
    file's) and never reads HF_HOME from its environment: the jobs' params (batches, context) must not depend on the
    shell Snakemake runs in."""
    return Path(hf_home).expanduser() / COUNTS_FILE if hf_home else None


def read_counts(path: Path | None) -> dict:
    """The counts file, {} where there is none; a file that is not ours is one line naming it."""
    if path is None or not path.is_file():
        return {}
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise UserError(f"{path}: not a token counts file ({err}); delete it or rerun `layerswap token-counts`")
    if not isinstance(doc, dict) or doc.get("version") != VERSION:
        raise UserError(f"{path}: not a version-{VERSION} token counts file; rerun `layerswap token-counts`")
    return doc


class TokenCounts:
    """Lengths per (benchmark, key) for one config: counted where the counts file matches, else from factors."""

    def __init__(self, config: dict, hf_home: str | None = None):
        self.config = config
        self.tasks = config["evaluation"]["tasks"]
        self.path = counts_path(hf_home)
        doc = read_counts(self.path)
        tokenizer = tokenizer_id(config)
        self.counted: dict[str, dict] = {}
        for bench, entry in (doc.get("benchmarks") or {}).items():
            if (
                doc.get("tokenizer") == tokenizer
                and bench in self.tasks
                and entry.get("settings") == settings_key(self.tasks[bench])
            ):
                self.counted[bench] = entry["keys"]

    def lengths(self, benchmark: str, key: str) -> Lengths:
        got = self.counted.get(benchmark, {}).get(key)
        if got is not None:
            return Lengths(**{**got, "source": f"counted: {self.path} (layerswap token-counts)"})
        if self.config["world"] == "toy":
            raise UserError(
                f"evaluation.tasks.{benchmark}: no token counts for {key} (the toy world has no length factors): "
                "run `layerswap token-counts` on its data first"
            )
        return from_factors(benchmark, key, self.tasks[benchmark])

    def source(self, benchmark: str) -> str:
        return f"counted ({self.path})" if benchmark in self.counted else "length factors"


def tokenizer_id(config: dict) -> str:
    base = config["base"]
    return f"{base['source']}@{base.get('revision') or 'main'}"


def common_prefix(rows: list[list[int]]) -> int:
    if not rows:
        return 0
    first, n = rows[0], len(rows[0])
    for row in rows[1:]:
        n = min(n, len(row))
        n = next((i for i in range(n) if row[i] != first[i]), n)
    return n


def count_task(instances, tokenizer, new_tokens: int) -> dict:
    """Lengths (as a dict) of one task key from lm-eval's requests (Instance.arguments: (context, continuation) or
    (context, generation kwargs)) and the base's tokenizer."""
    by_doc: dict[int, list] = {}
    for inst in instances:
        by_doc.setdefault(inst.doc_id, []).append(inst.arguments)
    contexts = [args[0][0] for args in by_doc.values()]
    ids = [tokenizer(c, add_special_tokens=False).input_ids for c in contexts]
    first = next(iter(by_doc.values()))[0]
    generate = not isinstance(first[1], str)
    conts = (
        []
        if generate
        else [len(tokenizer(a[1], add_special_tokens=False).input_ids) for v in by_doc.values() for a in v]
    )
    budget = int(first[1].get("max_gen_toks", new_tokens)) if generate else 0
    return {
        "items": len(by_doc),
        "requests": max(len(v) for v in by_doc.values()),
        "prompt": round(sum(map(len, ids)) / len(ids), 1),
        "prompt_max": max(map(len, ids)),
        "shared": common_prefix(ids),
        "continuation": round(sum(conts) / len(conts), 2) if conts else 0.0,
        "new_tokens": budget,
    }


def combine(parts: list[dict]) -> dict:
    """One key's counts from its leaf tasks' (a group such as Global-MMLU: one leaf per subject, each with its own
    few-shot block): items summed, means weighted by items, the longest prompt, the shared prefix a leaf's items
    share (weighted mean: what a prefix cache saves per item)."""
    n = sum(p["items"] for p in parts)

    def mean(k: str) -> float:
        return round(sum(p[k] * p["items"] for p in parts) / n, 2)

    return {
        "items": n,
        "requests": max(p["requests"] for p in parts),
        "prompt": mean("prompt"),
        "prompt_max": max(p["prompt_max"] for p in parts),
        "shared": int(mean("shared")),
        "continuation": mean("continuation"),
        "new_tokens": max(p["new_tokens"] for p in parts),
    }


def evaluated_keys(config: dict) -> list[tuple[str, str]]:
    """Every (benchmark, language key) some evaluation job of the config runs: each task's languages (its own list,
    else English and the targets; MGSM also `mgsm_languages`, Table 2's), benchmarks that score nothing left out."""
    world = config["toy_world"]["languages"] if config["world"] == "toy" else config["languages"]
    out = []
    for bench, task in config["evaluation"]["tasks"].items():
        b = BENCHMARKS[bench]
        if b.unsafe and not task.get("execute_code", False):
            continue
        langs = list(task.get("languages") or ["en", *world])
        langs += [l for l in (config.get("mgsm_languages") or []) if bench == MATH and l not in langs]
        out += [(bench, k) for l in langs for k in b.keys(l)]
    return list(dict.fromkeys(out))
