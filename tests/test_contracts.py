"""File contracts with one owner (layerswap/contracts.py): pair ids, selection files, atomic writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from layerswap.contracts import pair_id, pair_ids, read_selection, write_text_atomic
from layerswap.errors import UserError


def test_pair_ids_are_language_rank_major():
    assert pair_ids(2) == ["l1m1", "l1m2", "l2m1", "l2m2"] and pair_id(3, 1) == "l3m1"
    assert len(pair_ids(3)) == 9 and pair_ids(3)[-1] == "l3m3"


def test_read_selection_sorts_by_rank_and_names_the_file_at_fault(tmp_path):
    good = tmp_path / "math.json"
    good.write_text(
        json.dumps(
            {
                "selected": [
                    {"rank": 2, "run": "r", "checkpoint": "s2", "path": "p2"},
                    {"rank": 1, "run": "r", "checkpoint": "s1", "path": "p1"},
                ]
            }
        )
    )
    assert [e["path"] for e in read_selection(good, ("run", "checkpoint", "path"))] == ["p1", "p2"]
    cases = {
        "missing.json": None,
        "bad.json": "{not json",
        "empty.json": json.dumps({"selected": []}),
        "no_path.json": json.dumps({"selected": [{"rank": 1}]}),
        "rank.json": json.dumps({"selected": [{"rank": "1", "path": "p"}]}),
    }
    for name, text in cases.items():
        path = tmp_path / name
        if text is not None:
            path.write_text(text)
        with pytest.raises(UserError) as err:
            read_selection(path)
        assert str(path) in str(err.value) and "\n" not in str(err.value), name


def test_write_text_atomic_leaves_no_partial_file(tmp_path, monkeypatch):
    target = tmp_path / "out" / "a.json"
    write_text_atomic(target, "one\n")
    assert target.read_text() == "one\n"
    real = Path.write_bytes

    def dying(self, data, *a, **k):
        real(self, data[:2], *a, **k)
        raise KeyboardInterrupt("killed mid-write")

    monkeypatch.setattr(Path, "write_bytes", dying)
    with pytest.raises(KeyboardInterrupt):
        write_text_atomic(target, "two\n")
    monkeypatch.undo()
    assert target.read_text() == "one\n" and sorted(p.name for p in target.parent.iterdir()) == ["a.json"]
