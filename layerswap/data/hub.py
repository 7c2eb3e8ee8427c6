"""Hub sources of the paper config: the per-(source, language) data files and the base model, from the HF cache.

``layerswap hub-data --spec-json ... --out results/data/raw/<name>_<lang>.jsonl``  (rule ``hub_data``)
    Load one pre-staged source (offline on compute nodes), map its columns onto the source's schema
    (`layerswap.data.mixes.SCHEMAS`), walk its rows in a seeded random order, drop blank rows, duplicates and rows that
    contain a FLORES sentence (sources with ``exclude: [flores]``), stop once the mix's count of distinct examples
    is reached, and write the rows plus ``<name>_<lang>.manifest.json`` (counts of what was seen and dropped).

The base model (``layerswap prepare-base``) is `layerswap.data.prepare_base`, which links it from the snapshot
`snapshot` finds; ``layerswap prestage``, which downloads what the config needs, is `layerswap.workflow.prestage`.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Iterable, Iterator

from layerswap.contracts import write_text_atomic
from layerswap.data.mixes import language_mix
from layerswap.errors import UserError
from layerswap.hf_cache import use_hf_home

#: Files of a model snapshot that are fetched and linked: weights as safetensors only (never pickle).
MODEL_PATTERNS = ["*.safetensors", "*.json", "tokenizer*"]
#: FLORES-200 sentences for evaluation-overlap removal: one config per FLORES code, column `text`.
FLORES_HUB = {"hub_id": "openlanguagedata/flores_plus", "splits": ["dev", "devtest"], "column": "text"}
#: `exclude` values this module knows.
EXCLUDES = ("flores",)


# ----------------------------------------------------------------------------------------------------------------
# what the config needs


def _fmt(value, lang: str, code: str | None):
    """Fill {lang}/{code} (and {src}/{tgt}, the halves of a '<src>-<tgt>' code) in a string, list or mapping."""
    if isinstance(value, (list, tuple)):
        return [_fmt(v, lang, code) for v in value]
    if isinstance(value, dict):
        return {k: _fmt(v, lang, code) for k, v in value.items()}
    if not isinstance(value, str):
        return value
    code = code if code is not None else lang
    src, _, tgt = code.partition("-")
    return value.format(lang=lang, code=code, src=src, tgt=tgt or src)


def needed_sources(config: dict) -> dict[tuple[str, str], int]:
    """(hub source name, language) -> the largest count a mix asks of it (math mixes are English: 'en')."""
    sources = config["data_sources"]
    mixes = config["mixes"]
    out: dict[tuple[str, str], int] = {}

    def add(mix: dict, lang: str) -> None:
        for name, n in mix.items():
            if "hub_id" in sources[name]:
                out[(name, lang)] = max(out.get((name, lang), 0), int(n))

    add(mixes["math"], "en")
    for lang in config["languages"]:
        add(language_mix(mixes, lang), lang)
    return out


def source_spec(config: dict, name: str, lang: str) -> dict:
    """Everything `hub-data` needs for one (source, language), with {code}/{lang} filled in."""
    src = config["data_sources"][name]
    code = (src.get("languages") or {}).get(lang)
    spec = {
        "name": name,
        "lang": lang,
        "hub_id": src["hub_id"],
        "revision": src.get("revision"),
        "subset": _fmt(src.get("subset"), lang, code),
        "data_files": _fmt(src.get("data_files"), lang, code),
        "split": _fmt(src.get("split", "train"), lang, code),
        "schema": src["schema"],
        "builder": src.get("builder"),
        "builder_kwargs": _fmt(src.get("builder_kwargs") or {}, lang, code),
        "columns": _fmt(dict(src.get("columns") or {}), lang, code),
        "language_column": src.get("language_column"),
        "language_value": code if src.get("language_column") else None,
        "n": needed_sources(config).get((name, lang)),
        "flores": [],
    }
    for what in src.get("exclude") or []:
        if what not in EXCLUDES:
            raise UserError(f"data source '{name}': unknown exclude '{what}'; allowed: {', '.join(EXCLUDES)}")
        spec["flores"] = flores_artefacts(lang)
    return spec


def flores_artefacts(lang: str) -> list[dict]:
    """FLORES dev + devtest of English and `lang` (an English sentence in a prompt leaks the item as well)."""
    from layerswap.languages import HF_LANGUAGES

    codes = [HF_LANGUAGES[c]["flores"] for c in dict.fromkeys(["en", lang]) if c in HF_LANGUAGES]
    if lang not in HF_LANGUAGES:
        raise UserError(f"no FLORES code known for language '{lang}' (layerswap/languages.py:HF_LANGUAGES)")
    return [
        {
            "kind": "dataset",
            "hub_id": FLORES_HUB["hub_id"],
            "subset": code,
            "split": split,
            "column": FLORES_HUB["column"],
            "purpose": f"overlap removal ({lang})",
        }
        for code in codes
        for split in FLORES_HUB["splits"]
    ]


def is_local_source(source: str) -> bool:
    """Whether base.source names a local directory (a path, or an existing directory) rather than a hub id."""
    return source.startswith(("/", ".", "~")) or Path(source).expanduser().is_dir()


def describe(item: dict) -> str:
    parts = [item["kind"], item["hub_id"]]
    for key in ("subset", "split", "builder", "data_files", "revision"):
        if item.get(key):
            parts.append(f"{key}={item[key]}")
    return " ".join(parts) + (f"  # {item['purpose']}" if item.get("purpose") else "")


# ----------------------------------------------------------------------------------------------------------------
# downloads and offline loads


def load_dataset(item: dict, streaming: bool = False):
    """`open_dataset`, with any failure as one line naming the artefact and what to do."""
    try:
        return open_dataset(item, streaming)
    except Exception as err:  # noqa: BLE001 - datasets raises many kinds; one line naming the artefact
        raise UserError(f"cannot load {describe(item)}: {load_error(err)}") from None


def open_dataset(item: dict, streaming: bool = False):
    """`datasets.load_dataset` for an artefact/spec dict (offline when HF_DATASETS_OFFLINE=1): the hub repository
    `hub_id`, or with `builder` the files `data_files` names (read by that packaged builder)."""
    import datasets

    kwargs = {"split": item.get("split") or "train"}
    if item.get("data_files"):
        kwargs["data_files"] = item["data_files"]
    if item.get("revision") and not item.get("builder"):
        kwargs["revision"] = item["revision"]
    if streaming:
        kwargs["streaming"] = True
    kwargs.update(item.get("builder_kwargs") or {})
    if item.get("builder"):
        return datasets.load_dataset(item["builder"], **kwargs)
    if item.get("data_files"):
        builder, kwargs["data_files"] = repo_files(item, download=not streaming)
        kwargs.pop("revision", None)
        return datasets.load_dataset(builder, **kwargs)
    return datasets.load_dataset(item["hub_id"], item.get("subset"), **kwargs)


def gated_hint() -> str:
    from huggingface_hub import get_token

    return (
        "gated: accept its terms on the hub page with the account of your token, and give the token (HF_TOKEN "
        "or `hf auth login`)" + ("" if get_token() else "; no token is set")
    )


BUILDERS = {".parquet": "parquet", ".jsonl": "json", ".json": "json", ".csv": "csv"}


def repo_files(item: dict, download: bool = True) -> tuple[str, list[str]]:
    """(packaged builder, files) of a hub dataset's `data_files` glob: local paths, fetched into the HF hub cache (or
    found there when offline), or with download=False their hf:// paths (streamed; the pre-flight check). Read as
    local files because `datasets` cannot find a data_files load in its cache offline (the cache key hashes the
    resolved hub URLs, which offline resolution does not reproduce)."""
    import fnmatch

    from huggingface_hub import HfApi, snapshot_download

    if download:
        offline = os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("HF_DATASETS_OFFLINE") == "1"
        local = Path(
            snapshot_download(
                item["hub_id"],
                repo_type="dataset",
                revision=item.get("revision"),
                allow_patterns=[item["data_files"]],
                local_files_only=offline,
            )
        )
        files = sorted(str(p) for p in local.glob(item["data_files"]))
    else:
        at = f"@{item['revision']}" if item.get("revision") else ""
        files = [
            f"hf://datasets/{item['hub_id']}{at}/{p}"
            for p in sorted(HfApi().list_repo_files(item["hub_id"], repo_type="dataset", revision=item.get("revision")))
            if fnmatch.fnmatch(p, item["data_files"])
        ]
    if not files:
        raise FileNotFoundError(f"no file matches data_files {item['data_files']!r}")
    suffix = Path(files[0]).suffix
    if suffix not in BUILDERS:
        raise ValueError(f"data_files {item['data_files']!r}: no builder for *{suffix} files")
    return BUILDERS[suffix], files


def load_error(err: BaseException) -> str:
    """What went wrong loading a dataset, in one line, with what to do about it."""
    text = str(err).splitlines()[0] if str(err) else ""
    name = type(err).__name__
    offline = os.environ.get("HF_DATASETS_OFFLINE") == "1" or os.environ.get("HF_HUB_OFFLINE") == "1"
    if "Dataset scripts are no longer supported" in text:
        return (
            f"a loading-script dataset ({text.rsplit(' ', 1)[-1]}), which the installed datasets refuses; "
            "read its parquet conversion (revision: refs/convert/parquet, with data_files) or the files the "
            "script reads (builder + data_files)"
        )
    if name in ("GatedRepoError",) or "gated" in text.lower():
        return gated_hint()
    if "BuilderConfig" in text and "not found" in text:
        return f"no such config: {text}"
    if offline:
        return f"{name}: {text} (offline: run `layerswap prestage` first, with the same HF_HOME)"
    return f"{name}: {text}"


def snapshot(item: dict, local_files_only: bool) -> Path:
    from huggingface_hub import snapshot_download

    try:
        return Path(
            snapshot_download(
                repo_id=item["hub_id"],
                revision=item.get("revision"),
                allow_patterns=item.get("allow_patterns", MODEL_PATTERNS),
                local_files_only=local_files_only,
            )
        )
    except Exception as err:  # noqa: BLE001
        hint = " (run `layerswap prestage` first, with the same HF_HOME)" if local_files_only else ""
        raise UserError(f"cannot get {describe(item)}: {type(err).__name__}{hint}") from None


# ----------------------------------------------------------------------------------------------------------------
# hub-data: one (source, language) -> rows in the source schema + manifest


def flores_sentences(specs: list[dict], load=load_dataset) -> list[str]:
    out: list[str] = []
    for spec in specs:
        ds = load(spec)
        out += [s for s in ds[spec.get("column", "text")] if isinstance(s, str)]
    return out


def select_rows(rows: Iterable[dict], spec: dict, n: int, overlap=None) -> tuple[list[dict], dict]:
    """Walk `rows` (already in seeded order); keep rows in the source schema until `n` distinct examples.

    Returns (kept rows, counts). A row is dropped if it gives no example (blank), if its examples were all seen
    before (duplicate), or if any of its text contains an overlap sentence."""
    from layerswap.data.mixes import examples, to_schema

    kept: list[dict] = []
    seen: set[tuple[str, str]] = set()
    counts = {"scanned": 0, "blank": 0, "duplicate": 0, "overlap": 0, "wrong_language": 0}
    for row in rows:
        if len(seen) >= n:
            break
        counts["scanned"] += 1
        if spec.get("language_column") and row.get(spec["language_column"]) != spec["language_value"]:
            counts["wrong_language"] += 1
            continue
        doc = to_schema(row, spec["schema"], spec.get("columns"), spec["name"])
        try:
            pairs = examples(doc, spec["schema"], spec["lang"])
        except (KeyError, TypeError, ValueError):
            pairs = []
        if not pairs:
            counts["blank"] += 1
            continue
        new = [p for p in pairs if p not in seen]
        if not new:
            counts["duplicate"] += 1
            continue
        if overlap is not None and overlap.row_contains(doc):
            counts["overlap"] += 1
            continue
        seen.update(new)
        kept.append(doc)
    counts["kept_rows"], counts["examples"] = len(kept), len(seen)
    return kept, counts


def _shuffled_rows(ds, seed: int, indices=None, chunk: int = 2048) -> Iterator[dict]:
    """Rows of a `datasets.Dataset` (or only those at `indices`) in a seeded random order, read in chunks (no copy
    of the dataset, nothing written to the cache)."""
    import numpy as np

    order = np.random.default_rng(seed).permutation(len(ds) if indices is None else np.asarray(indices))
    for start in range(0, len(order), chunk):
        batch = ds[order[start : start + chunk].tolist()]
        names = list(batch)
        for i in range(len(batch[names[0]]) if names else 0):
            yield {k: batch[k][i] for k in names}


def source_seed(seed: int, name: str, lang: str) -> int:
    import hashlib

    return int.from_bytes(hashlib.sha256(f"{seed}:{name}:{lang}".encode()).digest()[:8], "big")


def write_source(spec: dict, seed: int, out: Path, manifest: Path, load=load_dataset) -> dict:
    from layerswap.data.mixes import OverlapFilter

    ds = load(spec)
    if spec.get("language_column"):
        column, value = spec["language_column"], spec["language_value"]
        if column not in ds.column_names:
            raise UserError(
                f"data source '{spec['name']}': no column '{column}' (language_column); the dataset "
                f"has: {', '.join(ds.column_names)}"
            )
        indices = [i for i, v in enumerate(ds[column]) if v == value]
    else:
        indices = None
    total = len(ds)
    in_language = total if indices is None else len(indices)
    overlap = None
    if spec.get("flores"):
        overlap = OverlapFilter(flores_sentences(spec["flores"], load))
    n = int(spec["n"])
    order = _shuffled_rows(ds, source_seed(seed, spec["name"], spec["lang"]), indices)
    rows, counts = select_rows(order, spec, n, overlap)
    if counts["examples"] < n:
        raise UserError(
            f"data source '{spec['name']}' ({spec['lang']}): only {counts['examples']} usable examples "
            f"after removing blanks, duplicates and evaluation overlap; the mix asks for {n} "
            f"(dropped: {counts})"
        )
    write_text_atomic(out, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    info = {
        "source": spec["name"],
        "lang": spec["lang"],
        "hub_id": spec["hub_id"],
        "subset": spec.get("subset"),
        "split": spec.get("split"),
        "data_files": spec.get("data_files"),
        "revision": spec.get("revision"),
        "dataset_fingerprint": getattr(ds, "_fingerprint", None),
        "schema": spec["schema"],
        "columns": spec.get("columns"),
        "rows_in_split": total,
        "rows_in_language": in_language,
        "seed": seed,
        "asked": n,
        "overlap_sentences": overlap.size if overlap else 0,
        "overlap_source": [f"{f['hub_id']}:{f['subset']}:{f['split']}" for f in spec.get("flores") or []],
        **counts,
    }
    write_text_atomic(manifest, json.dumps(info, indent=1, ensure_ascii=False) + "\n")
    return info


# ----------------------------------------------------------------------------------------------------------------
# CLI (`layerswap prepare-base` is layerswap.data.prepare_base; `layerswap prestage` is layerswap.workflow.prestage)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--spec-json", required=True, help="output of source_spec (one source, one language)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--manifest", required=True, type=Path)
    parser.add_argument("--hf-home", default=None)


def run(args: argparse.Namespace) -> None:
    use_hf_home(args.hf_home)
    spec = json.loads(args.spec_json)
    info = write_source(spec, args.seed, args.out, args.manifest)
    print(
        json.dumps(
            {
                k: info[k]
                for k in ("source", "lang", "scanned", "kept_rows", "examples", "blank", "duplicate", "overlap")
            }
        )
    )
