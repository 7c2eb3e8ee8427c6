# Evaluation through lm-eval: the base, and merges built in memory (one job per merge config and language).
# evaluation.tasks_per_job: grouped (one job runs all tasks of its models) or single (one job per task, wildcard
# {benchmark}); output paths are the same either way, so tables read the same files.

SOUPS = ["langsoup", "multisoup"]


def merge_eval_outputs(group, lang, names, benchmarks=None):
    return [f for n in names for f in eval_files(f"merge/{group}/{lang}/{n}", benchmarks or MERGE_BENCHMARKS)]


def merge_models(group, lang, names, recipes):
    return " ".join(f"--model merge/{group}/{lang}/{n}={r}" for n, r in zip(names, recipes))


# Output patterns of the merge evaluations with {cfg}/{lang} (and {benchmark}) wildcards.
def merge_eval_patterns(group, names, benchmarks):
    files = merge_eval_outputs("GROUP", "LANG", names, benchmarks)
    return [f.replace("GROUP", group).replace("LANG", "{lang}") for f in files]


def base_eval_groups():
    """grouped: the base's benchmarks that selection constraints read get a job of their own (evaluate_base_select),
    so that editing another task's settings reruns no selection; (rest, constrained)."""
    constrained = [b for b in BENCHMARKS if any(b in constraint_benchmarks(k) for k in ("math", "language", "joint"))]
    rest = [b for b in BENCHMARKS if b not in constrained]
    return (rest, constrained) if rest and constrained else (BENCHMARKS, [])


BASE_REST, BASE_CONSTRAINED = base_eval_groups()

if not SINGLE_TASK_JOBS:

    rule evaluate_base:
        input:
            base=f"{R}/base/config.json",
            data=task_data_files(BASE_REST),
        output:
            eval_files("base", BASE_REST),
        params:
            benchmarks=benchmark_params(BASE_REST),
            batch_size=EVAL["batch_size"],
            seed=config["seed"],
            task_set=TASK_SET,
            backend=BACKEND,
            code=code_hash(*EVAL_LIB),
        threads: EVAL["threads"]
        resources:
            gpu=GPUS,
        log:
            f"{R}/logs/evaluate/base.log",
        shell:
            "layerswap evaluate --data-dir {R}/data/eval --benchmarks-json {params.benchmarks} --model base={R}/base "
            "--out-dir {R}/evals --batch-size {params.batch_size} --seed {params.seed} "
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
                code=code_hash(*EVAL_LIB),
            log:
                f"{R}/logs/evaluate/base_select.log",

    rule evaluate_merges:
        input:
            recipes=expand(f"{R}/merges/{{{{cfg}}}}/{{{{lang}}}}/{{pair}}.json", pair=PAIRS),
            data=lambda w: task_data_files(MERGE_BENCHMARKS, merge_languages(w.lang)),
        output:
            merge_eval_patterns("{cfg}", PAIRS, MERGE_BENCHMARKS),
        params:
            models=lambda w, input: merge_models(w.cfg, w.lang, PAIRS, input.recipes),
            benchmarks=lambda w: benchmark_params(MERGE_BENCHMARKS, merge_languages(w.lang)),
            batch_size=EVAL["batch_size"],
            seed=config["seed"],
            task_set=TASK_SET,
            backend=BACKEND,
            code=code_hash(*EVAL_LIB, *MERGE_LIB),
        threads: EVAL["threads"]
        resources:
            gpu=GPUS,
        log:
            f"{R}/logs/evaluate/merge_{{cfg}}_{{lang}}.log",
        shell:
            "layerswap evaluate --data-dir {R}/data/eval --benchmarks-json {params.benchmarks} {params.models} "
            "--out-dir {R}/evals --batch-size {params.batch_size} --seed {params.seed} "
            "--task-set {params.task_set} --backend {params.backend} --threads {threads} > {log} 2>&1"

    use rule evaluate_merges as evaluate_soup_then_swap with:
        input:
            recipes=expand(f"{R}/merges/soupswap/{{{{lang}}}}/{{m}}.json", m=SOUPS),
            data=lambda w: task_data_files(MERGE_BENCHMARKS, merge_languages(w.lang)),
        output:
            merge_eval_patterns("soupswap", SOUPS, MERGE_BENCHMARKS),
        params:
            models=lambda w, input: merge_models("soupswap", w.lang, SOUPS, input.recipes),
            benchmarks=lambda w: benchmark_params(MERGE_BENCHMARKS, merge_languages(w.lang)),
            batch_size=EVAL["batch_size"],
            seed=config["seed"],
            task_set=TASK_SET,
            backend=BACKEND,
            code=code_hash(*EVAL_LIB, *MERGE_LIB),
        log:
            f"{R}/logs/evaluate/merge_soupswap_{{lang}}.log",

else:

    rule evaluate_base:
        input:
            base=f"{R}/base/config.json",
            data=lambda w: task_data_files([w.benchmark]),
        output:
            f"{R}/evals/base/{{benchmark}}.json",
        params:
            benchmarks=lambda w: benchmark_params([w.benchmark]),
            batch_size=EVAL["batch_size"],
            seed=config["seed"],
            task_set=TASK_SET,
            backend=BACKEND,
            code=code_hash(*EVAL_LIB),
        wildcard_constraints:
            benchmark="|".join(BENCHMARKS),
        threads: EVAL["threads"]
        resources:
            gpu=GPUS,
        log:
            f"{R}/logs/evaluate/base_{{benchmark}}.log",
        shell:
            "layerswap evaluate --data-dir {R}/data/eval --benchmarks-json {params.benchmarks} --model base={R}/base "
            "--out-dir {R}/evals --batch-size {params.batch_size} --seed {params.seed} "
            "--task-set {params.task_set} --backend {params.backend} --threads {threads} > {log} 2>&1"

    rule evaluate_merges:
        input:
            recipes=expand(f"{R}/merges/{{{{cfg}}}}/{{{{lang}}}}/{{pair}}.json", pair=PAIRS),
            data=lambda w: task_data_files([w.benchmark], merge_languages(w.lang)),
        output:
            merge_eval_patterns("{cfg}", PAIRS, ["{benchmark}"]),
        params:
            models=lambda w, input: merge_models(w.cfg, w.lang, PAIRS, input.recipes),
            benchmarks=lambda w: benchmark_params([w.benchmark], merge_languages(w.lang)),
            batch_size=EVAL["batch_size"],
            seed=config["seed"],
            task_set=TASK_SET,
            backend=BACKEND,
            code=code_hash(*EVAL_LIB, *MERGE_LIB),
        wildcard_constraints:
            benchmark="|".join(MERGE_BENCHMARKS),
        threads: EVAL["threads"]
        resources:
            gpu=GPUS,
        log:
            f"{R}/logs/evaluate/merge_{{cfg}}_{{lang}}_{{benchmark}}.log",
        shell:
            "layerswap evaluate --data-dir {R}/data/eval --benchmarks-json {params.benchmarks} {params.models} "
            "--out-dir {R}/evals --batch-size {params.batch_size} --seed {params.seed} "
            "--task-set {params.task_set} --backend {params.backend} --threads {threads} > {log} 2>&1"

    use rule evaluate_merges as evaluate_soup_then_swap with:
        input:
            recipes=expand(f"{R}/merges/soupswap/{{{{lang}}}}/{{m}}.json", m=SOUPS),
            data=lambda w: task_data_files([w.benchmark], merge_languages(w.lang)),
        output:
            merge_eval_patterns("soupswap", SOUPS, ["{benchmark}"]),
        params:
            models=lambda w, input: merge_models("soupswap", w.lang, SOUPS, input.recipes),
            benchmarks=lambda w: benchmark_params([w.benchmark], merge_languages(w.lang)),
            batch_size=EVAL["batch_size"],
            seed=config["seed"],
            task_set=TASK_SET,
            backend=BACKEND,
            code=code_hash(*EVAL_LIB, *MERGE_LIB),
        log:
            f"{R}/logs/evaluate/merge_soupswap_{{lang}}_{{benchmark}}.log",
