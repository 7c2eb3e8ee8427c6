# Every checkpoint of a run is evaluated once (selection metrics + Table 5); top-k per expert type.


# Selection reads only the evaluations of its own benchmarks (SELECT_READS + weights): they get their own job(s),
# so an edit to a task selection does not read (MMLU, MBPP) reruns those evaluations and the tables, not
# selection, merges or their evaluations.
rule evaluate_checkpoints:
    """Selection benchmarks of every checkpoint of a run (single layout: one benchmark); the index names their files."""
    input:
        manifest=layout.checkpoints_record("{run}"),
        data=lambda w: spec.evals.checkpoint_eval_data(
            w.run, spec.evals.job_benchmarks(w, spec.evals.selection_benchmarks(w.run))
        ),
    output:
        spec.evals.per_layout(layout.checkpoint_index("{run}"), layout.checkpoint_index("{run}", "{benchmark}")),
    params:
        models=lambda w: spec.evals.checkpoint_model_args(w.run),
        benchmarks=lambda w: spec.evals.checkpoint_eval_rule_params(
            w.run, spec.evals.job_benchmarks(w, spec.evals.selection_benchmarks(w.run))
        ),
        **spec.evals.evaluation_params("evaluate"),
    wildcard_constraints:
        benchmark="|".join(spec.evals.tasks),
    threads: spec.evals.threads
    resources:
        gpu=spec.evals.gpus,
        **requests.of("evaluate_checkpoints"),
    log:
        spec.evals.per_layout(layout.log("evaluate", "ckpt_{run}"), layout.log("evaluate", "ckpt_{run}_{benchmark}")),
    conda:
        "../envs/layerswap.yaml"
    shell:
        evaluate_shell("evaluate", "{params.models}",
                       tail=f" --run {{wildcards.run}} --index {{output}} --store {layout.store()}")


if not spec.evals.single_task_jobs:

    use rule evaluate_checkpoints as evaluate_checkpoints_other with:
        input:
            manifest=layout.checkpoints_record("{run}"),
            data=lambda w: spec.evals.checkpoint_eval_data(w.run, spec.evals.other_checkpoint_benchmarks(w.run)),
        output:
            layout.checkpoint_index("{run}", "other"),
        params:
            models=lambda w: spec.evals.checkpoint_model_args(w.run),
            benchmarks=lambda w: spec.evals.checkpoint_eval_rule_params(
                w.run, spec.evals.other_checkpoint_benchmarks(w.run)
            ),
            **spec.evals.evaluation_params("evaluate"),
        log:
            layout.log("evaluate", "ckpt_{run}_other"),

else:

    rule checkpoint_index:
        """The per-benchmark indexes of a run's selection benchmarks, as the one index `select` reads."""
        localrule: True
        input:
            lambda w: [layout.checkpoint_index(w.run, b) for b in spec.evals.selection_benchmarks(w.run)],
        output:
            layout.checkpoint_index("{run}"),
        params:
            code=command_hash("checkpoint-index"),
        log:
            layout.log("checkpoint_index", "{run}"),
        conda:
            "../envs/layerswap.yaml"
        shell:
            "layerswap checkpoint-index --out {output} {input} > {log} 2>&1"


rule select:
    localrule: True
    input:
        indexes=lambda w: spec.evals.selection_indexes(w.expert),
        base=lambda w: spec.evals.eval_files("base", spec.evals.constraint_benchmarks(expert_type(w.expert))),
    output:
        layout.selection("{expert}"),
    params:
        select=lambda w: spec.evals.selection_params(w.expert),
        code=command_hash("select"),
    log:
        layout.log("select", "{expert}"),
    conda:
        "../envs/layerswap.yaml"
    shell:
        "layerswap select --index {input.indexes} --base-evals {input.base} --expert {wildcards.expert} "
        "--params-json {params.select} --out {output} > {log} 2>&1"
