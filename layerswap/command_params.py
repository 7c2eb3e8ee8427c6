"""Command params: one typed object per command, built from the JSON a rule passes (`--params-json` and the like).

A command declares what it reads as a dataclass; `parse(Params, text)` checks the JSON object against the
dataclass's annotations and returns an instance. A missing or unknown key, or a value of another type, is one line
naming the key (``--params-json: 'top_k' must be an integer >= 1, got 0``). What a type alone cannot say is an
``Annotated`` bound: ``Annotated[int, AtLeast(1)]`` (numbers: the value, lists, mappings and strings: the length).
Checks across keys go in the dataclass's ``__post_init__``.

The rules build these objects' JSON from a validated config (layerswap/workflow/spec.py), so the checks here catch a
hand-written command line or a rule edited out of step with its command, not config errors.

Types understood: ``int`` (not ``bool``), ``float`` (an int too, not ``bool``), ``str``, ``bool``, ``Any``,
``Literal[...]``, ``X | None``, ``list[X]``, ``dict[str, X]`` and nested dataclasses.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from typing import Annotated, Any, Literal, TypeVar, Union

from layerswap.errors import UserError
from layerswap.jsonl import json_object

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class AtLeast:
    """A lower bound: of a number's value, of a list's, mapping's or string's length."""

    low: float


def parse(cls: type[T], text: str, what: str = "--params-json") -> T:
    """`text` (a JSON object) as an instance of the dataclass `cls`; one UserError naming `what` and the key."""
    return build(cls, json_object(text, what), what)


def build(cls: type[T], raw: Any, what: str, key: str = "") -> T:
    """The dataclass `cls` from an already decoded JSON object (`key`: where it sits, for messages)."""
    if not isinstance(raw, dict):
        raise UserError(f"{what}: {_name(key)}must be an object, got {_short(raw)}")
    hints = typing.get_type_hints(cls, include_extras=True)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(raw) - set(fields))
    if unknown:
        raise UserError(f"{what}: unknown key '{key}{unknown[0]}'; known: {', '.join(fields)}")
    values = {}
    for name, f in fields.items():
        if name in raw:
            values[name] = _value(hints[name], raw[name], f"{key}{name}", what)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise UserError(f"{what}: missing key '{key}{name}'")
    return cls(**values)


def _value(tp: Any, value: Any, key: str, what: str, shown: Any = None) -> Any:
    """`value` checked against `tp`; `shown`: the type its message names (an optional's, `X | None`)."""
    shown = tp if shown is None else shown
    base, bounds = _unannotated(tp)
    origin, args = typing.get_origin(base), typing.get_args(base)
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]  # `X | None` only
        return _value(inner, value, key, what, shown) if value is not None else _fail(what, key, shown, value)
    if dataclasses.is_dataclass(base):
        return build(base, value, what, f"{key}.")
    if origin is list:
        if not isinstance(value, list):
            _fail(what, key, shown, value)
        out = [_value(args[0], item, f"{key}[{i}]", what) for i, item in enumerate(value)]
    elif origin is dict:
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            _fail(what, key, shown, value)
        out = {k: _value(args[1], v, f"{key}.{k}", what) for k, v in value.items()}
    elif origin is Literal:
        if not any(value == a and type(value) is type(a) for a in args):
            _fail(what, key, shown, value)
        out = value
    elif not _is(base, value):
        _fail(what, key, shown, value)
    else:
        out = value
    for bound in bounds:
        if (len(out) if isinstance(out, (list, dict, str)) else out) < bound.low:
            _fail(what, key, shown, value)
    return out


def _is(tp: Any, value: Any) -> bool:
    if tp is Any:
        return True
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, tp)


def _unannotated(tp: Any) -> tuple[Any, list[AtLeast]]:
    if typing.get_origin(tp) is Annotated:
        base, *extras = typing.get_args(tp)
        return base, [e for e in extras if isinstance(e, AtLeast)]
    return tp, []


def describe(tp: Any) -> str:
    """What a value of type `tp` is, in words ('an integer >= 1', 'null or a non-empty list of strings')."""
    base, bounds = _unannotated(tp)
    origin, args = typing.get_origin(base), typing.get_args(base)
    low = bounds[0].low if bounds else None
    if origin in (Union, types.UnionType):
        return "null or " + describe(next(a for a in args if a is not type(None)))
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if dataclasses.is_dataclass(base):
        return "an object with keys " + ", ".join(f.name for f in dataclasses.fields(base))
    if origin in (list, dict):
        noun, item = ("list", args[0]) if origin is list else ("object", args[1])
        size = "non-empty " if low == 1 else ""
        article = "an" if (size or noun).startswith(("a", "e", "i", "o", "u")) else "a"
        more = f" (at least {low:g})" if low not in (None, 1) else ""
        return f"{article} {size}{noun} of {_plural(describe(item))}{more}"
    words = {int: "an integer", float: "a number", str: "a string", bool: "true or false", Any: "any value"}
    text = words.get(base, getattr(base, "__name__", str(base)))
    if low is not None:
        text = "a non-empty string" if base is str and low == 1 else f"{text} >= {low:g}"
    return text


def _plural(text: str) -> str:
    """'an integer >= 1' -> 'integers >= 1', 'a non-empty list of strings' -> 'non-empty lists of strings'."""
    article, _, rest = text.partition(" ")
    if article not in ("a", "an"):
        return text
    words = rest.split(" ")
    noun = next(i for i, w in enumerate(words) if w != "non-empty")
    words[noun] += "s"
    return " ".join(words)


def _fail(what: str, key: str, tp: Any, value: Any):
    raise UserError(f"{what}: '{key}' must be {describe(tp)}, got {_short(value)}")


def _name(key: str) -> str:
    return f"'{key.rstrip('.')}' " if key else ""


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
