# Reproducibility audit: results/manifest.json, the last job of the DAG. Its inputs are every file `all` makes and
# the intermediates (data, base, experts, checkpoint evaluations, selections, recipes, merge evaluations), so it runs
# after all of them; `layerswap manifest` then hashes everything under results/ (logs excepted) and takes rule,
# params and shell command of each file from Snakemake's own per-output records in .snakemake/metadata/.


rule manifest:
    input:
        spec.results(),
    output:
        f"{R}/manifest.json",
    params:
        config=lambda w: spec.config_json(),  # secrets: dropped by the command
        workflow_dir=shlex.quote(workflow.basedir),
        code=command_hash("manifest"),
    log:
        f"{R}/logs/manifest.log",
    conda:
        "../envs/layerswap.yaml"
    shell:
        "layerswap manifest --root results --out {output} --metadata-dir .snakemake/metadata "
        "--workflow-dir {params.workflow_dir} --config-json {params.config} > {log} 2>&1"
