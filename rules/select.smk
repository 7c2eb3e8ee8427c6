# Every checkpoint of a run is evaluated once (selection metrics + Table 5); top-k per expert type.


# Selection reads only the evaluations of its own benchmarks (SELECT_READS + weights): they get their own job(s),
# so an edit to a task selection does not read (MMLU, MBPP) reruns those evaluations and the tables, not
# selection, merges or their evaluations.
rule evaluate_checkpoints:
    """Selection benchmarks of every checkpoint of a run (single layout: one benchmark); the index names their files."""
    input:
        manifest=f"{EXPERTS}/{{run}}/checkpoints.json",
        data=lambda w: task_data_files(job_benchmarks(w, selection_benchmarks(w.run)), checkpoint_languages(w.run)),
    output:
        per_layout(f"{R}/evals/ckpt/{{run}}/index.json", f"{R}/evals/ckpt/{{run}}/index.{{benchmark}}.json"),
    params:
        models=lambda w: " ".join(f"--model {i}={p}" for i, p in checkpoint_models(w.run).items()),
        benchmarks=lambda w: checkpoint_eval_rule_params(w.run, job_benchmarks(w, selection_benchmarks(w.run))),
        batch_size=EVAL["batch_size"],
        seed=config["seed"],
        task_set=TASK_SET,
        backend=BACKEND,
        code=command_hash("evaluate"),
    wildcard_constraints:
        benchmark="|".join(EVAL["tasks"]),
    threads: EVAL["threads"]
    resources:
        gpu=GPUS,
    log:
        per_layout(f"{R}/logs/evaluate/ckpt_{{run}}.log", f"{R}/logs/evaluate/ckpt_{{run}}_{{benchmark}}.log"),
    conda:
        "../envs/layerswap.yaml"
    shell:
        "layerswap evaluate --data-dir results/data/eval --benchmarks-json {params.benchmarks} {params.models} "
        "--out-dir results/evals --batch-size {params.batch_size} --seed {params.seed} "
        "--task-set {params.task_set} --backend {params.backend} --threads {threads} "
        "--run {wildcards.run} --index {output} > {log} 2>&1"


if not SINGLE_TASK_JOBS:

    use rule evaluate_checkpoints as evaluate_checkpoints_other with:
        input:
            manifest=f"{EXPERTS}/{{run}}/checkpoints.json",
            data=lambda w: task_data_files(other_checkpoint_benchmarks(w.run), checkpoint_languages(w.run)),
        output:
            f"{R}/evals/ckpt/{{run}}/index.other.json",
        params:
            models=lambda w: " ".join(f"--model {i}={p}" for i, p in checkpoint_models(w.run).items()),
            benchmarks=lambda w: checkpoint_eval_rule_params(w.run, other_checkpoint_benchmarks(w.run)),
            batch_size=EVAL["batch_size"],
            seed=config["seed"],
            task_set=TASK_SET,
            backend=BACKEND,
            code=command_hash("evaluate"),
        log:
            f"{R}/logs/evaluate/ckpt_{{run}}_other.log",

else:

    localrules:
        checkpoint_index,

    rule checkpoint_index:
        """The per-benchmark indexes of a run's selection benchmarks, as the one index `select` reads."""
        input:
            lambda w: [f"{R}/evals/ckpt/{w.run}/index.{b}.json" for b in selection_benchmarks(w.run)],
        output:
            f"{R}/evals/ckpt/{{run}}/index.json",
        params:
            code=command_hash("checkpoint-index"),
        log:
            f"{R}/logs/checkpoint_index/{{run}}.log",
        conda:
            "../envs/layerswap.yaml"
        shell:
            "layerswap checkpoint-index --out {output} {input} > {log} 2>&1"


rule select:
    input:
        indexes=lambda w: selection_indexes(w.expert),
        base=lambda w: eval_files("base", constraint_benchmarks(expert_kind(w.expert))),
    output:
        f"{R}/selection/{{expert}}.json",
    params:
        select=lambda w: selection_params(w.expert),
        code=command_hash("select"),
    log:
        f"{R}/logs/select/{{expert}}.log",
    conda:
        "../envs/layerswap.yaml"
    shell:
        "layerswap select --index {input.indexes} --base-evals {input.base} --expert {wildcards.expert} "
        "--params-json {params.select} --out {output} > {log} 2>&1"
