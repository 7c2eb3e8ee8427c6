# Evaluation through lm-eval: the base, and merges built in memory (one job per merge config and language).
# evaluation.tasks_per_job: grouped (one job runs all tasks of its models) or single (one job per task, wildcard
# {benchmark}); output paths are the same either way, so tables read the same files.
# Every evaluation job (base, checkpoints, merges) keeps its results by content in EVAL_STORE
# (layerswap.evaluation.store, no rule's output), model by model: a job that reruns (or was cut by its time limit)
# evaluates only the models whose result for the same evaluation is not there (docs/RERUNS.md).

EVAL_STORE = layout.store()

rule evaluate_base:
    input:
        base=layout.base_config(),
        data=lambda w: spec.evals.task_data_files(spec.evals.job_benchmarks(w, spec.evals.base_rest)),
    output:
        spec.evals.per_layout(
            spec.evals.eval_files("base", spec.evals.base_rest), layout.eval_file("base", "{benchmark}")
        ),
    params:
        benchmarks=lambda w: spec.evals.benchmark_params(spec.evals.job_benchmarks(w, spec.evals.base_rest)),
        **spec.evals.evaluation_params("evaluate"),
    wildcard_constraints:
        benchmark="|".join(b for b in spec.evals.benchmarks if not spec.evals.skipped(b)) or "(?!)",
    threads: spec.evals.threads
    resources:
        gpu=spec.evals.gpus,
        **requests.of("evaluate_base"),
    log:
        spec.evals.per_layout(layout.log("evaluate", "base"), layout.log("evaluate", "base_{benchmark}")),
    conda:
        "../envs/layerswap.yaml"
    shell:
        evaluate_shell("evaluate", f"--model base={layout.base()}", tail=f" --store {EVAL_STORE}")


if spec.evals.single_task_jobs:

    use rule evaluate_base as evaluate_base_skipped with:
        localrule: True
        wildcard_constraints:
            benchmark="|".join(b for b in spec.evals.benchmarks if spec.evals.skipped(b)) or "(?!)",
        resources:
            gpu=0,


if spec.evals.base_constrained:

    use rule evaluate_base as evaluate_base_select with:
        input:
            base=layout.base_config(),
            data=spec.evals.task_data_files(spec.evals.base_constrained),
        output:
            spec.evals.eval_files("base", spec.evals.base_constrained),
        params:
            benchmarks=spec.evals.benchmark_params(spec.evals.base_constrained),
            **spec.evals.evaluation_params("evaluate"),
        log:
            layout.log("evaluate", "base_select"),


rule evaluate_merges:
    input:
        recipes=expand(layout.recipe("{{cfg}}", "{{lang}}", "{pair}"), pair=spec.merges.pairs),
        data=lambda w: spec.evals.task_data_files(spec.evals.job_benchmarks(w, spec.evals.merge_benchmarks), [w.lang]),
    output:
        spec.evals.merge_eval_patterns(
            "{cfg}", spec.merges.pairs, spec.evals.per_layout(spec.evals.merge_benchmarks, ["{benchmark}"])
        ),
    params:
        models=lambda w, input: spec.evals.merge_models(w.cfg, w.lang, spec.merges.pairs, input.recipes),
        benchmarks=lambda w: spec.evals.benchmark_params(
            spec.evals.job_benchmarks(w, spec.evals.merge_benchmarks), [w.lang]
        ),
        **spec.evals.evaluation_params("evaluate-merges"),
    wildcard_constraints:
        benchmark="|".join(spec.evals.merge_benchmarks),
    threads: spec.evals.threads
    resources:
        gpu=spec.evals.gpus,
        **requests.of("evaluate_merges"),
    log:
        spec.evals.per_layout(
            layout.log("evaluate", "merge_{cfg}_{lang}"),
            layout.log("evaluate", "merge_{cfg}_{lang}_{benchmark}"),
        ),
    conda:
        "../envs/layerswap.yaml"
    shell:
        evaluate_shell("evaluate-merges", "{params.models}", tail=f" --store {EVAL_STORE}")


use rule evaluate_merges as evaluate_soup_then_swap with:
    input:
        recipes=expand(layout.recipe(spec.merges.soup_swap, "{{lang}}", "{m}"), m=spec.merges.soups),
        data=lambda w: spec.evals.task_data_files(spec.evals.job_benchmarks(w, spec.evals.merge_benchmarks), [w.lang]),
    output:
        spec.evals.merge_eval_patterns(
            spec.merges.soup_swap, spec.merges.soups, spec.evals.per_layout(spec.evals.merge_benchmarks, ["{benchmark}"])
        ),
    params:
        models=lambda w, input: spec.evals.merge_models(spec.merges.soup_swap, w.lang, spec.merges.soups, input.recipes),
        benchmarks=lambda w: spec.evals.benchmark_params(
            spec.evals.job_benchmarks(w, spec.evals.merge_benchmarks), [w.lang]
        ),
        **spec.evals.evaluation_params("evaluate-merges"),
    log:
        spec.evals.per_layout(
            layout.log("evaluate", f"merge_{spec.merges.soup_swap}_{{lang}}"),
            layout.log("evaluate", f"merge_{spec.merges.soup_swap}_{{lang}}_{{benchmark}}"),
        ),


# Table 2 shows its language's experts and merges in English and every MGSM language, which their own evaluation
# files do not hold (checkpoints: English + own language; merges: their target language). Those scores are files of
# their own, one job per extra language: evals/by_language/<lang>/<model id>/mgsm.json, found there by
# layerswap.report.evals.Evals. So a new Table 2 language or MGSM language adds jobs and files and reruns no evaluation,
# selection or merge that exists.


rule table2_models:
    """The models Table 2 reads, per extra language: its winners chosen on the table's language as the table chooses
    them (layerswap/report/table2_models.py), the default swap and the selected experts."""
    localrule: True
    input:
        spec.evals.table2_choice_inputs(),
    output:
        [spec.evals.table2_models_file(l) for l in spec.evals.t2_langs],
    params:
        tables=spec.evals.table2_choice_params(),
        covered=spec.evals.table2_covered(),
        langs=" ".join(spec.evals.t2_langs),
        code=command_hash("table2-models"),
    log:
        layout.log("table2_models"),
    conda:
        "../envs/layerswap.yaml"
    shell:
        f"layerswap table2-models --selection-dir {layout.selection_dir()} --evals-dir {layout.evals()} "
        "--params-json {params.tables} --covered-json {params.covered} --languages {params.langs} "
        "--out {output} > {log} 2>&1"


rule evaluate_table2:
    """MGSM in one extra language on the Table 2 models that lack it and that Table 2 reads (the list of rule
    table2_models); the index names the files. The store keeps each finished model: a changed winner evaluates
    only the new one."""
    input:
        only=lambda w: spec.evals.table2_models_file(w.lang),
        models=lambda w: spec.evals.table2_inputs(w.lang),
        data=lambda w: spec.evals.task_data_files(["mgsm"], [w.lang]),
    output:
        spec.evals.table2_index("{lang}"),
    params:
        models=lambda w: spec.evals.table2_model_args(w.lang),
        benchmarks=lambda w: spec.evals.benchmark_params(["mgsm"], [w.lang]),
        **spec.evals.evaluation_params("evaluate-merges"),
    threads: spec.evals.threads
    resources:
        gpu=spec.evals.gpus,
        **requests.of("evaluate_table2"),
    log:
        layout.log("evaluate", "table2_{lang}"),
    conda:
        "../envs/layerswap.yaml"
    shell:
        evaluate_shell("evaluate-merges", "{params.models}", layout.language_evals("{wildcards.lang}"),
                       f" --index {{output}} --store {EVAL_STORE} --only-models {{input.only}}")
