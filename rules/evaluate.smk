# Evaluation through lm-eval: the base, and merges built in memory (one job per merge config and language, or per
# group of a language's configs: evaluation.merge_configs_per_job, layerswap/workflow/merge_groups.py).
# evaluation.tasks_per_job: grouped (one job runs all tasks of its models) or single (one job per task, wildcard
# {benchmark}); output paths are the same either way, so tables read the same files.
# Every evaluation job (base, checkpoints, merges) keeps its results by content in EVAL_STORE
# (layerswap.evaluation.store, no rule's output), model by model: a job that reruns (or was cut by its time limit)
# evaluates only the models whose result for the same evaluation is not there (docs/RERUNS.md).

EVAL_STORE = layout.store()
MERGE_JOB_BENCHMARKS = evals.per_layout(evals.merge_benchmarks, ["{benchmark}"])  # of a merge evaluation job


# out: results/evals/base/{benchmark}.json (the job's benchmarks)
rule evaluate_base:
    input:
        base=layout.base_config(),
        data=lambda w: evals.task_data_files(base_job_benchmarks(w)),
    output:
        evals.per_layout(
            [layout.eval_file("base", b) for b in evals.base_rest], layout.eval_file("base", "{benchmark}")
        ),
    params:
        benchmarks=lambda w: evals.benchmark_params(base_job_benchmarks(w)),
        **evals.evaluation_params("evaluate"),
    wildcard_constraints:
        benchmark="|".join(b for b in evals.benchmarks if not evals.skipped(b)) or "(?!)",
    threads: evals.threads
    resources:
        gpu=evals.gpus,
        **requests.of("evaluate_base"),
    log:
        evals.per_layout(layout.log("evaluate", "base"), layout.log("evaluate", "base_{benchmark}")),
    conda:
        "../envs/layerswap.yaml"
    shell:
        evaluate_shell("evaluate", f"--model base={layout.base()}", tail=f" --store {EVAL_STORE}")


if evals.single_task_jobs:

    # A benchmark that scores nothing (MBPP without execute_code), written as skipped by a local job, no GPU:
    #   in:  results/base/config.json
    #   out: results/evals/base/{benchmark}.json
    use rule evaluate_base as evaluate_base_skipped with:
        localrule: True
        wildcard_constraints:
            benchmark="|".join(b for b in evals.benchmarks if evals.skipped(b)) or "(?!)",
        resources:
            gpu=0,


if evals.base_constrained:

    # out: results/evals/base/{benchmark}.json of the benchmarks selection constraints read
    use rule evaluate_base as evaluate_base_select with:
        input:
            base=layout.base_config(),
            data=evals.task_data_files(evals.base_constrained),
        output:
            [layout.eval_file("base", b) for b in evals.base_constrained],
        params:
            benchmarks=evals.benchmark_params(evals.base_constrained),
            **evals.evaluation_params("evaluate"),
        log:
            layout.log("evaluate", "base_select"),


# One job per merge config and language, on every expert pair's merge (built in memory from its recipe):
#   in:  results/merges/{cfg}/{lang}/{pair}.json (rules/merge.smk merge_recipes)
#   out: results/evals/merge/{cfg}/{lang}/{pair}/{benchmark}.json (each pair, the job's benchmarks)
#   runs: layerswap evaluate-merges --data-dir results/data/eval --benchmarks-json <the job's benchmarks in {lang}>
#         --model merge/{cfg}/{lang}/{pair}=<its recipe> ... --out-dir results/evals <evaluation params>
#         --store results/store/evals (evaluate_shell, layerswap/workflow/words.py)
rule evaluate_merges:
    input:
        recipes=[layout.recipe("{cfg}", "{lang}", pair) for pair in PAIRS],
        data=lambda w: evals.task_data_files(merge_job_benchmarks(w), [w.lang]),
    output:
        [layout.merge_eval("{cfg}", "{lang}", pair, b) for pair in PAIRS for b in MERGE_JOB_BENCHMARKS],
    params:
        models=lambda w, input: evals.merge_models(w.cfg, w.lang, PAIRS, input.recipes),
        benchmarks=lambda w: evals.benchmark_params(merge_job_benchmarks(w), [w.lang]),
        **evals.evaluation_params("evaluate-merges"),
    wildcard_constraints:
        benchmark="|".join(evals.merge_benchmarks),
    threads: evals.threads
    resources:
        gpu=evals.gpus,
        **requests.of("evaluate_merges"),
    log:
        evals.per_layout(
            layout.log("evaluate", "merge_{cfg}_{lang}"),
            layout.log("evaluate", "merge_{cfg}_{lang}_{benchmark}"),
        ),
    conda:
        "../envs/layerswap.yaml"
    shell:
        evaluate_shell("evaluate-merges", "{params.models}", tail=f" --store {EVAL_STORE}")


# The soup-then-swap merges of a language, evaluate_merges' command:
#   in:  results/merges/soupswap/{lang}/{soup}.json (rules/merge.smk soup_then_swap_recipes)
#   out: results/evals/merge/soupswap/{lang}/{soup}/{benchmark}.json
use rule evaluate_merges as evaluate_soup_then_swap with:
    input:
        recipes=[layout.recipe(SOUPSWAP, "{lang}", soup) for soup in SOUPS],
        data=lambda w: evals.task_data_files(merge_job_benchmarks(w), [w.lang]),
    output:
        [layout.merge_eval(SOUPSWAP, "{lang}", soup, b) for soup in SOUPS for b in MERGE_JOB_BENCHMARKS],
    params:
        models=lambda w, input: evals.merge_models(SOUPSWAP, w.lang, SOUPS, input.recipes),
        benchmarks=lambda w: evals.benchmark_params(merge_job_benchmarks(w), [w.lang]),
        **evals.evaluation_params("evaluate-merges"),
    log:
        evals.per_layout(
            layout.log("evaluate", f"merge_{SOUPSWAP}_{{lang}}"),
            layout.log("evaluate", f"merge_{SOUPSWAP}_{{lang}}_{{benchmark}}"),
        ),


# With evaluation.merge_configs_per_job > 1: one job per group of a language's merge configs (soup-then-swap counted as
# one), each a rule of its own without wildcards, evaluate_merge_group_<lang>_<n>[_<benchmark>], which Snakemake
# prefers to evaluate_merges and evaluate_soup_then_swap for the same files (spec.merge_groups, layerswap/workflow/
# merge_groups.py: which configs, why). The group's merges are evaluated in one process: imports, the model's start
# and the experts' reads paid once; the store feeds every model whose result it keeps (a changed config's recipes
# rerun the group, and only that config's merges are evaluated; a group cut short resumes after its last model).
#   in:  results/merges/<each config of the group>/<lang>/{pair}.json
#   out: results/evals/merge/<each config of the group>/<lang>/{pair}/<the group's benchmarks>.json
for _group in spec.merge_groups.groups:

    rule:
        name:
            f"evaluate_merge_group_{_group.name}"
        input:
            recipes=spec.merge_groups.recipes(_group),
            data=evals.task_data_files(_group.benchmarks, [_group.lang]),
        output:
            spec.merge_groups.outputs(_group),
        params:
            models=spec.merge_groups.model_args(_group),
            benchmarks=evals.benchmark_params(_group.benchmarks, [_group.lang]),
            **evals.evaluation_params("evaluate-merges"),
        threads: evals.threads
        resources:
            gpu=evals.gpus,
            **requests.of(_group.rule),
        log:
            spec.merge_groups.log(_group),
        conda:
            "../envs/layerswap.yaml"
        shell:
            evaluate_shell("evaluate-merges", "{params.models}", tail=f" --store {EVAL_STORE}")


# Table 2 shows its language's experts and merges in English and every MGSM language, which their own evaluation
# files do not hold (checkpoints: English + own language; merges: their target language). Those scores are files of
# their own, one job per extra language: evals/by_language/<lang>/<model id>/mgsm.json, found there by
# layerswap.report.evals.Evals. So a new Table 2 language or MGSM language adds jobs and files and reruns no evaluation,
# selection or merge that exists.


# out: results/evals/by_language/{lang}/table2_<Table 2 language>.models.json, each extra language
rule table2_models:
    """The models Table 2 reads, per extra language: its winners chosen on the table's language as the table chooses
    them (layerswap/report/table2_models.py), the default swap and the selected experts."""
    localrule: True
    input:
        evals.table2_choice_inputs(),
    output:
        [layout.table2_models(lang, evals.t2) for lang in evals.t2_langs],
    params:
        tables=evals.table2_choice_params(),
        covered=evals.table2_covered(),
        langs=" ".join(evals.t2_langs),
        code=command_hash("table2-models"),
    log:
        layout.log("table2_models"),
    conda:
        "../envs/layerswap.yaml"
    shell:
        f"layerswap table2-models --selection-dir {layout.selection_dir()} --evals-dir {layout.evals()} "
        "--params-json {params.tables} --covered-json {params.covered} --languages {params.langs} "
        "--out {output} > {log} 2>&1"


# out: results/evals/by_language/{lang}/table2_<Table 2 language>.json (the index), and beside it
# <model id>/mgsm.json of each model the list names
rule evaluate_table2:
    """MGSM in one extra language on the Table 2 models that lack it and that Table 2 reads (the list of rule
    table2_models); the index names the files. The store keeps each finished model: a changed winner evaluates
    only the new one."""
    input:
        only=lambda w: layout.table2_models(w.lang, evals.t2),
        models=lambda w: evals.table2_inputs(w.lang),
        data=lambda w: evals.task_data_files(["mgsm"], [w.lang]),
    output:
        layout.table2_index("{lang}", evals.t2),
    params:
        models=lambda w: evals.table2_model_args(w.lang),
        benchmarks=lambda w: evals.benchmark_params(["mgsm"], [w.lang]),
        **evals.evaluation_params("evaluate-merges"),
    threads: evals.threads
    resources:
        gpu=evals.gpus,
        **requests.of("evaluate_table2"),
    log:
        layout.log("evaluate", "table2_{lang}"),
    conda:
        "../envs/layerswap.yaml"
    shell:
        evaluate_shell("evaluate-merges", "{params.models}", layout.language_evals("{wildcards.lang}"),
                       f" --index {{output}} --store {EVAL_STORE} --only-models {{input.only}}")
