# Ablations (<ablations_dir>/<name>.yaml, planned in rules/common.smk): the layer_swap merge configs they add
# (ABLATION_MERGE_CONFIGS, in MERGE_CONFIGS beside merges.configs) are built and evaluated by the generic
# merge_recipes / evaluate_merges rules; `ablation_<name>` builds results/ablations/<name>/table.{csv,md} +
# figure.{svg,png}; `ablations` builds the ones the `ablations` config key selects (all when absent). Not part of
# `all`; the main tables and figures read merges.configs only, so the ablations change none of the main jobs.


# Expert-set ablations (layerswap/workflow/ablations.py docstring): their extra runs, bases, selections and merge configs.
EXPERT_ABLATIONS = {n: a for n, a in ABLATIONS.items() if "runs" in a}
ABLATION_BASES = {}  # "<ablation>/<base>" -> base spec
ABLATION_MERGES = {}  # ax_* merge config name -> {merge, set, lang_from, task_from, ablation}
for _name, _abl_spec in EXPERT_ABLATIONS.items():
    ABLATION_RUNS.update(_abl_spec["runs"])
    for _run, _base in _abl_spec["run_base"].items():
        ABLATION_RUN_BASE[_run] = None if _base == "main" else f"{R}/ablations/{_name}/bases/{_base}"
    for _base, _bspec in _abl_spec["bases"].items():
        ABLATION_BASES[f"{_name}/{_base}"] = _bspec
    for _cfg, _m in _abl_spec["merges"].items():
        ABLATION_MERGES[_cfg] = {**_m, "ablation": _name}


ABLATION_EXTRA = sorted({b for n in ABLATIONS for b in ablation_extra_benchmarks(n)})


if EXPERT_ABLATIONS:

    rule ablation_select:
        """Top-k checkpoints of an expert-set ablation's own runs, per (set, expert type)."""
        input:
            indexes=lambda w: [f"{R}/evals/ckpt/{r}/index.json" for r in ablation_runs_of(w.ablation, w.set, w.expert)],
            base=lambda w: ablation_base_evals(w.ablation, w.set, w.expert),
        output:
            f"{R}/ablations/{{ablation}}/selection/{{set}}/{{expert}}.json",
        params:
            select=lambda w: selection_params(w.expert),
            code=command_hash("select"),
        wildcard_constraints:
            ablation="|".join(EXPERT_ABLATIONS),
            set="[A-Za-z0-9]+",
        log:
            f"{R}/logs/ablations/select_{{ablation}}_{{set}}_{{expert}}.log",
        conda:
            "../envs/layerswap.yaml"
        shell:
            "layerswap select --index {input.indexes} --base-evals {input.base} --expert {wildcards.expert} "
            "--params-json {params.select} --out {output} > {log} 2>&1"

    rule evaluate_ablation_base:
        """A second base of an expert-set ablation on one benchmark that its selection constraints compare with."""
        input:
            base=f"{R}/ablations/{{ablation}}/bases/{{base}}/config.json",
            data=lambda w: task_data_files([w.benchmark]),
        output:
            f"{R}/evals/ablations/{{ablation}}/bases/{{base}}/{{benchmark}}.json",
        params:
            benchmarks=lambda w: benchmark_params([w.benchmark]),
            batch_size=EVAL["batch_size"],
            seed=config["seed"],
            task_set=TASK_SET,
            backend=BACKEND,
            code=command_hash("evaluate"),
        wildcard_constraints:
            ablation="|".join(EXPERT_ABLATIONS),
            base="[A-Za-z0-9]+",
            benchmark="|".join(BENCHMARKS),
        threads: EVAL["threads"]
        resources:
            gpu=GPUS,
        log:
            f"{R}/logs/evaluate/ablation_base_{{ablation}}_{{base}}_{{benchmark}}.log",
        conda:
            "../envs/layerswap.yaml"
        shell:
            "layerswap evaluate --data-dir results/data/eval --benchmarks-json {params.benchmarks} "
            "--model ablations/{wildcards.ablation}/bases/{wildcards.base}=results/ablations/{wildcards.ablation}/bases/{wildcards.base} "
            "--out-dir results/evals --batch-size {params.batch_size} --seed {params.seed} "
            "--task-set {params.task_set} --backend {params.backend} --threads {threads} > {log} 2>&1"


if ABLATION_MERGES:

    ruleorder: ablation_merge_recipes > merge_recipes

    rule ablation_merge_recipes:
        """Recipes of an expert-set ablation's merge config (ax_*): its own and/or the main selections."""
        input:
            lang=lambda w: ablation_merge_selection(w.cfg, w.lang, "lang"),
            task=lambda w: ablation_merge_selection(w.cfg, w.lang, "task"),
        output:
            expand(f"{R}/merges/{{{{cfg}}}}/{{{{lang}}}}/{{pair}}.json", pair=PAIRS),
        params:
            merge=lambda w: as_json(ABLATION_MERGES[w.cfg]["merge"]),
            code=command_hash("recipes"),
        wildcard_constraints:
            cfg="|".join(ABLATION_MERGES),
        log:
            f"{R}/logs/merge_recipes/{{cfg}}_{{lang}}.log",
        conda:
            "../envs/layerswap.yaml"
        shell:
            "layerswap recipes --params-json {params.merge} --lang-selection {input.lang} "
            "--task-selection {input.task} --base results/base --out-dir results/merges/{wildcards.cfg}/{wildcards.lang} "
            "> {log} 2>&1"


_OTHER_BASE_RUNS = sorted(r for r, b in ABLATION_RUN_BASE.items() if b)
if _OTHER_BASE_RUNS:

    ruleorder: ablation_sft > sft

    rule ablation_sft:
        """SFT of an ablation run from another base than results/base (same command as sft)."""
        input:
            base=lambda w: f"{ABLATION_RUN_BASE[w.run]}/config.json",
            data=lambda w: f"{R}/data/sft/{run_spec(w.run)['expert']}.jsonl",
        output:
            f"{EXPERTS}/{{run}}/checkpoints.json",
        params:
            run=lambda w: as_json({**run_spec(w.run), "template": config["prompt_template"]}),
            launch=sft_launch,
            base=lambda w: ABLATION_RUN_BASE[w.run],
            code=command_hash("sft"),
        wildcard_constraints:
            run="|".join(_OTHER_BASE_RUNS),
        threads: lambda w: run_spec(w.run).get("threads", 1)
        resources:
            gpu=GPUS,
        log:
            f"{R}/logs/sft/{{run}}.log",
        conda:
            "../envs/layerswap.yaml"
        shell:
            "{params.launch} --base {params.base} --data {input.data} --out-dir \"$(dirname {output})\" "
            "--params-json {params.run} > {log} 2>&1"


if ABLATION_BASES and config["world"] == "toy":

    rule ablation_toy_base:
        """A second toy base (same corpus and shape, another seed) for an expert-set ablation."""
        input:
            corpus=f"{R}/data/raw/pretrain.jsonl",
            vocab=f"{R}/data/raw/vocab.json",
        output:
            f"{R}/ablations/{{ablation}}/bases/{{base}}/config.json",
        params:
            model=lambda w: as_json(ABLATION_BASES[f"{w.ablation}/{w.base}"]["model"]),
            train=as_json(config["base"].get("toy_pretrain", {})),
            layers=config["base"]["num_layers"],
            seed=lambda w: ABLATION_BASES[f"{w.ablation}/{w.base}"]["seed"],
            code=command_hash("toy-base"),
        wildcard_constraints:
            ablation="|".join(EXPERT_ABLATIONS),
            base="[A-Za-z0-9]+",
        threads: config["base"].get("toy_pretrain", {}).get("threads", 1)
        log:
            f"{R}/logs/ablations/base_{{ablation}}_{{base}}.log",
        conda:
            "../envs/layerswap.yaml"
        shell:
            "layerswap toy-base --corpus {input.corpus} --vocab {input.vocab} --out results/ablations/{wildcards.ablation}/bases/{wildcards.base} "
            "--model-json {params.model} --train-json {params.train} --num-layers {params.layers} "
            "--seed {params.seed} > {log} 2>&1"

elif ABLATION_BASES:

    rule ablation_prepare_base:
        """A second hub base (pre-staged, like prepare_base) for an expert-set ablation."""
        output:
            f"{R}/ablations/{{ablation}}/bases/{{base}}/config.json",
        params:
            source=lambda w: shlex.quote(ABLATION_BASES[f"{w.ablation}/{w.base}"]["source"]),
            revision=lambda w: (f"--revision {shlex.quote(ABLATION_BASES[f'{w.ablation}/{w.base}']['revision'])}"
                                if ABLATION_BASES[f"{w.ablation}/{w.base}"].get("revision") else ""),
            hf_home=HF_HOME_ARG,
            code=command_hash("prepare-base"),
        wildcard_constraints:
            ablation="|".join(EXPERT_ABLATIONS),
            base="[A-Za-z0-9]+",
        log:
            f"{R}/logs/ablations/base_{{ablation}}_{{base}}.log",
        conda:
            "../envs/layerswap.yaml"
        shell:
            "HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "
            "layerswap prepare-base --source {params.source} {params.revision} "
            "--out results/ablations/{wildcards.ablation}/bases/{wildcards.base} {params.hf_home} > {log} 2>&1"


if ABLATION_EXTRA:

    rule evaluate_ablation_merges:
        """Benchmarks an ablation reports that evaluation.merge_tasks does not include, one job per (config,
        language, benchmark); evaluate_merges makes the merge tasks' files."""
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
            benchmark="|".join(ABLATION_EXTRA),
        threads: EVAL["threads"]
        resources:
            gpu=GPUS,
        log:
            f"{R}/logs/evaluate/merge_{{cfg}}_{{lang}}_{{benchmark}}.log",
        conda:
            "../envs/layerswap.yaml"
        shell:
            "layerswap evaluate-merges --data-dir results/data/eval --benchmarks-json {params.benchmarks} {params.models} "
            "--out-dir results/evals --batch-size {params.batch_size} --seed {params.seed} "
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
            code=command_hash("ablation-table"),
        log:
            f"{R}/logs/ablations/{_name}.log",
        conda:
            "../envs/layerswap.yaml"
        shell:
            "layerswap ablation-table --evals-dir results/evals --params-json {params.table} "
            "--out-dir results/ablations/{params.name} > {log} 2>&1"

    rule:
        name:
            f"ablation_{_name}"
        input:
            expand(f"{R}/ablations/{_name}/{{f}}", f=["table.csv", "table.md", "figure.svg", "figure.png"]),


rule ablations:
    """The ablations the `ablations` config key selects (all when it is absent)."""
    input:
        [f"{R}/ablations/{n}/{f}" for n in SELECTED_ABLATIONS for f in ["table.csv", "table.md", "figure.svg", "figure.png"]],
