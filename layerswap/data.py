"""Source datasets -> one instruction schema {"prompt", "response", "source"} -> a seeded SFT mix.

Each normaliser reads one real dataset's schema (Orca-Math, Aya, NLLB), so the toy files and the real
downloads go through the same code.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Callable, Iterator

from layerswap.errors import UserError
from layerswap.training import read_jsonl

Normaliser = Callable[[dict, str], Iterator[tuple[str, str]]]


def orca_math(row: dict, lang: str) -> Iterator[tuple[str, str]]:
    yield row["question"], row["answer"]


def aya(row: dict, lang: str) -> Iterator[tuple[str, str]]:
    yield row["inputs"], row["targets"]


def nllb(row: dict, lang: str) -> Iterator[tuple[str, str]]:
    """A translation pair gives one instruction per direction."""
    pair = row["translation"]
    src = next((k for k in pair if k.startswith("eng")), None)
    tgt = next((k for k in pair if k != src), None)
    if src is None or tgt is None:
        raise KeyError("translation.eng_*")
    yield f"translate en to {lang} : {pair[src]}", pair[tgt]
    yield f"translate {lang} to en : {pair[tgt]}", pair[src]


SCHEMAS: dict[str, tuple[Normaliser, tuple[str, ...]]] = {
    "orca_math": (orca_math, ("question", "answer")),
    "aya": (aya, ("inputs", "targets")),
    "nllb": (nllb, ("translation",)),
}


def normalise(path: Path, schema: str, lang: str, source: str) -> list[dict]:
    if schema not in SCHEMAS:
        raise UserError(f"data source '{source}': unknown schema '{schema}'; allowed: {', '.join(SCHEMAS)}")
    fn, required = SCHEMAS[schema]
    out = []
    for i, row in enumerate(read_jsonl(path, required), 1):
        try:
            out += [{"prompt": p, "response": r, "source": source} for p, r in fn(row, lang)]
        except KeyError as err:
            raise UserError(f"{path}:{i}: missing field {err}") from None
    return out


def build_mix(sources: list[dict], seed: int, out: Path) -> dict[str, int]:
    """Sample `n` normalised rows (without replacement, deduplicated) from each source; shuffle; write JSONL."""
    if not sources:
        raise UserError(f"{out}: empty mix (no sources)")
    rng = random.Random(seed)
    rows: list[dict] = []
    counts: dict[str, int] = {}
    for src in sources:
        pool = list({(r["prompt"], r["response"]): r for r in normalise(Path(src["path"]), src["schema"],
                                                                          src.get("lang", "en"), src["name"])}.values())
        if src["n"] > len(pool):
            raise UserError(f"data source '{src['name']}' ({src['path']}): asked for {src['n']} rows, has {len(pool)}")
        picked = rng.sample(pool, src["n"])
        counts[f"{src['name']}:{src.get('lang', 'en')}"] = len(picked)
        rows += picked
    rng.shuffle(rows)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    tmp.replace(out)
    return counts


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sources-json", required=True, help='[{"name","schema","path","n","lang"}, ...]')
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True, type=Path)


def run(args: argparse.Namespace) -> None:
    counts = build_mix(json.loads(args.sources_json), args.seed, args.out)
    print(json.dumps({"mix": str(args.out), "counts": counts}))
