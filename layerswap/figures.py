"""`layerswap heatmap`: where SFT changed the weights (paper Fig. 2 and Figs. 4-9).

For each expert and each (transformer layer, projection matrix) the figure shows the share of rows whose mean
absolute change |W_ft - W_pre| exceeds the expert's threshold, one panel per expert, layer 0 at the bottom.

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
from pathlib import Path

from layerswap.contracts import read_selection
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


def change_shares(base_dir: str | Path, experts: dict[str, str | Path], thresholds: dict[str, float],
                  rows: str = "input") -> list[dict]:
    """Records {expert, layer, matrix, share, n_above, n_rows, threshold}: per layer and matrix, the share of rows
    (see module doc for `rows`) whose mean |W_ft - W_pre| is above the expert's threshold."""
    import torch

    if rows not in ("input", "output"):
        raise UserError(f"--rows must be 'input' or 'output', not {rows!r}")
    # a row of the [out, in] tensor is a mean over dim 1; an input feature (column) is a mean over dim 0
    reduce_dim = 0 if rows == "input" else 1
    records: list[dict] = []
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
                    mav = (ft - pre).abs().mean(dim=reduce_dim)
                    above = int((mav > thresholds[name]).sum().item())
                    records.append({
                        "expert": name, "layer": layer, "matrix": short,
                        "share": above / mav.numel(), "n_above": above, "n_rows": mav.numel(),
                        "threshold": thresholds[name],
                    })
                    del ft, mav
                del pre
    return records


def heatmap_chart(frame, experts: list[str]):
    """One panel per expert: x = projection matrix, y = layer (0 at the bottom), colour = share of rows."""
    import altair as alt

    frame = frame.copy()
    frame["panel"] = [f"{e}|threshold {t:.1e}" for e, t in zip(frame["expert"], frame["threshold"])]
    order = {e: i for i, e in enumerate(experts)}
    panels = sorted(dict.fromkeys(frame["panel"]), key=lambda p: order.get(p.rsplit("|", 1)[0], len(order)))
    num_layers = int(frame["layer"].max()) + 1
    base = alt.Chart(frame).mark_rect(stroke="#dddddd", strokeWidth=0.5).encode(
        x=alt.X("matrix:N", sort=MATRIX_NAMES, title=None, axis=alt.Axis(labelAngle=-45)),
        y=alt.Y("layer:O", sort="descending", title="layer"),
        color=alt.Color("share:Q", title="share of rows",
                        scale=alt.Scale(domain=[0, 1], range=["#ffffff", "#00441b"], interpolate="rgb")),
        tooltip=["expert:N", "layer:O", "matrix:N", alt.Tooltip("share:Q", format=".4f"), "n_above:Q", "n_rows:Q"],
    ).properties(width=24 * len(MATRIX_NAMES), height=max(120, 14 * num_layers))
    header = alt.Header(labelExpr="split(datum.value, '|')", labelFontSize=11)
    return base.facet(column=alt.Column("panel:N", sort=panels, title=None, header=header)).properties(
        title="Share of rows with mean |W_ft - W_pre| above the threshold"
    )


def save_chart(chart, prefix: Path) -> list[Path]:
    import vl_convert as vlc

    spec = chart.to_json()
    svg, png = prefix.with_name(prefix.name + ".svg"), prefix.with_name(prefix.name + ".png")
    svg.write_text(vlc.vegalite_to_svg(spec))
    png.write_bytes(vlc.vegalite_to_png(spec, scale=2))
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


def parse_thresholds(text: str, experts: dict[str, str]) -> dict[str, float]:
    raw = json_object(text, "--threshold-json", "an object {expert name: threshold}")
    out = {}
    for name in experts:
        value = raw.get(name, raw.get("*"))
        if value is None:
            raise UserError(f"--threshold-json: no threshold for expert '{name}' (nor a '*' default)")
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value < 0:
            raise UserError(f"--threshold-json: threshold of '{name}' must be a non-negative number")
        out[name] = float(value)
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--base", required=True, help="HF model directory of the pretrained base")
    parser.add_argument("--expert", action="append", default=[], metavar="NAME=DIR",
                        help="an expert checkpoint directory, one panel each (repeatable)")
    parser.add_argument("--expert-from-selection", action="append", default=[], metavar="NAME=SELECTION_JSON",
                        help="the rank-1 checkpoint of a selection file, one panel each (repeatable)")
    parser.add_argument("--threshold-json", required=True,
                        help="JSON object {expert name: threshold}; key '*' is a default for the others")
    parser.add_argument("--out-prefix", required=True, help="writes <prefix>.svg, <prefix>.png and <prefix>.csv")
    parser.add_argument("--rows", choices=["input", "output"], default="input",
                        help="rows = input features, as in the paper's figures (default), or rows of the stored "
                             "[out, in] tensor")


def run(args: argparse.Namespace) -> None:
    import pandas as pd

    experts = experts_from_selections(args.expert_from_selection)
    experts.update(parse_experts(args.expert) if args.expert or not experts else {})
    thresholds = parse_thresholds(args.threshold_json, experts)
    records = change_shares(args.base, experts, thresholds, rows=args.rows)
    frame = pd.DataFrame.from_records(records)
    prefix = Path(args.out_prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(prefix.with_name(prefix.name + ".csv"), index=False)
    save_chart(heatmap_chart(frame, list(experts)), prefix)
