# Data: the toy generator (toy world) or the pre-staged hub sources and base model (hf world), and the per-expert
# SFT mixes.


if config["world"] == "toy":
    from layerswap.data import toyworld

    TOY_DATASETS = toyworld.datasets(sorted(config["toy_world"]["languages"]))
    TOY_EVAL = [d for d in TOY_DATASETS if toyworld.is_evaluation_set(d)]
    TOY_RAW = [d for d in TOY_DATASETS if d not in TOY_EVAL and d != "pretrain"]  # SFT sources

    # out: results/data/raw/pretrain.jsonl, results/data/raw/vocab.json
    rule toy_corpus:
        """The toy world's pretraining corpus and vocabulary."""
        output:
            corpus=layout.pretrain_corpus(),
            vocab=layout.vocab(),
        params:
            world=spec.data.toy_dataset_params("pretrain"),
            code=command_hash("toy-data"),
        resources:
            **requests.of("toy_corpus"),
        log:
            layout.log("toy_data", "pretrain"),
        conda:
            "../envs/layerswap.yaml"
        shell:
            "layerswap toy-data --dataset pretrain --out {output.corpus} --params-json {params.world} > {log} 2>&1"

    # out: results/data/raw/{dataset}.jsonl
    rule toy_source:
        """One toy SFT source file (Orca-Math, or Aya / NLLB of one language)."""
        localrule: True
        output:
            layout.raw("{dataset}.jsonl"),
        wildcard_constraints:
            dataset="|".join(TOY_RAW),
        params:
            world=lambda w: spec.data.toy_dataset_params(w.dataset),
            code=command_hash("toy-data"),
        log:
            layout.log("toy_data", "{dataset}"),
        conda:
            "../envs/layerswap.yaml"
        shell:
            "layerswap toy-data --dataset {wildcards.dataset} --out {output} --params-json {params.world} > {log} 2>&1"

    # out: results/data/eval/{dataset}.jsonl ({dataset}: <benchmark>_<lang>)
    use rule toy_source as toy_eval with:
        localrule: True
        output:
            layout.eval_set("{dataset}"),
        wildcard_constraints:
            dataset="|".join(TOY_EVAL),
        log:
            layout.log("toy_data", "eval_{dataset}"),


# in: the expert's sources results/data/raw/<source file>; out: results/data/sft/{expert}.jsonl, {expert}.manifest.json
rule sft_mix:
    input:
        lambda w: [s["path"] for s in spec.data.mix_sources(w.expert)],
    output:
        mix=layout.sft_mix("{expert}"),
        manifest=layout.sft_mix("{expert}", "manifest.json"),
    params:
        sources=lambda w: as_json(spec.data.mix_sources(w.expert)),
        seed=config["seed"],
        code=command_hash("mix"),
    resources:
        **requests.of("sft_mix"),
    log:
        layout.log("sft_mix", "{expert}"),
    conda:
        "../envs/layerswap.yaml"
    shell:
        "layerswap mix --sources-json {params.sources} --seed {params.seed} --out {output.mix} "
        "--manifest {output.manifest} > {log} 2>&1"


if config["world"] == "hf":
    # Hub sources and the base model are read from the HF cache that `layerswap prestage` filled (login node with
    # internet); jobs run offline (HF_*_OFFLINE=1 in their shell commands). HF_HOME: storage.hf_home, else the job's
    # environment.
    from layerswap.data.hub import needed_sources, source_spec

    HUB_NEEDED = needed_sources(config)

    # out: results/data/raw/{source}_{lang}.jsonl, {source}_{lang}.manifest.json
    rule hub_data:
        output:
            rows=layout.raw("{source}_{lang}.jsonl"),
            manifest=layout.hub_manifest("{source}_{lang}.jsonl"),
        wildcard_constraints:
            source="|".join(sorted({s for s, _ in HUB_NEEDED}, key=len, reverse=True)),
            lang="|".join(sorted({l for _, l in HUB_NEEDED}, key=len, reverse=True)),
        params:
            spec=lambda w: as_json(source_spec(config, w.source, w.lang)),
            seed=config["seed"],
            hf_home=spec.hf_home_arg,
            code=command_hash("hub-data"),
        resources:
            **requests.of("hub_data"),
        log:
            layout.log("hub_data", "{source}_{lang}"),
        conda:
            "../envs/layerswap.yaml"
        shell:
            "HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "
            "layerswap hub-data --spec-json {params.spec} --seed {params.seed} --out {output.rows} "
            "--manifest {output.manifest} {params.hf_home} > {log} 2>&1"


# A local HF model directory (either world) or a pre-staged hub snapshot (hf world): linked, never copied.
if config["world"] == "hf" or is_local_source(config["base"]["source"]):

    # out: results/base/config.json (the base folder results/base/)
    rule prepare_base:
        output:
            layout.base_config(),
        params:
            source=shlex.quote(config["base"]["source"]),
            revision=revision_arg(config["base"]),
            hf_home=spec.hf_home_arg,
            code=command_hash("prepare-base"),
        resources:
            **requests.of("prepare_base"),
        log:
            layout.log("prepare_base"),
        conda:
            "../envs/layerswap.yaml"
        shell:
            "HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "
            f"layerswap prepare-base --source {{params.source}} {{params.revision}} --out {layout.base()} "
            "{params.hf_home} > {log} 2>&1"

    ruleorder: prepare_base > toy_base


if is_gguf_source(config["base"]["source"]):

    # out: results/base/config.json (the base folder results/base/)
    rule gguf_base:
        """The base model from a GGUF file (a path, or pkg:<package>/<file> inside an installed package), dequantised
        into a safetensors HF directory with its tokenizer and chat template (either world)."""
        output:
            layout.base_config(),
        params:
            source=shlex.quote(config["base"]["source"]),
            layers=config["base"]["num_layers"],
            code=command_hash("gguf-base"),
        resources:
            **requests.of("gguf_base"),
        log:
            layout.log("gguf_base"),
        conda:
            "../envs/layerswap.yaml"
        shell:
            f"layerswap gguf-base --source {{params.source}} --num-layers {{params.layers}} --out {layout.base()} "
            "> {log} 2>&1"

    ruleorder: gguf_base > toy_base

    if config["world"] == "hf":

        ruleorder: gguf_base > prepare_base
