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
        code=code_hash("pretrain", "training"),
    threads: config["base"].get("toy_pretrain", {}).get("threads", 1)
    log:
        f"{R}/logs/toy_base.log",
    shell:
        "layerswap toy-base --corpus {input.corpus} --vocab {input.vocab} --out {R}/base "
        "--model-json {params.model} --train-json {params.train} --num-layers {params.layers} "
        "--seed {params.seed} > {log} 2>&1"


rule sft:
    input:
        base=f"{R}/base/config.json",
        data=lambda w: f"{R}/data/sft/{RUNS[w.run]['expert']}.jsonl",
    output:
        f"{R}/experts/{{run}}/checkpoints.json",
    params:
        run=lambda w: as_json({**RUNS[w.run], "template": config["prompt_template"]}),
        code=code_hash("sft", "training"),
    threads: lambda w: RUNS[w.run].get("threads", 1)
    resources:
        gpu=lambda w: 0 if config["world"] == "toy" else 1,
    log:
        f"{R}/logs/sft/{{run}}.log",
    shell:
        "layerswap sft --base {R}/base --data {input.data} --out-dir {R}/experts/{wildcards.run} "
        "--params-json {params.run} > {log} 2>&1"
