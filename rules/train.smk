# The base model and expert SFT runs.


# in: results/data/raw/pretrain.jsonl, vocab.json; out: results/base/config.json (the base folder results/base/)
rule toy_base:
    input:
        corpus=layout.pretrain_corpus(),
        vocab=layout.vocab(),
    output:
        layout.base_config(),
    params:
        model=as_json(config["base"].get("toy_model", {})),
        train=as_json(config["base"].get("toy_pretrain", {})),
        layers=config["base"]["num_layers"],
        seed=config["seed"],
        out=lambda w, output: str(Path(output[0]).parent),  # the base folder (ablation_toy_base: another one)
        code=command_hash("toy-base"),
    threads: config["base"].get("toy_pretrain", {}).get("threads", 1)
    resources:
        **requests.of("toy_base"),
    log:
        layout.log("toy_base"),
    conda:
        "../envs/layerswap.yaml"
    shell:
        "layerswap toy-base --corpus {input.corpus} --vocab {input.vocab} --out {params.out} "
        "--model-json {params.model} --train-json {params.train} --num-layers {params.layers} "
        "--seed {params.seed} > {log} 2>&1"


# in: results/base/config.json, results/data/sft/<the run's expert type>.jsonl
# out: <big>/experts/{run}/checkpoints.json, beside the checkpoints <big>/experts/{run}/s<samples>/ (<big>:
# storage.scratch's folder of this results folder, else results)
rule sft:
    input:
        base=layout.base_config(),
        data=lambda w: layout.sft_mix(spec.runs.spec(w.run)["expert"]),
    output:
        layout.checkpoints_record("{run}"),
    params:
        run=lambda w: spec.runs.sft_params(w.run),
        launch=sft_launch,
        base=lambda w, input: str(Path(input.base).parent),  # the base folder (ablation_sft: its run's base)
        code=command_hash("sft"),
    threads: lambda w: spec.runs.spec(w.run).get("threads", 1)
    resources:
        gpu=lambda w: spec.runs.sft_gpus(w.run),
        **requests.of("sft"),
    log:
        layout.log("sft", "{run}"),
    conda:
        "../envs/layerswap.yaml"
    shell:
        # progress (the Trainer's tqdm bar and loss lines, on stderr) goes to the log; loss and tokens/s also to
        # {EXPERTS}/{run}/log.jsonl
        "{params.launch} --base {params.base} --data {input.data} --out-dir \"$(dirname {output})\" "
        "--params-json {params.run} > {log} 2>&1"
