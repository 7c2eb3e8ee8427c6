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
    log:
        f"{R}/logs/toy_base.log",
    shell:
        "layerswap toy-base --corpus {input.corpus} --vocab {input.vocab} --out {R}/base "
        "--model-json {params.model} --train-json {params.train} --num-layers {params.layers} "
        "--seed {params.seed} > {log} 2>&1"


def sft_launch(wildcards, resources):
    """The command that runs `layerswap sft`: the plain CLI, or `accelerate launch` with the repo's accelerate config
    and one process per GPU the job gets (resources.gpu, e.g. 8 from cluster/profile.yaml), at most batch_size. A derived param: moving
    a workflow from one launcher to the other does not retrain finished runs."""
    if config["sft"]["launcher"] != "accelerate":
        return "layerswap sft"
    # batch_size is the global batch: use the most GPUs that split it evenly (batch 4 on 8 GPUs: 4 processes)
    batch, gpus = int(run_spec(wildcards.run)["batch_size"]), max(1, int(resources.gpu))
    procs = max(n for n in range(1, min(batch, gpus) + 1) if batch % n == 0)
    # a relative accelerate config is the repository's (cluster/...), wherever --directory points
    accel = Path(config["sft"]["accelerate_config"])
    accel = accel if accel.is_absolute() or accel.exists() else Path(workflow.basedir) / accel
    return (f"accelerate launch --config_file {shlex.quote(str(accel))} "
            f"--num_processes {procs} -m layerswap.sft")


rule sft:
    input:
        base=f"{R}/base/config.json",
        data=lambda w: f"{R}/data/sft/{run_spec(w.run)['expert']}.jsonl",
    output:
        f"{EXPERTS}/{{run}}/checkpoints.json",
    params:
        run=lambda w: as_json({**run_spec(w.run), "template": config["prompt_template"]}),
        launch=sft_launch,
        code=command_hash("sft"),
    threads: lambda w: run_spec(w.run).get("threads", 1)
    resources:
        gpu=GPUS,
    log:
        f"{R}/logs/sft/{{run}}.log",
    shell:
        # progress (the Trainer's tqdm bar and loss lines, on stderr) goes to the log; loss and tokens/s also to
        # {EXPERTS}/{run}/log.jsonl
        "{params.launch} --base {R}/base --data {input.data} --out-dir {EXPERTS}/{wildcards.run} "
        "--params-json {params.run} > {log} 2>&1"
