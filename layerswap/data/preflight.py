"""`layerswap prestage --verify`: the pre-flight check of every hub artefact a config needs, meant for the login
node before any GPU job is queued. One line per artefact, exit 1 if any fails. No data or weights are downloaded:
datasets are streamed (only their cards land in the HF cache, as `datasets` keeps them), a model's config and
tokenizer files go to a temporary folder.

Per artefact (the list is `layerswap.workflow.prestage.artefacts`):
* model: the repository answers; its gate lets the token through (a file is requested); the installed
  transformers reads its config.json, whose layer count matches `base.num_layers`, and its tokenizer; it has
  safetensors weights; the download size of what prestage fetches (safetensors, JSON, tokenizer files).
* dataset: the installed `datasets` can load it (no loading script, config and split exist, gate passes), read by
  streaming; the columns the normaliser or the evaluation task reads are present; for SFT sources, the rows that
  the language filter selects and the normaliser accepts reach the count the mixes ask (rows are read until then,
  in file order); the size of its data files.

Checks run in parallel threads (network-bound); lines print in the artefacts' order.
"""

from __future__ import annotations

import concurrent.futures
import fnmatch
import os
import sys
import tempfile
import time

from layerswap.data import hub_retry
from layerswap.data.hub import MODEL_PATTERNS, describe, gated_hint, load_error, open_dataset, repo_files
from layerswap.errors import UserError

WORKERS = 8


def _size(n: int | None) -> str:
    if n is None:
        return "size unknown"
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return ""


def _hub_error(err: BaseException, item: dict) -> str:
    """One line for a huggingface_hub error, with what to do."""
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError

    if isinstance(err, GatedRepoError):
        return gated_hint()
    if isinstance(err, RevisionNotFoundError):
        return f"no revision {item.get('revision')!r}"
    if isinstance(err, RepositoryNotFoundError):
        return "not found (or private): check the id" + ("" if _token() else ", or give a token")
    return load_error(err)


def _token() -> str | None:
    from huggingface_hub import get_token

    return get_token()


# ---------------------------------------------------------------------------------------------------------- models
def check_model(item: dict, num_layers: int | None) -> str:
    from huggingface_hub import HfApi, hf_hub_download

    try:
        tree = HfApi().list_repo_tree(item["hub_id"], revision=item.get("revision"), recursive=True)
        files = {f.path: getattr(f, "size", None) for f in tree if getattr(f, "size", None) is not None}
    except Exception as err:  # noqa: BLE001
        raise UserError(_hub_error(err, item)) from None
    fetched = {
        f: s for f, s in files.items() if any(fnmatch.fnmatch(f, p) for p in item.get("allow_patterns", MODEL_PATTERNS))
    }
    weights = [f for f in fetched if f.endswith(".safetensors")]
    if not weights:
        pickles = [f for f in files if f.endswith((".bin", ".pth", ".pt"))]
        raise UserError(
            "no safetensors weights"
            + (f" (only pickle: {', '.join(pickles[:2])})" if pickles else "")
            + "; layerswap loads safetensors only"
        )
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for name in [f for f in fetched if f.endswith(".json") and "/" not in f] + [
                f for f in fetched if f.startswith("tokenizer")
            ]:
                hf_hub_download(item["hub_id"], name, revision=item.get("revision"), local_dir=tmp)
        except Exception as err:  # noqa: BLE001
            raise UserError(_hub_error(err, item)) from None
        from transformers import AutoConfig, AutoTokenizer

        try:
            cfg = AutoConfig.from_pretrained(tmp)
            AutoTokenizer.from_pretrained(tmp)
        except Exception as err:  # noqa: BLE001
            raise UserError(
                f"transformers cannot read its config or tokenizer: {type(err).__name__}: "
                f"{str(err).splitlines()[0] if str(err) else ''}"
            ) from None
    layers = getattr(cfg, "num_hidden_layers", None)
    if num_layers is not None and layers != num_layers:
        raise UserError(f"{layers} layers, the config says base.num_layers: {num_layers}")
    return (
        f"{cfg.model_type}, {layers} layers, {len(weights)} safetensors file(s), "
        f"{_size(sum(s or 0 for s in fetched.values()))} to fetch"
    )


# -------------------------------------------------------------------------------------------------------- datasets
def _data_size(item: dict) -> int | None:
    """Bytes of the data files that the artefact's split reads (None where they cannot be listed)."""
    import datasets
    from huggingface_hub import HfFileSystem

    try:
        if item.get("builder"):
            import fsspec

            urls = item["data_files"] if isinstance(item["data_files"], list) else [item["data_files"]]
            return sum(fsspec.filesystem(u.split("://")[0]).size(u) or 0 for u in urls)
        if item.get("data_files"):  # the hf:// paths the streamed load read
            files = repo_files(item, download=False)[1]
        else:
            builder = datasets.load_dataset_builder(item["hub_id"], item.get("subset"), revision=item.get("revision"))
            files = (builder.config.data_files or {}).get(item.get("split") or "train") or []
        fs = HfFileSystem()
        return sum(fs.size(str(f)) or 0 for f in files)
    except Exception:  # noqa: BLE001 - the size is informative; the load below reports real faults
        return None


def check_dataset(item: dict, scan_cap: int = 2_000_000) -> str:
    from layerswap.data.mixes import examples, to_schema

    spec = item.get("spec")
    try:
        rows = iter(open_dataset(item, streaming=True))
        first = next(rows, None)
    except Exception as err:  # noqa: BLE001 - datasets raises many kinds, while loading or streaming
        raise UserError(load_error(err)) from None
    if first is None:
        raise UserError("the split has no rows")
    needed = list(item.get("columns") or [])
    if spec:
        needed += [spec["language_column"]] if spec.get("language_column") else []
    missing = [c for c in needed if c not in first]
    if missing:
        raise UserError(f"no column '{missing[0]}'; the dataset has: {', '.join(first)}")
    size = _size(_data_size(item))
    if not spec:
        return f"{len(first)} columns ({', '.join(list(first)[:6])}{', ...' if len(first) > 6 else ''}), {size}"
    # SFT source: count what the language filter selects and the normaliser accepts, until the mix's count
    n, column, value = int(spec["n"]), spec.get("language_column"), spec.get("language_value")
    scanned = in_language = 0
    usable: set = set()
    row = first
    while row is not None and len(usable) < n and scanned < scan_cap:
        scanned += 1
        if not column or row.get(column) == value:
            in_language += 1
            doc = to_schema(row, spec["schema"], spec.get("columns"), spec["name"])
            try:
                usable.update(examples(doc, spec["schema"], spec["lang"]))
            except (KeyError, TypeError, ValueError, AttributeError) as err:
                raise UserError(
                    f"row {scanned - 1}: the {spec['schema']} normaliser cannot read it ({type(err).__name__}: {err})"
                ) from None
        row = next(rows, None)
    if column and in_language == 0:
        raise UserError(f"{column} = {value!r} selects no rows (of {scanned} read); check the language value")
    if len(usable) < n:
        where = "in the split" if row is None else f"in the first {scanned} rows"
        raise UserError(f"only {len(usable)} usable examples {where}; the mix asks for {n}")
    return (
        f"{n} usable examples in the first {scanned} rows"
        + (f" ({column} = {value!r})" if column else "")
        + f", {size}"
    )


# ------------------------------------------------------------------------------------------------------------ all
def verify(items: list[dict], base_layers: int | None, out=None, policy: hub_retry.Policy = hub_retry.Policy()) -> bool:
    """Check every artefact (`layerswap.workflow.prestage.artefacts`; the base model's layer count against
    `base_layers`, the config's `base.num_layers`); print one line each; True when all pass. A check that fails for a
    transient reason (a reset, a timeout, 429, 5xx) is run again as `policy` says, with a line per retry
    (`layerswap.data.hub_retry`); only what still fails after its tries, or fails for good, is a FAIL line."""
    out = out or sys.stdout
    start = time.monotonic()

    def check(item: dict) -> str:
        if item["kind"] == "model":
            return check_model(item, base_layers if item.get("purpose") == "base model" else None)
        return check_dataset(item)

    def one(item: dict) -> tuple[bool, str]:
        try:
            return True, hub_retry.call(describe(item), lambda: check(item), policy, out)
        except Exception as err:  # noqa: BLE001 - a check must never take the others down
            what = str(err) if isinstance(err, UserError) else f"{type(err).__name__}: {err}"
            tries = f" (still failing after {policy.tries} tries)" if hub_retry.transient(err) else ""
            return False, what + tries

    # Import the HF libraries here, in one thread, before the checks start: a first `import transformers` is not
    # thread-safe, and a `datasets` call in another thread that finds the half-imported module fails
    # ("module 'transformers' has no attribute 'PreTrainedTokenizerBase'", seen on a fresh venv).
    import datasets  # noqa: F401
    from transformers import AutoConfig, AutoTokenizer, PreTrainedTokenizerBase  # noqa: F401

    ok = True
    with concurrent.futures.ThreadPoolExecutor(WORKERS) as pool:
        for item, (passed, what) in zip(items, pool.map(one, items)):
            ok &= passed
            out.write(f"{'ok  ' if passed else 'FAIL'}  {describe(item)}: {what}\n")  # one write: retries print too
            out.flush()
    failed = "all passed" if ok else "FAILED: fix the lines marked FAIL before queueing jobs"
    print(
        f"{len(items)} artefacts checked in {time.monotonic() - start:.1f} s against "
        f"{os.environ.get('HF_ENDPOINT', 'https://huggingface.co')}: {failed}",
        file=out,
    )
    return ok
