# Ablations (<ablations_dir>/<name>.yaml, planned in rules/common.smk): the merge configs they add (layer swaps, or
# any registered merge method's: variant kind `method`)
# (ABLATION_MERGE_CONFIGS, in spec.merges.configs beside merges.configs) are built and evaluated by the generic
# merge_recipes / evaluate_merges rules; `ablation_<name>` builds results/ablations/<name>/table.{csv,md} +
# figure.{svg,png}; `ablations` builds the ones the `ablations` config key selects (all when absent). Not part of
# `all`; the main tables and figures read merges.configs only, so the ablations change none of the main jobs.


# Expert-set ablations (layerswap/workflow/expert_sets.py docstring): their extra runs, bases, selections and merge
# configs are spec.ablations.expert_sets, spec.runs.extra, spec.ablations.bases, spec.ablations.expert_merges
# (layerswap/workflow/ablation_jobs.py, layerswap/workflow/runs.py).


if spec.ablations.expert_sets:

    # The constraint evaluations of the leaders of an expert-set ablation's selection (evaluate_checkpoint_leaders on
    # the set's runs of the type, against the base they trained from):
    #   in:  results/evals/ckpt/<run>/index.json (each run of the set and type), the base's constraint evaluations
    #   out: results/evals/leaders/ablations/{ablation}/{set}/{expert}.json
    use rule evaluate_checkpoint_leaders as ablation_evaluate_leaders with:
        input:
            indexes=lambda w: spec.ablations.selection_indexes(w.ablation, w.set, w.expert),
            base=lambda w: spec.ablations.base_evals(w.ablation, w.set, w.expert),
            data=lambda w: spec.selection.leaders_data(spec.ablations.runs_of(w.ablation, w.set, w.expert)),
        output:
            layout.ablation_leaders_index("{ablation}", "{set}", "{expert}"),
        params:
            models=lambda w: spec.selection.leaders_models(spec.ablations.runs_of(w.ablation, w.set, w.expert)),
            benchmarks=lambda w: spec.selection.leaders_benchmarks(
                spec.ablations.runs_of(w.ablation, w.set, w.expert)
            ),
            select=lambda w: spec.selection.leaders_params(w.expert),
            **evals.evaluation_params("evaluate-leaders"),
        wildcard_constraints:
            ablation="|".join(spec.ablations.expert_sets),
            set="[A-Za-z0-9]+",
            expert="|".join(spec.selection.leader_experts()) or "(?!)",
        log:
            layout.log("ablations", "leaders_{ablation}_{set}_{expert}"),

    # Top-k checkpoints of an expert-set ablation's own runs, per (set, expert type).
    #   in:  results/evals/ckpt/<run>/index.json (each run of the set and type), the base's constraint evaluations,
    #        results/evals/leaders/ablations/{ablation}/{set}/{expert}.json (where ablation_evaluate_leaders runs)
    use rule select as ablation_select with:
        input:
            indexes=lambda w: spec.ablations.selection_indexes(w.ablation, w.set, w.expert),
            base=lambda w: spec.ablations.base_evals(w.ablation, w.set, w.expert),
            leaders=lambda w: spec.ablations.leaders(w.ablation, w.set, w.expert),
        output:  # results/ablations/{ablation}/selection/{set}/{expert}.json
            layout.ablation_selection("{ablation}", "{set}", "{expert}"),
        wildcard_constraints:
            ablation="|".join(spec.ablations.expert_sets),
            set="[A-Za-z0-9]+",
        log:
            layout.log("ablations", "select_{ablation}_{set}_{expert}"),

    # in: results/ablations/{ablation}/bases/{base}/config.json;
    # out: results/evals/ablations/{ablation}/bases/{base}/{benchmark}.json
    rule evaluate_ablation_base:
        """A second base of an expert-set ablation on one benchmark that its selection constraints compare with."""
        input:
            base=layout.base_config(layout.ablation_base("{ablation}", "{base}")),
            data=lambda w: evals.task_data_files([w.benchmark]),
        output:
            layout.ablation_base_eval("{ablation}", "{base}", "{benchmark}"),
        params:
            benchmarks=lambda w: evals.benchmark_params([w.benchmark]),
            **evals.evaluation_params("evaluate"),
        wildcard_constraints:
            ablation="|".join(spec.ablations.expert_sets),
            base="[A-Za-z0-9]+",
            benchmark="|".join(evals.benchmarks),
        threads: evals.threads
        resources:
            gpu=evals.gpus,
            **requests.of("evaluate_ablation_base"),
        log:
            layout.log("evaluate", "ablation_base_{ablation}_{base}_{benchmark}"),
        conda:
            "../envs/layerswap.yaml"
        shell:
            evaluate_shell("evaluate", f"--model ablations/{{wildcards.ablation}}/bases/{{wildcards.base}}="
                           f"{layout.ablation_base('{wildcards.ablation}', '{wildcards.base}')}",
                           tail=f" --store {layout.store()}")


if spec.ablations.expert_merges:

    ruleorder: ablation_merge_recipes > merge_recipes

    # Recipes of an expert-set ablation's merge config (ax_*): its own and/or the main selections.
    #   in:  results/ablations/<ablation>/selection/<set>/<expert>.json and/or results/selection/<expert>.json
    #   out: results/merges/{cfg}/{lang}/l<i>m<j>.json ({cfg}: ax_<ablation>_<set>_<config>)
    use rule merge_recipes as ablation_merge_recipes with:
        input:
            lang=lambda w: spec.ablations.merge_selection(w.cfg, w.lang, "lang"),
            task=lambda w: spec.ablations.merge_selection(w.cfg, w.lang, "task"),
        params:
            merge=lambda w: as_json(spec.ablations.expert_merges[w.cfg]["merge"]),
            code=command_hash("recipes"),
        wildcard_constraints:
            cfg="|".join(spec.ablations.expert_merges),


if spec.runs.other_base:

    ruleorder: ablation_sft > sft

    # SFT of an ablation run from another base than the main one: sft's command, with the run's base.
    #   in:  results/ablations/<ablation>/bases/<base>/config.json, results/data/sft/<the run's expert type>.jsonl
    #   out: <big>/experts/{run}/checkpoints.json ({run}: ax_<ablation>_<set>_<main run>)
    use rule sft as ablation_sft with:
        input:  # sft takes the base folder from input.base
            base=lambda w: layout.base_config(spec.runs.base_dir[w.run]),
            data=lambda w: layout.sft_mix(spec.runs.spec(w.run)["expert"]),
        wildcard_constraints:
            run="|".join(spec.runs.other_base),
        resources:
            gpu=lambda w: spec.runs.sft_gpus(w.run),
            **requests.of("ablation_sft"),


if spec.ablations.bases and config["world"] == "toy":

    # A second toy base (same corpus and shape, another seed) for an expert-set ablation: toy_base's command.
    #   in:  results/data/raw/pretrain.jsonl, results/data/raw/vocab.json
    #   out: results/ablations/{ablation}/bases/{base}/config.json (the base folder)
    use rule toy_base as ablation_toy_base with:
        output:
            layout.base_config(layout.ablation_base("{ablation}", "{base}")),
        params:  # params not named here are toy_base's
            model=lambda w: as_json(spec.ablations.base_spec(w.ablation, w.base)["model"]),
            seed=lambda w: spec.ablations.base_spec(w.ablation, w.base)["seed"],
        wildcard_constraints:
            ablation="|".join(spec.ablations.expert_sets),
            base="[A-Za-z0-9]+",
        resources:
            **requests.of("ablation_toy_base"),
        log:
            layout.log("ablations", "base_{ablation}_{base}"),

elif spec.ablations.bases:

    # out: results/ablations/{ablation}/bases/{base}/config.json (the base folder; linked from the pre-staged snapshot)
    rule ablation_prepare_base:
        """A second hub base (pre-staged, like prepare_base) for an expert-set ablation."""
        output:
            layout.base_config(layout.ablation_base("{ablation}", "{base}")),
        params:
            source=lambda w: shlex.quote(spec.ablations.base_spec(w.ablation, w.base)["source"]),
            revision=lambda w: revision_arg(spec.ablations.base_spec(w.ablation, w.base)),
            hf_home=spec.hf_home_arg,
            code=command_hash("prepare-base"),
        wildcard_constraints:
            ablation="|".join(spec.ablations.expert_sets),
            base="[A-Za-z0-9]+",
        resources:
            **requests.of("ablation_prepare_base"),
        log:
            layout.log("ablations", "base_{ablation}_{base}"),
        conda:
            "../envs/layerswap.yaml"
        shell:
            "HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "
            "layerswap prepare-base --source {params.source} {params.revision} "
            f"--out {layout.ablation_base('{wildcards.ablation}', '{wildcards.base}')} "
            "{params.hf_home} > {log} 2>&1"


if spec.ablations.extra_benchmarks:

    # Benchmarks an ablation reports that evaluation.merge_tasks does not include, one job per (config, language,
    # benchmark); evaluate_merges makes the merge tasks' files.
    #   in:  results/merges/{cfg}/{lang}/l<i>m<j>.json, results/data/eval/<benchmark>_{lang}.jsonl (toy world)
    #   out: results/evals/merge/{cfg}/{lang}/l<i>m<j>/{benchmark}.json
    use rule evaluate_merges as evaluate_ablation_merges with:
        input:
            recipes=[layout.recipe("{cfg}", "{lang}", pair) for pair in PAIRS],
            data=lambda w: evals.task_data_files([w.benchmark], [w.lang]),
        output:  # results/evals/merge/{cfg}/{lang}/{pair}/{benchmark}.json
            [layout.merge_eval("{cfg}", "{lang}", pair, "{benchmark}") for pair in PAIRS],
        params:
            models=lambda w, input: evals.merge_models(w.cfg, w.lang, PAIRS, input.recipes),
            benchmarks=lambda w: evals.benchmark_params([w.benchmark], [w.lang]),
            **evals.evaluation_params("evaluate-merges"),
        wildcard_constraints:
            benchmark="|".join(spec.ablations.extra_benchmarks),
        log:
            layout.log("evaluate", "merge_{cfg}_{lang}_{benchmark}"),


for _name in spec.ablations.planned:

    rule:
        name:
            f"ablation_table_{_name}"
        localrule: True
        input:
            spec.ablations.inputs(_name),
        output:
            csv=ablation_report(_name, "table.csv"),
            md=ablation_report(_name, "table.md"),
            svg=ablation_report(_name, "figure.svg"),
            png=ablation_report(_name, "figure.png"),
        params:
            table=spec.ablations.params(_name),
            name=_name,
            code=command_hash("ablation-table"),
        log:
            layout.log("ablations", _name),
        conda:
            "../envs/layerswap.yaml"
        shell:
            f"layerswap ablation-table --evals-dir {layout.evals()} --params-json {{params.table}} "
            f"--out-dir {layout.ablation_dir('{params.name}')} > {{log}} 2>&1"

    rule:
        name:
            f"ablation_{_name}"
        input:
            spec.ablations.results(_name),


# in: results/ablations/<name>/table.{csv,md}, figure.{svg,png} of each ablation the `ablations` key selects
rule ablations:
    """The ablations the `ablations` config key selects (all when it is absent)."""
    input:
        list(dict.fromkeys(f for n in spec.ablations.selected for f in spec.ablations.results(n))),
