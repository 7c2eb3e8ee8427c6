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
            code=command_hash("evaluate"),
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
                code=command_hash("evaluate"),
            log:
                f"{R}/logs/evaluate/base_select.log",

    rule evaluate_merges:
        input:
            recipes=expand(f"{R}/merges/{{{{cfg}}}}/{{{{lang}}}}/{{pair}}.json", pair=PAIRS),
            data=lambda w: task_data_files(MERGE_BENCHMARKS, [w.lang]),
        output:
            merge_eval_patterns("{cfg}", PAIRS, MERGE_BENCHMARKS),
        params:
            models=lambda w, input: merge_models(w.cfg, w.lang, PAIRS, input.recipes),
            benchmarks=lambda w: benchmark_params(MERGE_BENCHMARKS, [w.lang]),
            batch_size=EVAL["batch_size"],
            seed=config["seed"],
            task_set=TASK_SET,
            backend=BACKEND,
            code=command_hash("evaluate-merges"),
        threads: EVAL["threads"]
        resources:
            gpu=GPUS,
        log:
            f"{R}/logs/evaluate/merge_{{cfg}}_{{lang}}.log",
        shell:
            "layerswap evaluate-merges --data-dir {R}/data/eval --benchmarks-json {params.benchmarks} {params.models} "
            "--out-dir {R}/evals --batch-size {params.batch_size} --seed {params.seed} "
            "--task-set {params.task_set} --backend {params.backend} --threads {threads} > {log} 2>&1"

    use rule evaluate_merges as evaluate_soup_then_swap with:
        input:
            recipes=expand(f"{R}/merges/soupswap/{{{{lang}}}}/{{m}}.json", m=SOUPS),
            data=lambda w: task_data_files(MERGE_BENCHMARKS, [w.lang]),
        output:
            merge_eval_patterns("soupswap", SOUPS, MERGE_BENCHMARKS),
        params:
            models=lambda w, input: merge_models("soupswap", w.lang, SOUPS, input.recipes),
            benchmarks=lambda w: benchmark_params(MERGE_BENCHMARKS, [w.lang]),
            batch_size=EVAL["batch_size"],
            seed=config["seed"],
            task_set=TASK_SET,
            backend=BACKEND,
            code=command_hash("evaluate-merges"),
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
            code=command_hash("evaluate"),
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
            data=lambda w: task_data_files([w.benchmark], [w.lang]),
        output:
            merge_eval_patterns("{cfg}", PAIRS, ["{benchmark}"]),
        params:
            models=lambda w, input: merge_models(w.cfg, w.lang, PAIRS, input.recipes),
            benchmarks=lambda w: benchmark_params([w.benchmark], [w.lang]),
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
            f"{R}/logs/evaluate/merge_{{cfg}}_{{lang}}_{{benchmark}}.log",
        shell:
            "layerswap evaluate-merges --data-dir {R}/data/eval --benchmarks-json {params.benchmarks} {params.models} "
            "--out-dir {R}/evals --batch-size {params.batch_size} --seed {params.seed} "
            "--task-set {params.task_set} --backend {params.backend} --threads {threads} > {log} 2>&1"

    use rule evaluate_merges as evaluate_soup_then_swap with:
        input:
            recipes=expand(f"{R}/merges/soupswap/{{{{lang}}}}/{{m}}.json", m=SOUPS),
            data=lambda w: task_data_files([w.benchmark], [w.lang]),
        output:
            merge_eval_patterns("soupswap", SOUPS, ["{benchmark}"]),
        params:
            models=lambda w, input: merge_models("soupswap", w.lang, SOUPS, input.recipes),
            benchmarks=lambda w: benchmark_params([w.benchmark], [w.lang]),
            batch_size=EVAL["batch_size"],
            seed=config["seed"],
            task_set=TASK_SET,
            backend=BACKEND,
            code=command_hash("evaluate-merges"),
        log:
            f"{R}/logs/evaluate/merge_soupswap_{{lang}}_{{benchmark}}.log",


# Table 2 shows its language's experts and merges in English and every MGSM language, which their own evaluation
# files do not hold (checkpoints: English + own language; merges: their target language). Those scores are files of
# their own, one job per extra language: evals/by_language/<lang>/<model id>/mgsm.json, found there by
# layerswap.tables.Evals. So a new Table 2 language or MGSM language adds jobs and files and reruns no evaluation,
# selection or merge that exists.
T2 = config["analysis"]["table2_language"]
T2_CONFIGS = sorted({config["merges"]["default_swap"]}.union(*config["merges"]["best_of"].values()))


def table2_groups():
    """(models {id: source}, input files, languages their own MGSM files hold or None) of Table 2's columns."""
    mgsm = "mgsm" in BENCHMARKS
    groups = [({"base": f"{R}/base"}, [f"{R}/base/config.json"], task_languages("mgsm") if mgsm else [])]
    for run in [r for e in ("math", T2, f"joint_{T2}") for r in runs_of(e)]:
        langs = task_languages("mgsm", checkpoint_languages(run)) if mgsm else []
        groups.append((checkpoint_models(run), [f"{EXPERTS}/{run}/checkpoints.json"], langs))
    for cfg in T2_CONFIGS:
        recipes = {f"merge/{cfg}/{T2}/{p}": f"{R}/merges/{cfg}/{T2}/{p}.json" for p in PAIRS}
        groups.append((recipes, list(recipes.values()), task_languages("mgsm", [T2])))
    return groups


def table2_models(lang):
    """Table 2's models whose own evaluation files lack MGSM in `lang`: {model id: checkpoint dir or recipe}."""
    return {m: src for models, _, langs in table2_groups() if lang not in langs for m, src in models.items()}


def table2_index(lang):
    return f"{R}/evals/by_language/{lang}/table2_{T2}.json"


T2_LANGS = [l for l in canonical_languages(["en", *config["mgsm_languages"]]) if table2_models(l)]


rule evaluate_table2:
    """MGSM in one extra language on the Table 2 models that lack it; the index names the files."""
    input:
        models=lambda w: sorted({f for models, files, langs in table2_groups() if w.lang not in langs
                                 for f in files}),
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
    shell:
        "layerswap evaluate-merges --data-dir {R}/data/eval --benchmarks-json {params.benchmarks} {params.models} "
        "--out-dir {R}/evals/by_language/{wildcards.lang} --batch-size {params.batch_size} --seed {params.seed} "
        "--task-set {params.task_set} --backend {params.backend} --threads {threads} --index {output} > {log} 2>&1"
