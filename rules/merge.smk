# Merge recipes: small JSON files naming the selected experts by rank; evaluation builds them in memory.


#   in:  results/selection/{lang}.json, results/selection/math.json
#   out: results/merges/{cfg}/{lang}/{pair}.json (each expert pair l<i>m<j>)
rule merge_recipes:
    localrule: True
    input:
        lang=layout.selection("{lang}"),
        task=layout.selection("math"),
    output:
        [layout.recipe("{cfg}", "{lang}", pair) for pair in PAIRS],
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
#   in:  results/merges/{cfg}/{lang}/{pair}.json
#   out: <big>/merged/{cfg}/{lang}/{pair}/ (<big>: storage.scratch's folder of this results folder, else results)
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


#   in:  results/selection/{lang}.json, results/selection/math.json, results/selection/<each language>.json
#   out: results/merges/soupswap/{lang}/{soup}.json (langsoup, multisoup)
rule soup_then_swap_recipes:
    localrule: True
    input:
        lang=layout.selection("{lang}"),
        task=layout.selection("math"),
        all_langs=expand(layout.selection("{l}"), l=spec.merges.langs),
    output:
        [layout.recipe(SOUPSWAP, "{lang}", soup) for soup in SOUPS],
    params:
        merge=as_json(config["merges"]["configs"][config["merges"]["soup_then_swap"]]),
        code=command_hash("recipes"),
    log:
        layout.log("merge_recipes", f"{SOUPSWAP}_{{lang}}"),
    conda:
        "../envs/layerswap.yaml"
    shell:
        "layerswap recipes --soup-then-swap --params-json {params.merge} --lang-selection {input.lang} "
        f"--task-selection {{input.task}} --all-lang-selections {{input.all_langs}} --base {layout.base()} "
        f"--out-dir {layout.recipe_dir(SOUPSWAP, '{wildcards.lang}')} > {{log}} 2>&1"
