# Aggregation: the paper's tables and the parameter-change heatmap, from evaluation and selection files only.

EXPERT_TYPES = expert_types()
TABLES = expand(f"{R}/tables/table{{n}}.{{ext}}", n=[1, 2, 5, 6], ext=["csv", "md", "tex"])
BEST_CONFIGS = expand(f"{R}/tables/table{{n}}_best_configs.{{ext}}", n=[1, 2], ext=["csv", "md"])


def table_inputs():
    files = [f"{R}/selection/{e}.json" for e in EXPERT_TYPES]
    files += [i for e in EXPERT_TYPES for i in checkpoint_indexes(e)]
    files += eval_files("base", BENCHMARKS)
    for cfg in PAIR_CONFIGS:
        for lang in LANGS:
            files += merge_eval_outputs(cfg, lang, PAIRS)
    for lang in LANGS:
        files += merge_eval_outputs("soupswap", lang, ["langsoup", "multisoup"])
    return files


def table_params():
    m = config["merges"]
    names = config.get("language_names", {})
    return as_json({
        "languages": LANGS, "mgsm_languages": config["mgsm_languages"], "top_k": config["selection"]["top_k"],
        "best_of": m["best_of"], "default_swap": m["default_swap"], "world": config["world"],
        "table2_language": config["analysis"]["table2_language"], "language_names": names,
    })


rule tables:
    input:
        table_inputs(),
    output:
        [report(f, category="Tables", caption="../report/tables.rst") for f in TABLES],
        best=BEST_CONFIGS,
    params:
        tables=table_params(),
        code=code_hash("tables"),
    log:
        f"{R}/logs/tables.log",
    shell:
        "layerswap tables --selection-dir {R}/selection --evals-dir {R}/evals --params-json {params.tables} "
        "--out-dir {R}/tables > {log} 2>&1"


rule heatmap:
    input:
        base=f"{R}/base/config.json",
        selections=expand(f"{R}/selection/{{e}}.json", e=["math"] + LANGS),
    output:
        svg=report(f"{R}/figures/param_change.svg", category="Figures", caption="../report/heatmap.rst"),
        png=f"{R}/figures/param_change.png",
        csv=f"{R}/figures/param_change.csv",
    params:
        experts=" ".join(f"--expert-from-selection {e}={R}/selection/{e}.json" for e in ["math"] + LANGS),
        thresholds=as_json({e: config["analysis"]["heatmap_thresholds"][expert_kind(e)] for e in ["math"] + LANGS}),
        code=code_hash("figures"),
    log:
        f"{R}/logs/heatmap.log",
    shell:
        "layerswap heatmap --base {R}/base {params.experts} --threshold-json {params.thresholds} "
        "--out-prefix {R}/figures/param_change > {log} 2>&1"
