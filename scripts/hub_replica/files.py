"""The Hub replica's building blocks: a repository (`Repo`), the file writers (parquet, JSONL, CSV, gzipped TSV,
dataset cards) and the synthetic text every repository's rows are made of (repos.py lists the repositories)."""

from __future__ import annotations

import dataclasses
import gzip
import io
import json
from typing import Callable

N = 24  # rows per synthetic split (the paper-shaped mixes ask for 4 per source)

# Per-language sample text: a word in the language's script, so rows look like the real languages to a reader.
WORD = {
    "en": "water",
    "swh": "maji",
    "tel": "నీరు",
    "ben": "জল",
    "jpn": "水",
    "deu": "Wasser",
    "fra": "eau",
    "zho": "水",
    "rus": "вода",
    "spa": "agua",
    "tha": "น้ำ",
}


@dataclasses.dataclass
class Repo:
    repo_id: str
    kind: str = "dataset"  # dataset | model
    files: dict[str, bytes | Callable[[], bytes]] = dataclasses.field(default_factory=dict)
    gated: bool = False
    # extra git refs: name -> {path: content} committed on top of nothing but these files (refs/convert/parquet)
    refs: dict[str, dict[str, bytes | Callable[[], bytes]]] = dataclasses.field(default_factory=dict)


# ------------------------------------------------------------------------------------------------- file writers
def parquet(rows: list[dict]) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), buf)
    return buf.getvalue()


def jsonl(rows: list[dict]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode()


def csv(rows: list[dict]) -> bytes:
    import pandas as pd

    return pd.DataFrame(rows).to_csv(index=False).encode()


def tsv_gz(rows: list[list]) -> bytes:
    text = "".join("\t".join(str(c) for c in r) + "\n" for r in rows)
    return gzip.compress(text.encode(), mtime=0)


def card(configs: list[dict] | None = None, gated: bool = False, extra: str = "") -> bytes:
    """A README.md whose YAML header holds `configs:` (as the real cards do) and, when gated, `extra_gated_*`."""
    import yaml

    meta: dict = {}
    if configs:
        meta["configs"] = configs
    if gated:
        meta["extra_gated_prompt"] = "You agree to the terms of use of this dataset."
    head = f"---\n{yaml.safe_dump(meta, sort_keys=False, allow_unicode=True)}---\n" if meta else ""
    return (head + "# Hub replica (synthetic rows)\n" + extra).encode()


def text(lang: str, what: str, i: int) -> str:
    return f"{WORD.get(lang, lang)} {what} {i}"
