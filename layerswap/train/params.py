"""An SFT run's own params that both the config check and the job read: fine-tuning method, LoRA settings, export
dtype, scheduler names. Light (no torch): `layerswap.config` imports it at parse time."""

from __future__ import annotations

from layerswap.config_schema import schema_defaults
from layerswap.errors import UserError

#: sft param 'scheduler' -> the transformers scheduler name.
SCHEDULERS = {"linear": "linear", "wsd": "warmup_stable_decay"}
#: Fine-tuning methods whose experts can be merged (layerswap/train/sft.py's docstring says why the others are not).
PEFT_METHODS = ("full", "lora")
#: Methods users may ask for that are refused, with the reason.
UNSUPPORTED_PEFT = {
    "prefix": "prefix tuning adds virtual tokens, no per-layer weights to swap",
    "prefix_tuning": "prefix tuning adds virtual tokens, no per-layer weights to swap",
    "prompt": "prompt tuning adds virtual tokens, no per-layer weights to swap",
    "prompt_tuning": "prompt tuning adds virtual tokens, no per-layer weights to swap",
    "adapterfusion": "AdapterFusion needs a fusion layer over several adapters, which no weight merge expresses",
    "adapter_fusion": "AdapterFusion needs a fusion layer over several adapters, which no weight merge expresses",
}
#: sft param 'export_dtype' -> the torch dtype name checkpoints are exported in ('base': the base's own).
EXPORT_DTYPES = {"base": None, "bf16": "bfloat16", "fp32": "float32"}


def peft_refusal(method: object) -> str | None:
    """Why `method` cannot be a run's peft_method (one line, with the reason where one is known), or None."""
    if method in PEFT_METHODS:
        return None
    why = UNSUPPORTED_PEFT.get(str(method).lower())
    return f"'{method}' is not supported" + (f" ({why})" if why else "")


def peft_method(p: dict) -> str:
    """The run's fine-tuning method, refused with one line unless it is one of `PEFT_METHODS`."""
    method = p.get("peft_method", "full")
    refusal = peft_refusal(method)
    if refusal:
        raise UserError(f"sft param 'peft_method': {refusal}; allowed: {', '.join(PEFT_METHODS)}")
    return method


def lora_settings(p: dict) -> dict:
    """The run's LoRA settings over the schema's defaults (config/schema.yaml `$defs/lora`, their one owner)."""
    return {**schema_defaults("lora"), **(p.get("lora") or {})}


def export_dtype_name(params: dict) -> str:
    """The run's sft param 'export_dtype' (default 'base'), refused with one line unless it is in EXPORT_DTYPES."""
    name = params.get("export_dtype", "base")
    if name not in EXPORT_DTYPES:
        raise UserError(f"sft param 'export_dtype': unknown {name!r}; allowed: {', '.join(EXPORT_DTYPES)}")
    return name
