"""`snakemake --report` for the micro run: a self-contained HTML file holding every table, figure and the config.

Snakemake 9's report is a JS app: the results are a JSON object in <script id="results"> ("var results = {...};"),
each with its caption (HTML) and the file itself as a base64 data URI; the workflow description (report/workflow.rst
rendered) is in <script id="workflow-desc">.
"""

from __future__ import annotations

import base64
import io
import json
from html import escape
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest
from conftest import snakemake

pytestmark = pytest.mark.workflow

TABLES = ["table1", "table2", "table5", "table6", "table1_best_configs", "table2_best_configs"]
FIGURES = ["param_change", "param_change_mean", "swap_grid", "table1_bars"]


class Scripts(HTMLParser):
    """The text of every <script id=...> and whether the app root is there."""

    def __init__(self):
        super().__init__()
        self.scripts: dict[str, str] = {}
        self.has_app = False
        self._current: str | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "div" and attrs.get("id") == "app":
            self.has_app = True
        if tag == "script" and attrs.get("id"):
            self._current = attrs["id"]
            self.scripts[self._current] = ""

    def handle_endtag(self, tag):
        if tag == "script":
            self._current = None

    def handle_data(self, data):
        if self._current:
            self.scripts[self._current] += data


def js_value(script: str, name: str):
    text = script.strip()
    prefix = f"var {name} = "
    assert text.startswith(prefix), text[:80]
    return json.loads(text[len(prefix) :].rstrip().rstrip(";"))


def decode(data_uri: str) -> bytes:
    head, _, payload = data_uri.partition(",")
    assert head.startswith("data:") and head.endswith(";base64"), head[:80]
    return base64.b64decode(payload)


@pytest.fixture(scope="module")
def report(micro_run, tmp_path_factory):
    out = tmp_path_factory.mktemp("report") / "report.html"
    proc = snakemake(micro_run.parent, "--report", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    parser = Scripts()
    parser.feed(out.read_text(encoding="utf-8"))
    parser.close()
    results = js_value(parser.scripts["results"], "results")
    by_file = {Path(path).as_posix().split("results/", 1)[-1]: entry for path, entry in results.items()}
    return {
        "parser": parser,
        "results": by_file,
        "categories": js_value(parser.scripts["categories"], "categories"),
        "workflow": js_value(parser.scripts["workflow-desc"], "workflow_desc"),
        "run": micro_run,
    }


def test_report_opens(report):
    parser = report["parser"]
    assert parser.has_app
    assert {"results", "categories", "workflow-desc"} <= set(parser.scripts)
    assert {"Tables", "Figures", "Config"} <= set(report["categories"])


@pytest.mark.parametrize("table", TABLES)
def test_report_holds_table(report, table):
    results, run = report["results"], report["run"]
    page, csv = results[f"tables/{table}.html"], results[f"tables/{table}.csv"]
    number = table[len("table")]
    for entry in (page, csv):
        assert entry["caption"].strip(), f"{table}: no caption"
        assert entry["labels"]["table"] == table
    assert page["mime_type"] == "text/html"
    html = decode(page["data_uri"]).decode("utf-8")
    assert f"<h2>Table {number}" in html and "<table>" in html and "TOY WORLD" in html
    # the CSV in the report is the table on disk, and its numbers appear in the rendered page
    embedded = pd.read_csv(io.BytesIO(decode(csv["data_uri"])))
    on_disk = pd.read_csv(run / "tables" / f"{table}.csv")
    pd.testing.assert_frame_equal(embedded, on_disk)
    for column, value in on_disk.iloc[0].items():  # every cell of the first row, as the page formats it
        if isinstance(value, float) and value != value:  # an empty cell
            continue
        if column.endswith("_n"):  # an item count (a float column where some cells have none)
            assert f"{int(value)}" in html, (table, column, value)
        elif isinstance(value, float):
            assert f"{value:.1f}" in html or f"{value:.3f}" in html, (table, value)
        else:
            assert escape(str(value)) in html, (table, value)


def test_report_table_captions_say_what_and_how(report):
    results = report["results"]
    assert "Table 1: MGSM results of layer swapping" in results["tables/table1.csv"]["caption"]
    assert "swap_default" in results["tables/table1.html"]["caption"]  # the default config, from the config
    assert "toy_swh" in results["tables/table2.html"]["caption"]
    assert "Which config won" in results["tables/table1_best_configs.html"]["caption"]


@pytest.mark.parametrize("figure", FIGURES)
def test_report_holds_figure(report, figure):
    results, run = report["results"], report["run"]
    svg, png, csv = (results[f"figures/{figure}.{ext}"] for ext in ("svg", "png", "csv"))
    assert svg["mime_type"] == "image/svg+xml" and png["mime_type"] == "image/png"
    assert decode(svg["data_uri"]).lstrip().startswith(b"<svg")
    assert decode(png["data_uri"])[:8] == b"\x89PNG\r\n\x1a\n"
    assert decode(csv["data_uri"]) == (run / "figures" / f"{figure}.csv").read_bytes()
    caption = svg["caption"]
    assert "layerswap" in caption and csv["caption"] == caption  # says how it was made (the command)


def test_report_figure_numbers(report):
    run = report["run"]
    grid = pd.read_csv(run / "figures" / "swap_grid.csv")
    assert list(grid["config"]) == ["swap_default"] and bool(grid["in_grid"].iloc[0])
    assert (grid["bottom"].iloc[0], grid["top"].iloc[0]) == (1, 1)
    bars = pd.read_csv(run / "figures" / "table1_bars.csv")
    t1 = pd.read_csv(run / "tables" / "table1.csv").set_index("Setting")
    avg = bars[bars["kind"] == "avg"].set_index("setting_label")["mgsm"]
    row = t1.loc["toy-Swahili (synthetic) avg"]
    for label, value in avg.items():
        assert value == pytest.approx(row[label], abs=1e-5)
    # the micro config has top_k 2: 4 pairs per merge column, 2 experts per expert column
    counts = bars[bars["kind"] == "point"].groupby("setting").size().to_dict()
    assert counts == {
        "base": 1,
        "language_expert": 2,
        "math_expert": 2,
        "soup_best": 4,
        "swap_default": 4,
        "swap_best": 4,
    }


def test_report_holds_config(report):
    results, workflow = report["results"], report["workflow"]
    page = decode(results["config_used.html"]["data_uri"]).decode("utf-8")
    assert "Config used" in page and "swap_default" in page and "toy_swh" in page
    import yaml

    used = yaml.safe_load(decode(results["config_used.yaml"]["data_uri"]))
    assert used["languages"] == ["toy_swh"] and used["selection"]["top_k"] == 2
    assert "Config used" in workflow and "swap_default" in workflow and "top 2 checkpoints" in workflow
    assert "synthetic toy language" in workflow
