"""The config checks of the data the workflow reads: the prompt template, `data_sources` (languages, local files
confined to results/data/raw) and `mixes` (every source known, per-language sources only in language mixes). Called
by `layerswap.config.check`, after the schema; every error is one line naming the key."""

from __future__ import annotations

import os
import string
from pathlib import Path

from layerswap.config_schema import key_error, short
from layerswap.languages import HF_LANGUAGES


def check_prompt(config: dict) -> None:
    fields = _placeholders(config.get("prompt_template", "{prompt}"))
    if fields - {"prompt"}:
        raise key_error(
            "prompt_template",
            f"unknown placeholder {{{sorted(fields - {'prompt'})[0]}}} (write {{{{ }}}} for a literal brace)",
            ["{prompt}"],
        )


def _placeholders(text: str | None) -> set[str]:
    try:
        return {f for _, f, _, _ in string.Formatter().parse(text or "") if f is not None}
    except ValueError:
        return {"<unbalanced brace>"}


def _check_sources(config: dict, known: list[str]) -> None:
    ok_codes = ["en", *known, *([] if config["world"] == "toy" else HF_LANGUAGES)]
    for name, src in config["data_sources"].items():
        where = f"data_sources.{name}"
        if ("file" in src) == ("hub_id" in src):
            raise key_error(where, "needs exactly one of file, hub_id", ["file", "hub_id"])
        if "file" in src:
            _check_data_file(f"{where}.file", src["file"])
        if src.get("builder") and not src.get("data_files"):
            raise key_error(f"{where}.builder", "needs data_files (the files the builder reads)", ["data_files"])
        for field, allowed in (("file", {"lang"}), ("subset", {"lang", "code"}), ("data_files", {"lang", "code"})):
            extra = _placeholders(src.get(field)) - allowed
            if extra:
                raise key_error(
                    f"{where}.{field}",
                    f"unknown placeholder {{{sorted(extra)[0]}}}",
                    ", ".join(f"{{{a}}}" for a in sorted(allowed)),
                )
            if "code" in _placeholders(src.get(field)) and not src.get("languages"):
                raise key_error(
                    f"{where}.{field}",
                    "uses {code} but the source has no languages mapping",
                    "a languages: {<target>: <code>} mapping",
                )
        for lang in src.get("languages") or {}:
            if lang not in ok_codes:
                raise key_error(f"{where}.languages.{lang}", f"unknown language '{lang}'", ok_codes)


def _check_data_file(where: str, file) -> None:
    """A source's `file` names a file of the data folder (`Layout.raw`: results/data/raw/), the only place its jobs
    read and declare it: a relative path that stays there, whatever language fills {lang}."""
    from layerswap.layout import Layout

    folder = Layout().raw("")
    name = str(file).replace("{lang}", "x").replace("{{", "{").replace("}}", "}")
    norm = os.path.normpath(name)
    if not name or Path(name).is_absolute() or norm == "." or norm.split(os.sep)[0] == "..":
        raise key_error(
            where,
            f"{short(file)} lies outside the data folder {folder} (the source's file is read from there)",
            f"a file name relative to {folder}, e.g. orca_math.jsonl",
        )


def _per_language(source: dict) -> bool:
    fields = [source.get(k) for k in ("file", "subset", "data_files")]
    return bool(source.get("languages")) or any(_placeholders(f) & {"lang", "code"} for f in fields)


def check_mixes(config: dict, languages: list[str], known: list[str]) -> None:
    mixes, sources = config["mixes"], config["data_sources"]
    _check_sources(config, known)
    lang_mix = mixes["language"]
    per_language = [isinstance(v, dict) for v in lang_mix.values()]
    if any(per_language) and not all(per_language):
        raise key_error(
            "mixes.language",
            "mixes {source: count} and {language: {source: count}} forms",
            "either one shared {source: count} or one {source: count} per target language",
        )
    if all(per_language):
        for lang in lang_mix:
            if lang not in known:
                raise key_error(f"mixes.language.{lang}", f"unknown language '{lang}'", known)
        for lang in languages:
            if lang not in lang_mix:
                raise key_error("mixes.language", f"no mix for target language '{lang}'", list(lang_mix))
        lang_parts = [(f"mixes.language.{lang}", lang, lang_mix[lang]) for lang in languages]
    else:
        lang_parts = [("mixes.language", lang, lang_mix) for lang in languages]

    for source in mixes["math"]:
        if source not in sources:
            raise key_error(f"mixes.math.{source}", f"unknown data source '{source}'", list(sources))
        if _per_language(sources[source]):
            raise key_error(
                f"mixes.math.{source}",
                f"source '{source}' is per target language (the math mix is English)",
                [n for n, s in sources.items() if not _per_language(s)],
            )
    for where, lang, mix in lang_parts:
        for source in mix:
            if source not in sources:
                raise key_error(f"{where}.{source}", f"unknown data source '{source}'", list(sources))
            mapping = sources[source].get("languages")
            if mapping and lang not in mapping:
                raise key_error(
                    f"data_sources.{source}.languages",
                    f"no entry for language '{lang}' (used in {where})",
                    list(mapping),
                )
