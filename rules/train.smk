# The base model and expert SFT runs.


rule toy_base:
    input:
        corpus=f"{R}/data/raw/pretrain.jsonl",
        vocab=f"{R}/data/raw/vocab.json",
    output:
        f"{R}/base/config.json",
    params:
        model=as_json(config["base"].get("toy_model", {})),
        train=as_json(config["base"].get("toy_pretrain", {})),
        layers=config["base"]["num_layers"],
        seed=config["seed"],
        code=command_hash("toy-base"),
    threads: config["base"].get("toy_pretrain", {}).get("threads", 1)
    resources:
        **requests.of("toy_base"),
    log:
        f"{R}/logs/toy_base.log",
    conda:
        "../envs/layerswap.yaml"
    shell:
        f"layerswap toy-base --corpus {{input.corpus}} --vocab {{input.vocab}} --out {R}/base "
        "--model-json {params.model} --train-json {params.train} --num-layers {params.layers} "
        "--seed {params.seed} > {log} 2>&1"


rule sft:
    input:
        base=f"{R}/base/config.json",
        data=lambda w: f"{R}/data/sft/{spec.run_spec(w.run)['expert']}.jsonl",
    output:
        f"{spec.experts}/{{run}}/checkpoints.json",
    params:
        run=lambda w: spec.sft_params(w.run),
        launch=sft_launch,
        code=command_hash("sft"),
    threads: lambda w: spec.run_spec(w.run).get("threads", 1)
    resources:
        gpu=lambda w: spec.sft_gpus(w.run),
        **requests.of("sft"),
    log:
        f"{R}/logs/sft/{{run}}.log",
    conda:
        "../envs/layerswap.yaml"
    shell:
        # progress (the Trainer's tqdm bar and loss lines, on stderr) goes to the log; loss and tokens/s also to
        # {EXPERTS}/{run}/log.jsonl
        f"{{params.launch}} --base {R}/base --data {{input.data}} --out-dir \"$(dirname {{output}})\" "
        "--params-json {params.run} > {log} 2>&1"
