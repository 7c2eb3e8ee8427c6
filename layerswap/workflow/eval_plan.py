"""The evaluation plan of a config, counted before anything runs: per evaluation rule its jobs, and per job the models
x language keys x items it evaluates and the GPU time that work takes at the rates below.

`layerswap cost` prints the plan (models x languages x items per rule) and counts the evaluation and selection
stages' GPU-hours from it; the evaluation jobs' time limits come from its largest job of each rule
(layerswap/workflow/resources.py). Only the paper world (one GPU per job) has rates: the toy world's evaluations
run on the CPU in seconds and keep their fixed requests.

Work per item and language key of a benchmark: `requests` forward passes over a prompt of `prompt` tokens plus
`per_shot` tokens per few-shot example (prefill), then `new_tokens` generated tokens (the config's
`max_new_tokens`, else the task's own budget; a batch runs until its longest answer stops, so the budget is what
counts). Items per key: the paper datasets' test splits (tests/hub_replica/EVIDENCE.md), capped by the config's
`limit`. Per model: its load (a checkpoint read from disk, or a merge built in memory). Per job: the first
generation's warm-up. Every figure names its source; "measured" ones come from docs/MEASUREMENTS.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from layerswap.benchmarks import BENCHMARKS
from layerswap.config import expert_type
from layerswap.merge.registry import best_of_methods

#: test items per language key of the paper's benchmarks (tests/hub_replica/EVIDENCE.md: MGSM test 250, Belebele 900
#: per language, FLORES+ devtest 1,012 sentences per direction, Global-MMLU test 14,042, MBPP full test 500)
PAPER_ITEMS = {"mgsm": 250, "belebele": 900, "flores": 1012, "mmlu": 14042, "mbpp": 500}


@dataclass(frozen=True)
class Work:
    requests: int  # forward passes per item (log-likelihood tasks: one per answer choice)
    prompt: int  # prompt tokens of a 0-shot item (estimate)
    per_shot: int  # prompt tokens each few-shot example adds (estimate)
    new_tokens: int  # generated tokens per item, unless the config's max_new_tokens says otherwise (task YAML)
    source: str


#: per benchmark, what one item costs (lm-eval task shapes: MGSM and FLORES and MBPP generate, Belebele and MMLU
#: score 4 choices); token counts are estimates from the datasets' typical lengths in Llama 3's tokenizer
WORK = {
    "mgsm": Work(1, 150, 150, 512, "estimate; 256 new tokens is lm-eval's default, config/paper.yaml sets 512"),
    "belebele": Work(4, 450, 450, 0, "estimate: a passage, question and 4 answers ~450 tokens"),
    "flores": Work(1, 60, 60, 256, "estimate; max_gen_toks 256 (layerswap/tasks/paper/_flores_template_yaml)"),
    "mmlu": Work(4, 120, 120, 0, "estimate: a Global-MMLU question with 4 choices ~120 tokens"),
    "mbpp": Work(1, 150, 150, 512, "estimate; max_gen_toks 512 (layerswap/tasks/paper/mbpp.yaml)"),
}

#: one H100 80GB, HF backend, Llama-3.1-8B shapes, bf16 (docs/MEASUREMENTS.md#cost-figures, issue 34)
RATES = {
    # 12.7-13.7 s per batch of 64 MGSM items generating 512 tokens: 64 x 512 / 13.7 s
    "generate_tokens_per_s": (2392.0, "measured: scripts/benchmark_costs.py time_merges, one H100 80GB, 2026-11-26"),
    # prompt tokens per second of a forward pass without generation: not measured; about a third of the H100's dense
    # bf16 peak at ~16 GFLOP per token of an 8B model
    "prefill_tokens_per_s": (20000.0, "estimate: ~1/3 of the H100's bf16 peak at 16 GFLOP per token"),
    # a merge built on the CPU and loaded: 13.2-16.1 s build + 1.8-2.0 s load_state_dict (upper ends)
    "merge_switch_s": (18.1, "measured: scripts/benchmark_costs.py time_merges, one H100 80GB, 2026-11-26"),
    # a checkpoint read from disk: its export-dtype bytes at 1 GB/s (fp32 8B: 32 s)
    "checkpoint_read_gb_per_s": (1.0, "estimate: a parallel file system's read rate for one job"),
    # the first generation of every fresh model build: 20-30 s, once per job at the upper end
    "job_warmup_s": (30.0, "measured: scripts/benchmark_costs.py time_merges, one H100 80GB, 2026-11-26"),
}


@dataclass
class Row:
    """One evaluation rule's plan: `jobs` jobs; per job (the largest) and in all, models x language keys x items."""

    rule: str
    benchmark: str
    jobs: int
    models: int  # in all (an upper bound where a job's list is written at run time: Table 2)
    keys: int  # language keys per model
    items: int  # per key
    seconds: float  # in all
    largest_job_s: float
    model_key_total: int  # models x language keys, summed over the jobs
    model_languages: int  # models x languages (a FLORES language: two keys), summed over the jobs
    note: str = ""


class EvalPlan:
    """The evaluation plan of one config (`spec`: its Spec)."""

    def __init__(self, config: dict, spec, checkpoint_gb: float):
        """`checkpoint_gb`: the size of one expert checkpoint as exported (layerswap.workflow.resources.Requests
        builds the plan with it: `Requests(config, spec).plan`)."""
        self.config, self.spec, self.checkpoint_gb = config, spec, checkpoint_gb
        self.paper = config["world"] != "toy"
        self.tasks = config["evaluation"]["tasks"]
        self.limit = config["evaluation"].get("limit")
        self.rows = self._rows()

    # --- per item, model, job ----------------------------------------------------------------------------------
    def items(self, bench: str) -> int:
        task = self.tasks[bench]
        n = (
            PAPER_ITEMS[bench]
            if self.paper
            else self.config["toy_world"]["sizes"].get(bench, BENCHMARKS[bench].toy_size)
        )
        caps = [c for c in (task.get("limit"), self.limit) if c]
        return min([n, *caps])

    def item_seconds(self, bench: str) -> float:
        """GPU seconds of one item in one language key. Generation: its new tokens at the measured rate (measured
        with an 8-shot MGSM prompt, whose prefill it includes); log-likelihood: its requests' prompt tokens (the
        shots included) at the prefill rate."""
        work, task = WORK[bench], self.tasks[bench]
        new = int(task.get("max_new_tokens") or work.new_tokens)
        if new:
            return new / RATES["generate_tokens_per_s"][0]
        prompt = work.prompt + int(task.get("shots", 0)) * work.per_shot
        return work.requests * prompt / RATES["prefill_tokens_per_s"][0]

    def key_seconds(self, bench: str) -> float:
        """One language key of one model: its items in whole batches (a batch takes as long when part full)."""
        batch = int(self.tasks[bench].get("batch_size") or self.config["evaluation"]["batch_size"])
        return math.ceil(self.items(bench) / batch) * batch * self.item_seconds(bench)

    def load_seconds(self, merged: bool) -> float:
        return RATES["merge_switch_s"][0] if merged else self.checkpoint_gb / RATES["checkpoint_read_gb_per_s"][0]

    def job_seconds(self, bench: str, models: int, keys: int, merged: bool) -> float:
        if not models:
            return 0.0
        per_model = keys * self.key_seconds(bench) + self.load_seconds(merged)
        return RATES["job_warmup_s"][0] + models * per_model

    def keys(self, bench: str, languages) -> int:
        evals = self.spec.evals
        return sum(len(BENCHMARKS[bench].keys(l)) for l in evals.task_languages(bench, languages))

    # --- the plan ----------------------------------------------------------------------------------------------
    def _add(self, rows, rule, bench, jobs: list[tuple[int, int]], merged: bool, note: str = "") -> None:
        """`jobs`: (models, keys per model) of each job of `rule` on `bench`; jobs without models are left out."""
        jobs = [(m, k) for m, k in jobs if m and k]
        per_lang = 2 if BENCHMARKS[bench].directions else 1
        if not jobs:
            return
        secs = [self.job_seconds(bench, m, k, merged) for m, k in jobs]
        models = sum(m for m, _ in jobs)
        keys = max(k for _, k in jobs)
        total = sum(m * k for m, k in jobs)
        rows.append(
            Row(
                rule,
                bench,
                len(jobs),
                models,
                keys,
                self.items(bench),
                sum(secs),
                max(secs),
                total,
                total // per_lang,
                note,
            )
        )

    def _rows(self) -> list[Row]:
        spec, evals, merges = self.spec, self.spec.evals, self.spec.merges
        cfg = self.config
        rows: list[Row] = []
        top_k, per_run = cfg["selection"]["top_k"], cfg["selection"]["max_per_run"]
        sel: dict[str, list] = {b: [] for b in evals.benchmarks}
        other: dict[str, list] = {b: [] for b in evals.benchmarks}
        lead: dict[str, list] = {b: [] for b in evals.benchmarks}
        for run in spec.runs.main:
            n = len(evals.checkpoint_models(run))
            for bench in evals.primary_benchmarks(run):
                sel[bench].append((n, self.keys(bench, evals.selection_languages(run, bench))))
            for langs, _ in evals.table5_parts(run).values():  # grouped layout: a part's benchmarks, row by row
                for bench, ls in langs.items():
                    other[bench].append((min(n, top_k, per_run), self.keys(bench, ls)))
        worst = 0  # the leaders' constraint evaluations (evaluate_checkpoint_leaders): top_k per expert type planned
        for expert in spec.selection.leader_experts():
            runs = spec.runs.of(expert)
            worst = max(worst, sum(len(evals.checkpoint_models(r)) for r in runs))
            for bench in evals.leader_benchmarks(expert_type(expert)):
                lead[bench].append((top_k, self.keys(bench, evals.selection_languages(runs[0], bench))))
        for bench in evals.benchmarks:
            if evals.skipped(bench):
                continue  # a local job writes 'skipped' (no GPU)
            self._add(rows, "evaluate_checkpoints", bench, sel[bench], False, "every checkpoint, what selection reads")
            note = f"the top-{top_k} leaders if they pass; at worst all {worst} checkpoints of an expert type"
            self._add(rows, "evaluate_checkpoint_leaders", bench, lead[bench], False, note)
            self._add(rows, "evaluate_checkpoints_other", bench, other[bench], False, "the selected checkpoints")
            self._add(rows, "evaluate_base", bench, [(1, self.keys(bench, None))], False)
        mc = spec.report.merge_eval_languages()
        for bench in evals.merge_benchmarks:
            jobs = [(len(merges.pairs), self.keys(bench, [lang])) for c, langs in mc.items() for lang in langs]
            self._add(rows, "evaluate_merges", bench, jobs, True, "merges some table or figure reads")
            soups = [(len(merges.soups), self.keys(bench, [lang])) for lang in merges.langs]
            self._add(rows, "evaluate_soup_then_swap", bench, soups, True)
        if "mgsm" in evals.benchmarks or "mgsm" in evals.merge_benchmarks:
            t2 = [(self.table2_models(lang), self.keys("mgsm", [lang])) for lang in evals.t2_langs]
            self._add(rows, "evaluate_table2", "mgsm", t2, True, "Table 2's models (at most; written by table2_models)")
        return rows

    def table2_models(self, lang: str) -> int:
        """At most how many models Table 2 evaluates in extra language `lang`: the columns whose own files lack it
        (selected experts: top_k each; merges: the pairs of the default swap and of each method's best config)."""
        evals, k = self.spec.evals, self.config["selection"]["top_k"]
        covered = evals.table2_covered_languages()
        pairs = len(self.spec.merges.pairs)
        sizes = {"base": 1, "math_expert": k, "language_expert": k, "joint_sft": k, "swap_default": pairs}
        for m in best_of_methods(self.config["merges"]["best_of"], 2):
            sizes[m.best_column] = pairs
        return sum(n for col, n in sizes.items() if lang not in covered[col])

    # --- views -------------------------------------------------------------------------------------------------
    def gpu_hours(self) -> dict[str, float]:
        """GPU-hours per rule (paper world; the toy world runs on CPUs: none)."""
        out: dict[str, float] = {}
        if self.paper:
            for r in self.rows:
                out[r.rule] = out.get(r.rule, 0.0) + r.seconds / 3600
        return out

    def largest_job_hours(self, rule: str) -> float | None:
        """Hours of the rule's largest job (None: not an evaluation rule of this plan)."""
        rows = [r for r in self.rows if r.rule == rule]
        return max(r.largest_job_s for r in rows) / 3600 if rows else None

    def model_languages(self, rule_prefix: str) -> int:
        """Models x languages of the rules whose name starts with `rule_prefix`."""
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
            f"base {n('evaluate_base'):,}, merges {n('evaluate_merges'):,}, "
            f"soup-then-swap {n('evaluate_soup_then_swap'):,}, Table 2 at most {n('evaluate_table2'):,}"
        )
        if self.paper:
            lines.append("rates (one H100, HF backend, 8B bf16):")
            lines += [f"  {k} = {v:g}  ({src})" for k, (v, src) in RATES.items()]
            lines.append(
                "work per item (tokens): "
                + "; ".join(
                    f"{b}: {w.requests} x ({w.prompt} + {w.per_shot}/shot) prompt, {w.new_tokens} new ({w.source})"
                    for b, w in WORK.items()
                )
            )
            lines.append(f"items per language key: {PAPER_ITEMS} (tests/hub_replica/EVIDENCE.md), capped by `limit`")
        return "\n".join(lines)
