"""Validation of a workflow config against config/schema.yaml (JSON schema, defaults filled in place), and the
one-line form of every config error: ``config key '<dotted.path>': <what is wrong>; allowed: <values>``.

layerswap/config.py runs it before its own checks (the ones a schema cannot express) and reads config files through
it.
"""

from __future__ import annotations

import copy
import functools
import re
from pathlib import Path
from typing import Any, Iterable

from layerswap.contracts import read_text
from layerswap.errors import UserError, yaml_problem

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "config" / "schema.yaml"


def _key(path: Iterable[Any]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def short(value: Any, limit: int = 60) -> str:
    text = repr(value).replace("\n", "\\n")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def key_error(path: Iterable[Any] | str, message: str, allowed: Iterable[Any] | str | None = None) -> UserError:
    key = path if isinstance(path, str) else _key(path)
    head = f"config key '{key}'" if key else "config"
    if allowed is not None and not isinstance(allowed, str):
        allowed = ", ".join(str(a) for a in allowed)
    text = f"{head}: {message}" + (f"; allowed: {allowed}" if allowed is not None else "")
    return UserError(" ".join(text.split("\n")))


def load_yaml(path: str | Path, what: str) -> Any:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    text = read_text(path, what)  # missing, unreadable or not UTF-8: one line naming the file
    try:
        return yaml.load(text, Loader=loader)
    except yaml.YAMLError as err:
        raise UserError(f"{what} {path} {yaml_problem(err)}") from None


def read_config_file(path: str | Path) -> dict:
    """A workflow config file as a mapping, or one UserError naming the file (and line): missing, unreadable, not
    UTF-8, not YAML, empty, or not a mapping. What Snakemake's own loader would refuse, said better."""
    config = load_yaml(path, "config file")
    if config is None:
        raise UserError(f"config file {path} is empty; a config is a mapping of keys (see config/config.yaml)")
    if not isinstance(config, dict):
        raise UserError(f"config file {path}: expected a mapping of keys, got {type(config).__name__}")
    return config


@functools.lru_cache(maxsize=8)
def _schema(path: str, mtime: float) -> dict:
    return load_yaml(path, "schema")


@functools.lru_cache(maxsize=1)
def _validator_class():
    from jsonschema import Draft202012Validator, validators

    validate_properties = Draft202012Validator.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for name, sub in properties.items():
                if isinstance(sub, dict) and "default" in sub and name not in instance:
                    instance[name] = copy.deepcopy(sub["default"])
        yield from validate_properties(validator, properties, instance, schema)

    return validators.extend(Draft202012Validator, {"properties": set_defaults})


def _error_to_user(error) -> UserError:
    """One line for a jsonschema ValidationError, naming the key path and, where known, the allowed values."""
    path, kind, schema, value = list(error.absolute_path), error.validator, error.schema, error.instance
    if kind in ("anyOf", "oneOf"):
        # descend into the branch that got furthest into the value (e.g. a wrong count inside a right-shaped mix)
        deeper = [e for e in error.context if len(e.relative_path) > 0]
        named = [e for e in error.context if "propertyNames" in e.relative_schema_path]  # a mapping's unknown key
        if named and not deeper:
            return _error_to_user(named[0])
        if deeper:
            return _error_to_user(max(deeper, key=lambda e: len(e.relative_path)))
        expected = schema.get("description") or " or ".join(
            str(s.get("type") or s.get("const") or s.get("enum") or "another form") for s in error.validator_value
        )
        return key_error(path, f"{short(value)} is not valid; expected {expected}")
    if kind == "additionalProperties":
        known = list(schema.get("properties", {}))
        extra = sorted(k for k in value if k not in known)
        what = f"unknown key '{extra[0]}'" if len(extra) == 1 else f"unknown keys {', '.join(map(repr, extra))}"
        if not path:
            return key_error(path, f"{what} at top level", known)
        return key_error(path, what, known)
    if kind == "unevaluatedProperties":  # toy_world.sizes: its own keys, and every benchmark's through allOf
        from layerswap.benchmarks import NAMES

        extra = sorted(set(re.findall(r"'([^']+)'", error.message)))
        return key_error(
            path, f"unknown key '{extra[0]}'" if extra else error.message, [*schema.get("properties", {}), *NAMES]
        )
    if kind == "required":
        missing = error.message.split("'")[1] if "'" in error.message else str(error.validator_value)
        return key_error([*path, missing], "required key is missing")
    if "propertyNames" in error.absolute_schema_path:  # a key of a mapping (the value here) is at fault
        if kind == "enum":
            return key_error(path, f"unknown key {short(value)}", error.validator_value)
        rule = schema.get("description") or error.message
        return key_error(path, f"key {short(value)} is not a valid name ({rule})")
    if kind in ("enum", "const"):
        allowed = error.validator_value if kind == "enum" else [error.validator_value]
        return key_error(path, f"{short(value)} is not allowed", allowed)
    if kind in ("minProperties", "minItems") and error.validator_value == 1:
        return key_error(path, "must not be empty")
    if kind == "pattern":
        rule = schema.get("description")
        if path and path[-1] == "prompt_template":
            rule = "must contain {prompt}"
        return key_error(path, f"{short(value)} is not valid ({rule or 'must match ' + error.validator_value})")
    if kind == "type" and isinstance(value, str):
        hint = ""
        try:
            float(value)
            hint = " (YAML reads 1e-5 as a string: write 1.0e-5)"
        except ValueError:
            pass
        return key_error(path, f"{short(value)} is not of type {error.validator_value!r}{hint}")
    message = error.message
    if len(message) > 200:
        message = message[:197] + "..."
    return key_error(path, message)


def validate_config(config: dict, schema_path: str | Path = SCHEMA_PATH) -> dict:
    """Validate `config` against the JSON schema, filling schema defaults in place; return it.

    The first (most relevant) error becomes a one-line UserError naming the key path.
    """
    from jsonschema.exceptions import relevance

    if not isinstance(config, dict):
        raise UserError(f"config: expected a mapping of keys, got {type(config).__name__}")
    path = Path(schema_path)
    try:
        mtime = path.stat().st_mtime
    except OSError as err:
        raise UserError(f"cannot read schema {path}: {err.strerror}") from None
    schema = _schema(str(path), mtime)
    errors = list(_validator_class()(schema).iter_errors(config))
    # a value refused inside an allOf branch also leaves its key "unevaluated" (toy_world.sizes: a benchmark's
    # size over its maximum would read as an unknown key): name the value's own fault first
    real = [e for e in errors if e.validator != "unevaluatedProperties"] or errors
    if real:
        raise _error_to_user(max(real, key=relevance))
    return config


def schema_maximum(definition: str, schema_path: str | Path = SCHEMA_PATH) -> int:
    """The `maximum` of the schema's `$defs/<definition>` (e.g. `seed`): the one owner of a bound that a check outside
    the config schema (an ablation file's) also applies."""
    path = Path(schema_path)
    return _schema(str(path), path.stat().st_mtime)["$defs"][definition]["maximum"]


def schema_defaults(definition: str, schema_path: str | Path = SCHEMA_PATH) -> dict:
    """The `default` of each property of the schema's `$defs/<definition>`: the one owner of defaults that a job
    also applies when run by hand (without the config check that fills them)."""
    path = Path(schema_path)
    properties = _schema(str(path), path.stat().st_mtime)["$defs"][definition]["properties"]
    return {key: spec["default"] for key, spec in properties.items() if "default" in spec}
