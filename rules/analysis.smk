# Aggregation: the paper's tables, figures and the report pages, from evaluation and selection files only.
# Snakemake 9's HTML report shows images, HTML and PDF inline; CSV/Markdown/YAML are download links. Each table is
# therefore in the report twice: rendered (an HTML page made from its Markdown) and as CSV.

EXPERT_TYPES = expert_types()
TABLES = expand(f"{R}/tables/table{{n}}.{{ext}}", n=[1, 2, 5, 6], ext=["csv", "md", "tex"])
BEST_CONFIGS = expand(f"{R}/tables/table{{n}}_best_configs.{{ext}}", n=[1, 2], ext=["csv", "md"])
PAPER_WORLD = config["world"] != "toy"
# report entries: file stem -> (subcategory, caption)
TABLE_PAGES = {f"table{n}": (f"Table {n}", f"../report/table{n}.rst") for n in [1, 2, 5, 6]}
TABLE_PAGES |= {f"table{n}_best_configs": (f"Table {n}", "../report/best_configs.rst") for n in [1, 2]}
if PAPER_WORLD:
    TABLE_PAGES |= {f"table{n}_paper_vs_ours": (f"Table {n}", "../report/paper_vs_ours.rst") for n in [1, 2, 5, 6]}
TABLE_HTML = [f"{R}/tables/{t}.html" for t in TABLE_PAGES]
FIGURES = {
    "param_change": ("Parameter change", "../report/heatmap.rst"),
    "param_change_mean": ("Parameter change", "../report/param_change_mean.rst"),
    "swap_grid": ("Layer-swap grid", "../report/swap_grid.rst"),
    "table1_bars": ("Table 1 bars", "../report/table1_bars.rst"),
}
REPORT_FILES = TABLES + TABLE_HTML + [f"{R}/figures/{f}.{e}" for f in FIGURES for e in ("svg", "png", "csv")]
REPORT_FILES += [f"{R}/config_used.yaml", f"{R}/config_used.html"]
# the layer_swap configs of the swap-grid figure (lang_layers ones are listed in its CSV, not plotted)
SWAP_CONFIGS = {n: c for n, c in config["merges"]["configs"].items() if c["method"] == "layer_swap"}


# The tables' 95% intervals also read the per-item logs (<benchmark>.samples.jsonl) beside each evaluation file:
# the job that writes an input below writes its log too (like the checkpoint files behind each index), so no rule
# lists them.
rule tables:
    input:
        table_inputs(),
    output:
        [table_report(f"table{n}", "csv") for n in [1, 2, 5, 6]],
        [f for f in TABLES if not f.endswith(".csv")],
        best=[table_report(f"table{n}_best_configs", "csv") for n in [1, 2]]
        + [f"{R}/tables/table{n}_best_configs.md" for n in [1, 2]],
        paper=[table_report(f"table{n}_paper_vs_ours", "csv") for n in [1, 2, 5, 6]]
        + [f"{R}/tables/table{n}_paper_vs_ours.md" for n in [1, 2, 5, 6]] if PAPER_WORLD else [],
        summary=f"{R}/tables/summary.md",
    params:
        tables=table_params(),
        code=command_hash("tables"),
    log:
        f"{R}/logs/tables.log",
    conda:
        "../envs/layerswap.yaml"
    shell:
        "layerswap tables --selection-dir results/selection --evals-dir results/evals --params-json {params.tables} "
        "--out-dir results/tables > {log} 2>&1"


rule heatmap:
    input:
        base=f"{R}/base/config.json",
        selections=expand(f"{R}/selection/{{e}}.json", e=["math"] + LANGS),
    output:
        svg=figure_report("param_change", "svg"),
        png=figure_report("param_change", "png"),
        csv=figure_report("param_change", "csv"),
        mean=[figure_report("param_change_mean", ext) for ext in ("svg", "png", "csv")],
    params:
        experts=" ".join(f"--expert-from-selection {e}={R}/selection/{e}.json" for e in ["math"] + LANGS),
        thresholds=as_json({e: config["analysis"]["heatmap_thresholds"][expert_kind(e)] for e in ["math"] + LANGS}),
        code=command_hash("heatmap"),
    log:
        f"{R}/logs/heatmap.log",
    conda:
        "../envs/layerswap.yaml"
    shell:
        "layerswap heatmap --base results/base {params.experts} --threshold-json {params.thresholds} "
        "--out-prefix results/figures/param_change > {log} 2>&1"


rule table_pages:
    input:
        [f"{R}/tables/{t}.md" for t in TABLE_PAGES],
    output:
        [table_report(t, "html") for t in TABLE_PAGES],
    params:
        code=command_hash("charts"),
    log:
        f"{R}/logs/table_pages.log",
    conda:
        "../envs/layerswap.yaml"
    shell:
        "layerswap charts table-html --markdown {input} --out-dir results/tables > {log} 2>&1"


rule swap_grid:
    input:
        swap_grid_inputs(),
    output:
        svg=figure_report("swap_grid", "svg"),
        png=figure_report("swap_grid", "png"),
        csv=figure_report("swap_grid", "csv"),
    params:
        grid=as_json({
            "configs": SWAP_CONFIGS, "languages": LANGS, "top_k": config["selection"]["top_k"],
            "default_swap": config["merges"]["default_swap"], "world": config["world"],
            "language_names": config.get("language_names", {}),
        }),
        names=", ".join(SWAP_CONFIGS),  # for the caption
        code=command_hash("charts"),
    log:
        f"{R}/logs/swap_grid.log",
    conda:
        "../envs/layerswap.yaml"
    shell:
        "layerswap charts swap-grid --evals-dir results/evals --params-json {params.grid} "
        "--out-prefix results/figures/swap_grid > {log} 2>&1"


rule table1_bars:
    input:
        table1_bars_inputs(),
    output:
        svg=figure_report("table1_bars", "svg"),
        png=figure_report("table1_bars", "png"),
        csv=figure_report("table1_bars", "csv"),
    params:
        tables=table_params(table2=False),
        code=command_hash("charts"),
    log:
        f"{R}/logs/table1_bars.log",
    conda:
        "../envs/layerswap.yaml"
    shell:
        "layerswap charts table1-bars --selection-dir results/selection --evals-dir results/evals "
        "--params-json {params.tables} --out-prefix results/figures/table1_bars > {log} 2>&1"

# The config as given (rules/ablations.smk, included later, adds the ablations' merge configs to it).
CONFIG_AS_GIVEN = shlex.quote(json.dumps(config, default=str, sort_keys=True))  # defaults filled, keys sorted


rule config_used:
    output:
        yaml=report(f"{R}/config_used.yaml", category="Config", subcategory="Config used",
                    caption="../report/config.rst", labels={"file": "config_used", "format": "YAML"}),
        html=report(f"{R}/config_used.html", category="Config", subcategory="Config used",
                    caption="../report/config.rst", labels={"file": "config_used", "format": "rendered (HTML)"}),
    params:
        config=lambda w: CONFIG_AS_GIVEN,  # a function: the config holds "{lang}", no wildcard
        code=command_hash("charts"),
    log:
        f"{R}/logs/config_used.log",
    conda:
        "../envs/layerswap.yaml"
    shell:
        "layerswap charts config-html --config-json {params.config} --out-prefix results/config_used "
        "> {log} 2>&1"
