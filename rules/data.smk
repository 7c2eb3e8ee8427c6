# Data: the toy generator (toy world) and the per-expert SFT mixes.


def toy_raw_files():
    langs = list(config["toy_world"]["languages"])
    return [f"{R}/data/raw/orca_math.jsonl"] + [
        f"{R}/data/raw/{src}_{l}.jsonl" for src in ("aya", "nllb") for l in langs
    ]


if config["world"] == "toy":

  rule toy_data:
      output:
          corpus=f"{R}/data/raw/pretrain.jsonl",
          vocab=f"{R}/data/raw/vocab.json",
          sources=toy_raw_files(),
          evals=eval_data_files(["mgsm", "belebele", "flores", "mmlu", "mbpp"]),
      params:
          world=as_json(config.get("toy_world", {})),
          code=code_hash("toyworld"),
      log:
          f"{R}/logs/toy_data.log",
      shell:
          "layerswap toy-data --raw-dir {R}/data/raw --eval-dir {R}/data/eval "
          "--params-json {params.world} > {log} 2>&1"


def mix_sources(expert):
    """[{name, schema, path, n, lang}] for an expert type, from `mixes` and `data_sources`."""
    mixes, sources = config["mixes"], config["data_sources"]

    def entries(group, lang):
        mix = mixes[group]
        if group == "language" and any(isinstance(v, dict) for v in mix.values()):
            mix = mix[lang]  # per-language mixes (paper config)
        return [
            {"name": name, "schema": sources[name]["schema"], "n": n, "lang": lang,
             "path": f"{R}/data/raw/" + sources[name].get("file", "{name}_{lang}.jsonl").format(name=name, lang=lang)}
            for name, n in mix.items()
        ]

    if expert == "math":
        return entries("math", "en")
    if expert.startswith("joint_"):
        return entries("math", "en") + entries("language", expert[len("joint_"):])
    return entries("language", expert)


rule sft_mix:
    input:
        lambda w: [s["path"] for s in mix_sources(w.expert)],
    output:
        f"{R}/data/sft/{{expert}}.jsonl",
    params:
        sources=lambda w: as_json(mix_sources(w.expert)),
        seed=config["seed"],
        code=code_hash("data", "training"),
    log:
        f"{R}/logs/sft_mix/{{expert}}.log",
    shell:
        "layerswap mix --sources-json {params.sources} --seed {params.seed} --out {output} > {log} 2>&1"
