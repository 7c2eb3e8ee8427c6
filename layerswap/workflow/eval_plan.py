"""The evaluation plan of a config, counted before anything runs: per evaluation job, the models x language keys x
items it evaluates and the GPU time that work takes; per rule, its jobs summed.

`layerswap cost` prints the plan and counts the evaluation and selection stages' GPU-hours from it; each evaluation
job's time limit comes from its own planned work (layerswap/workflow/resources.py). Only worlds sized for a GPU have
rates (layerswap/workflow/batch_fit.py: Sizing): the toy world's evaluations run on the CPU in seconds and keep their
fixed requests.

Per language key of a benchmark (its lengths: layerswap/workflow/token_counts.py, counted from the pre-staged data or
from length factors; its batch: batch_fit.py, the largest that fits the GPU), on its backend (`backend_for`):
- log-likelihood, HF: lm-eval scores the choices of an item whose continuations are one token each (the letters A-D
  of Belebele and MMLU) in one forward pass over its prompt (HFLM groups requests by context), else one pass per
  choice; prompt tokens at the prefill rate, plus attention over the context (`attention_share`);
- log-likelihood, vLLM (lm-eval's wrapper): one full prompt per choice with prompt log-probs, which vLLM serves
  without its prefix cache (lm-eval issue 2418): `requests` x the prompt;
- generation: per batch, the prompts' prefill, then the budget's decode steps (a batch runs until its longest answer
  stops: the budget is what counts). A decode step reads the weights and each sequence's KV cache once: at the
  H100's memory bandwidth x an efficiency (estimate), and on HF never below the step time measured there (its
  per-step overhead); on vLLM the batch's sequences run as many at once as its KV pool holds, and a prompt prefix that
  every item shares (a few-shot block in a fixed order) is prefilled once (prefix caching; MGSM's shots come in a
  per-item order, so it shares none).
Per model: its load (a checkpoint read; a merge built on the CPU and loaded, or only loaded where the build of the next
merge overlaps the current evaluation). Per job: start-up and the first generation's warm-up. Every rate names its
source; "measured" ones come from docs/MEASUREMENTS.md.

The jobs are the DAG's: checkpoint evaluations of what selection ranks by, the constraints no weight reads on the
leaders only (selection.constraint_evaluation: leaders, one evaluate_checkpoint_leaders job per expert type), merge
evaluations per config or in groups (evaluation.merge_configs_per_job). `Features` says whether merge builds overlap
evaluation (every merge evaluation job builds one ahead: layerswap/merge/merger.py).
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict

from layerswap.benchmarks import BENCHMARKS, MATH
from layerswap.config import expert_type
from layerswap.merge.registry import best_of_methods
from layerswap.workflow.merge_groups import FAMILY, family

H100 = "one H100 80GB, HF backend, Llama-3.1-8B shapes, bf16"
MEASURED = "measured: scripts/benchmark_costs.py time_merges, " + H100 + ", 2026-11-26"
#: per rate: (value, source)
RATES = {
    "prefill_tokens_per_s": (20000.0, "estimate: ~1/3 of the H100's dense bf16 peak (989 TFLOPS) at 16 GFLOP a token"),
    # 13.7 s per batch of 64 MGSM items generating 512 tokens (measured), less the batch's prefill (64 x 1,350
    # prompt tokens at the prefill estimate, 4.3 s): HF's step, nearly the same at batch 16 (645 tokens/s)
    "hf_step_s": (0.0183, "derived: " + MEASURED + ", (13.7 s - 4.3 s prefill) / 512 steps"),
    "hbm_bytes_per_s": (3.35e12, "published: NVIDIA H100 SXM5 80GB datasheet, HBM3 bandwidth"),
    "bandwidth_efficiency": (0.5, "estimate: share of the HBM bandwidth a decode step reaches (weights + KV reads)"),
    "merge_build_s": (16.1, MEASURED + " (upper end of 13.2-16.1 s, on the CPU)"),
    "merge_load_s": (2.0, MEASURED + " (load_state_dict, upper end of 1.8-2.0 s)"),
    "checkpoint_read_gb_per_s": (1.0, "estimate: a parallel file system's read rate for one job"),
    "job_warmup_s": (30.0, MEASURED + " (first generation of a fresh model build, upper end of 20-30 s)"),
    "job_start_s": (60.0, "estimate: Snakemake re-parse ~10 s, imports ~6 s (DESIGN.md), lm-eval task loading"),
    "vllm_start_s": (90.0, "estimate: vLLM engine start, 39-54 s on the CPU build (issue 48) + CUDA graph capture"),
}
#: constraint candidates evaluated per run where only the leaders are (selection.constraint_evaluation: leaders):
#: in primary-score order until the places are filled; the paper's own experts sit at the base's level on the
#: constraint benchmarks (Table 5), so each leader is taken to fail as a coin flip: selection's own walk on the paper
#: config's shape (3 runs of 8 checkpoints, top_k 3, max_per_run 1) evaluates 6.0 a language on average at p = 0.5
LEADER_TRIES = (2, "python -m scripts.measure.leaders_count: mean 6.0 a language of 3 runs at a failure rate of 0.5")


def rate(name: str) -> float:
    return RATES[name][0]


@dataclasses.dataclass(frozen=True)
class Features:
    """Which work-saving modes the config's jobs have (what the plan counts)."""

    overlapped_build: bool = False  # the next merge built on the CPU while the current one is evaluated

    @classmethod
    def of(cls, config: dict) -> Features:
        # every merge evaluation job builds one merge ahead (layerswap/merge/merger.py AHEAD, which imports torch: not
        # read at parse time; tests/test_plan_lengths.py holds the two together)
        return cls(overlapped_build=True)


@dataclasses.dataclass
class Job:
    rule: str
    wildcards: tuple  # ((name, value), ...) as the rule's job has them
    bench: str
    models: int
    keys: list[str]
    merged: bool
    seconds: float = 0.0


@dataclasses.dataclass
class Row:
    """One evaluation rule's plan on one benchmark: its jobs, models x language keys x items, GPU time."""

    rule: str
    benchmark: str
    jobs: int
    models: int
    keys: int  # language keys per model (the most of a job)
    items: int  # per key
    seconds: float
    largest_job_s: float
    model_key_total: int
    model_languages: int
    note: str = ""


#: rules whose jobs have a {benchmark} wildcard in the single layout (evaluation.tasks_per_job: single)
SINGLE = ("evaluate_checkpoints", "evaluate_base", "evaluate_merges", "evaluate_soup_then_swap")
NOTES = {
    "evaluate_checkpoints": "every checkpoint, what selection reads",
    "evaluate_checkpoints_other": "the selected checkpoints",
    "evaluate_merges": "merges some table or figure reads",
    FAMILY: "merges some table or figure reads, a language's configs in groups (evaluation.merge_configs_per_job)",
    "evaluate_table2": "Table 2's models (at most; written by table2_models)",
}


class EvalPlan:
    """The evaluation plan of one config (`spec`: its Spec)."""

    def __init__(self, config: dict, spec, checkpoint_gb: float, features: Features | None = None):
        self.config, self.spec, self.checkpoint_gb = config, spec, checkpoint_gb
        self.features = features or Features.of(config)
        self.sizing = spec.evals.sizing
        self.paper = self.sizing is not None
        self.tasks = config["evaluation"]["tasks"]
        self.limit = config["evaluation"].get("limit")
        self.jobs = self._jobs()
        if self.paper:
            for job in self.jobs:
                job.seconds = self.job_seconds(job)
        self.rows = self._rows()

    # --- per key, model, job -------------------------------------------------------------------------------------
    def items(self, bench: str, key: str | None = None) -> int:
        if self.paper:
            n = self.sizing.lengths(bench, key or self._any_key(bench)).items
        else:
            n = self.config["toy_world"]["sizes"].get(bench, BENCHMARKS[bench].toy_size)
        caps = [c for c in (self.tasks[bench].get("limit"), self.limit) if c]
        return min([n, *caps])

    def _any_key(self, bench: str) -> str:
        return next(k for b, k in self._keys_of() if b == bench)

    def _keys_of(self):
        from layerswap.workflow.token_counts import evaluated_keys

        return evaluated_keys(self.config)

    def attention_share(self, context: float) -> float:
        """Attention FLOPs over a context of `context` tokens, per token, as a share of the weights' 2 x params:
        4 x layers x hidden x context / 2 (causal) over 2 x params."""
        s = self.sizing.fit.shapes
        return 4 * s.layers * s.hidden * context / 2 / (2 * s.parameters)

    def prefill_s(self, n_tokens: float, context: float) -> float:
        return n_tokens * (1 + self.attention_share(context)) / rate("prefill_tokens_per_s")

    def step_s(self, bench: str, at_once: int, context: float) -> float:
        """One decode step of `at_once` sequences of `context` tokens on the benchmark's backend."""
        shapes = self.sizing.fit.shapes
        read = shapes.weight_bytes + at_once * context * shapes.kv_bytes
        t = read / (rate("hbm_bytes_per_s") * rate("bandwidth_efficiency"))
        return t if self.sizing.backend[bench] == "vllm" else max(rate("hf_step_s"), t)

    def key_seconds(self, bench: str, key: str) -> float:
        """GPU seconds of one language key of one model."""
        lengths, n = self.sizing.lengths(bench, key), self.items(bench, key)
        batch, vllm = self.sizing.batch(bench, key), self.sizing.backend[bench] == "vllm"
        prompt = lengths.prompt + lengths.continuation
        if not lengths.new_tokens:  # log-likelihood
            passes = lengths.requests if vllm or lengths.continuation > 1 else 1
            return self.prefill_s(n * passes * prompt, prompt)
        context = lengths.prompt + lengths.new_tokens / 2  # a sequence's mean context while it decodes
        if vllm:
            at_once = self.sizing.fit.concurrency(f"evaluation.tasks.{bench} ({key})", lengths, batch)
            steps = math.ceil(n / batch) * math.ceil(min(batch, n) / at_once) * lengths.new_tokens
            own = n * (lengths.prompt - lengths.shared) + lengths.shared
            return self.prefill_s(own, lengths.prompt) + steps * self.step_s(bench, at_once, context)
        batches, size = math.ceil(n / batch), min(batch, n)
        per_batch = self.prefill_s(size * lengths.prompt, lengths.prompt)
        per_batch += lengths.new_tokens * self.step_s(bench, size, context)
        return batches * per_batch

    def load_seconds(self, merged: bool) -> float:
        """A model's load: a checkpoint read, or a merge's load (and its build on the CPU, unless it was built while
        the model before it was evaluated: layerswap/merge/merger.py builds one ahead; an evaluation of a merge takes
        longer than a build, so the whole build is hidden)."""
        if not merged:
            return self.checkpoint_gb / rate("checkpoint_read_gb_per_s")
        build = 0.0 if self.features.overlapped_build else rate("merge_build_s")
        return build + rate("merge_load_s")

    def job_seconds(self, job: Job) -> float:
        if not job.models:
            return 0.0
        start = rate("job_start_s") + rate("job_warmup_s")
        if job.merged and self.features.overlapped_build:
            start += rate("merge_build_s")  # a job's first merge: nothing before it to hide its build behind
        if self.sizing.backend[job.bench] == "vllm":
            start += rate("vllm_start_s")
        per_model = sum(self.key_seconds(job.bench, k) for k in job.keys) + self.load_seconds(job.merged)
        return start + job.models * per_model

    def keys(self, bench: str, languages) -> list[str]:
        evals = self.spec.evals
        return [k for l in evals.task_languages(bench, languages) for k in BENCHMARKS[bench].keys(l)]

    # --- the jobs ------------------------------------------------------------------------------------------------
    def _jobs(self) -> list[Job]:
        spec, evals, merges = self.spec, self.spec.evals, self.spec.merges
        cfg, single = self.config, evals.single_task_jobs
        top_k, per_run = merges.top_k, cfg["selection"]["max_per_run"]
        jobs: list[Job] = []

        def add(rule: str, wc: dict, bench: str, models: int, keys: list[str], merged: bool) -> None:
            if models and keys and not evals.skipped(bench):
                wc = {**wc, "benchmark": bench} if single and rule in SINGLE else wc
                jobs.append(Job(rule, tuple(sorted(wc.items())), bench, models, keys, merged))

        for run in spec.runs.main:
            n = len(evals.checkpoint_models(run))
            for bench in evals.primary_benchmarks(run):  # every checkpoint, on what selection ranks by
                add(
                    "evaluate_checkpoints",
                    {"run": run},
                    bench,
                    n,
                    self.keys(bench, evals.selection_languages(run, bench)),
                    False,
                )
            for part, (langs, _) in evals.table5_parts(run).items():
                for bench, ls in langs.items():
                    add(
                        "evaluate_checkpoints_other",
                        {"run": run, "part": part},
                        bench,
                        min(n, top_k, per_run),
                        self.keys(bench, ls),
                        False,
                    )
        # the constraints no weight reads, on the leaders only (selection.constraint_evaluation: leaders): one job per
        # expert type, planned at LEADER_TRIES candidates a run (at worst every checkpoint of the type)
        for expert in spec.selection.leader_experts():
            runs = spec.runs.of(expert)
            total = sum(len(evals.checkpoint_models(r)) for r in runs)
            planned = min(total, LEADER_TRIES[0] * len(runs))
            for bench in evals.leader_benchmarks(expert_type(expert)):
                keys = self.keys(bench, evals.selection_languages(runs[0], bench))
                add("evaluate_checkpoint_leaders", {"expert": expert}, bench, planned, keys, False)
        for bench in evals.benchmarks:
            rule = "evaluate_base_select" if bench in evals.base_constrained else "evaluate_base"
            add(rule, {}, bench, 1, self.keys(bench, None), False)
        groups = spec.merge_groups.groups  # evaluation.merge_configs_per_job > 1: one job per group, not per config
        for g in groups:
            for bench in g.benchmarks:
                add(g.rule, {}, bench, g.models, self.keys(bench, [g.lang]), True)
        for c, langs in ({} if groups else spec.report.merge_eval_languages()).items():
            for lang in langs:
                for bench in evals.merge_benchmarks:
                    add(
                        "evaluate_merges",
                        {"cfg": c, "lang": lang},
                        bench,
                        len(merges.pairs),
                        self.keys(bench, [lang]),
                        True,
                    )
        for lang in [] if groups else merges.langs:
            for bench in evals.merge_benchmarks:
                add("evaluate_soup_then_swap", {"lang": lang}, bench, len(merges.soups), self.keys(bench, [lang]), True)
        if MATH in evals.benchmarks or MATH in evals.merge_benchmarks:
            for lang in evals.t2_langs:
                add("evaluate_table2", {"lang": lang}, MATH, self.table2_models(lang), self.keys(MATH, [lang]), True)
        return jobs

    def _rows(self) -> list[Row]:
        groups: dict[tuple[str, str], list[Job]] = defaultdict(list)
        for job in self.jobs:  # a merge group is a rule of its own: the groups are one row
            groups[family(job.rule), job.bench].append(job)
        rows = []
        for (rule, bench), jobs in groups.items():
            per_lang = 2 if BENCHMARKS[bench].directions else 1
            total = sum(j.models * len(j.keys) for j in jobs)
            rows.append(
                Row(
                    rule,
                    bench,
                    len(jobs),
                    sum(j.models for j in jobs),
                    max(len(j.keys) for j in jobs),
                    self.items(bench, jobs[0].keys[0]) if self.paper else self.items(bench),
                    sum(j.seconds for j in jobs),
                    max(j.seconds for j in jobs),
                    total,
                    total // per_lang,
                    NOTES.get(rule, ""),
                )
            )
        order = {r: i for i, r in enumerate(dict.fromkeys(family(j.rule) for j in self.jobs))}
        return sorted(
            rows,
            key=lambda r: (
                list(self.spec.evals.benchmarks + [MATH]).index(r.benchmark)
                if r.rule.startswith(("evaluate_checkpoints", "evaluate_base"))
                else 99,
                order[r.rule],
            ),
        )

    def table2_models(self, lang: str) -> int:
        """At most how many models Table 2 evaluates in extra language `lang`: the columns whose own files lack it
        (selected experts: top_k each; merges: the pairs of the default swap and of each method's best config)."""
        evals, k = self.spec.evals, self.spec.merges.top_k
        covered = evals.table2_covered_languages()
        pairs = len(self.spec.merges.pairs)
        sizes = {"base": 1, "math_expert": k, "language_expert": k, "joint_sft": k, "swap_default": pairs}
        for m in best_of_methods(self.config["merges"]["best_of"], 2):
            sizes[m.best_column] = pairs
        return sum(n for col, n in sizes.items() if lang not in covered[col])

    # --- views ---------------------------------------------------------------------------------------------------
    def gpu_hours(self) -> dict[str, float]:
        """GPU-hours per rule (worlds sized for a GPU; the toy world runs on CPUs: none)."""
        out: dict[str, float] = {}
        if self.paper:
            for r in self.rows:
                out[r.rule] = out.get(r.rule, 0.0) + r.seconds / 3600
        return out

    def job_hours(self, rule: str, wildcards: dict) -> float | None:
        """Hours of one job (its benchmarks summed where the layout groups them), by the rule's wildcards; None: no
        such job in the plan (not an evaluation job of this plan, or one that evaluates nothing)."""
        wanted = set(wildcards.items())
        found = [j for j in self.jobs if j.rule == rule and set(j.wildcards) <= wanted]
        if not found and wanted:  # a `use rule` that inherits its parent's requests: the job with these wildcards
            found = [j for j in self.jobs if set(j.wildcards) == wanted]
        return sum(j.seconds for j in found) / 3600 if found else None

    def largest_job_hours(self, rule: str) -> float | None:
        jobs: dict[tuple, float] = defaultdict(float)
        for j in self.jobs:
            if j.rule == rule:
                jobs[j.wildcards] += j.seconds
        return max(jobs.values()) / 3600 if jobs else None

    def model_languages(self, rule_prefix: str) -> int:
        return sum(r.model_languages for r in self.rows if r.rule.startswith(rule_prefix))

    def format(self) -> str:
        head = f"{'rule':<28}{'benchmark':<10}{'jobs':>6}{'models':>8}{'x keys':>7}{'x items':>9}"
        head += f"{'GPU-h':>9}{'max job h':>10}"
        lines = ["evaluation plan (models x language keys x items per rule; layerswap/workflow/eval_plan.py)", head]
        for r in self.rows:
            gpu = f"{r.seconds / 3600:,.1f}" if self.paper else "-"
            big = f"{r.largest_job_s / 3600:,.2f}" if self.paper else "-"
            lines.append(
                f"{r.rule:<28}{r.benchmark:<10}{r.jobs:>6}{r.models:>8}{r.keys:>7}{r.items:>9,}{gpu:>9}{big:>10}"
                + (f"  {r.note}" if r.note else "")
            )
        n = self.model_languages
        lines.append(
            f"model x language evaluations: checkpoints {n('evaluate_checkpoints'):,} (before selection "
            f"{n('evaluate_checkpoints') - n('evaluate_checkpoints_other'):,}, Table 5's on the selected "
            f"{n('evaluate_checkpoints_other'):,}; the leaders' constraints {n('evaluate_checkpoint_leaders'):,}), "
            f"base {n('evaluate_base'):,}, merges {n('evaluate_merge'):,}, "
            f"soup-then-swap {n('evaluate_soup_then_swap'):,}, Table 2 at most {n('evaluate_table2'):,}"
        )
        if self.paper:
            lines += self.format_keys()
            f = self.features
            leaders = f"the leaders only ({LEADER_TRIES[0]} a run: {LEADER_TRIES[1]})"
            if not self.spec.selection.leader_experts():
                leaders = "every checkpoint"
            build = "overlapped with evaluation" if f.overlapped_build else "on the GPU job's critical path"
            lines.append(f"modes: constraint benchmarks on {leaders}; merge build {build}")
            lines.append(f"rates ({H100} unless said):")
            lines += [f"  {k} = {v:g}  ({src})" for k, (v, src) in RATES.items()]
        return "\n".join(lines)

    def format_keys(self) -> list[str]:
        """Per (benchmark, language key): tokens per item, the batch, the backend and where the lengths come from."""
        from layerswap.workflow.token_counts import LENGTH_FACTORS

        s = self.sizing
        lines = [
            "tokens per item per (benchmark, language key) (layerswap/workflow/token_counts.py), batch "
            f"(layerswap/workflow/batch_fit.py, a {s.fit.gpu_gb:g} GB GPU), GPU seconds per model",
            f"{'benchmark':<10}{'key':<9}{'items':>7}{'prompt':>8}{'longest':>9}{'shared':>8}{'+cont':>6}{'+new':>6}"
            f"{'batch':>7}{'backend':>8}{'s/model':>9}  lengths from",
        ]
        for bench, key in self._keys_of():
            if bench not in self.spec.evals.tasks:
                continue
            L = s.lengths(bench, key)
            src = (
                "counted" if L.source.startswith("counted") else "factor " + f"{L.source.split(' x ')[1].split(' ')[0]}"
            )
            lines.append(
                f"{bench:<10}{key:<9}{self.items(bench, key):>7,}{L.prompt:>8,.0f}{L.prompt_max:>9,}{L.shared:>8,}"
                f"{L.continuation:>6g}{L.new_tokens:>6}{s.batch(bench, key):>7}{s.backend[bench]:>8}"
                f"{self.key_seconds(bench, key):>9,.1f}  {src}"
            )
        used = sorted(
            {l for b, k in self._keys_of() for l in [k.split("-")[0], k.split("-")[-1]] if l in LENGTH_FACTORS}
        )
        lines.append(
            "length factors (Llama 3 tokens per English token): "
            + "; ".join(f"{l} {LENGTH_FACTORS[l][0]:g} ({LENGTH_FACTORS[l][1]})" for l in used)
        )
        from layerswap.workflow.token_counts import ENGLISH

        lines.append(
            "English lengths: "
            + "; ".join(
                f"{b}: {e.prompt} + {e.per_shot}/shot ({e.source})" for b, e in ENGLISH.items() if b in self.tasks
            )
        )
        lines.append(
            f"counts file: {s.counts.path or 'none (no HF cache)'}; counted: {', '.join(s.counts.counted) or 'none'}"
        )
        return lines
