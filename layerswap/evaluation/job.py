"""An evaluation job's settings, typed: what `layerswap evaluate` and `layerswap evaluate-merges` compute every model's
results with, read once from the command line the rule writes (layerswap.workflow.words.evaluate_shell).

The evaluation reads its settings from here, and so do the store's key (layerswap.evaluation.store.job_key), the
store entry's record of how to evaluate a model again (`record`) and the audit that does so
(layerswap.audit.reevaluate: `from_record`, `argv`). One list of fields: a setting added here reaches the key, the
record and the re-evaluation together (tests/test_eval_job.py holds them to it).

Not here: what one invocation evaluates and where it writes (--model, --out-dir, --index, --store, --only-*,
--verbose): those are not what a result is computed from.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

from layerswap.errors import UserError
from layerswap.evaluation.tasks import (
    TASK_SETS,
    BenchmarkPlan,
    TaskSettings,
    job_backends,
    parse_benchmarks,
    plan_benchmarks,
)

COMMANDS = ("evaluate", "evaluate-merges")  # the commands whose jobs these are (the store's key names the command)


@dataclasses.dataclass(frozen=True)
class EvaluationJob:
    command: str  # COMMANDS: whose code computes the results (the store key's `code`)
    benchmarks_json: str  # --benchmarks-json: {benchmark: layerswap.evaluation.tasks.TaskSettings}
    batch_size: int
    data_dir: str | None = None  # the toy task set's data folder (unused by paper)
    seed: int = 0
    threads: int = 1  # torch CPU threads
    device: str = "auto"
    dtype: str = "auto"
    task_set: str = "toy"
    backend: str = "hf"  # of every benchmark whose settings name none
    hf_home: str | None = None
    context_tokens: int | None = None  # keyed and recorded only where given, so keys without it stay

    def __post_init__(self) -> None:
        if self.command not in COMMANDS:
            raise UserError(f"evaluation job: command {self.command!r}; known: {', '.join(COMMANDS)}")
        if self.task_set not in TASK_SETS:
            raise UserError(f"--task-set {self.task_set}: known: {', '.join(TASK_SETS)}")
        if self.task_set == "toy" and self.data_dir is None:
            raise UserError("--data-dir is required with --task-set toy")
        if self.batch_size < 1 or self.threads < 1:
            raise UserError("--batch-size and --threads must be >= 1")
        if self.context_tokens is not None and self.context_tokens < 1:
            raise UserError(f"--context-tokens {self.context_tokens}: must be >= 1")

    @classmethod
    def from_args(cls, args, command: str) -> EvaluationJob:
        """The settings of a parsed command line (`add_arguments` of layerswap.evaluation.evaluate); a measurement
        script's namespace may leave out those with a default."""
        values = {f.name: getattr(args, f.name) for f in dataclasses.fields(cls)[1:] if hasattr(args, f.name)}
        if values.get("data_dir") is not None:
            values["data_dir"] = str(values["data_dir"])  # argparse gives a Path; the record holds text
        return cls(command=command, **values)

    @classmethod
    def from_record(cls, doc: dict) -> EvaluationJob:
        """The settings a store entry records (`record`, plus the model's `source`), checked as a command's params."""
        from layerswap.command_params import build

        return build(cls, {k: v for k, v in doc.items() if k != "source"}, "store entry args")

    def record(self) -> dict:
        """What evaluates a model of this job again without the store (`layerswap audit --reevaluate-store`): kept in
        the entry's key.json beside the key's documents, not hashed into the key."""
        doc = dataclasses.asdict(self)
        if self.context_tokens is None:
            del doc["context_tokens"]
        return doc

    def argv(self) -> list[str]:
        """The command-line flags that give these settings (the command's own name, --model and --out-dir apart)."""
        out = []
        for name, value in self.record().items():
            if name != "command" and value is not None:
                out += [f"--{name.replace('_', '-')}", str(value)]
        return out

    @functools.cached_property
    def spec(self) -> dict[str, TaskSettings]:
        """The benchmarks' settings, parsed once (the key, the plans and the backends read them)."""
        return parse_benchmarks(self.benchmarks_json)

    def backends(self) -> dict[str, str]:
        """{benchmark: backend}: its own where its settings name one, else the job's."""
        return job_backends(self.spec, self.backend)

    def backend_key(self) -> str | dict[str, str]:
        """The job's backend as its key holds it: one name, or {benchmark: backend} where a benchmark names another."""
        backends = self.backends()
        return self.backend if set(backends.values()) == {self.backend} else backends

    def batch_sizes(self) -> dict[str, dict[str, int]]:
        """{benchmark: {language key: batch}} of the benchmarks whose settings give keys their own batch."""
        return {b: cfg.batch_sizes for b, cfg in self.spec.items() if cfg.batch_sizes}

    def plans(self) -> list[BenchmarkPlan]:
        """The benchmarks' plans: the paper's lm-eval tasks, or the toy task set's over `data_dir`."""
        if self.task_set == "paper":
            from layerswap.evaluation.paper_tasks import plan_paper

            return plan_paper(self.spec)
        return plan_benchmarks(Path(self.data_dir), self.spec)

    def resolved(self, torch) -> tuple[str, str]:
        """(device, dtype) as the job computes: `auto` resolved on this machine."""
        from layerswap.evaluation.hosts import resolve_device, resolve_dtype

        return resolve_device(self.device, torch), resolve_dtype(self.dtype, self.device, torch)
