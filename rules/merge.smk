# Merge recipes: small JSON files naming the selected experts by rank; evaluation builds them in memory.


rule merge_recipes:
    localrule: True
    input:
        lang=layout.selection("{lang}"),
        task=layout.selection("math"),
    output:
        expand(layout.recipe("{{cfg}}", "{{lang}}", "{pair}"), pair=spec.merges.pairs),
    params:
        merge=lambda w: as_json(spec.merges.configs[w.cfg]),
        code=command_hash("recipes"),
    wildcard_constraints:
        cfg="(?!ax_)[A-Za-z0-9_]+",  # ax_*: expert-set ablations (ablation_merge_recipes)
    log:
        layout.log("merge_recipes", "{cfg}_{lang}"),
    conda:
        "../envs/layerswap.yaml"
    shell:
        "layerswap recipes --params-json {params.merge} --lang-selection {input.lang} "
        f"--task-selection {{input.task}} --base {layout.base()} "
        f"--out-dir {layout.recipe_dir('{wildcards.cfg}', '{wildcards.lang}')} "
        "> {log} 2>&1"


# Only by request (storage.keep_merged, or naming the directory as a target): evaluations build merges in memory.
rule merged_model:
    input:
        layout.recipe("{cfg}", "{lang}", "{pair}"),
    output:
        directory(layout.merged_model("{cfg}", "{lang}", "{pair}")),
    params:
        code=command_hash("merge"),
    resources:
        **requests.of("merged_model"),
    log:
        layout.log("merged_model", "{cfg}_{lang}_{pair}"),
    conda:
        "../envs/layerswap.yaml"
    shell:
        "layerswap merge --recipe {input} --out {output} > {log} 2>&1"


rule soup_then_swap_recipes:
    localrule: True
    input:
        lang=layout.selection("{lang}"),
        task=layout.selection("math"),
        all_langs=expand(layout.selection("{l}"), l=spec.merges.langs),
    output:
        expand(layout.recipe(spec.merges.soup_swap, "{{lang}}", "{m}"), m=spec.merges.soups),
    params:
        merge=as_json(config["merges"]["configs"][config["merges"]["soup_then_swap"]]),
        code=command_hash("recipes"),
    log:
        layout.log("merge_recipes", f"{spec.merges.soup_swap}_{{lang}}"),
    conda:
        "../envs/layerswap.yaml"
    shell:
        "layerswap recipes --soup-then-swap --params-json {params.merge} --lang-selection {input.lang} "
        f"--task-selection {{input.task}} --all-lang-selections {{input.all_langs}} --base {layout.base()} "
        f"--out-dir {layout.recipe_dir(spec.merges.soup_swap, '{wildcards.lang}')} > {{log}} 2>&1"
