# Evaluation through lm-eval: the base, and merges built in memory (one job per merge config and language).
# evaluation.tasks_per_job: grouped (one job runs all tasks of its models) or single (one job per task, wildcard
# {benchmark}); output paths are the same either way, so tables read the same files.

SOUPS = ["langsoup", "multisoup"]


BASE_REST, BASE_CONSTRAINED = base_eval_groups()


rule evaluate_base:
    input:
        base=f"{R}/base/config.json",
        data=lambda w: task_data_files(job_benchmarks(w, BASE_REST)),
    output:
        per_layout(eval_files("base", BASE_REST), f"{R}/evals/base/{{benchmark}}.json"),
    params:
        benchmarks=lambda w: benchmark_params(job_benchmarks(w, BASE_REST)),
        batch_size=EVAL["batch_size"],
        seed=config["seed"],
        task_set=TASK_SET,
        backend=BACKEND,
        code=command_hash("evaluate"),
    wildcard_constraints:
        benchmark="|".join(BENCHMARKS),
    threads: EVAL["threads"]
    resources:
        gpu=GPUS,
    log:
        per_layout(f"{R}/logs/evaluate/base.log", f"{R}/logs/evaluate/base_{{benchmark}}.log"),
    conda:
        "../envs/layerswap.yaml"
    shell:
        "layerswap evaluate --data-dir results/data/eval --benchmarks-json {params.benchmarks} --model base=results/base "
        "--out-dir results/evals --batch-size {params.batch_size} --seed {params.seed} "
        "--task-set {params.task_set} --backend {params.backend} --threads {threads} > {log} 2>&1"


if BASE_CONSTRAINED:

    use rule evaluate_base as evaluate_base_select with:
        input:
            base=f"{R}/base/config.json",
            data=task_data_files(BASE_CONSTRAINED),
        output:
            eval_files("base", BASE_CONSTRAINED),
        params:
            benchmarks=benchmark_params(BASE_CONSTRAINED),
            batch_size=EVAL["batch_size"],
            seed=config["seed"],
            task_set=TASK_SET,
            backend=BACKEND,
            code=command_hash("evaluate"),
        log:
            f"{R}/logs/evaluate/base_select.log",


rule evaluate_merges:
    input:
        recipes=expand(f"{R}/merges/{{{{cfg}}}}/{{{{lang}}}}/{{pair}}.json", pair=PAIRS),
        data=lambda w: task_data_files(job_benchmarks(w, MERGE_BENCHMARKS), [w.lang]),
    output:
        merge_eval_patterns("{cfg}", PAIRS, per_layout(MERGE_BENCHMARKS, ["{benchmark}"])),
    params:
        models=lambda w, input: merge_models(w.cfg, w.lang, PAIRS, input.recipes),
        benchmarks=lambda w: benchmark_params(job_benchmarks(w, MERGE_BENCHMARKS), [w.lang]),
        batch_size=EVAL["batch_size"],
        seed=config["seed"],
        task_set=TASK_SET,
        backend=BACKEND,
        code=command_hash("evaluate-merges"),
    wildcard_constraints:
        benchmark="|".join(MERGE_BENCHMARKS),
    threads: EVAL["threads"]
    resources:
        gpu=GPUS,
    log:
        per_layout(
            f"{R}/logs/evaluate/merge_{{cfg}}_{{lang}}.log", f"{R}/logs/evaluate/merge_{{cfg}}_{{lang}}_{{benchmark}}.log"
        ),
    conda:
        "../envs/layerswap.yaml"
    shell:
        "layerswap evaluate-merges --data-dir results/data/eval --benchmarks-json {params.benchmarks} {params.models} "
        "--out-dir results/evals --batch-size {params.batch_size} --seed {params.seed} "
        "--task-set {params.task_set} --backend {params.backend} --threads {threads} > {log} 2>&1"


use rule evaluate_merges as evaluate_soup_then_swap with:
    input:
        recipes=expand(f"{R}/merges/soupswap/{{{{lang}}}}/{{m}}.json", m=SOUPS),
        data=lambda w: task_data_files(job_benchmarks(w, MERGE_BENCHMARKS), [w.lang]),
    output:
        merge_eval_patterns("soupswap", SOUPS, per_layout(MERGE_BENCHMARKS, ["{benchmark}"])),
    params:
        models=lambda w, input: merge_models("soupswap", w.lang, SOUPS, input.recipes),
        benchmarks=lambda w: benchmark_params(job_benchmarks(w, MERGE_BENCHMARKS), [w.lang]),
        batch_size=EVAL["batch_size"],
        seed=config["seed"],
        task_set=TASK_SET,
        backend=BACKEND,
        code=command_hash("evaluate-merges"),
    log:
        per_layout(
            f"{R}/logs/evaluate/merge_soupswap_{{lang}}.log", f"{R}/logs/evaluate/merge_soupswap_{{lang}}_{{benchmark}}.log"
        ),


# Table 2 shows its language's experts and merges in English and every MGSM language, which their own evaluation
# files do not hold (checkpoints: English + own language; merges: their target language). Those scores are files of
# their own, one job per extra language: evals/by_language/<lang>/<model id>/mgsm.json, found there by
# layerswap.report.tables.Evals. So a new Table 2 language or MGSM language adds jobs and files and reruns no evaluation,
# selection or merge that exists.
T2 = config["analysis"]["table2_language"]
T2_CONFIGS = sorted({config["merges"]["default_swap"]}.union(*config["merges"]["best_of"].values()))
T2_GROUPS = table2_groups()
T2_LANGS = [l for l in canonical_languages(["en", *config["mgsm_languages"]]) if table2_models(l)]


rule evaluate_table2:
    """MGSM in one extra language on the Table 2 models that lack it; the index names the files."""
    input:
        models=lambda w: sorted({f for _, files, langs in T2_GROUPS if w.lang not in langs for f in files}),
        data=lambda w: task_data_files(["mgsm"], [w.lang]),
    output:
        table2_index("{lang}"),
    params:
        models=lambda w: " ".join(f"--model {m}={src}" for m, src in table2_models(w.lang).items()),
        benchmarks=lambda w: benchmark_params(["mgsm"], [w.lang]),
        batch_size=EVAL["batch_size"],
        seed=config["seed"],
        task_set=TASK_SET,
        backend=BACKEND,
        code=command_hash("evaluate-merges"),
    threads: EVAL["threads"]
    resources:
        gpu=GPUS,
    log:
        f"{R}/logs/evaluate/table2_{{lang}}.log",
    conda:
        "../envs/layerswap.yaml"
    shell:
        "layerswap evaluate-merges --data-dir results/data/eval --benchmarks-json {params.benchmarks} {params.models} "
        "--out-dir results/evals/by_language/{wildcards.lang} --batch-size {params.batch_size} --seed {params.seed} "
        "--task-set {params.task_set} --backend {params.backend} --threads {threads} --index {output} > {log} 2>&1"
