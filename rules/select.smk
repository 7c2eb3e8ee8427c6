# Every checkpoint of a run is evaluated once (selection metrics + Table 5); top-k per expert type.


def checkpoint_models(run):
    return {
        f"ckpt/{run}/{checkpoint_name(s)}": f"{R}/experts/{run}/{checkpoint_name(s)}"
        for s in checkpoints_of(RUNS[run])
    }


rule evaluate_checkpoints:
    input:
        manifest=f"{R}/experts/{{run}}/checkpoints.json",
        data=eval_data_files(BENCHMARKS),
    output:
        f"{R}/evals/ckpt/{{run}}/index.json",
    params:
        models=lambda w: " ".join(f"--model {i}={p}" for i, p in checkpoint_models(w.run).items()),
        benchmarks=lambda w: benchmark_params(BENCHMARKS, checkpoint_languages(w.run)),
        batch_size=EVAL["batch_size"],
        seed=config["seed"],
        code=code_hash("evaluate", "evaluation", "tasks"),
    threads: EVAL["threads"]
    resources:
        gpu=lambda w: 0 if config["world"] == "toy" else 1,
    log:
        f"{R}/logs/evaluate/ckpt_{{run}}.log",
    shell:
        "layerswap evaluate --data-dir {R}/data/eval --benchmarks-json {params.benchmarks} {params.models} "
        "--out-dir {R}/evals --batch-size {params.batch_size} --seed {params.seed} --threads {threads} "
        "--run {wildcards.run} --index {output} > {log} 2>&1"


def selection_params(expert):
    kind = expert_kind(expert)
    lang = None if kind == "math" else expert.removeprefix("joint_")
    return as_json({
        "kind": kind, "lang": lang, "weights": config["selection"]["weights"][kind],
        "top_k": config["selection"]["top_k"], "max_per_run": config["selection"]["max_per_run"],
        "mgsm_languages": config["mgsm_languages"],
    })


rule select:
    input:
        lambda w: checkpoint_indexes(w.expert),
    output:
        f"{R}/selection/{{expert}}.json",
    params:
        select=lambda w: selection_params(w.expert),
        code=code_hash("select"),
    log:
        f"{R}/logs/select/{{expert}}.log",
    shell:
        "layerswap select --index {input} --expert {wildcards.expert} --params-json {params.select} "
        "--out {output} > {log} 2>&1"
