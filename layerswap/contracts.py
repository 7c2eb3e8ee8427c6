"""File contracts that several stages share, each with one owner: merge pair ids, model ids, selection metrics (which
evaluation file and score each reads), selection files, atomic writes of result files. (The files themselves are
described in docs/ARCHITECTURE.md.)"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

from layerswap.errors import UserError


def pair_id(lang_rank: int, math_rank: int) -> str:
    """A merge pair's id: `l<i>m<j>`, the language expert of rank i with the math expert of rank j."""
    return f"l{lang_rank}m{math_rank}"


def pair_ids(top_k: int) -> list[str]:
    """Every pair of the top-k experts, i-major (l1m1, l1m2, ..., lkmk)."""
    return [pair_id(i, j) for i in range(1, top_k + 1) for j in range(1, top_k + 1)]


BASE_MODEL_ID = "base"  # the base model's evaluations: results/evals/base/


def checkpoint_model_id(run: str, checkpoint: str) -> str:
    """An expert checkpoint's model id, `ckpt/<run>/<checkpoint>`: the folder of its evaluations under results/evals/
    and the name the tables give it."""
    return f"ckpt/{run}/{checkpoint}"


#: The soup-then-swap merges (Table 6; `layerswap recipes --soup-then-swap`, of the merge config that
#: merges.soup_then_swap names): their config in model ids, recipe and evaluation paths, and their members, one of
#: each per language (the language's soup, the soup of every language's experts, each swapped with the math soup).
SOUP_SWAP = "soupswap"
SOUPS = ["langsoup", "multisoup"]


def merge_model_id(config: str, lang: str, member: str) -> str:
    """A merge's model id, `merge/<config>/<lang>/<member>`: member a pair id `l<i>m<j>`, or for the soup-then-swap
    recipes (config `SOUP_SWAP`) one of `SOUPS`; the folder of its evaluations under results/evals/."""
    return f"merge/{config}/{lang}/{member}"


def merge_model_parts(model_id: str) -> tuple[str, str, str]:
    """(config, lang, member) of a merge's model id (`merge_model_id`); anything else is a ValueError."""
    kind, config, lang, member = model_id.split("/")
    if kind != "merge":
        raise ValueError(f"not a merge model id: {model_id!r}")
    return config, lang, member


#: An export's own record, beside its weights (layerswap/train/training.py: export_model), and its key holding
#: {weight file: sha256} as written.
EXPORT_META = "layerswap_meta.json"
WEIGHTS_RECORD = "weights_sha256"
#: An expert checkpoint's directory name in its run's folder: `s<samples, 7 digits>`, the one owner of that name (the
#: SFT job writes it, the workflow plans it, checkpoint reads recognise it).
CHECKPOINT_DIR_RE = re.compile(r"^s\d{7}$")


def checkpoint_name(samples: int) -> str:
    """The directory name of the checkpoint exported after `samples` training samples."""
    return f"s{samples:07d}"


def checkpoint_samples(num_samples: int, every: int) -> list[int]:
    """Samples seen at each checkpoint of a run: every, 2*every, ..., up to num_samples."""
    return list(range(every, num_samples + 1, every))


def read_selection(path: str | Path, fields: tuple[str, ...] = ("rank", "path")) -> list[dict]:
    """The 'selected' entries of a selection file (`layerswap select`), by rank; each has an int 'rank' and the other
    `fields` ('run', 'checkpoint', 'path'). A missing or malformed file is one error naming it."""
    path = Path(path)
    data = read_json(path, "selection")
    selected = data.get("selected") if isinstance(data, dict) else None
    if not isinstance(selected, list) or not selected:
        raise UserError(f"{path}: not a selection file with a non-empty 'selected' list")
    for n, entry in enumerate(selected):
        if not isinstance(entry, dict) or any(entry.get(k) in (None, "") for k in ("rank", *fields)):
            raise UserError(
                f"{path}: selected[{n}] needs " + ", ".join(f"'{k}'" for k in dict.fromkeys(("rank", *fields)))
            )
        if not isinstance(entry["rank"], int) or isinstance(entry["rank"], bool):
            raise UserError(f"{path}: selected[{n}].rank must be an integer")
    return sorted(selected, key=lambda e: e["rank"])


def read_evaluation_index(path: str | Path) -> dict:
    """A run's evaluation index (`layerswap evaluate --index`, `layerswap checkpoint-index`): its checkpoints, their
    files and the files' sha256. A missing or malformed file is one error naming it."""
    index = read_json(path, "evaluation index")
    if not (
        isinstance(index, dict)
        and isinstance(index.get("checkpoints"), list)
        and isinstance(index.get("files"), dict)
        and isinstance(index.get("sha256", {}), dict)
    ):
        raise UserError(f"evaluation index {path}: needs 'checkpoints' (a list), 'files' and 'sha256' (objects)")
    return index


def read_text(path: str | Path, what: str = "file") -> str:
    """A UTF-8 text file's content; a missing or unreadable file, or one that is not UTF-8, is one UserError naming it
    (and the line of the first bad byte)."""
    try:
        data = Path(path).read_bytes()
    except OSError as err:
        raise UserError(f"cannot read {what} {path}: {err.strerror or err}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise UserError(
            f"{what} {path} line {line}: not UTF-8 text (byte 0x{data[err.start]:02x}); save it as UTF-8"
        ) from None


def read_json(path: str | Path, kind: str, sha256: str | None = None, recorded_in: str | Path | None = None):
    """A JSON file the workflow wrote (`kind` names it: evaluation, selection, index, ...), the one reader of results
    JSON: a missing file, one that is unreadable, not UTF-8 or not valid JSON (truncated, edited) is one UserError
    naming the file (and the line and column of the fault). Given `sha256` (what the record `recorded_in` says the
    file had when it was written), a file whose bytes differ is refused the same way, before it is used."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"missing {kind} file {path}")
    text = read_text(path, f"{kind} file")
    if sha256 is not None:
        import hashlib

        if hashlib.sha256(text.encode("utf-8")).hexdigest() != sha256:
            raise UserError(
                f"{kind} file {path}: sha256 differs from the one {recorded_in or 'its index'} records "
                f"(the file changed after it was written); {REBUILD}"
            )
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise UserError(
            f"{kind} file {path} line {err.lineno} column {err.colno}: not valid JSON ({err.msg}); {REBUILD}"
        ) from None


#: How to rebuild a damaged result file (a file no rule declares, e.g. a checkpoint evaluation, is not rebuilt just
#: because it is deleted): the audit compares it with the manifest and names the job (docs/REPAIR.md).
REBUILD = "layerswap audit --repair names the job that rebuilds it (docs/REPAIR.md)"


def write_json_atomic(path: str | Path, data) -> None:
    """`data` as JSON (indent 1, sorted keys, trailing newline), written atomically: the layout of every JSON record the
    workflow writes (selections, recipes, indexes, manifests), so equal content gives equal bytes."""
    write_text_atomic(path, json.dumps(data, indent=1, sort_keys=True) + "\n")


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write `text` (UTF-8) to `path` atomically (see write_bytes_atomic)."""
    write_bytes_atomic(path, text.encode("utf-8"))


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    """Write `data` to `path` through a hidden temporary file in the same folder, renamed into place: a reader (or a
    killed job) never sees a half-written result file. The file's mode follows the umask (as `open` makes it)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        with naming(path, hidden=tmp):
            tmp.write_bytes(data)
            os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def naming(path: str | Path, hidden: str | Path | None = None) -> Iterator[None]:
    """Attach `path` to an operating-system error raised inside that names no file, or names a hidden temporary
    file whose path starts with `hidden`, so the one-line report of the entry point (layerswap/cli.py) names the
    file or directory the user asked for: an OSError without a file name (a failed `write()`: disk full, I/O error),
    or a library error that carries only an OS error code (safetensors' Rust writer: "... I/O error: No space left
    on device (os error 28)"), turned into that OSError."""
    try:
        yield
    except OSError as err:
        named = err.filename is not None and not (hidden is not None and str(err.filename).startswith(str(hidden)))
        if err.errno is not None and not named:  # (an OSError("text") has no errno: its text is left as it is)
            err.filename = str(path)
        raise
    except Exception as err:  # noqa: BLE001 - only errors carrying an OS error code are turned; others re-raised
        code = re.search(r"\(os error (\d+)\)", str(err))
        if code is None:
            raise
        raise OSError(int(code[1]), os.strerror(int(code[1])), str(path)) from err


def umask() -> int:
    """The process umask (read from /proc where it can be, so it is never changed, not even for an instant)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def follow_umask(root: Path) -> None:
    """Give `root` and everything under it the modes a plain `open`/`mkdir` would have (0o666/0o777 minus the umask):
    `tempfile.mkdtemp` makes 0700 folders and safetensors' writer 0600 files, which a group could not read. A file
    system without modes (chmod refused with EPERM/ENOTSUP) keeps its own."""
    mask = umask()
    paths = [(root, True)]
    for dirpath, dirnames, filenames in os.walk(root):
        paths += [(Path(dirpath, n), True) for n in dirnames]
        paths += [(Path(dirpath, n), False) for n in filenames if not os.path.islink(os.path.join(dirpath, n))]
    for path, is_dir in paths:
        full = is_dir or os.stat(path).st_mode & 0o111  # directories and executables keep their x bits
        try:
            os.chmod(path, (0o777 if full else 0o666) & ~mask)
        except OSError as err:
            if err.errno not in (errno.EPERM, errno.ENOTSUP):
                raise


def refuse_unsafe_target(out: str | Path, label: str | None = None) -> None:
    """A directory no output ever replaces (its content would be deleted): the file system root, the home directory,
    and the working directory or any folder above it. `label` names `out` in the error (default: the path)."""
    real = Path(os.path.realpath(out))
    cwd = Path(os.path.realpath(os.getcwd()))
    home = Path(os.path.realpath(os.path.expanduser("~")))
    reason = (
        "the file system root"
        if real == Path(real.anchor)
        else "the home directory"
        if real == home
        else "the working directory"
        if real == cwd
        else "a parent of the working directory"
        if real in cwd.parents
        else None
    )
    if reason is not None:
        raise UserError(
            f"{label or out} is {reason}, which an output never replaces: name a new or empty directory "
            "(nothing was changed)"
        )


def replace_dir(tmp: Path, out: Path) -> None:
    """Put the finished directory `tmp` (made beside `out`) in place of `out`, an old `out` moved aside first and then
    removed: a reader finds the old directory or the new one, never a mix or a partial one. Modes follow the umask
    (follow_umask). The root, home and working directories (or a parent of it) are never replaced."""
    out = Path(os.path.abspath(out))
    refuse_unsafe_target(out)
    follow_umask(tmp)
    if not (out.exists() or out.is_symlink()):
        os.replace(tmp, out)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
    try:
        os.replace(out, old / "x")
    except BaseException:
        old.rmdir()  # nothing moved: no hidden folder left behind
        raise
    try:
        os.replace(tmp, out)
    except BaseException:
        os.replace(old / "x", out)  # the old directory goes back
        old.rmdir()
        raise
    shutil.rmtree(old)


#: The evaluation store's record of what fed each result file (layerswap.evaluation.store writes it as it copies a
#: result; layerswap.audit.store_check reads it): `<store>/../fed/<sha256 of the file's path>.json`.
def store_fed_record(store_root: str | Path, dest: str | Path) -> Path:
    import hashlib
    import os

    name = hashlib.sha256(os.path.normpath(str(dest)).encode()).hexdigest()
    return Path(store_root).parent / "fed" / name[:2] / f"{name}.json"


def store_entry_key(doc) -> str | None:
    """The key an evaluation store entry's `key.json` hashes to (None if it is not one): the sha256 of its job's hash
    (key.json's `job`) and its model document, as layerswap.evaluation.store computes keys."""
    import hashlib

    if not isinstance(doc, dict) or not isinstance(doc.get("job"), str) or not isinstance(doc.get("model"), dict):
        return None
    blob = json.dumps({"job": doc["job"], "model": doc["model"]}, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()
