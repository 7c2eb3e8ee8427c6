"""The `layerswap` commands: each command's module and one line of help. The dispatcher (`layerswap.cli`) imports
only the module of the command it runs; the code fingerprints (`layerswap.fingerprint.command_hash`) hash what that
module can import. Here, apart from both, so that neither imports the other."""

from __future__ import annotations

#: command -> (the module whose `add_arguments(parser)` and `run(args)` it calls, its help line)
COMMANDS: dict[str, tuple[str, str]] = {
    "check-config": ("layerswap.config", "validate a workflow config file"),
    "toy-data": ("layerswap.data.toyworld", "write the synthetic toy-world datasets"),
    "mix": ("layerswap.data.mixes", "normalise source datasets into one SFT mix"),
    "toy-base": ("layerswap.train.pretrain", "build the toy tokenizer and pretrain the toy base model"),
    "sft": ("layerswap.train.sft", "fine-tune an expert, saving a checkpoint every N samples"),
    "select": ("layerswap.select", "pick the top-k checkpoints of an expert type"),
    "checkpoint-index": (
        "layerswap.evaluation.checkpoint_index",
        "one evaluation index of a run from its per-benchmark indexes",
    ),
    "recipes": ("layerswap.merge.recipes", "write merge recipes for the 3x3 pairs of one language"),
    "merge": ("layerswap.merge.cli", "build a merge recipe and write it as a HF model directory"),
    "evaluate": ("layerswap.evaluation.evaluate", "evaluate checkpoints with lm-eval"),
    "evaluate-leaders": (
        "layerswap.evaluation.leaders",
        "evaluate a selection's constraint benchmarks on the candidates it reaches in score order",
    ),
    "evaluate-merges": (
        "layerswap.evaluation.evaluate_merges",
        "evaluate checkpoints and merge recipes (built in memory)",
    ),
    "tables": ("layerswap.report.tables", "build the paper's tables from evaluation files"),
    "table2-models": (
        "layerswap.report.table2_models",
        "the models Table 2 reads per extra MGSM language (its winners, chosen as the table chooses them)",
    ),
    "heatmap": ("layerswap.report.figures", "plot parameter-change heatmaps"),
    "charts": ("layerswap.report.charts", "figures and report pages from evaluation and table files"),
    "plan": ("layerswap.workflow.plan", "dry-run snakemake and summarise, per rule, which jobs would run and why"),
    "prestage": ("layerswap.workflow.prestage", "download every hub artefact a config needs into the HF cache"),
    "hub-data": ("layerswap.data.hub", "one pre-staged hub source -> its schema's JSONL + manifest"),
    "prepare-base": ("layerswap.data.prepare_base", "link a local or pre-staged base model into results/base"),
    "gguf-base": ("layerswap.train.gguf_base", "dequantise a GGUF base model into a safetensors HF directory"),
    "manifest": ("layerswap.audit.manifest", "hash every results file with the job, params and software that made it"),
    "audit": ("layerswap.audit.check", "re-hash results against a manifest (drift), trace a table cell, or repair"),
    "ablation-table": (
        "layerswap.report.ablation_table",
        "an ablation's table (CSV + Markdown) and figure from evaluation files",
    ),
    "token-counts": (
        "layerswap.workflow.count_tokens",
        "count each evaluation key's prompt tokens (pre-staged data, the base's tokenizer) for the plan",
    ),
    "cost": ("layerswap.workflow.cost", "print a config's plan cost: jobs per rule, GPU-hours and disk by stage"),
}
