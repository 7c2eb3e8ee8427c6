# Evaluation through lm-eval: the base, and merges built in memory (one job per merge config and language).


rule evaluate_base:
    input:
        base=f"{R}/base/config.json",
        data=eval_data_files(BENCHMARKS),
    output:
        eval_files("base", BENCHMARKS),
    params:
        benchmarks=benchmark_params(BENCHMARKS),
        batch_size=EVAL["batch_size"],
        seed=config["seed"],
        code=code_hash("evaluate", "evaluation", "tasks"),
    threads: EVAL["threads"]
    resources:
        gpu=lambda w: 0 if config["world"] == "toy" else 1,
    log:
        f"{R}/logs/evaluate/base.log",
    shell:
        "layerswap evaluate --data-dir {R}/data/eval --benchmarks-json {params.benchmarks} --model base={R}/base "
        "--out-dir {R}/evals --batch-size {params.batch_size} --seed {params.seed} --threads {threads} > {log} 2>&1"


def merge_eval_outputs(group, lang, names):
    return [f for n in names for f in eval_files(f"merge/{group}/{lang}/{n}", MERGE_BENCHMARKS)]


rule evaluate_merges:
    input:
        recipes=expand(f"{R}/merges/{{{{cfg}}}}/{{{{lang}}}}/{{pair}}.json", pair=PAIRS),
        data=eval_data_files(MERGE_BENCHMARKS),
    output:
        [f.replace("CFG", "{cfg}").replace("LANG", "{lang}") for f in merge_eval_outputs("CFG", "LANG", PAIRS)],
    params:
        models=lambda w, input: " ".join(
            f"--model merge/{w.cfg}/{w.lang}/{p}={r}" for p, r in zip(PAIRS, input.recipes)
        ),
        benchmarks=lambda w: benchmark_params(MERGE_BENCHMARKS, merge_languages(w.lang)),
        batch_size=EVAL["batch_size"],
        seed=config["seed"],
        code=code_hash("evaluate", "evaluation", "tasks", "merge"),
    threads: EVAL["threads"]
    resources:
        gpu=lambda w: 0 if config["world"] == "toy" else 1,
    log:
        f"{R}/logs/evaluate/merge_{{cfg}}_{{lang}}.log",
    shell:
        "layerswap evaluate --data-dir {R}/data/eval --benchmarks-json {params.benchmarks} {params.models} "
        "--out-dir {R}/evals --batch-size {params.batch_size} --seed {params.seed} --threads {threads} > {log} 2>&1"


use rule evaluate_merges as evaluate_soup_then_swap with:
    input:
        recipes=expand(f"{R}/merges/soupswap/{{{{lang}}}}/{{m}}.json", m=["langsoup", "multisoup"]),
        data=eval_data_files(MERGE_BENCHMARKS),
    output:
        [f.replace("LANG", "{lang}") for f in merge_eval_outputs("soupswap", "LANG", ["langsoup", "multisoup"])],
    params:
        models=lambda w, input: " ".join(
            f"--model merge/soupswap/{w.lang}/{m}={r}" for m, r in zip(["langsoup", "multisoup"], input.recipes)
        ),
        benchmarks=lambda w: benchmark_params(MERGE_BENCHMARKS, merge_languages(w.lang)),
        batch_size=EVAL["batch_size"],
        seed=config["seed"],
        code=code_hash("evaluate", "evaluation", "tasks", "merge"),
    log:
        f"{R}/logs/evaluate/merge_soupswap_{{lang}}.log",
