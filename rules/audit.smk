# Reproducibility audit: results/manifest.json, the last job of the DAG. Its inputs are every file `all` makes and
# the intermediates (data, base, experts, checkpoint evaluations, selections, recipes, merge evaluations), so it runs
# after all of them; `layerswap manifest` then hashes everything under results/ (logs excepted) and takes rule,
# params and shell command of each file from Snakemake's own per-output records in .snakemake/metadata/.


def manifest_inputs():
    files = TABLES + BEST_CONFIGS + REPORT_FILES + table_inputs() + swap_grid_inputs() + table1_bars_inputs()
    files += [f"{R}/base/config.json"]
    files += [f"{EXPERTS}/{run}/checkpoints.json" for run in RUNS]
    files += [f for run in RUNS for f in checkpoint_eval_indexes(run)]
    files += [f"{R}/data/sft/{e}.{ext}" for e in expert_types() for ext in ("jsonl", "manifest.json")]
    files += [f"{R}/merges/{c}/{l}/{p}.json" for c in PAIR_CONFIGS for l in LANGS for p in PAIRS]
    files += [f"{R}/merges/soupswap/{l}/{m}.json" for l in LANGS for m in SOUPS]
    files += MERGED_MODELS
    return list(dict.fromkeys(files))


rule manifest:
    input:
        manifest_inputs(),
    output:
        f"{R}/manifest.json",
    params:
        config=lambda w: shlex.quote(json.dumps(config, default=str, sort_keys=True)),  # secrets: dropped by the command
        workflow_dir=shlex.quote(workflow.basedir),
        code=command_hash("manifest"),
    log:
        f"{R}/logs/manifest.log",
    shell:
        "layerswap manifest --root {R} --out {output} --metadata-dir .snakemake/metadata "
        "--workflow-dir {params.workflow_dir} --config-json {params.config} > {log} 2>&1"
