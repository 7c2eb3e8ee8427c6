"""Source datasets -> one instruction schema {"prompt", "response", "source"} -> a seeded SFT mix.

Each normaliser reads one real dataset's row schema, so the toy files and the pre-staged hub downloads (written by
`layerswap hub-data` in the same schema) go through the same code. Schemas and the hub datasets they come from
(field names as on the datasets' hub cards):

=========== ============================================ ==========================================================
schema      fields                                       datasets (paper Table 3)
=========== ============================================ ==========================================================
orca_math   question, answer                             microsoft/orca-math-word-problems-200k
aya         inputs, targets                              CohereForAI/aya_dataset
nllb        translation: {eng_Latn: s, <code>: t}        allenai/nllb
xp3         inputs, targets                              bigscience/xP3mt
inkuba      instruction, inputs, targets                 lelapa/Inkuba-instruct
alpaca      instruction, input (optional), output        BongChat, llm-japanese, dolly-ja, ichikara (text ->
                                                         instruction), Telugu Alpaca (telugu_* -> *)
sharegpt    conversations: [{from, value}, ...]          ai4bharat/indic-align Indic_ShareLlama (one language
                                                         column per language, renamed to conversations)
=========== ============================================ ==========================================================

A row whose prompt or response is blank gives no example.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator

from layerswap.contracts import write_text_atomic
from layerswap.errors import UserError
from layerswap.jsonl import read_rows
from layerswap.layout import Layout


def language_mix(mixes: dict, lang: str) -> dict[str, int]:
    """{source: count} of `lang`'s language SFT data: ``mixes.language`` is one mix for every language (toy config)
    or a mix per language (paper config: {lang: {source: count}}). Here, not in `config`, so that the hub data
    commands that need it do not import the config checks (and the merge registry behind them)."""
    mix = mixes["language"]
    return dict(mix[lang]) if any(isinstance(v, dict) for v in mix.values()) else dict(mix)


Normaliser = Callable[[dict, str], Iterator[tuple[str, str]]]


def _text(value) -> str:
    return value.strip() if isinstance(value, str) else ""


def _pair(prompt, response) -> Iterator[tuple[str, str]]:
    prompt, response = _text(prompt), _text(response)
    if prompt and response:
        yield prompt, response


def _join(instruction, extra) -> str:
    instruction, extra = _text(instruction), _text(extra)
    return f"{instruction}\n\n{extra}" if instruction and extra else instruction or extra


def orca_math(row: dict, lang: str) -> Iterator[tuple[str, str]]:
    yield from _pair(row["question"], row["answer"])


def aya(row: dict, lang: str) -> Iterator[tuple[str, str]]:
    yield from _pair(row["inputs"], row["targets"])


def nllb(row: dict, lang: str) -> Iterator[tuple[str, str]]:
    """A translation pair gives one instruction per direction."""
    pair = row["translation"]
    src = next((k for k in pair if k.startswith("eng")), None)
    tgt = next((k for k in pair if k != src), None)
    if src is None or tgt is None:
        raise KeyError("translation.eng_*")
    yield from _pair(f"translate en to {lang} : {pair[src]}", pair[tgt])
    yield from _pair(f"translate {lang} to en : {pair[tgt]}", pair[src])


def xp3(row: dict, lang: str) -> Iterator[tuple[str, str]]:
    """xP3 / xP3mt prompts already hold the instruction (prompted with promptsource templates)."""
    yield from _pair(row["inputs"], row["targets"])


def inkuba(row: dict, lang: str) -> Iterator[tuple[str, str]]:
    """Inkuba-instruct: a task instruction plus its input text."""
    yield from _pair(_join(row["instruction"], row.get("inputs")), row["targets"])


def alpaca(row: dict, lang: str) -> Iterator[tuple[str, str]]:
    """Alpaca style: instruction, optional input, output."""
    yield from _pair(_join(row["instruction"], row.get("input")), row["output"])


_USER = {"human", "user", "prompter"}
_ASSISTANT = {"gpt", "assistant", "bot", "model", "chatgpt"}


def _turns(conversation) -> list[tuple[str | None, str]]:
    """[(role or None, text)] from ShareGPT turns ({from, value} / {role, content}), a list of plain strings, or a
    list of [user, assistant] pairs (IndicAlign's Indic_ShareLlama)."""
    if isinstance(conversation, str):
        conversation = json.loads(conversation)
    out = []
    for turn in conversation or []:
        if isinstance(turn, str):
            out.append((None, turn))
        elif isinstance(turn, (list, tuple)):
            if len(turn) != 2:
                raise ValueError(f"a conversation turn pair has {len(turn)} items, not 2 ([user, assistant])")
            out += [("user", turn[0]), ("assistant", turn[1])]
        else:
            role = str(turn.get("from", turn.get("role", ""))).lower()
            out.append((role, turn.get("value", turn.get("content"))))
    return out


def sharegpt(row: dict, lang: str) -> Iterator[tuple[str, str]]:
    """The first user turn and the assistant's answer to it (our choice: later turns need the earlier context).

    Plain-string turns alternate user, assistant (IndicAlign stores a conversation as a list of strings)."""
    turns = _turns(row["conversations"])
    for i in range(len(turns) - 1):
        (role, text), (next_role, answer) = turns[i], turns[i + 1]
        user = role in _USER if role is not None else i % 2 == 0
        bot = next_role in _ASSISTANT if next_role is not None else i % 2 == 0
        if user and bot:
            yield from _pair(text, answer)
            return


@dataclass(frozen=True)
class Schema:
    """A row schema: its normaliser and, per role, the field the normaliser reads (hub columns map onto these)."""

    fn: Normaliser
    fields: dict[str, str]
    optional: tuple[str, ...] = ()

    @property
    def required(self) -> tuple[str, ...]:
        return tuple(f for role, f in self.fields.items() if role not in self.optional)


SCHEMAS: dict[str, Schema] = {
    "orca_math": Schema(orca_math, {"prompt": "question", "response": "answer"}),
    "aya": Schema(aya, {"prompt": "inputs", "response": "targets"}),
    "nllb": Schema(nllb, {"translation": "translation"}),
    "xp3": Schema(xp3, {"prompt": "inputs", "response": "targets"}),
    "inkuba": Schema(inkuba, {"prompt": "instruction", "input": "inputs", "response": "targets"}, ("input",)),
    "alpaca": Schema(alpaca, {"prompt": "instruction", "input": "input", "response": "output"}, ("input",)),
    "sharegpt": Schema(sharegpt, {"conversation": "conversations"}),
}


def schema_of(name: str, source: str) -> Schema:
    if name not in SCHEMAS:
        raise UserError(f"data source '{source}': unknown schema '{name}'; allowed: {', '.join(SCHEMAS)}")
    return SCHEMAS[name]


def to_schema(row: dict, schema: str, columns: dict[str, str] | None, source: str) -> dict:
    """A hub row -> a row in `schema`'s own fields, reading column `columns[role]` (default: the schema's field)."""
    spec = schema_of(schema, source)
    columns = columns or {}
    out = {}
    for role, target in spec.fields.items():
        column = columns.get(role, target)
        if isinstance(column, list):  # a field made of several columns: {column: value}
            missing = [c for c in column if c not in row]
            if missing:
                raise UserError(
                    f"data source '{source}': no column '{missing[0]}' (for {role}); the dataset has: "
                    f"{', '.join(sorted(row))}"
                )
            out[target] = {c: row[c] for c in column}
        elif column in row:
            out[target] = row[column]
        elif role not in spec.optional or role in columns:
            raise UserError(
                f"data source '{source}': no column '{column}' (for {role}); the dataset has: {', '.join(sorted(row))}"
            )
    return out


def examples(row: dict, schema: str, lang: str) -> list[tuple[str, str]]:
    return list(SCHEMAS[schema].fn(row, lang))


def normalise(path: Path, schema: str, lang: str, source: str) -> list[dict]:
    spec = schema_of(schema, source)
    out = []
    for i, row in read_rows(path, spec.required):
        try:
            out += [{"prompt": p, "response": r, "source": source} for p, r in spec.fn(row, lang)]
        except (KeyError, TypeError, ValueError) as err:
            raise UserError(f"{path}:{i}: missing or malformed field {err}") from None
    if not out:
        raise UserError(f"{path}: no rows")
    return out


# ----------------------------------------------------------------------------------------------------------------
# evaluation overlap: drop rows that contain an evaluation sentence (the paper removes FLORES from xP3mt)


def overlap_key(text: str) -> str:
    """Normal form for overlap matching: NFKC, casefolded, with everything but letters and digits removed (so
    spacing, punctuation and case differences do not hide a copied sentence)."""
    return re.sub(r"[\W_]+", "", unicodedata.normalize("NFKC", text).casefold())


@dataclass
class OverlapFilter:
    """Finds any of a set of sentences inside a text, after `overlap_key` on both.

    Sentences are indexed by their first `key_len` normalised characters; a text is scanned once, looking each
    position's `key_len` characters up in that index and checking the full sentence only on a hit."""

    sentences: Iterable[str]
    min_chars: int = 20
    key_len: int = 16
    index: dict[str, set[str]] = field(default_factory=dict, init=False)

    def __post_init__(self):
        for sentence in self.sentences:
            norm = overlap_key(sentence)
            if len(norm) >= max(self.min_chars, self.key_len):
                self.index.setdefault(norm[: self.key_len], set()).add(norm)
        self.size = sum(len(v) for v in self.index.values())

    def contains(self, text: str) -> bool:
        if not self.index:
            return False
        norm, k = overlap_key(text), self.key_len
        for i in range(len(norm) - k + 1):
            hits = self.index.get(norm[i : i + k])
            if hits and any(norm.startswith(s, i) for s in hits):
                return True
        return False

    def row_contains(self, row) -> bool:
        """True if any string anywhere in a (nested) row contains an indexed sentence."""
        if isinstance(row, str):
            return self.contains(row)
        if isinstance(row, dict):
            return any(self.row_contains(v) for v in row.values())
        if isinstance(row, (list, tuple)):
            return any(self.row_contains(v) for v in row)
        return False


# ----------------------------------------------------------------------------------------------------------------
# the mix


def manifest_path(out: Path) -> Path:
    """The manifest beside a mix `out`: `<expert>.jsonl` -> `<expert>.manifest.json`, as the results layout has it."""
    return out.with_name(Path(Layout().sft_mix(out.name.removesuffix(".jsonl"), "manifest.json")).name)


def build_mix(sources: list[dict], seed: int, out: Path, manifest: Path | None = None) -> dict[str, int]:
    """Sample `n` normalised rows (without replacement, deduplicated) from each source; shuffle; write JSONL and a
    manifest (sources, rows available after deduplication, rows taken, and each source file's own manifest if
    `hub-data` wrote one beside it)."""
    if not sources:
        raise UserError(f"{out}: empty mix (no sources)")
    rng = random.Random(seed)
    rows: list[dict] = []
    counts: dict[str, int] = {}
    entries = []
    for src in sources:
        lang = src.get("lang", "en")
        pool = list(
            {
                (r["prompt"], r["response"]): r for r in normalise(Path(src["path"]), src["schema"], lang, src["name"])
            }.values()
        )
        if src["n"] > len(pool):
            raise UserError(f"data source '{src['name']}' ({src['path']}): asked for {src['n']} rows, has {len(pool)}")
        picked = rng.sample(pool, src["n"])
        counts[f"{src['name']}:{lang}"] = len(picked)
        rows += picked
        entry = {
            "name": src["name"],
            "lang": lang,
            "schema": src["schema"],
            "path": str(src["path"]),
            "available": len(pool),
            "taken": len(picked),
        }
        raw_manifest = manifest_path(Path(src["path"]))
        if raw_manifest.is_file():
            entry["source_manifest"] = json.loads(raw_manifest.read_text(encoding="utf-8"))
        entries.append(entry)
    rng.shuffle(rows)
    write_text_atomic(out, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    if manifest is not None:
        write_text_atomic(
            manifest,
            json.dumps(
                {"mix": str(out), "seed": seed, "rows": len(rows), "counts": counts, "sources": entries},
                indent=1,
                ensure_ascii=False,
            )
            + "\n",
        )
    return counts


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sources-json", required=True, help='[{"name","schema","path","n","lang"}, ...]')
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--manifest", type=Path, default=None, help="write sources and counts here (JSON)")


def run(args: argparse.Namespace) -> None:
    counts = build_mix(json.loads(args.sources_json), args.seed, args.out, args.manifest)
    print(json.dumps({"mix": str(args.out), "counts": counts}))
