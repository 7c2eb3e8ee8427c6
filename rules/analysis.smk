# Aggregation: the paper's tables, figures and the report pages, from evaluation and selection files only.
# Snakemake 9's HTML report shows images, HTML and PDF inline; CSV/Markdown/YAML are download links. Each table is
# therefore in the report twice: rendered (an HTML page made from its Markdown) and as CSV.

# File lists, report entries (spec.table_pages, spec.figures) and params: layerswap/workflow/spec.py.


# The tables' 95% intervals also read the per-item logs (<benchmark>.samples.jsonl) beside each evaluation file:
# the job that writes an input below writes its log too (like the checkpoint files behind each index), so no rule
# lists them.
rule tables:
    localrule: True
    input:
        spec.table_inputs(),
    output:
        [table_report(f"table{n}", "csv") for n in [1, 2, 5, 6]],
        [f for f in spec.tables if not f.endswith(".csv")],
        best=[table_report(f"table{n}_best_configs", "csv") for n in [1, 2]]
        + [f"{R}/tables/table{n}_best_configs.md" for n in [1, 2]],
        paper=[table_report(f"table{n}_paper_vs_ours", "csv") for n in [1, 2, 5, 6]]
        + [f"{R}/tables/table{n}_paper_vs_ours.md" for n in [1, 2, 5, 6]] if spec.paper_world else [],
        summary=f"{R}/tables/summary.md",
    params:
        tables=spec.table_params(),
        code=command_hash("tables"),
    log:
        f"{R}/logs/tables.log",
    conda:
        "../envs/layerswap.yaml"
    shell:
        f"layerswap tables --selection-dir {R}/selection --evals-dir {R}/evals --params-json {{params.tables}} "
        f"--out-dir {R}/tables > {{log}} 2>&1"


rule heatmap:
    input:
        base=f"{R}/base/config.json",
        selections=expand(f"{R}/selection/{{e}}.json", e=spec.heatmap_experts()),
    output:
        svg=figure_report("param_change", "svg"),
        png=figure_report("param_change", "png"),
        csv=figure_report("param_change", "csv"),
        mean=[figure_report("param_change_mean", ext) for ext in ("svg", "png", "csv")],
    params:
        experts=spec.heatmap_expert_args(),
        thresholds=spec.heatmap_thresholds(),
        code=command_hash("heatmap"),
    resources:
        **requests.of("heatmap"),
    log:
        f"{R}/logs/heatmap.log",
    conda:
        "../envs/layerswap.yaml"
    shell:
        f"layerswap heatmap --base {R}/base {{params.experts}} --threshold-json {{params.thresholds}} "
        f"--out-prefix {R}/figures/param_change > {{log}} 2>&1"


rule table_pages:
    localrule: True
    input:
        [f"{R}/tables/{t}.md" for t in spec.table_pages],
    output:
        [table_report(t, "html") for t in spec.table_pages],
    params:
        code=command_hash("charts"),
    log:
        f"{R}/logs/table_pages.log",
    conda:
        "../envs/layerswap.yaml"
    shell:
        f"layerswap charts table-html --markdown {{input}} --out-dir {R}/tables > {{log}} 2>&1"


rule swap_grid:
    localrule: True
    input:
        spec.swap_grid_inputs(),
    output:
        svg=figure_report("swap_grid", "svg"),
        png=figure_report("swap_grid", "png"),
        csv=figure_report("swap_grid", "csv"),
    params:
        grid=spec.swap_grid_params(),
        names=", ".join(spec.swap_configs),  # for the caption
        code=command_hash("charts"),
    log:
        f"{R}/logs/swap_grid.log",
    conda:
        "../envs/layerswap.yaml"
    shell:
        f"layerswap charts swap-grid --evals-dir {R}/evals --params-json {{params.grid}} "
        f"--out-prefix {R}/figures/swap_grid > {{log}} 2>&1"


rule table1_bars:
    localrule: True
    input:
        spec.table1_bars_inputs(),
    output:
        svg=figure_report("table1_bars", "svg"),
        png=figure_report("table1_bars", "png"),
        csv=figure_report("table1_bars", "csv"),
    params:
        tables=spec.table_params(table2=False),
        code=command_hash("charts"),
    log:
        f"{R}/logs/table1_bars.log",
    conda:
        "../envs/layerswap.yaml"
    shell:
        f"layerswap charts table1-bars --selection-dir {R}/selection --evals-dir {R}/evals "
        f"--params-json {{params.tables}} --out-prefix {R}/figures/table1_bars > {{log}} 2>&1"


rule config_used:
    localrule: True
    output:
        yaml=report(f"{R}/config_used.yaml", category="Config", subcategory="Config used",
                    caption="../report/config.rst", labels={"file": "config_used", "format": "YAML"}),
        html=report(f"{R}/config_used.html", category="Config", subcategory="Config used",
                    caption="../report/config.rst", labels={"file": "config_used", "format": "rendered (HTML)"}),
    params:
        config=lambda w: spec.config_json(),  # a function: the config holds "{lang}", no wildcard
        code=command_hash("charts"),
    log:
        f"{R}/logs/config_used.log",
    conda:
        "../envs/layerswap.yaml"
    shell:
        f"layerswap charts config-html --config-json {{params.config}} --out-prefix {R}/config_used "
        "> {log} 2>&1"
