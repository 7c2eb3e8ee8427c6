# Checkpoint evaluations in phases: before selection every checkpoint of a run on what selection ranks by, and (per
# expert type) the candidates selection reaches in score order on its constraint benchmarks; after it, the selected
# checkpoints on what Tables 2 and 5 read besides; top-k per expert type.


# Selection reads only the evaluations of its own benchmarks (SELECT_READS + weights + constraints), in the languages
# its metrics name: they get their own job(s), so an edit to a task selection does not read (MMLU, MBPP) reruns
# those evaluations and the tables, not selection, merges or their evaluations. Here every checkpoint on all of them
# but the constraint benchmarks no weight reads, which evaluate_checkpoint_leaders evaluates on the leaders
# (selection.constraint_evaluation: leaders; `all`: here too).
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
        top_k=spec.merges.top_k,
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


# A Table 5 part that scores nothing (MBPP without execute_code), written as skipped by a local job, no GPU:
#   in:  <big>/experts/{run}/checkpoints.json, results/selection/<the run's expert type>.json
#   out: results/evals/ckpt/{run}/index.{part}.json
use rule evaluate_checkpoints_other as checkpoint_skipped with:
    localrule: True
    wildcard_constraints:
        part=evals.table5_part_names(skipped=True),
    resources:
        gpu=0,


if evals.single_task_jobs:

    # in:  results/evals/ckpt/{run}/index.<benchmark>.json (each primary selection benchmark)
    # out: results/evals/ckpt/{run}/index.json
    rule checkpoint_index:
        """The per-benchmark indexes of a run's primary selection benchmarks, as the one index `select` reads."""
        localrule: True
        input:
            lambda w: [layout.checkpoint_index(w.run, b) for b in evals.primary_benchmarks(w.run)],
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


# The constraint benchmarks of an expert type's selection that no weight reads (MMLU, a language's MGSM), on the
# candidates the selection reaches in score order only (layerswap/evaluation/leaders.py): round by round, the top_k
# leaders within max_per_run, then those that take the places of the ones that failed, until the walk needs no more;
# the same picks as with every checkpoint evaluated. The candidates (every checkpoint of the type's runs) are known
# when the DAG is built; the primary indexes decide which are evaluated, and the store keeps each finished one.
#   in:  results/evals/ckpt/<run>/index.json (each run of the type), results/evals/base/<constraint benchmark>.json
#   out: results/evals/leaders/{expert}.json; beside the runs' other files, each evaluated checkpoint's
#        ckpt/<run>/<checkpoint>/{benchmark}.json, which the index names
rule evaluate_checkpoint_leaders:
    """The constraint benchmarks of an expert type's selection on the candidates it reaches in score order."""
    input:
        indexes=lambda w: spec.selection.indexes(w.expert),
        base=lambda w: spec.selection.base_evals(w.expert),
        data=lambda w: spec.selection.leaders_data(spec.runs.of(w.expert)),
    output:
        layout.leaders_index("{expert}"),
    params:
        models=lambda w: spec.selection.leaders_models(spec.runs.of(w.expert)),
        benchmarks=lambda w: spec.selection.leaders_benchmarks(spec.runs.of(w.expert)),
        select=lambda w: spec.selection.leaders_params(w.expert),
        **evals.evaluation_params("evaluate-leaders"),
    wildcard_constraints:
        expert="|".join(spec.selection.leader_experts()) or "(?!)",
    threads: evals.threads
    resources:
        gpu=evals.gpus,
        **requests.of("evaluate_checkpoint_leaders"),
    log:
        layout.log("evaluate", "leaders_{expert}"),
    conda:
        "../envs/layerswap.yaml"
    shell:
        evaluate_shell("evaluate-leaders", "{params.models}",
                       tail=" --primary {input.indexes} --base-evals {input.base} --expert {wildcards.expert}"
                       f" --params-json {{params.select}} --index {{output}} --store {layout.store()}")


# Top-k checkpoints of an expert type (layerswap/workflow/selection_jobs.py):
#   in:  results/evals/ckpt/<run>/index.json (each run of the type), results/evals/base/<constraint benchmark>.json,
#        results/evals/leaders/{expert}.json (where evaluate_checkpoint_leaders runs)
#   out: results/selection/{expert}.json
rule select:
    localrule: True
    input:
        indexes=lambda w: spec.selection.indexes(w.expert),
        base=lambda w: spec.selection.base_evals(w.expert),
        leaders=lambda w: spec.selection.leaders(w.expert),
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
        "layerswap select --index {input.indexes} --base-evals {input.base} --leaders {input.leaders} "
        "--expert {wildcards.expert} --params-json {params.select} --out {output} > {log} 2>&1"
