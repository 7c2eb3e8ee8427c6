# Aggregation: the paper's tables, figures and the report pages, from evaluation and selection files only.
# Snakemake 9's HTML report shows images, HTML and PDF inline; CSV/Markdown/YAML are download links. Each table is
# therefore in the report twice: rendered (an HTML page made from its Markdown) and as CSV.

# Which tables and figures exist, their files, builders, report pages and the merges each reads:
# layerswap/report/registry.py. File lists, report entries (spec.report.table_pages, spec.report.figures) and params:
# layerswap/workflow/report_jobs.py.


# The tables' 95% intervals also read the per-item logs (<benchmark>.samples.jsonl) beside each evaluation file:
# the job that writes an input below writes its log too (like the checkpoint files behind each index), so no rule
# lists them.
#   in:  (what each table's entry reads) results/evals/base/<benchmark>.json, results/evals/ckpt/<run>/<an index>.json,
#        results/selection/<expert>.json, results/evals/merge/<config>/<lang>/l<i>m<j>/<benchmark>.json
#   out: results/tables/<stem>.{csv,md,tex} of each registered table, results/tables/summary.md
rule tables:
    localrule: True
    input:
        spec.report.table_inputs(),
    output:
        # results/tables/<stem>.<format> of each table of layerswap/report/registry.py (the CSVs report entries)
        [table_report(s, e) if e == "csv" else layout.table(s, e) for s, e in spec.report.table_outputs()],
        summary=layout.table("summary", "md"),
    params:
        tables=spec.report.table_params(),
        code=command_hash("tables"),
    log:
        layout.log("tables"),
    conda:
        "../envs/layerswap.yaml"
    shell:
        f"layerswap tables --selection-dir {layout.selection_dir()} --evals-dir {layout.evals()} "
        f"--params-json {{params.tables}} --out-dir {layout.table_dir()} > {{log}} 2>&1"


#   in:  results/base/config.json, results/selection/<expert>.json (the selected experts' checkpoints)
#   out: results/figures/param_change.{svg,png,csv}, results/figures/param_change_mean.{svg,png,csv}
rule heatmap:
    input:
        base=layout.base_config(),
        selections=expand(layout.selection("{e}"), e=spec.report.heatmap_experts()),
    output:
        svg=figure_report("param_change", "svg"),
        png=figure_report("param_change", "png"),
        csv=figure_report("param_change", "csv"),
        mean=[figure_report("param_change_mean", ext) for ext in ("svg", "png", "csv")],
    params:
        experts=spec.report.heatmap_expert_args(),
        thresholds=spec.report.heatmap_thresholds(),
        code=command_hash("heatmap"),
    resources:
        **requests.of("heatmap"),
    log:
        layout.log("heatmap"),
    conda:
        "../envs/layerswap.yaml"
    shell:
        f"layerswap heatmap --base {layout.base()} {{params.experts}} --threshold-json {{params.thresholds}} "
        f"--out-prefix {layout.figure_prefix('param_change')} > {{log}} 2>&1"


#   in:  results/tables/<stem>.md of each table with a report page
#   out: results/tables/<stem>.html
rule table_pages:
    localrule: True
    input:
        [layout.table(t, "md") for t in spec.report.table_pages],
    output:
        [table_report(t, "html") for t in spec.report.table_pages],
    params:
        code=command_hash("charts"),
    log:
        layout.log("table_pages"),
    conda:
        "../envs/layerswap.yaml"
    shell:
        f"layerswap charts table-html --markdown {{input}} --out-dir {layout.table_dir()} > {{log}} 2>&1"


#   in:  results/evals/merge/<swap config>/<lang>/l<i>m<j>/mgsm.json
#   out: results/figures/swap_grid.{svg,png,csv}
rule swap_grid:
    localrule: True
    input:
        spec.report.swap_grid_inputs(),
    output:
        svg=figure_report("swap_grid", "svg"),
        png=figure_report("swap_grid", "png"),
        csv=figure_report("swap_grid", "csv"),
    params:
        grid=spec.report.swap_grid_params(),
        names=", ".join(spec.report.swap_configs),  # for the caption
        code=command_hash("charts"),
    log:
        layout.log("swap_grid"),
    conda:
        "../envs/layerswap.yaml"
    shell:
        f"layerswap charts swap-grid --evals-dir {layout.evals()} --params-json {{params.grid}} "
        f"--out-prefix {layout.figure_prefix('swap_grid')} > {{log}} 2>&1"


#   in:  results/evals/base/mgsm.json, results/evals/ckpt/<run>/<an index>.json,
#        results/evals/merge/<config>/<lang>/l<i>m<j>/mgsm.json
#   out: results/figures/table1_bars.{svg,png,csv}
rule table1_bars:
    localrule: True
    input:
        spec.report.table1_bars_inputs(),
    output:
        svg=figure_report("table1_bars", "svg"),
        png=figure_report("table1_bars", "png"),
        csv=figure_report("table1_bars", "csv"),
    params:
        tables=spec.report.table_params(table2=False),
        code=command_hash("charts"),
    log:
        layout.log("table1_bars"),
    conda:
        "../envs/layerswap.yaml"
    shell:
        f"layerswap charts table1-bars --selection-dir {layout.selection_dir()} --evals-dir {layout.evals()} "
        f"--params-json {{params.tables}} --out-prefix {layout.figure_prefix('table1_bars')} > {{log}} 2>&1"


# out: results/config_used.yaml, results/config_used.html
rule config_used:
    localrule: True
    output:
        yaml=report(layout.config_used("yaml"), category="Config", subcategory="Config used",
                    caption="../report/config.rst", labels={"file": "config_used", "format": "YAML"}),
        html=report(layout.config_used("html"), category="Config", subcategory="Config used",
                    caption="../report/config.rst", labels={"file": "config_used", "format": "rendered (HTML)"}),
    params:
        config=lambda w: spec.config_json(),  # a function: the config holds "{lang}", no wildcard
        code=command_hash("charts"),
    log:
        layout.log("config_used"),
    conda:
        "../envs/layerswap.yaml"
    shell:
        f"layerswap charts config-html --config-json {{params.config}} --out-prefix {layout.config_used_prefix()} "
        "> {log} 2>&1"
