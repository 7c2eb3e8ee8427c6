"""Safetensors checkpoints: validated opening (weights checked against the sha256 their run recorded), chunked reads
without pickle or mmap, streamed shard writing."""

from __future__ import annotations

import json
import math
import os
import struct
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from layerswap.contracts import CHECKPOINT_DIR_RE, naming, read_json
from layerswap.errors import UserError
from layerswap.layout import RUN_RECORD

DTYPES: dict[str, torch.dtype] = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}
DTYPE_NAMES: dict[torch.dtype, str] = {v: k for k, v in DTYPES.items()}
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")
SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
BASE_FINGERPRINT_FILE = "layerswap_base.json"
#: What `layerswap prepare-base` writes beside the base it links (source, revision, the weights' sha256).
SOURCE_RECORD = "layerswap_source.json"
MAX_HEADER_BYTES = 100 * 2**20
#: The output head that `tie_word_embeddings` ties to the input embedding (Llama-family name).
TIED_HEAD = "lm_head.weight"

Fill = Callable[[str, int, int, torch.Tensor], None]


@dataclass(frozen=True)
class TensorInfo:
    """Where one tensor's bytes lie: file, absolute byte offset, dtype and shape."""

    file: str
    offset: int
    dtype: torch.dtype
    shape: tuple[int, ...]

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def itemsize(self) -> int:
        return torch.empty((), dtype=self.dtype).element_size()


def read_header(file: str) -> dict[str, TensorInfo]:
    """Parse and check a safetensors header; a truncated or corrupt file raises UserError naming it."""
    try:
        size = os.path.getsize(file)
        with open(file, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise UserError(f"{file}: truncated safetensors file ({size} bytes, no header)")
            (n,) = struct.unpack("<Q", head)
            if n > MAX_HEADER_BYTES or 8 + n > size:
                raise UserError(f"{file}: corrupt or truncated safetensors header (length {n}, file {size} bytes)")
            raw = f.read(n)
    except OSError as err:
        raise UserError(f"{file}: cannot read ({err.strerror})") from err
    try:
        header = json.loads(raw.decode("utf-8"))
        if not isinstance(header, dict):
            raise ValueError("not an object")
    except (UnicodeDecodeError, ValueError) as err:
        raise UserError(f"{file}: corrupt safetensors header ({err})") from err
    data_start = 8 + n
    infos: dict[str, TensorInfo] = {}
    end_max = 0
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype = DTYPES[entry["dtype"]]
            shape = tuple(int(d) for d in entry["shape"])
            begin, end = (int(x) for x in entry["data_offsets"])
        except (KeyError, TypeError, ValueError) as err:
            raise UserError(f"{file}: corrupt header entry for tensor {name} ({err!r})") from err
        info = TensorInfo(file, data_start + begin, dtype, shape)
        if end - begin != info.numel * info.itemsize or begin < 0:
            raise UserError(f"{file}: tensor {name} has data_offsets {begin}..{end} that do not match its shape")
        end_max = max(end_max, end)
        infos[name] = info
    if data_start + end_max > size:
        raise UserError(f"{file}: truncated safetensors file ({size} bytes, header needs {data_start + end_max})")
    return infos


def _json(path: Path) -> dict:
    data = read_json(path, "checkpoint")
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a JSON object")
    return data


def sha256_once(path: Path) -> str:
    """sha256 of a file, hashed once per file state (`layerswap.hashcache`: keyed by device, inode, size, mtime and
    ctime, in this process and, within the workflow, across its jobs): a job opens the same expert for many merges,
    and many jobs read the same experts. Keyed by the file itself, not its path: an export hashed in its hidden folder
    is not hashed again once renamed into place; a changed file is always hashed again."""
    from layerswap.hashcache import sha256

    return sha256(path)


_RECORDS: dict[tuple[str, int, int], list] = {}  # (record path, size, mtime_ns) -> its checked entries, this process


def run_record(record: Path) -> list:
    """The checkpoint entries of a run's `checkpoints.json`, checked against its folder once per process: a listed
    checkpoint whose directory is missing, or a checkpoint directory (`s<samples>`) in the folder that the record does
    not list, is one UserError naming both and the repair."""
    st = os.stat(record)
    key = (str(record), st.st_size, st.st_mtime_ns)
    if key not in _RECORDS:
        entries = _json(record).get("checkpoints")
        entries = entries if isinstance(entries, list) else []
        listed = {str(e.get("name")) for e in entries if isinstance(e, dict)}
        rewrite = f"snakemake --forcerun {record} (with the run's own options, e.g. --configfile)"
        for name in sorted(listed):
            if not (record.parent / name).is_dir():
                raise UserError(
                    f"{record} lists checkpoint {name}, but {record.parent / name} does not exist; "
                    f"rebuild the run's checkpoints and record with: {rewrite}"
                )
        for ckpt in sorted(record.parent.iterdir()):
            if CHECKPOINT_DIR_RE.match(ckpt.name) and ckpt.is_dir() and ckpt.name not in listed:
                raise UserError(
                    f"{ckpt}: a checkpoint that {record} does not list (not of the run's schedule, or "
                    f"the record is stale); remove it (rm -r {ckpt}) or rewrite the record with: "
                    f"{rewrite}"
                )
        _RECORDS[key] = entries
    return _RECORDS[key]


def recorded_weights(ckpt_dir: Path) -> tuple[Path, dict[str, str]] | None:
    """(record, {weight file name: sha256}) of a checkpoint: the entry of its run's `checkpoints.json` that lists it
    (by directory name; the record is checked against its folder first, run_record), else the directory's own record
    of the job that wrote it (`export_records`: the base's `layerswap_meta.json`, written by `layerswap toy-base`), or
    None: a directory no job recorded (a merged model, a hand-made directory) is not checked."""
    record = ckpt_dir.parent / RUN_RECORD
    if record.is_file():
        for entry in run_record(record):
            if isinstance(entry, dict) and entry.get("name") == ckpt_dir.name:
                files = entry.get("files") or {SINGLE_FILE: entry.get("sha256")}
                if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
                    raise UserError(f"{record}: checkpoint {ckpt_dir.name} has no sha256 of its weights")
                return record, files
    return export_records(ckpt_dir)


def export_records(ckpt_dir: Path) -> tuple[Path, dict[str, str]] | None:
    """(record, {weight file name: sha256}) that the job which wrote a model directory left in it: `weights_sha256`
    of `layerswap_meta.json` (every export of `layerswap.train.training.export_model`: the toy base, each expert
    checkpoint) or of `layerswap_source.json` (a base linked by `layerswap prepare-base`). None where the directory
    holds no such record. A record without a usable sha256 is one UserError."""
    from layerswap.contracts import EXPORT_META, WEIGHTS_RECORD

    found = [ckpt_dir / name for name in (EXPORT_META, SOURCE_RECORD) if (ckpt_dir / name).is_file()]
    files = _json(found[0]).get(WEIGHTS_RECORD) if found else None
    if files is None:  # no record, or written before records held the weights' sha256: nothing to check against
        return None
    meta = found[0]
    if not isinstance(files, dict) or not files or not all(isinstance(v, str) for v in files.values()):
        raise UserError(f"{meta}: '{WEIGHTS_RECORD}' is not a {{file: sha256}} object; rebuild the model")
    return meta, files


def verify_weights(ckpt_dir: str | Path) -> None:
    """Check a checkpoint's weight files against the sha256 its run recorded (`recorded_weights`), each file hashed
    once per process; a file that differs is one UserError naming it, the record, and the command that rebuilds it."""
    ckpt_dir = Path(ckpt_dir)
    found = recorded_weights(ckpt_dir)
    if found is None:
        return
    record, files = found
    for name, expected in sorted(files.items()):
        path = ckpt_dir / name
        if not path.is_file():
            raise UserError(f"{path}: missing, but {record} lists it; {rebuild_hint(ckpt_dir, record)}")
        if sha256_once(path) != expected:
            raise UserError(
                f"{path}: sha256 differs from {record} (the file changed after training); "
                f"{rebuild_hint(ckpt_dir, record)}"
            )


def weight_files(ckpt: Path) -> list[Path]:
    """The weight files of an exported checkpoint: model.safetensors, or the index and every shard it names."""
    single, index = ckpt / SINGLE_FILE, ckpt / INDEX_FILE
    if single.is_file():
        return [single]
    if not index.is_file():
        return []
    try:
        shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    except (OSError, ValueError, KeyError, AttributeError) as err:
        raise UserError(f"{index}: not a readable safetensors index ({err})") from None
    missing = [s for s in shards if not (ckpt / s).is_file()]
    if missing:
        raise UserError(f"{index}: shard {missing[0]} is missing")
    return [index] + [ckpt / s for s in shards]


def export_record(ckpt: Path) -> dict[str, str]:
    """{weight file name: sha256} of a checkpoint being exported (`layerswap_meta.json` records it beside the weights:
    what `layerswap sft` checks before it records the checkpoint in its run's `checkpoints.json`)."""
    return {p.name: sha256_once(p) for p in weight_files(Path(ckpt))}


def verify_export(ckpt: Path, recorded: dict[str, str], record: Path) -> None:
    """Check an export's weight files against the sha256 recorded at export (`export_record`, in `record`); a file
    that differs or is missing is one UserError naming it and how to rebuild the checkpoint."""
    for name, expected in sorted(recorded.items()):
        path = Path(ckpt) / name
        if not path.is_file():
            raise UserError(
                f"{path}: missing, but {record} lists it; {rebuild_hint(Path(ckpt), Path(ckpt).parent / RUN_RECORD)}"
            )
        if sha256_once(path) != expected:
            raise UserError(
                f"{path}: sha256 differs from the one recorded at export in {record} (the file changed "
                f"after training); {rebuild_hint(Path(ckpt), Path(ckpt).parent / RUN_RECORD)}"
            )


def rebuild_hint(ckpt_dir: Path, record: Path) -> str:
    """The commands that rebuild a run's checkpoint: without the directory the run is no longer complete, so the
    forced `sft` job trains it again (same seed, same weights) and rewrites the record; what read it reruns after.
    A model directory whose own record was read (the base) is rebuilt by forcing the job of its `config.json`."""
    if Path(record).parent == Path(ckpt_dir):
        record = Path(ckpt_dir) / "config.json"
    return (
        f"rebuild it with: rm -r {ckpt_dir} && snakemake --forcerun {record} (with the run's own options, "
        "e.g. --configfile)"
    )


def ties_head(config: dict) -> bool:
    """Whether a model config ties its output head to the input embedding (`tie_word_embeddings: true`): then the head
    IS the embedding, and a checkpoint holds (and a merge writes) the embedding tensor only."""
    return config.get("tie_word_embeddings") is True


class Checkpoint:
    """A HF model directory with safetensors weights (single file or sharded with an index)."""

    def __init__(self, path: str) -> None:
        self.path = str(path)
        root = Path(path)
        if not root.is_dir():
            what = (
                "exists but is not a directory; a checkpoint is a Hugging Face model folder (config.json and "
                "safetensors weights)"
                if root.exists()
                else "checkpoint directory does not exist"
            )
            raise UserError(f"{path}: {what}")
        verify_weights(root)  # before anything is read from it: a changed file is named with how to rebuild it
        if not (root / "config.json").is_file():
            raise UserError(f"{path}: no config.json in checkpoint directory")
        self.config = _json(root / "config.json")
        self.tensors: dict[str, TensorInfo] = {}
        if (root / SINGLE_FILE).is_file():
            self.tensors = read_header(str(root / SINGLE_FILE))
        elif (root / INDEX_FILE).is_file():
            self._read_index(root / INDEX_FILE)
        else:
            pickles = sorted(p.name for p in root.iterdir() if p.name.endswith(PICKLE_SUFFIXES))
            if pickles:
                raise UserError(f"{path}: pickle checkpoint ({pickles[0]}) refused; convert it to safetensors")
            raise UserError(f"{path}: no model.safetensors or {INDEX_FILE} in checkpoint directory")
        fp = root / BASE_FINGERPRINT_FILE
        self.base_fingerprint: str | None = str(_json(fp).get("base_sha256")) if fp.is_file() else None
        self._fds: dict[str, int] = {}

    def _read_index(self, index: Path) -> None:
        weight_map = _json(index).get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise UserError(f"{index}: no weight_map")
        headers: dict[str, dict[str, TensorInfo]] = {}
        for shard in sorted(set(weight_map.values())):
            file = index.parent / str(shard)
            if not file.is_file():
                raise UserError(f"{index}: shard {shard} is missing")
            headers[str(shard)] = read_header(str(file))
        for name, shard in weight_map.items():
            if name not in headers[str(shard)]:
                raise UserError(f"{index}: tensor {name} is not in its shard {shard}")
            self.tensors[name] = headers[str(shard)][name]
        for shard, infos in headers.items():
            extra = sorted(set(infos) - set(weight_map))
            if extra:
                raise UserError(f"{index}: tensor {extra[0]} in shard {shard} is missing from weight_map")

    def read_into(self, name: str, start: int, stop: int, dest: torch.Tensor) -> None:
        """Read elements [start, stop) of flattened tensor `name` into `dest` (1-D, same dtype), checking finiteness."""
        info = self.tensors[name]
        fd = self._fds.get(info.file)
        if fd is None:
            fd = self._fds[info.file] = os.open(info.file, os.O_RDONLY)
        view = dest.view(torch.uint8).numpy()
        pos, offset = 0, info.offset + start * info.itemsize
        while pos < view.nbytes:
            with naming(info.file):  # a read error (EIO) names the file it read
                got = os.preadv(fd, [view[pos:]], offset + pos)
            if got <= 0:
                raise UserError(f"{info.file}: truncated while reading tensor {name}")
            pos += got
        if dest.is_floating_point() and dest.numel():
            lo, hi = torch.aminmax(dest)  # propagates NaN; much faster than isfinite().all()
            if not (math.isfinite(float(lo)) and math.isfinite(float(hi))):
                raise UserError(f"{self.path}: tensor {name} contains NaN or Inf")

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()


def chunk_ranges(shape: tuple[int, ...], chunk: int) -> list[tuple[int, int]]:
    """Element ranges covering a flattened tensor, whole rows per chunk for tensors of 2 or more dims."""
    numel = 1
    for d in shape:
        numel *= d
    step = chunk
    if len(shape) >= 2 and shape[-1] > 0:
        step = max(1, chunk // shape[-1]) * shape[-1]
    return [(s, min(s + step, numel)) for s in range(0, numel, step)] or [(0, 0)]


def write_shard(file: str, entries: list[tuple[str, torch.dtype, tuple[int, ...]]], fill: Fill, chunk: int) -> None:
    """Write one safetensors file, filling each tensor chunk by chunk through `fill(name, start, stop, dest)`."""
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, dtype, shape in entries:
        nbytes = TensorInfo(file, 0, dtype, shape).numel * torch.empty((), dtype=dtype).element_size()
        header[name] = {"dtype": DTYPE_NAMES[dtype], "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    raw = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    # Three rotating buffers per dtype: a background thread writes one while the next chunks are computed.
    buffers: dict[torch.dtype, list[torch.Tensor]] = {}
    pending: dict[int, Future] = {}
    turn = 0
    with open(file, "wb") as f, ThreadPoolExecutor(max_workers=1) as pool:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for name, dtype, shape in entries:
            for start, stop in chunk_ranges(shape, chunk):
                n = stop - start
                ring = buffers.setdefault(dtype, [])
                slot = turn % 3
                turn += 1
                if slot in pending:
                    pending.pop(slot).result()
                while len(ring) <= slot:
                    ring.append(torch.empty(0, dtype=dtype))
                if ring[slot].numel() < n:
                    ring[slot] = torch.empty(max(n, 1), dtype=dtype)
                dest = ring[slot][:n]
                fill(name, start, stop, dest)
                pending[slot] = pool.submit(f.write, dest.view(torch.uint8).numpy())
        for fut in pending.values():
            fut.result()


def write_sharded(
    directory: Path,
    entries: list[tuple[str, torch.dtype, tuple[int, ...]]],
    fill: Fill,
    max_shard_bytes: int,
    chunk: int,
    shown: Path | None = None,
    hidden: Path | None = None,
) -> None:
    """Write tensors `entries` (name, dtype, shape), in order, each filled chunk by chunk through `fill`, as safetensors
    shards `model-0000N-of-0000M.safetensors` of at most `max_shard_bytes` (a larger tensor alone in its shard) in
    `directory`, with their index INDEX_FILE (total size, each tensor's shard), as the Hub's sharded checkpoints.
    An operating-system error names the shard under `shown` (the directory the user asked for, where `directory` is a
    hidden temporary one whose paths start with `hidden`: contracts.naming)."""
    shards: list[list[tuple[str, torch.dtype, tuple[int, ...]]]] = [[]]
    size = 0
    for name, dtype, shape in entries:
        nbytes = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
        if shards[-1] and size + nbytes > max_shard_bytes:
            shards.append([])
            size = 0
        shards[-1].append((name, dtype, shape))
        size += nbytes
    weight_map: dict[str, str] = {}
    total = 0
    for i, part in enumerate(shards):
        file = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        with naming((shown or directory) / file, hidden):
            write_shard(str(directory / file), part, fill, chunk)
        for name, dtype, shape in part:
            weight_map[name] = file
            total += math.prod(shape) * torch.empty((), dtype=dtype).element_size()
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (directory / INDEX_FILE).write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
