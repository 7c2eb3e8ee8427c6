# Reproducibility audit: results/manifest.json, the last job of the DAG. Its inputs are every file a job of the
# default DAG declares (spec.results(): data, base, experts, checkpoint evaluations, selections, recipes, merge
# evaluations, tables, figures), so it runs after all of them; `layerswap manifest` then hashes everything under
# results/ (logs excepted; training logs apart) and takes rule, params and shell command of each file from
# Snakemake's own per-output records in .snakemake/metadata/. No path of this machine in params: the git commit it
# records is the checkout's the running package lives in, so a copied results folder does not rerun it.


# in: every file of the default DAG (spec.results()); out: results/manifest.json
rule manifest:
    input:
        spec.results(),
    output:
        layout.manifest(),
    params:
        config=lambda w: spec.config_json(),  # secrets: dropped by the command
        code=command_hash("manifest"),
    resources:
        **requests.of("manifest"),
    log:
        layout.log("manifest"),
    conda:
        "../envs/layerswap.yaml"
    shell:
        f"layerswap manifest --root {layout.root} --out {{output}} --metadata-dir .snakemake/metadata "
        "--config-json {params.config} > {log} 2>&1"


# A run that fails after Snakemake removed results/manifest.json to rerun its job (the manifest job refused to record
# a changed result, or failed) gets back the manifest it started with (layerswap/audit/kept.py): the folder stays as
# auditable as the run found it.
onerror:
    from layerswap.audit.kept import put_back

    put_back(layout.manifest(), ".snakemake/metadata")
