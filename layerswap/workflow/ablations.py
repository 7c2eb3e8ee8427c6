"""Ablations as declarative experiments: `config/ablations/<name>.yaml` -> extra merge configs, a table and a figure.

An ablation file lists *variants* of the layer swap, or of any registered merge method (kind ``method``,
layerswap/workflow/sweeps.py); each resolves, for the workflow's base model depth L, to one merge config. At parse
time (rules/common.smk) ``plan`` returns those configs beside the config, which it leaves unchanged, and the rules
look merge configs up in ``merges.configs`` plus these (``spec.merges.configs``,
layerswap/workflow/spec.py), so the generic ``merge_recipes`` / ``evaluate_merges`` rules build and evaluate them
for every language and expert pair; ``layerswap ablation-table`` then turns their evaluation files into
``results/ablations/<name>/table.{csv,md}`` and ``figure.{svg,png}``.

Ablation file
-------------
::

    title: Swapped-layer count            # table/figure title
    plan: "seed 002: ..."                  # where the ablation comes from (free text, shown in the Markdown)
    metrics: [mgsm]                        # mgsm (always first), then any benchmark (layerswap/benchmarks.py)
    reference_depth: 32                    # depth the `scaled` layer counts are given for (optional)
    variants:
      - {kind: bottom_top, bottom: 5, top: 2, scaled: true, label: "b5 u2"}
      - {kind: grid, transition_bottom: [0, 1, 2], transition_top: [0, 1, 2]}
      - {kind: middle}
      - {kind: alternating, offset: 0}
      - {kind: random, seed: 0, draws: 3}
      - {kind: layers, lang_layers: [0, 1, 7]}
      - {kind: method, method: ties, density: [0.2, 0.5]}   # any registered method's params (sweeps.py)

Variant kinds (L = base.num_layers; "default" = the value of ``merges.default_swap``):

* ``bottom_top``: ``bottom``, ``top``, ``transition_bottom``, ``transition_top`` (each an int or ``default``;
  ``bottom``/``top`` default to ``default``, transitions to 0). With ``scaled: true`` bottom and top are counts for a
  ``reference_depth``-layer model, scaled to L as ``round_half_up(v * L / reference_depth)``, at least 1 when v > 0
  (so a swap the plan asks for never vanishes on a small model). Transition counts are never scaled.
* ``grid``: like ``bottom_top`` but any field may be a list; the cartesian product, in order.
* ``middle``: the default swap's number of language layers n = bottom + top, as one centred block
  ``[(L - n) // 2, (L - n) // 2 + n)``.
* ``alternating``: n layers, no two adjacent: from the layers of parity ``offset`` (0: 0, 2, 4, ...; 1: 1, 3, ...)
  the n evenly spread ones, candidate index ``floor((i + 0.5) * m / n)`` for i < n (m candidates).
* ``random``: ``draws`` sets of n layers, draw d uses ``random.Random(seed + d).sample(range(L), n)`` (sorted).
* ``layers``: explicit ``lang_layers`` (indices for this depth).
* ``method``: a merge config of any registered method (``method``), its params given or swept as lists
  (layerswap/workflow/sweeps.py); what the others leave at the default swap's values, it leaves at the method's
  defaults.

Location variants (middle/alternating/random/layers) have no transition layers. A variant that does not fit the
model (layers past L, or n > L) is kept as a table row marked ``skipped`` with the reason, and builds nothing.

An ablation may also train its own experts (``expert_sets``, ``bases``): layerswap/workflow/expert_sets.py. The
variants' expansion and merge config names: layerswap/workflow/variants.py; the table and figure:
layerswap/report/ablation_table.py (`layerswap ablation-table`).
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

from layerswap.benchmarks import MATH, NAMES
from layerswap.contracts import read_text
from layerswap.errors import UserError, yaml_problem
from layerswap.merge.methods.layer_swap import SWAP_KEYS
from layerswap.workflow import expert_sets, sweeps
from layerswap.workflow.variants import assign_names, check_mapping, describe, expand, fail, n_lang

KINDS = ("bottom_top", "grid", "middle", "alternating", "random", "layers", "method")
METRICS = NAMES  # the benchmarks (layerswap/benchmarks.py)
VARIANT_KEYS = {
    "bottom_top": {"kind", "label", "scaled", *SWAP_KEYS},
    "grid": {"kind", "label", "scaled", *SWAP_KEYS},
    "middle": {"kind", "label"},
    "alternating": {"kind", "label", "offset"},
    "random": {"kind", "label", "seed", "draws"},
    "layers": {"kind", "label", "lang_layers"},
    "method": sweeps.BASE_KEYS,  # and the method's params (sweeps.allowed_keys)
}
FILE_KEYS = {"title", "plan", "metrics", "reference_depth", "variants", "note", "expert_sets", "bases"}


# ----------------------------------------------------------------------------------------------------------------
# loading and planning


def enabled(value: Any, available: list[str]) -> list[str]:
    """The `ablations` config value (list, comma-separated string or 'all'; absent: all) as a list of names."""
    if value is None:
        return list(available)
    if value in ("", []):
        return []
    if isinstance(value, str):
        names = available if value.strip() == "all" else [v.strip() for v in value.split(",") if v.strip()]
    else:
        names = [str(v) for v in value]
    for name in names:
        if name not in available:
            raise UserError(f"config key 'ablations': unknown ablation '{name}'; allowed: {', '.join(available)}")
    return list(dict.fromkeys(names))


def available(ablations_dir: str | Path) -> list[str]:
    return sorted(p.stem for p in Path(ablations_dir).glob("*.yaml"))


def load(path: str | Path) -> dict:
    """Read and check one ablation file (structure only; depth-dependent checks happen in `expand`)."""
    import yaml

    path = Path(path)
    text = read_text(path, "ablation file")  # missing, unreadable or not UTF-8: one line naming the file
    try:
        spec = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise UserError(f"ablation file {path} {yaml_problem(err)}") from None
    where = str(path)
    check_mapping(spec, where, FILE_KEYS)
    variants = spec.get("variants")
    if not isinstance(variants, list) or not variants:
        raise fail(f"{where}: variants", "must be a non-empty list")
    metrics = spec.get("metrics", [MATH])
    if not isinstance(metrics, list) or MATH not in metrics or any(m not in METRICS for m in metrics):
        raise fail(f"{where}: metrics", f"{metrics!r} must be a list containing {MATH}; allowed: {', '.join(METRICS)}")
    expert_sets.check_file(where, spec)
    texts = [(k, spec.get(k)) for k in ("title", "plan", "note")]
    texts += [(f"variants[{i}].label", v.get("label")) for i, v in enumerate(variants) if isinstance(v, dict)]
    for key, text in texts:
        if isinstance(text, str) and re.search(r"\{\s*[.\w]+\s*[,}]", text):  # they reach a rule's params string
            raise fail(
                f"{where}: {key}", "must not contain {name} or {name, ...} (Snakemake reads it in params as a wildcard)"
            )
    for i, v in enumerate(variants):
        vw = f"{where}: variants[{i}]"
        if not isinstance(v, dict) or v.get("kind") not in KINDS:
            raise fail(vw, f"needs kind; allowed: {', '.join(KINDS)}")
        keys = sweeps.allowed_keys(v, vw) if v["kind"] == "method" else VARIANT_KEYS[v["kind"]]
        extra = sorted(set(v) - keys)
        if extra:
            raise fail(vw, f"unknown key '{extra[0]}' for kind {v['kind']}; allowed: {', '.join(sorted(keys))}")
        if v.get("scaled") and not isinstance(spec.get("reference_depth"), int):
            raise fail(vw, "scaled: true needs an integer reference_depth in the file")
    return {
        "name": path.stem,
        "title": spec.get("title", path.stem),
        "plan": spec.get("plan", ""),
        "note": spec.get("note", ""),
        "metrics": list(dict.fromkeys(metrics)),
        "reference_depth": spec.get("reference_depth"),
        "variants": variants,
        "expert_sets": spec.get("expert_sets") or [],
        "bases": spec.get("bases") or {},
    }


def plan(config: dict, ablations_dir: str | Path) -> tuple[dict[str, dict], dict[str, dict]]:
    """Load every ablation file: (specs by name, the merge configs they add to merges.configs). `config` is left as
    it is; the rules merge the added configs into a view of their own (`with_merge_configs`), so each ablation's
    target exists whatever the `ablations` key selects (that key only picks what the `ablations` target builds).

    A spec: {title, plan, note, metrics, variants: [{label, config, layers, n_lang_layers, skipped}], and for
    expert-set ablations also runs, run_base, bases, selections, merges (expert_sets.plan)}.
    """
    if config.get("ablations") not in ("", []) and not Path(ablations_dir).is_dir():
        raise UserError(f"config key 'ablations_dir': {ablations_dir} is not a directory")
    names = available(ablations_dir) if Path(ablations_dir).is_dir() else []
    enabled(config.get("ablations"), names)  # an unknown name in the key is an error, here at parse time
    depth = int(config["base"]["num_layers"])
    main = config["merges"]["configs"]
    configs = dict(main)  # the main configs and those added so far: an equal config keeps its first name
    out: dict[str, dict] = {}
    for name in names:
        spec = load(Path(ablations_dir) / f"{name}.yaml")
        variants = expand(spec, config)
        if spec["expert_sets"]:
            extra = expert_sets.plan(name, spec, config, variants)
            out[name] = {k: spec[k] for k in ("title", "plan", "note", "metrics")} | {"variants": extra.pop("rows")}
            out[name].update(extra)
            continue
        configs.update(assign_names(variants, configs))
        rows = [
            {
                "label": v["label"],
                "config": v["config"],
                "skipped": v["skipped"],
                "layers": describe(v["merge"], depth) if v["merge"] else "",
                "n_lang_layers": n_lang(v["merge"]) if v["merge"] else None,
            }
            for v in variants
        ]
        out[name] = {k: spec[k] for k in ("title", "plan", "note", "metrics")} | {"variants": rows}
    return out, {k: v for k, v in configs.items() if k not in main}


def with_merge_configs(config: dict, added: dict[str, dict]) -> dict:
    """A copy of `config` whose merges.configs also hold `added` (to validate and check them with the rest)."""
    view = copy.deepcopy(config)
    view["merges"]["configs"].update(copy.deepcopy(added))
    return view
