"""`layerswap heatmap`: where SFT changed the weights (paper Fig. 2 and Figs. 4-9).

For each expert and each (transformer layer, projection matrix) the heatmap shows the share of rows whose mean
absolute change |W_ft - W_pre| (the row's "change") exceeds the expert's threshold, one panel per expert, layer 0 at
the bottom. Beside it, a line chart of the mean |W_ft - W_pre| of each matrix per layer, one line per matrix, one
panel per expert. Both come from one pass over the weights: per expert, the vector of row changes of every
(layer, matrix) is kept (rows x matrices x layers floats, about 5 MB for an 8B model), never the weights.

Thresholds (`--threshold-json`, see ThresholdSpec): a fixed value per expert (the paper's Fig. 2 values), or
{"quantile": q}: the q-quantile of that expert's row changes over all rows of all matrices of all layers, computed
exactly (numpy's linear interpolation between order statistics, in float64), so about a share 1-q of the expert's
rows count as changed and the heatmap shows where they sit.

Which "rows": the paper's published values (Appendix A.5, e.g. attention.wk.weight 0.680908 = 2789/4096 and
feed_forward.w2.weight 0.374442 = 5368/14336 for Llama 3.1 8B) have the matrix's *input* dimension as the
denominator, i.e. a row is one input feature (the layout of W in x @ W). With Hugging Face weights, stored as
[out_features, in_features], that is a column, and the mean runs over the output dimension. `--rows input`
(the default) reproduces that; `--rows output` uses the rows of the stored [out, in] tensor instead.

Tensors are read one at a time with safetensors' safe_open (single file or sharded through
model.safetensors.index.json), never torch.load.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from layerswap.contracts import read_selection, write_bytes_atomic, write_text_atomic
from layerswap.errors import UserError
from layerswap.jsonl import json_object

MATRICES: list[tuple[str, str]] = [
    ("q_proj", "self_attn.q_proj.weight"),
    ("k_proj", "self_attn.k_proj.weight"),
    ("v_proj", "self_attn.v_proj.weight"),
    ("o_proj", "self_attn.o_proj.weight"),
    ("gate_proj", "mlp.gate_proj.weight"),
    ("up_proj", "mlp.up_proj.weight"),
    ("down_proj", "mlp.down_proj.weight"),
]
MATRIX_NAMES = [short for short, _ in MATRICES]
LAYER_RE = re.compile(r"^model\.layers\.(\d+)\.")


class Checkpoint:
    """Tensor names -> safetensors files of one HF model directory (single file or sharded)."""

    def __init__(self, directory: str | Path):
        self.dir = Path(directory)
        index = self.dir / "model.safetensors.index.json"
        single = self.dir / "model.safetensors"
        if index.is_file():
            try:
                weight_map = json.loads(index.read_text())["weight_map"]
            except (OSError, json.JSONDecodeError, KeyError, TypeError) as err:
                raise UserError(f"{index}: not a readable safetensors index ({err})") from None
            self.files = {name: self.dir / fname for name, fname in weight_map.items()}
        elif single.is_file():
            from safetensors import safe_open

            try:
                with safe_open(str(single), framework="pt") as handle:
                    names = list(handle.keys())
            except Exception as err:  # safetensors raises its own error types
                raise UserError(f"{single}: not a readable safetensors file ({err})") from None
            self.files = {name: single for name in names}
        else:
            pickles = sorted(p.name for p in self.dir.glob("*") if p.suffix in {".bin", ".pt", ".pth", ".ckpt", ".pkl"})
            if pickles:
                raise UserError(f"{self.dir}: pickle checkpoint ({pickles[0]}) refused; convert it to safetensors")
            raise UserError(f"{self.dir}: no model.safetensors or model.safetensors.index.json")
        for path in set(self.files.values()):
            if not path.is_file():
                raise UserError(f"missing checkpoint shard {path}")
        self._stack = ExitStack()
        self._handles: dict[Path, object] = {}

    def num_layers(self) -> int:
        layers = {int(m.group(1)) for name in self.files if (m := LAYER_RE.match(name))}
        if not layers:
            raise UserError(f"{self.dir}: no tensors named model.layers.<l>.*")
        return max(layers) + 1

    def tensor(self, name: str):
        from safetensors import safe_open

        if name not in self.files:
            raise UserError(f"{self.dir}: no tensor {name}")
        path = self.files[name]
        if path not in self._handles:
            try:
                self._handles[path] = self._stack.enter_context(safe_open(str(path), framework="pt"))
            except Exception as err:
                raise UserError(f"{path}: not a readable safetensors file ({err})") from None
        tensor = self._handles[path].get_tensor(name)
        if tensor.is_floating_point() and tensor.numel():
            import math

            import torch

            lo, hi = torch.aminmax(tensor.float())
            if not (math.isfinite(float(lo)) and math.isfinite(float(hi))):
                raise UserError(f"{self.dir}: tensor {name} contains NaN or Inf")
        return tensor

    def close(self) -> None:
        self._stack.close()

    def __enter__(self) -> "Checkpoint":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class ThresholdSpec:
    """An expert's threshold: a fixed `value`, or the `quantile` q (0 <= q <= 1) of its own row changes."""

    value: float | None = None
    quantile: float | None = None

    def resolve(self, row_changes) -> float:
        """The threshold for an expert whose row changes (all rows of all matrices of all layers, one flat float
        array) are `row_changes`: the fixed value, or their exact q-quantile (linear interpolation, float64)."""
        import numpy as np

        if self.quantile is None:
            return float(self.value)
        return float(np.quantile(np.asarray(row_changes, dtype=np.float64), self.quantile, method="linear"))


def row_changes(base_dir: str | Path, experts: dict[str, str | Path], rows: str = "input") -> dict:
    """{expert: {(layer, matrix): float32 tensor of row changes}}: per row (see module doc for `rows`) the mean
    |W_ft - W_pre|, read in one pass over the checkpoints, one tensor at a time."""
    import torch

    if rows not in ("input", "output"):
        raise UserError(f"--rows must be 'input' or 'output', not {rows!r}")
    # a row of the [out, in] tensor is a mean over dim 1; an input feature (column) is a mean over dim 0
    reduce_dim = 0 if rows == "input" else 1
    changes: dict[str, dict[tuple[int, str], object]] = {name: {} for name in experts}
    with ExitStack() as stack:
        base = stack.enter_context(Checkpoint(base_dir))
        cks = {name: stack.enter_context(Checkpoint(path)) for name, path in experts.items()}
        num_layers = base.num_layers()
        for name, ck in cks.items():
            if ck.num_layers() != num_layers:
                raise UserError(f"{ck.dir}: {ck.num_layers()} layers, the base {base.dir} has {num_layers}")
        for layer in range(num_layers):
            for short, suffix in MATRICES:
                tname = f"model.layers.{layer}.{suffix}"
                pre = base.tensor(tname).to(torch.float32)
                if pre.ndim != 2:
                    raise UserError(f"{base.dir}: {tname} has shape {tuple(pre.shape)}, expected a matrix")
                for name, ck in cks.items():
                    ft = ck.tensor(tname).to(torch.float32)
                    if ft.shape != pre.shape:
                        raise UserError(
                            f"{ck.dir}: {tname} has shape {tuple(ft.shape)}, the base has {tuple(pre.shape)}"
                        )
                    changes[name][(layer, short)] = (ft - pre).abs().mean(dim=reduce_dim)
                    del ft
                del pre
    return changes


def change_records(
    base_dir: str | Path, experts: dict[str, str | Path], thresholds: dict[str, ThresholdSpec], rows: str = "input"
) -> tuple[list[dict], list[dict]]:
    """(share records, mean records) from one pass over the weights.

    Share records {expert, layer, matrix, share, n_above, n_rows, threshold, threshold_quantile}: per layer and
    matrix, the share of rows whose change is above the expert's threshold (threshold_quantile: the q it was set
    from, None for a fixed value). Mean records {expert, layer, matrix, mean_abs_change, n_rows}: the mean
    |W_ft - W_pre| over the whole matrix (= the mean of its row changes: every row has as many entries)."""
    import torch

    changes = row_changes(base_dir, experts, rows)
    shares: list[dict] = []
    means: list[dict] = []
    for name, per_matrix in changes.items():
        spec = thresholds[name]
        threshold = spec.resolve(torch.cat(list(per_matrix.values())).numpy())
        for (layer, short), mav in per_matrix.items():
            above = int((mav.double() > threshold).sum().item())
            shares.append(
                {
                    "expert": name,
                    "layer": layer,
                    "matrix": short,
                    "share": above / mav.numel(),
                    "n_above": above,
                    "n_rows": mav.numel(),
                    "threshold": threshold,
                    "threshold_quantile": spec.quantile,
                }
            )
            means.append(
                {
                    "expert": name,
                    "layer": layer,
                    "matrix": short,
                    "mean_abs_change": float(mav.double().mean().item()),
                    "n_rows": mav.numel(),
                }
            )
    return shares, means


def heatmap_chart(frame, experts: list[str]):
    """One panel per expert: x = projection matrix, y = layer (0 at the bottom), colour = share of rows; the panel
    header names the expert, its threshold and, for a quantile threshold, the quantile."""
    import altair as alt
    import pandas as pd

    frame = frame.copy()
    frame["panel"] = [
        f"{e}|threshold {t:.1e}" + ("" if pd.isna(q) else f"|(quantile {q:g} of its rows)")
        for e, t, q in zip(frame["expert"], frame["threshold"], frame["threshold_quantile"])
    ]
    order = {e: i for i, e in enumerate(experts)}
    panels = sorted(dict.fromkeys(frame["panel"]), key=lambda p: order.get(p.split("|", 1)[0], len(order)))
    num_layers = int(frame["layer"].max()) + 1
    base = (
        alt.Chart(frame)
        .mark_rect(stroke="#dddddd", strokeWidth=0.5)
        .encode(
            x=alt.X("matrix:N", sort=MATRIX_NAMES, title=None, axis=alt.Axis(labelAngle=-45)),
            y=alt.Y("layer:O", sort="descending", title="layer"),
            color=alt.Color(
                "share:Q",
                title="share of rows",
                scale=alt.Scale(domain=[0, 1], range=["#ffffff", "#00441b"], interpolate="rgb"),
            ),
            tooltip=["expert:N", "layer:O", "matrix:N", alt.Tooltip("share:Q", format=".4f"), "n_above:Q", "n_rows:Q"],
        )
        .properties(width=24 * len(MATRIX_NAMES), height=max(120, 14 * num_layers))
    )
    header = alt.Header(labelExpr="split(datum.value, '|')", labelFontSize=11)
    return base.facet(column=alt.Column("panel:N", sort=panels, title=None, header=header)).properties(
        title="Share of rows with mean |W_ft - W_pre| above the threshold"
    )


def mean_chart(frame, experts: list[str]):
    """One panel per expert (own y scale): x = layer, y = mean |W_ft - W_pre| of the matrix, one line per matrix."""
    import altair as alt

    num_layers = int(frame["layer"].max()) + 1
    base = (
        alt.Chart(frame)
        .mark_line(point=True, strokeWidth=1.5)
        .encode(
            x=alt.X(
                "layer:Q",
                title="layer",
                scale=alt.Scale(domain=[0, num_layers - 1], nice=False),
                axis=alt.Axis(format="d", tickMinStep=1),
            ),
            y=alt.Y(
                "mean_abs_change:Q",
                title="mean |W_ft - W_pre|",
                scale=alt.Scale(zero=True),
                axis=alt.Axis(format=".1e"),
            ),
            color=alt.Color("matrix:N", sort=MATRIX_NAMES, title="matrix"),
            tooltip=["expert:N", "layer:O", "matrix:N", alt.Tooltip("mean_abs_change:Q", format=".3e")],
        )
        .properties(width=max(200, 16 * num_layers), height=180)
    )
    return (
        base.facet(column=alt.Column("expert:N", sort=experts, title=None, header=alt.Header(labelFontSize=11)))
        .resolve_scale(y="independent")
        .properties(title="Mean |W_ft - W_pre| per layer and matrix")
    )


def render_chart(chart) -> tuple[str, bytes]:
    """(SVG text, PNG bytes at scale 2) of an altair chart, rendered by vl-convert."""
    import vl_convert as vlc

    spec = chart.to_json()
    return vlc.vegalite_to_svg(spec), vlc.vegalite_to_png(spec, scale=2)


def save_chart(chart, prefix: Path) -> list[Path]:
    svg_text, png_bytes = render_chart(chart)
    svg, png = prefix.with_name(prefix.name + ".svg"), prefix.with_name(prefix.name + ".png")
    write_text_atomic(svg, svg_text)
    write_bytes_atomic(png, png_bytes)
    return [svg, png]


def _named(items: list[str], flag: str, metavar: str) -> dict[str, str]:
    """NAME=VALUE arguments of `flag` as {name: value}; a malformed item or a repeated name is an error."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name or not value:
            raise UserError(f"{flag} {item!r}: expected {metavar}")
        if name in out:
            raise UserError(f"{flag} {name}: given twice")
        out[name] = value
    return out


def parse_experts(items: list[str]) -> dict[str, str]:
    experts = _named(items, "--expert", "NAME=DIR")
    if not experts:
        raise UserError("--expert: give at least one NAME=DIR")
    return experts


def experts_from_selections(items: list[str]) -> dict[str, str]:
    """NAME=SELECTION_JSON -> the directory of that selection's rank-1 checkpoint."""
    experts: dict[str, str] = {}
    for name, path in _named(items, "--expert-from-selection", "NAME=SELECTION_JSON").items():
        experts[name] = read_selection(path)[0]["path"]
    return experts


def parse_thresholds(text: str, experts: dict[str, str]) -> dict[str, ThresholdSpec]:
    """--threshold-json: {expert name or '*': a fixed threshold (number >= 0) or {"quantile": q} (0 <= q <= 1)}."""
    raw = json_object(text, "--threshold-json", "an object {expert name: threshold}")
    out = {}
    for name in experts:
        key = name if name in raw else "*"
        value = raw.get(key)
        if value is None:
            raise UserError(f"--threshold-json: no threshold for expert '{name}' (nor a '*' default)")
        if isinstance(value, dict):
            unknown = sorted(set(value) - {"quantile"})
            if unknown or "quantile" not in value:
                what = f"unknown key '{unknown[0]}'" if unknown else "no key 'quantile'"
                raise UserError(
                    f"--threshold-json: threshold of '{key}': {what}; allowed: a number or {{\"quantile\": q}}"
                )
            q = value["quantile"]
            if not _is_number(q) or not 0 <= q <= 1:
                raise UserError(f"--threshold-json: quantile of '{key}' must be a number in [0, 1], not {q!r}")
            out[name] = ThresholdSpec(quantile=float(q))
        elif _is_number(value) and value >= 0:
            out[name] = ThresholdSpec(value=float(value))
        else:
            raise UserError(
                f"--threshold-json: threshold of '{key}' must be a non-negative number or "
                f'{{"quantile": q}}, not {value!r}'
            )
    return out


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--base", required=True, help="HF model directory of the pretrained base")
    parser.add_argument(
        "--expert",
        action="append",
        default=[],
        metavar="NAME=DIR",
        help="an expert checkpoint directory, one panel each (repeatable)",
    )
    parser.add_argument(
        "--expert-from-selection",
        action="append",
        default=[],
        metavar="NAME=SELECTION_JSON",
        help="the rank-1 checkpoint of a selection file, one panel each (repeatable)",
    )
    parser.add_argument(
        "--threshold-json",
        required=True,
        help="JSON object {expert name: threshold}, a threshold being a number (fixed) or "
        '{"quantile": q} (the q-quantile of that expert\'s row changes over all rows of all '
        "matrices of all layers); key '*' is a default for the others",
    )
    parser.add_argument(
        "--out-prefix",
        required=True,
        help="writes the heatmap as <prefix>.{svg,png,csv} and the mean change per layer and "
        "matrix as <prefix>_mean.{svg,png,csv}",
    )
    parser.add_argument(
        "--rows",
        choices=["input", "output"],
        default="input",
        help="rows = input features, as in the paper's figures (default), or rows of the stored [out, in] tensor",
    )


def run(args: argparse.Namespace) -> None:
    import pandas as pd

    experts = experts_from_selections(args.expert_from_selection)
    experts.update(parse_experts(args.expert) if args.expert or not experts else {})
    thresholds = parse_thresholds(args.threshold_json, experts)
    shares, means = change_records(args.base, experts, thresholds, rows=args.rows)
    share_frame, mean_frame = pd.DataFrame.from_records(shares), pd.DataFrame.from_records(means)
    prefix = Path(args.out_prefix)
    outputs = {}  # everything rendered before the first file is written
    for stem, frame, chart in [
        (prefix.name, share_frame, heatmap_chart(share_frame, list(experts))),
        (prefix.name + "_mean", mean_frame, mean_chart(mean_frame, list(experts))),
    ]:
        svg, png = render_chart(chart)
        outputs[stem] = (frame.to_csv(index=False), svg, png)
    for stem, (csv, svg, png) in outputs.items():
        write_text_atomic(prefix.with_name(stem + ".csv"), csv)
        write_text_atomic(prefix.with_name(stem + ".svg"), svg)
        write_bytes_atomic(prefix.with_name(stem + ".png"), png)
