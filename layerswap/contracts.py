"""File contracts that several stages share, each with one owner: merge pair ids, selection metrics (which
evaluation file and score each reads), selection files, atomic writes of result files. (The files themselves are described in docs/ARCHITECTURE.md.)"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from layerswap.errors import UserError


def pair_id(lang_rank: int, math_rank: int) -> str:
    """A merge pair's id: `l<i>m<j>`, the language expert of rank i with the math expert of rank j."""
    return f"l{lang_rank}m{math_rank}"


def pair_ids(top_k: int) -> list[str]:
    """Every pair of the top-k experts, i-major (l1m1, l1m2, ..., lkmk)."""
    return [pair_id(i, j) for i in range(1, top_k + 1) for j in range(1, top_k + 1)]


#: Selection metric -> (benchmark whose evaluation file it reads, key of that file's `scores`); `{lang}` is the
#: expert's target language, `*` the mean over the MGSM languages. The selection command computes them
#: (layerswap/select.py), the config checks and the rules read which benchmark each needs.
SELECTION_METRICS: dict[str, tuple[str, str]] = {
    "mgsm_en": ("mgsm", "en"), "mgsm_avg": ("mgsm", "*"), "mgsm_target": ("mgsm", "{lang}"),
    "belebele": ("belebele", "{lang}"), "flores_from_en": ("flores", "en-{lang}"),
    "flores_to_en": ("flores", "{lang}-en"), "mmlu": ("mmlu", "{lang}"), "mbpp": ("mbpp", "{lang}"),
}


def read_selection(path: str | Path, fields: tuple[str, ...] = ("rank", "path")) -> list[dict]:
    """The 'selected' entries of a selection file (`layerswap select`), by rank; each has an int 'rank' and the other
    `fields` ('run', 'checkpoint', 'path'). A missing or malformed file is one error naming it."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"missing selection file {path}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise UserError(f"{path}: not a readable selection file ({err})") from None
    selected = data.get("selected") if isinstance(data, dict) else None
    if not isinstance(selected, list) or not selected:
        raise UserError(f"{path}: not a selection file with a non-empty 'selected' list")
    for n, entry in enumerate(selected):
        if not isinstance(entry, dict) or any(entry.get(k) in (None, "") for k in ("rank", *fields)):
            raise UserError(f"{path}: selected[{n}] needs " + ", ".join(f"'{k}'" for k in dict.fromkeys(("rank", *fields))))
        if not isinstance(entry["rank"], int) or isinstance(entry["rank"], bool):
            raise UserError(f"{path}: selected[{n}].rank must be an integer")
    return sorted(selected, key=lambda e: e["rank"])


def write_json_atomic(path: str | Path, data) -> None:
    """`data` as JSON (indent 1, sorted keys, trailing newline), written atomically: the layout of every JSON record the
    workflow writes (selections, recipes, indexes, manifests), so equal content gives equal bytes."""
    write_text_atomic(path, json.dumps(data, indent=1, sort_keys=True) + "\n")


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write `text` (UTF-8) to `path` atomically (see write_bytes_atomic)."""
    write_bytes_atomic(path, text.encode("utf-8"))


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    """Write `data` to `path` through a hidden temporary file in the same folder, renamed into place: a reader (or a
    killed job) never sees a half-written result file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def replace_dir(tmp: Path, out: Path) -> None:
    """Put the finished directory `tmp` (made beside `out`) in place of `out`, an old `out` moved aside first and then
    removed: a reader finds the old directory or the new one, never a mix or a partial one."""
    os.chmod(tmp, 0o755)
    if out.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
        os.replace(out, old / "x")
        os.replace(tmp, out)
        shutil.rmtree(old)
    else:
        os.replace(tmp, out)
