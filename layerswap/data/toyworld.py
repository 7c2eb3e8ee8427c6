"""The toy world's files (`layerswap toy-data`, one job per dataset): which datasets a toy world has, what each one
depends on, and each written as a JSONL file in its real schema (layerswap/data/toy_writers.py), every word of its
text checked against the toy vocabulary (layerswap/data/toy_language.py) as it is written.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Iterator

from layerswap.benchmarks import BENCHMARKS, toy_sizes
from layerswap.data.toy_language import World, english, make_language, vocabulary
from layerswap.data.toy_writers import METADATA, WRITERS, _aya, _nllb, _pretrain, aya_mix, pretrain_mix
from layerswap.errors import UserError
from layerswap.layout import Layout


def _write_jsonl(path: Path, rows: Iterator[dict] | list[dict]) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    n = 0
    try:
        with tmp.open("w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
                n += 1
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    tmp.replace(path)
    return n


#: The files the generator writes, by dataset name (rules/data.smk runs one job per dataset): the pretraining corpus
#: (with the vocabulary), the SFT sources per language, and the evaluation sets per benchmark (layerswap/benchmarks.py;
#: its writer in layerswap/data/toy_writers.py, WRITERS) and language.
SOURCES = ("aya", "nllb")


def datasets(languages: list[str]) -> list[str]:
    """Every dataset name of a toy world with these languages (files: raw/<name>.jsonl or eval/<name>.jsonl)."""
    names = ["pretrain", "orca_math"] + [f"{src}_{l}" for src in SOURCES for l in languages]
    return names + [f"{b}_{l}" for b, bench in BENCHMARKS.items() for l in ["en", *languages] if bench.keys(l)]


def is_evaluation_set(name: str) -> bool:
    """Whether a dataset is an evaluation set (eval/<name>.jsonl) rather than raw data (raw/<name>.jsonl)."""
    return name.split("_", 1)[0] in BENCHMARKS


def dataset_inputs(name: str, languages: dict[str, dict], sizes: dict[str, int], mixes: dict | None = None) -> dict:
    """What one dataset depends on, besides the seed: its languages and its size, and for the pretraining corpus and
    the Aya sets their complete mix (`mixes`: {"pretrain": toy_world.pretrain_mix, "aya": toy_world.aya_mix}, each
    may be None; an omitted share and its default value give the same params). Nothing else reaches its job, so a
    changed size or an added language reruns only the datasets it touches."""
    mixes = mixes or {}
    if name == "pretrain":
        return {"languages": languages, "size": sizes["pretrain_docs"], "mix": pretrain_mix(mixes.get("pretrain"))}
    if name == "orca_math":
        return {"languages": {}, "size": sizes["math_sft"]}
    kind, lang = name.split("_", 1)
    size = sizes[f"{kind}_per_language"] if kind in SOURCES else toy_sizes(sizes)[kind]
    out = {"languages": {lang: languages[lang]} if lang != "en" else {}, "size": size}
    return out | ({"mix": aya_mix(mixes.get("aya"))} if kind == "aya" else {})


def _stream(seed: int, *names: str) -> random.Random:
    """A dataset's own random stream: no dataset draws from another's, so one's size changes no other file."""
    return random.Random("-".join([str(seed), *names]))


def write_dataset(
    name: str, out: Path, seed: int, languages: dict[str, dict], size: int, mix: dict | None = None
) -> None:
    """Write one dataset (`out`: its .jsonl; the pretraining corpus also writes vocab.json beside it). Every word of
    its text is checked against the vocabulary (`in_vocabulary`)."""
    langs = [make_language(code, spec["word_order"], seed) for code, spec in sorted(languages.items())]
    en = english()
    world = World(seed, langs)
    out = Path(out)
    rng, kind = _stream(seed, name), name
    if name == "pretrain":
        writer, rows = _pretrain, ({"text": d} for d in _pretrain(world, rng, en, langs, size, pretrain_mix(mix)))
    elif name == "orca_math":  # Orca-Math style English math (one- and two-step word problems, worked solutions)
        writer, rows = (
            World.render_math,
            (
                {"question": q, "answer": a}
                for q, a in (
                    world.render_math(world.math_problem(rng, steps=rng.choice([1, 2, 2])), en) for _ in range(size)
                )
            ),
        )
    else:
        kind, _, code = name.partition("_")  # benchmark and source names have no "_"
        if kind not in SOURCES + tuple(WRITERS) or not code or (code != "en" and len(langs) != 1):
            raise UserError(
                f"toy dataset '{name}': unknown; allowed: pretrain, orca_math, <aya|nllb>_<language>, "
                f"<{'|'.join(WRITERS)}>_<language> with that language's spec"
            )
        lang = en if code == "en" else langs[0]
        if kind == "aya":
            writer, rows = _aya, _aya(world, rng, lang, size, aya_mix(mix))
        elif kind == "nllb":
            writer, rows = _nllb, _nllb(world, rng, lang, size)
        else:  # an evaluation set: the same items in every language (the benchmark's stream), translated
            writer = WRITERS[kind]
            rows = writer(world, _stream(seed, kind), lang, size)
    _write_jsonl(out, in_vocabulary(name, kind, writer.__qualname__, rows, set(vocabulary(langs))))
    if name == "pretrain":
        vocab = out.with_name(Path(Layout().vocab()).name)  # beside the corpus, as the results layout has it
        vocab.write_text(json.dumps(vocabulary(langs), ensure_ascii=False), encoding="utf-8")


def in_vocabulary(
    name: str, kind: str, writer: str, rows: Iterator[dict] | list[dict], vocab: set[str]
) -> Iterator[dict]:
    """The rows of dataset `name` (of `kind`), refused with one line at the first word of model text (every string
    of a row, in lists and dicts too, but the fields `METADATA[kind]` names) that is not in the toy vocabulary: the
    word-level tokenizer would read it as <unk>, so the model could never see or write it."""
    metadata = METADATA.get(kind, frozenset())
    for row in rows:
        for key, value in row.items():
            unknown = [] if key in metadata else [w for text in strings(value) for w in text.split() if w not in vocab]
            if unknown:
                raise UserError(
                    f"toy dataset '{name}' (writer {writer} in layerswap/data/toy_writers.py): the word "
                    f"'{unknown[0]}' of field '{key}' is not in the toy vocabulary; append it to "
                    f"FUNCTION_WORDS, or, if no prompt shows the field, add '{key}' to METADATA['{kind}']"
                )
        yield row


def strings(value) -> Iterator[str]:
    """The strings of a JSON value (a string, or those inside its lists and dicts)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


def generate(
    out_raw: Path,
    out_eval: Path,
    seed: int,
    languages: dict[str, dict],
    sizes: dict[str, int],
    mixes: dict | None = None,
) -> None:
    """Write every dataset of the toy world (what the workflow's per-dataset jobs write, in one call)."""
    for name in datasets(sorted(languages)):
        folder = out_eval if is_evaluation_set(name) else out_raw
        folder.mkdir(parents=True, exist_ok=True)
        write_dataset(name, folder / f"{name}.jsonl", seed, **dataset_inputs(name, languages, sizes, mixes))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", required=True, help="pretrain, orca_math, <aya|nllb>_<lang> or <benchmark>_<lang>")
    parser.add_argument("--out", required=True, type=Path, help="the dataset's .jsonl file")
    parser.add_argument(
        "--params-json", required=True, help="{seed, languages, size}: what the dataset depends on (see dataset_inputs)"
    )


def run(args: argparse.Namespace) -> None:
    params = json.loads(args.params_json)
    write_dataset(args.dataset, args.out, params["seed"], params["languages"], params["size"], params.get("mix"))
