# Merge recipes: small JSON files naming the selected experts by rank; evaluation builds them in memory.


rule merge_recipes:
    localrule: True
    input:
        lang=f"{R}/selection/{{lang}}.json",
        task=f"{R}/selection/math.json",
    output:
        expand(f"{R}/merges/{{{{cfg}}}}/{{{{lang}}}}/{{pair}}.json", pair=spec.pairs),
    params:
        merge=lambda w: as_json(spec.merge_configs[w.cfg]),
        code=command_hash("recipes"),
    wildcard_constraints:
        cfg="(?!ax_)[A-Za-z0-9_]+",  # ax_*: expert-set ablations (ablation_merge_recipes)
    log:
        f"{R}/logs/merge_recipes/{{cfg}}_{{lang}}.log",
    conda:
        "../envs/layerswap.yaml"
    shell:
        "layerswap recipes --params-json {params.merge} --lang-selection {input.lang} "
        f"--task-selection {{input.task}} --base {R}/base --out-dir {R}/merges/{{wildcards.cfg}}/{{wildcards.lang}} "
        "> {log} 2>&1"


# Only by request (storage.keep_merged, or naming the directory as a target): evaluations build merges in memory.
rule merged_model:
    input:
        f"{R}/merges/{{cfg}}/{{lang}}/{{pair}}.json",
    output:
        directory(f"{spec.merged}/{{cfg}}/{{lang}}/{{pair}}"),
    params:
        code=command_hash("merge"),
    resources:
        **requests.of("merged_model"),
    log:
        f"{R}/logs/merged_model/{{cfg}}_{{lang}}_{{pair}}.log",
    conda:
        "../envs/layerswap.yaml"
    shell:
        "layerswap merge --recipe {input} --out {output} > {log} 2>&1"


rule soup_then_swap_recipes:
    localrule: True
    input:
        lang=f"{R}/selection/{{lang}}.json",
        task=f"{R}/selection/math.json",
        all_langs=expand(f"{R}/selection/{{l}}.json", l=spec.langs),
    output:
        expand(f"{R}/merges/soupswap/{{{{lang}}}}/{{m}}.json", m=spec.soups),
    params:
        merge=as_json(config["merges"]["configs"][config["merges"]["soup_then_swap"]]),
        code=command_hash("recipes"),
    log:
        f"{R}/logs/merge_recipes/soupswap_{{lang}}.log",
    conda:
        "../envs/layerswap.yaml"
    shell:
        "layerswap recipes --soup-then-swap --params-json {params.merge} --lang-selection {input.lang} "
        f"--task-selection {{input.task}} --all-lang-selections {{input.all_langs}} --base {R}/base "
        f"--out-dir {R}/merges/soupswap/{{wildcards.lang}} > {{log}} 2>&1"
