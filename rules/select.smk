# Checkpoint evaluations in two phases: before selection every checkpoint of a run on what selection reads; after it,
# the selected checkpoints on what Tables 2 and 5 read besides; top-k per expert type.


# Selection reads only the evaluations of its own benchmarks (SELECT_READS + weights + constraints), in the languages
# its metrics name: they get their own job(s), so an edit to a task selection does not read (MMLU, MBPP) reruns
# those evaluations and the tables, not selection, merges or their evaluations.
#   in:  <big>/experts/{run}/checkpoints.json (rules/train.smk sft; <big>: storage.scratch's folder, else results)
#   out: results/evals/ckpt/{run}/index.json, or with one job per task results/evals/ckpt/{run}/index.{benchmark}.json;
#        beside it each checkpoint's evaluations ckpt/{run}/<checkpoint>/{benchmark}.json, which the index names
rule evaluate_checkpoints:
    """Selection benchmarks of every checkpoint of a run, in the languages selection reads (single layout: one
    benchmark); the index names their files."""
    input:
        manifest=layout.checkpoints_record("{run}"),
        data=lambda w: evals.checkpoint_eval_data(w.run, checkpoint_job_benchmarks(w)),
    output:
        evals.per_layout(layout.checkpoint_index("{run}"), layout.checkpoint_index("{run}", "{benchmark}")),
    params:
        models=lambda w: evals.checkpoint_model_args(w.run),
        benchmarks=lambda w: evals.checkpoint_eval_rule_params(w.run, checkpoint_job_benchmarks(w)),
        **evals.evaluation_params("evaluate"),
    wildcard_constraints:
        benchmark="|".join(evals.tasks),
    threads: evals.threads
    resources:
        gpu=evals.gpus,
        **requests.of("evaluate_checkpoints"),
    log:
        evals.per_layout(layout.log("evaluate", "ckpt_{run}"), layout.log("evaluate", "ckpt_{run}_{benchmark}")),
    conda:
        "../envs/layerswap.yaml"
    shell:
        evaluate_shell("evaluate", "{params.models}",
                       tail=f" --run {{wildcards.run}} --index {{output}} --store {layout.store()}")


# After selection, on the checkpoints it selected only (the job's candidates are the run's checkpoints, the selection
# file names the ones it evaluates; a run none of whose checkpoints is selected evaluates nothing): Table 5's other
# benchmarks, and the languages of the selection benchmarks that selection does not read (written under
# evals/by_language/<lang>/). Parts and their benchmarks: EvaluationJobs.table5_parts. Joint runs get none. A part
# that scores nothing (MBPP without execute_code) is written as skipped by a local job, no GPU.
#   in:  <big>/experts/{run}/checkpoints.json, results/selection/<the run's expert type>.json
#   out: results/evals/ckpt/{run}/index.{part}.json
rule evaluate_checkpoints_other:
    """Table 5's evaluations of a run's selected checkpoints, one part (benchmarks and languages) per job."""
    input:
        manifest=layout.checkpoints_record("{run}"),
        selection=lambda w: spec.selection.of_run(w.run),
        data=lambda w: evals.table5_data(w.run, w.part),
    output:
        layout.checkpoint_index("{run}", "{part}"),
    params:
        models=lambda w: evals.checkpoint_model_args(w.run),
        benchmarks=lambda w: evals.table5_params(w.run, w.part),
        out_dir=lambda w: evals.table5_part(w.run, w.part)[1],
        top_k=config["selection"]["top_k"],
        **evals.evaluation_params("evaluate"),
    wildcard_constraints:
        part=evals.table5_part_names(skipped=False),
    threads: evals.threads
    resources:
        gpu=evals.gpus,
        **requests.of("evaluate_checkpoints_other"),
    log:
        layout.log("evaluate", "ckpt_{run}_{part}"),
    conda:
        "../envs/layerswap.yaml"
    shell:
        evaluate_shell("evaluate", "{params.models}", "{params.out_dir}",
                       tail=" --run {wildcards.run} --index {output} --only-selected {input.selection}"
                       f" --top-k {{params.top_k}} --store {layout.store()}")


use rule evaluate_checkpoints_other as checkpoint_skipped with:
    localrule: True
    wildcard_constraints:
        part=evals.table5_part_names(skipped=True),
    resources:
        gpu=0,


if evals.single_task_jobs:

    # in: results/evals/ckpt/{run}/index.<benchmark>.json (each selection benchmark); out: .../index.json
    rule checkpoint_index:
        """The per-benchmark indexes of a run's selection benchmarks, as the one index `select` reads."""
        localrule: True
        input:
            lambda w: [layout.checkpoint_index(w.run, b) for b in evals.selection_benchmarks(w.run)],
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


# Top-k checkpoints of an expert type (layerswap/workflow/selection_jobs.py):
#   in:  results/evals/ckpt/<run>/index.json (each run of the type), results/evals/base/<constraint benchmark>.json
#   out: results/selection/{expert}.json
rule select:
    localrule: True
    input:
        indexes=lambda w: spec.selection.indexes(w.expert),
        base=lambda w: spec.selection.base_evals(w.expert),
    output:
        layout.selection("{expert}"),
    params:
        select=lambda w: spec.selection.params(w.expert),
        code=command_hash("select"),
    log:
        layout.log("select", "{expert}"),
    conda:
        "../envs/layerswap.yaml"
    shell:
        "layerswap select --index {input.indexes} --base-evals {input.base} --expert {wildcards.expert} "
        "--params-json {params.select} --out {output} > {log} 2>&1"
