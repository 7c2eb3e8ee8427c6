# Ablations (config/ablations/<name>.yaml, enabled by the `ablations` config key): each adds layer_swap merge
# configs to merges.configs at parse time, so the generic merge_recipes / evaluate_merges rules build and evaluate
# them; `ablation_<name>` builds results/ablations/<name>/table.{csv,md} + figure.{svg,png}; `ablations` builds
# all enabled ones. Not part of `all`. Included after analysis.smk: the main tables and figures were fixed from the
# config before these merge configs were added, so enabling an ablation changes none of the main jobs.
from layerswap import ablations as _abl

ABLATIONS_DIR = Path(workflow.basedir) / "config" / "ablations"
try:
    ABLATIONS = _abl.apply(config, ABLATIONS_DIR)
    validate_config(config, workflow.source_path("../config/schema.yaml"))
    check(config)
except UserError as err:
    sys.exit(f"config error: {err}")


def ablation_configs(name):
    return list(dict.fromkeys(v["config"] for v in ABLATIONS[name]["variants"] if v["config"]))


def ablation_extra_benchmarks(name):
    """Benchmarks an ablation reports beyond the merge tasks every merge gets (evaluate_ablation_merges)."""
    return [b for b in ABLATIONS[name]["metrics"] if b not in MERGE_BENCHMARKS]


ABLATION_EXTRA = sorted({b for n in ABLATIONS for b in ablation_extra_benchmarks(n)})


def ablation_inputs(name):
    files = []
    for cfg in ablation_configs(name):
        for lang in LANGS:
            files += merge_eval_outputs(cfg, lang, PAIRS, ABLATIONS[name]["metrics"])
    return files


def ablation_params(name):
    spec = ABLATIONS[name]
    return as_json({
        "name": name, "title": spec["title"], "plan": spec["plan"], "metrics": spec["metrics"],
        "variants": spec["variants"], "languages": LANGS, "top_k": config["selection"]["top_k"],
        "world": config["world"], "language_names": config.get("language_names", {}),
    })


def ablation_report(name, file):
    return report(f"{R}/ablations/{name}/{file}", category="Ablations", subcategory=ABLATIONS[name]["title"],
                  caption="../report/ablation.rst", labels={"ablation": name, "file": file})


if ABLATION_EXTRA:

    rule evaluate_ablation_merges:
        """Benchmarks an ablation reports that evaluation.merge_tasks does not include, one job per (config,
        language, benchmark); evaluate_merges makes the merge tasks' files."""
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
            task_set="toy" if config["world"] == "toy" else "paper",
            backend=EVAL.get("backend", "hf"),
            code=code_hash(*EVAL_LIB, *MERGE_LIB),
        wildcard_constraints:
            benchmark="|".join(ABLATION_EXTRA),
        threads: EVAL["threads"]
        resources:
            gpu=lambda w: 0 if config["world"] == "toy" else 1,
        log:
            f"{R}/logs/evaluate/merge_{{cfg}}_{{lang}}_{{benchmark}}.log",
        shell:
            "layerswap evaluate --data-dir {R}/data/eval --benchmarks-json {params.benchmarks} {params.models} "
            "--out-dir {R}/evals --batch-size {params.batch_size} --seed {params.seed} "
            "--task-set {params.task_set} --backend {params.backend} --threads {threads} > {log} 2>&1"


for _name in ABLATIONS:

    rule:
        name:
            f"ablation_table_{_name}"
        input:
            ablation_inputs(_name),
        output:
            csv=ablation_report(_name, "table.csv"),
            md=ablation_report(_name, "table.md"),
            svg=ablation_report(_name, "figure.svg"),
            png=ablation_report(_name, "figure.png"),
        params:
            table=ablation_params(_name),
            name=_name,
            code=code_hash("ablations", "tables", "figures"),
        log:
            f"{R}/logs/ablations/{_name}.log",
        shell:
            "layerswap ablation-table --evals-dir {R}/evals --params-json {params.table} "
            "--out-dir {R}/ablations/{params.name} > {log} 2>&1"

    rule:
        name:
            f"ablation_{_name}"
        input:
            expand(f"{R}/ablations/{_name}/{{f}}", f=["table.csv", "table.md", "figure.svg", "figure.png"]),


rule ablations:
    """Every enabled ablation (config key `ablations`)."""
    input:
        [f"{R}/ablations/{n}/{f}" for n in ABLATIONS for f in ["table.csv", "table.md", "figure.svg", "figure.png"]],
