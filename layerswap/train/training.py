"""Shared training pieces: tokenised datasets, Trainer arguments, atomic checkpoint export, progress logging."""

from __future__ import annotations

import hashlib
import json
import shutil
import threading
import time
from pathlib import Path
from typing import Any, Callable

import torch
from transformers import PreTrainedTokenizerBase, TrainerCallback

from layerswap.checkpoints import export_record
from layerswap.contracts import WEIGHTS_RECORD, naming, replace_dir, write_text_atomic
from layerswap.errors import UserError


class TokenDataset(torch.utils.data.Dataset):
    """Pre-tokenised examples: dicts of input_ids and labels (lists of ints)."""

    def __init__(self, examples: list[dict[str, list[int]]]):
        self.examples = examples

    def __len__(self) -> int:
        return len(self.examples)

    def __getitem__(self, i: int) -> dict[str, list[int]]:
        return self.examples[i]


def sft_examples(
    rows: list[dict], tokenizer: PreTrainedTokenizerBase, template: str, seq_len: int, chat_template: bool = True
) -> TokenDataset:
    """Prompt/response pairs with the loss on the response only (prompt labels are -100).

    Uses the tokenizer's chat template when it has one and `chat_template` is true, else `template` (e.g.
    "Q: {prompt}\\nA:"): the format the evaluation prompts in (the toy tasks prompt raw "Q: ...\\nA:").
    """
    examples = []
    for row in rows:
        if chat_template and tokenizer.chat_template:
            messages = [{"role": "user", "content": row["prompt"]}]
            prompt_ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
            if isinstance(prompt_ids, dict) or hasattr(prompt_ids, "keys"):
                prompt_ids = prompt_ids["input_ids"]
            response_ids = tokenizer(row["response"], add_special_tokens=False)["input_ids"]
        else:
            prompt_ids = tokenizer(template.format(prompt=row["prompt"]), add_special_tokens=False)["input_ids"]
            response_ids = tokenizer(" " + row["response"], add_special_tokens=False)["input_ids"]
        response_ids = response_ids + [tokenizer.eos_token_id]
        ids = (list(prompt_ids) + response_ids)[:seq_len]
        labels = ([-100] * len(prompt_ids) + response_ids)[:seq_len]
        examples.append({"input_ids": ids, "labels": labels})
    return TokenDataset(examples)


# Options of the load that transformers (5.x) records in a tokenizer's init kwargs and writes to tokenizer_config.json:
# `local_files_only` is forced to true by offline mode (HF_HUB_OFFLINE), so without this the same export's bytes would
# depend on the environment of the job that wrote it (a SLURM job's vs a local run's).
LOAD_OPTIONS = ("is_local", "local_files_only")


def save_tokenizer(tokenizer: PreTrainedTokenizerBase, directory: Path) -> None:
    """`tokenizer.save_pretrained(directory)` without the options it was loaded with (LOAD_OPTIONS)."""
    for key in LOAD_OPTIONS:
        tokenizer.init_kwargs.pop(key, None)
    tokenizer.save_pretrained(directory)


class Background:
    """One task at a time on a worker thread, so a checkpoint's weights are written and hashed while training goes on.

    At paper scale an fp32 export is 32 GB: ~107 s to write (0.3 GB/s measured on an H100 node) and ~50 s of sha256 at
    the ~630 MiB/s docs/SAFE_IO.md measures; done in the training loop, every rank waited for them at each export.
    File writes, sha256 and file reads release the GIL, so a thread is enough (a process would copy nothing less).
    `submit` first waits for the task before it (one export's copy in memory at a time), and `wait` re-raises a
    task's error in the caller: a failed export stops training at the next save."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def submit(self, name: str, task: Callable[[], None]) -> None:
        self.wait()

        def run() -> None:
            try:
                task()
            except BaseException as err:  # handed to the next wait(), in the training thread
                self._error = err

        self._thread = threading.Thread(target=run, name=f"layerswap {name}")
        self._thread.start()

    @property
    def pending(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def wait(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._error is not None:
            error, self._error = self._error, None
            raise error


def export_model(
    model: Any,
    tokenizer: PreTrainedTokenizerBase,
    out_dir: Path,
    meta: dict,
    state_dict: dict | None = None,
    extra: Callable[[Path], None] | None = None,
    background: Background | None = None,
) -> None:
    """Write model (safetensors), tokenizer and `layerswap_meta.json` to out_dir atomically.

    Everything goes to a hidden sibling `.tmp-<name>/` first (`extra(tmp)` may add files, e.g. a LoRA adapter) and
    is renamed into place at the end, so a crash at any point leaves no `out_dir` without its full file set. File
    modes follow the umask (group-readable under 022 or 027), although safetensors writes 0600.
    `state_dict` (e.g. gathered from FSDP) replaces the model's own. A `base_sha256` in meta also goes to
    `layerswap_base.json`, which the merge engine compares across experts. The meta records the sha256 of the weight
    files as written (`weights_sha256`), so a file changed later is never recorded as the export.

    Given `background`, only the tokenizer is written here; the weights (`save_pretrained` of `state_dict`, `extra`),
    their hash, the meta and the rename into place are handed to it: the caller goes on while the export is written
    (`Background.wait` before relying on it). Then `state_dict` must be the caller's own copy: training goes on and
    changes the model's weights in place (layerswap.train.export.export_checkpoint gives one).
    """
    out_dir = Path(out_dir)
    tmp = out_dir.with_name(".tmp-" + out_dir.name)
    shutil.rmtree(tmp, ignore_errors=True)  # an interrupted export's folder
    if tmp.exists() or tmp.is_symlink():  # a file or link: not one an export made; name it, never write through it
        raise UserError(
            f"{tmp}: a file is in the way of the export of {out_dir} (its temporary folder); move it away and run again"
        )

    def write() -> None:
        try:
            with naming(out_dir):  # disk full, read-only, ...: one line naming the export
                model.save_pretrained(tmp, state_dict=state_dict, safe_serialization=True)
                if extra is not None:
                    extra(tmp)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        _finish_export(tmp, out_dir, meta)

    try:
        with naming(out_dir):
            tmp.mkdir(parents=True)
            save_tokenizer(tokenizer, tmp)  # in the caller's thread: training's data collator pads with it
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if background is None:
        write()
    else:
        background.submit(f"export {out_dir.name}", write)


def _finish_export(tmp: Path, out_dir: Path, meta: dict) -> None:
    """Record the weights' sha256 in the export's meta, then rename it into place (export_model)."""
    try:
        started = time.monotonic()
        with naming(out_dir):
            meta = {**meta, WEIGHTS_RECORD: export_record(tmp)}  # checked before the run records the export
            (tmp / "layerswap_meta.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
            if "base_sha256" in meta:
                (tmp / "layerswap_base.json").write_text(json.dumps({"base_sha256": meta["base_sha256"]}) + "\n")
        replace_dir(tmp, out_dir)  # modes follow the umask (safetensors writes 0600)
        print(f"{out_dir}: exported (weights hashed in {time.monotonic() - started:.1f} s)", flush=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def run_key(run: dict) -> str:
    """The key of a run's resumable Trainer state (`trainer-<key>/`): a hash of everything that defines the run, so a
    changed run never resumes from another run's state."""
    return hashlib.sha256(json.dumps(run, sort_keys=True).encode()).hexdigest()[:12]


def remove_other_states(folder: Path, key: str) -> None:
    """Delete the Trainer states in `folder` of runs other than `key`."""
    for stale in Path(folder).glob("trainer-*"):
        if stale.name != f"trainer-{key}":
            shutil.rmtree(stale)


def trainer_state(folder: Path, key: str) -> Path:
    """`<folder>/trainer-<key>/`, made on a fresh start, which also begins the progress log `<folder>/log.jsonl`
    anew (a resumed run keeps it)."""
    state = Path(folder) / f"trainer-{key}"
    if not state.is_dir():
        (Path(folder) / "log.jsonl").unlink(missing_ok=True)
        state.mkdir(parents=True)
    return state


def last_complete_checkpoint(work: Path) -> str | None:
    """The newest `checkpoint-N` in `work` whose Trainer state was fully written (trainer_state.json is the last
    file the Trainer writes), or None."""
    done = [
        d
        for d in Path(work).glob("checkpoint-*")
        if d.name.split("-")[-1].isdigit() and (d / "trainer_state.json").is_file()
    ]
    return str(max(done, key=lambda d: int(d.name.split("-")[-1]))) if done else None


class JsonlLogger(TrainerCallback):
    """Appends every Trainer log (loss, lr, step, tokens) to a JSONL file, so progress is visible while a run goes on.

    Each line also gets `tokens/s`: non-padding input tokens per second since the previous log line, over all
    processes (from the Trainer's `num_input_tokens_seen`; needs `include_num_input_tokens_seen`); the final
    summary line gets the average over the whole session. A run resumed from a Trainer checkpoint first drops the
    lines after that checkpoint's step (the killed session logged them; the resumed one logs them again), so the
    log keeps one line per logged step.
    """

    def __init__(self, path: Path):
        self.path = Path(path)
        self._last: tuple[float, int] | None = None
        self._begin = 0

    def on_train_begin(self, args, state, control, **kwargs):  # noqa: D102 (Trainer hook)
        self._last = (time.monotonic(), state.num_input_tokens_seen)
        self._begin = state.num_input_tokens_seen
        if state.global_step and state.is_world_process_zero and self.path.is_file():  # resumed
            lines = self.path.read_text().splitlines(keepends=True)
            kept = [line for line in lines if _logged_by_step(line, state.global_step)]
            if kept != lines:
                write_text_atomic(self.path, "".join(kept))

    def on_log(self, args, state, control, logs=None, **kwargs):  # noqa: D102 (Trainer hook)
        if not (logs and state.is_world_process_zero):
            return
        row = {"step": state.global_step, **logs}
        now, tokens = time.monotonic(), state.num_input_tokens_seen
        if self._last is not None and now > self._last[0] and tokens > self._last[1]:
            row["tokens/s"] = round((tokens - self._last[1]) / (now - self._last[0]), 1)
            self._last = (now, tokens)
        elif (
            logs.get("train_runtime") and tokens > self._begin
        ):  # the end-of-training summary: the average over this session
            row["tokens/s"] = round((tokens - self._begin) / logs["train_runtime"], 1)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as f:
            f.write(json.dumps(row) + "\n")


def _logged_by_step(line: str, step: int) -> bool:
    """A log line written by the time the Trainer reached `step`: a step line up to it (the summary line, with
    `train_loss`, comes only at the end of training)."""
    try:
        row = json.loads(line)
    except ValueError:
        return False  # a line cut by the kill
    return isinstance(row, dict) and "train_loss" not in row and row.get("step", step + 1) <= step
