"""Reading JSON objects (command-line arguments) and JSONL files with one-line errors that name what is at fault."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Iterator

from layerswap.errors import UserError


def json_object(text: str, what: str, expected: str = "a JSON object") -> dict:
    """A JSON object given as text (e.g. a --params-json argument); anything else is an error naming `what`."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as err:
        raise UserError(f"{what}: not valid JSON ({err.msg} at char {err.pos})") from None
    if not isinstance(raw, dict):
        raise UserError(f"{what}: expected {expected}")
    return raw


def read_rows(path: Path, required: Iterable[str]) -> Iterator[tuple[int, dict]]:
    """(line number, row) of a JSONL file; a row missing a required field is an error naming file, line, field."""
    with Path(path).open(encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise UserError(f"{path}:{i}: not valid JSON ({err.msg})") from None
            if not isinstance(row, dict):
                raise UserError(f"{path}:{i}: not a JSON object")
            for name in required:
                if name not in row:
                    raise UserError(f"{path}:{i}: missing field '{name}'")
            yield i, row


def read_jsonl(path: Path, required: Iterable[str]) -> list[dict]:
    """All rows of a JSONL file (see read_rows); an empty file is an error."""
    rows = [row for _, row in read_rows(path, required)]
    if not rows:
        raise UserError(f"{path}: no rows")
    return rows
