"""Report pages (`layerswap charts table-html`, `config-html`): the tables' Markdown files and the workflow config as
self-contained HTML pages, so that the Snakemake report shows them inline (Snakemake 9's report shows HTML, images and
PDF inline; CSV, Markdown and YAML are download links). A table page reads only the Markdown that `layerswap tables`
writes (layerswap/report/render.py: a title, paragraphs, one pipe table, notes)."""

from __future__ import annotations

import argparse
import html
from pathlib import Path

from layerswap.errors import UserError
from layerswap.jsonl import json_object

PAGE_CSS = (
    "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:1.2em;color:#222}"
    "table{border-collapse:collapse;font-size:13px}th,td{border:1px solid #ccc;padding:3px 8px}"
    "th{background:#f0f0f0}td.r,th.r{text-align:right}tr:nth-child(even) td{background:#fafafa}"
    "pre{background:#f6f6f6;padding:1em;font-size:12px;overflow:auto}ul{font-size:13px}"
)


def _page(title: str, body: str) -> str:
    return (
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{PAGE_CSS}</style></head><body>\n{body}\n</body></html>\n"
    )


def parse_markdown_table(text: str) -> dict:
    """The Markdown files of `layerswap tables`: '# title', paragraphs, one pipe table, '- note' lines."""
    lines = text.splitlines()
    title, paragraphs, rows, notes = "", [], [], []
    for line in lines:
        s = line.strip()
        if not s:
            continue
        if s.startswith("# ") and not title:
            title = s[2:].strip()
        elif s.startswith("|"):
            rows.append([c.strip() for c in s.strip("|").split("|")])
        elif s.startswith("- ") and rows:
            notes.append(s[2:])
        else:
            paragraphs.append(s)
    if len(rows) < 2 or not all(set(c) <= set(":-") and c for c in rows[1]):
        raise UserError("no Markdown pipe table (header, separator line, rows) found")
    align = ["right" if c.endswith(":") and not c.startswith(":") else "left" for c in rows[1]]
    return {
        "title": title,
        "paragraphs": paragraphs,
        "header": rows[0],
        "align": align,
        "rows": rows[2:],
        "notes": notes,
    }


def table_page(md_text: str, source: str) -> str:
    t = parse_markdown_table(md_text)
    esc = html.escape

    def cls(i: int) -> str:
        return ' class="r"' if i < len(t["align"]) and t["align"][i] == "right" else ""

    head = "".join(f"<th{cls(i)}>{esc(c)}</th>" for i, c in enumerate(t["header"]))
    body = "\n".join(
        "<tr>" + "".join(f"<td{cls(i)}>{esc(c)}</td>" for i, c in enumerate(row)) + "</tr>" for row in t["rows"]
    )
    parts = [f"<h2>{esc(t['title'])}</h2>"]
    parts += [f"<p>{esc(p)}</p>" for p in t["paragraphs"]]
    parts.append(f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody>\n</table>")
    if t["notes"]:
        parts.append("<ul>" + "".join(f"<li>{esc(n)}</li>" for n in t["notes"]) + "</ul>")
    parts.append(f'<p style="color:#777;font-size:12px">Source: {esc(source)}</p>')
    return _page(t["title"] or source, "\n".join(parts))


def run_table_html(args: argparse.Namespace) -> None:
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for md in args.markdown:
        src = Path(md)
        try:
            text = src.read_text()
        except OSError as err:
            raise UserError(f"{src}: cannot read the table ({err})") from None
        try:
            page = table_page(text, str(src))
        except UserError as err:
            raise UserError(f"{src}: {err}") from None
        (out_dir / f"{src.stem}.html").write_text(page)


def run_config_html(args: argparse.Namespace) -> None:
    import yaml

    config = json_object(args.config_json, "--config-json")
    prefix = Path(args.out_prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    text = yaml.safe_dump(config, sort_keys=False, allow_unicode=True, width=110)
    header = "# The workflow config this run used (after schema defaults), written by `layerswap charts config-html`.\n"
    prefix.with_name(prefix.name + ".yaml").write_text(header + text)
    world = config.get("world", "?")
    warn = (
        "<p><b>Toy world:</b> every language is a synthetic stand-in; no number says anything about a real "
        "language.</p>"
        if world == "toy"
        else ""
    )
    body = f"<h2>Config used (world: {html.escape(str(world))})</h2>{warn}<pre>{html.escape(text)}</pre>"
    prefix.with_name(prefix.name + ".html").write_text(_page("Config used", body))
