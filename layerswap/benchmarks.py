"""The benchmarks, one entry each: everything the workflow knows about a benchmark beyond its task YAMLs.

Table 5 (label, unit, row shape, order), the ablation tables (metric columns; a corpus metric has no intervals), the
toy world (its evaluation sets and their default size), the config schema (the benchmark lists and the toy sizes,
generated from here: `python -m layerswap.schema_blocks`), `Spec` (task languages) and the evaluation (the toy task
templates, the paper tasks) read it from here. Facts a task YAML holds are read from the YAML, not repeated: the toy
metric and filter (layerswap/tasks/toy/), the dataset, subset and split of our own paper tasks
(layerswap/tasks/paper/); see layerswap/evaluation/tasks.py. The paper tasks lm-eval ships are named here with the
hub datasets they read (tests/test_evaluate_paper.py checks those against lm-eval's own YAMLs).

Adding a benchmark: an entry below, its task YAML(s) in layerswap/tasks/toy/ (and tasks/paper/ or an lm-eval task),
its toy data writer in layerswap/data/toy_writers.py (`WRITERS`), tests (docs/EXTENDING.md walks it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from layerswap.errors import UserError

#: A benchmark name: lower-case letters and digits, no "_": the toy data files `<benchmark>_<language>.jsonl` (and the
#: evaluation logs `..._<language>_<benchmark>.log`) are split on "_", and the rules join the names into a wildcard
#: regex. Checked where a name is declared (`Benchmark`), so a bad one fails on import with its entry named.
NAME = re.compile(r"[a-z][a-z0-9]*")
#: Our own paper tasks' YAMLs (an `LmEvalTask` with folder None): FLORES's per direction, MBPP's.
PAPER_TASK_DIR = Path(__file__).resolve().parent / "tasks" / "paper"


@dataclass(frozen=True)
class HubSplits:
    """Hub dataset splits a paper task reads (for `layerswap prestage`); `subset` "{code}" is the language's code.
    None where our own task YAML says it (dataset_path, dataset_name, test_split: read by evaluation/tasks.py)."""

    hub_id: str | None
    subset: str | None
    splits: tuple[str, ...] | None
    columns: tuple[str, ...]


@dataclass(frozen=True)
class ItemWork:
    """A paper benchmark's items in English, in Llama 3 tokens, what the paper plan costs it by
    (layerswap/workflow/token_counts.py scales them per language). Estimates at ~1.3 tokens a word (English,
    cl100k-style BPE): nothing here was counted with Llama 3's tokenizer; `layerswap token-counts` counts them on the
    pre-staged data."""

    items: int  # test items per language key (scripts/hub_replica/EVIDENCE.md)
    requests: int  # per item
    prompt: int  # a 0-shot item's prompt
    per_shot: int  # what each few-shot example adds
    spread: float  # the longest item's own prompt over the mean (estimate)
    shot_spread: float  # the longest few-shot block over the mean (1: every item gets the same shots)
    shared_shots: bool  # lm-eval's first_n sampler: every item gets the same shots in the same order
    continuation: int
    new_tokens: int  # the task's own generation budget (the config's max_new_tokens replaces it)
    source: str


@dataclass(frozen=True)
class LmEvalTask:
    """A benchmark in the paper task set, as lm-eval tasks scored by `metric,filter`: per task key (a language, or a
    FLORES direction "en-<lang>" / "<lang>-en"), the lm-eval task or group `task` in the task `folder` (relative to
    lm_eval/tasks; None: ours, layerswap/tasks/paper/`yaml`), present when the file `marker` exists there (None:
    always), else unavailable with the reason `missing`. Templates: {key}, {code} (the language's code for this task's
    dataset: its `code` key in layerswap/languages.py:HF_LANGUAGES), {task}. `metric`/`filter` None: read from our task
    YAML (layerswap/evaluation/tasks.py: PAPER_TASKS). `translation`: the task of a translation of the same items (MGSM:
    AfriMGSM), run for a language whose entry has no `code` of this task's dataset but has the translation's: the
    language's math benchmark is then that translation, scored under this benchmark and recorded as a variant."""

    metric: str | None
    filter: str | None  # lm-eval filter name of the reported metric (the `<metric>,<filter>` result key)
    filter_doc: str
    paper_shots: int  # the paper's setting (Table 5); config shots are used, a difference is logged
    task: str
    folder: str | None
    marker: str | None
    missing: str
    code: str | None  # the HF_LANGUAGES key of the dataset's language codes ("mgsm", "flores", ...); None: no code
    hub: HubSplits
    work: ItemWork  # its items' work, for the paper plan
    directions: bool = False
    unsafe: bool = False
    group: bool = False  # the task name is an lm-eval group (metric aggregated over its subtasks)
    own_fewshot: bool = True  # the task has a few-shot split (ours for FLORES/MBPP have none: 0-shot only)
    yaml: str | None = None  # our task's YAML in layerswap/tasks/paper/ ({key}: the task key), whose facts are read
    variant: str | None = None  # how the task differs from the paper's (recorded in each evaluation file)
    translation: LmEvalTask | None = None  # for the languages this dataset lacks (see above); its variant: {key}
    # what the paper config runs where the paper names no set or setting (docs/PAPER_DIFFERENCES.md): a note under the
    # paper-world tables' paper-vs-ours numbers (the math benchmark's under each; every one under Table 5's)
    note: str = ""


@dataclass(frozen=True)
class Benchmark:
    name: str
    title: str  # short name in prose ("MGSM")
    label: str  # Table 5's row label
    unit: str  # "fraction" (accuracy, exact match, pass@1: Table 5 with 3 decimals, ablations in %) or "bleu" (0-100)
    toy_size: int  # items per language of the toy evaluation set (toy_world.sizes.<name> where a config omits it)
    toy_templates: tuple[tuple[str, str], ...]  # (task key, template YAML in layerswap/tasks/toy/) per language
    paper: LmEvalTask | None  # None: a toy-world benchmark the paper task set does not run
    table5: tuple[str, ...] = ("targets",)  # Table 5 row groups: en, targets, avg (over mgsm_languages), directions
    directions: bool = False  # scored per direction en-<lang> and <lang>-en (English has no task of its own)
    corpus: bool = False  # a corpus metric (BLEU): no per-item correctness, so no intervals
    unsafe: bool = False  # runs model-written code: only with execute_code (the YAML says unsafe_code: true)
    toy_scoring: str | None = None  # what the toy filter does, where the YAML's filter is not a regex to describe
    # the selection metrics it gives (selection.weights / selection.constraints): (metric, key of its `scores`), where
    # `{lang}` is the expert's target language and `*` the mean over the MGSM languages (layerswap/select.py)
    selection: tuple[tuple[str, str], ...] = ()
    selects: tuple[str, ...] = ()  # expert kinds (EXPERT_KINDS) whose checkpoints are always evaluated on it
    # the math benchmark (exactly one entry): what Tables 1, 2 and 6, the best-config choice and the swap figures read
    # in each target language, the benchmark of the merges' evaluations and of Table 2's models
    math: bool = False

    def __post_init__(self):
        if not NAME.fullmatch(self.name):
            raise UserError(
                f"layerswap/benchmarks.py: benchmark '{self.name}': a benchmark name is lower-case letters "
                "and digits, starting with a letter, with no '_' (the toy data files "
                "<benchmark>_<language>.jsonl are split on it)"
            )
        alt = self.paper.translation if self.paper else None
        if alt is not None and (alt.metric, alt.filter, alt.directions) != (
            self.paper.metric,
            self.paper.filter,
            self.paper.directions,
        ):
            raise UserError(
                f"layerswap/benchmarks.py: benchmark '{self.name}': its translation's task ({alt.task}) must score by "
                "the same metric and filter, per language, as its own task: its scores are kept under this benchmark"
            )

    @property
    def metric_name(self) -> str:
        """The metric as Table 5's label names it ("accuracy" of "Belebele (accuracy)"), for prose."""
        return self.label.removeprefix(f"{self.title} (").removesuffix(")")

    def keys(self, lang: str) -> list[str]:
        """The task keys (score keys) of a language: the language, or its two directions ([] for English)."""
        return [] if self.directions and lang == "en" else [k.format(lang=lang) for k, _ in self.toy_templates]


MBPP_VARIANT = (
    "English MBPP (google-research-datasets/mbpp, lm-eval's mbpp prompt, 0-shot) for every language key: "
    "no translated MBPP exists in lm-eval 0.4.13; the same number is recorded under each language"
)

# a GSM8K-style question ~45 words + "Question:/Step-by-Step Answer:" ~60 tokens with the template; an exemplar adds its
# question and a one-paragraph worked answer ~150. lm-eval's default sampler draws the 8 exemplars in a per-item random
# order (mgsm native_cot YAML: no first_n), so items share no prefix. MGSM's train split holds exactly 8 exemplars per
# language, so every item gets all 8 (a fixed length). AfriMGSM translates the same items.
MGSM_WORK = ItemWork(250, 1, 150, 150, 2.0, 1.0, False, 0, 256, "estimate: ~45-word question, ~150-token exemplars")

#: AfriMGSM (IrokoBench, Adelani et al. 2024, arXiv 2406.03368): MGSM translated by people into 16 African languages
#: (hub masakhane/afrimgsm, subsets by ISO 639-3 code; its train split holds the exemplars). lm-eval's direct_cot
#: prompt_1 tasks: the question in the language, "Step-by-Step Answer:", flexible-extract as MGSM's (lm-eval
#: 0.4.13's afrimgsm/direct_cot YAML). Its items' work is MGSM's (the same items; the language's length factor scales).
AFRIMGSM = LmEvalTask(
    "exact_match",
    "flexible-extract",
    "AfriMGSM chain of thought (lm-eval afrimgsm_cot prompt_1: the question in the target language, its train "
    "exemplars); greedy; flexible-extract: the last number of the generation, as MGSM's",
    8,
    task="afrimgsm_cot_{code}_prompt_1",
    folder="afrimgsm/direct_cot/prompt_1",
    marker="afrimgsm_cot_{code}.yaml",  # the file of task afrimgsm_cot_<code>_prompt_1
    missing="AfriMGSM has no {key} split ({task} not in lm-eval)",
    code="afrimgsm",
    hub=HubSplits("masakhane/afrimgsm", "{code}", ("train", "test"), ("question", "answer_number")),
    work=MGSM_WORK,
    variant="{key}: AfriMGSM (masakhane/afrimgsm, lm-eval {task}), the human translation of MGSM's items, in place "
    "of MGSM, which has no {key}",
)

REGISTRY: tuple[Benchmark, ...] = (
    Benchmark(
        "mgsm",
        "MGSM",
        "MGSM (exact match)",
        "fraction",
        60,
        (("{lang}", "mgsm.yaml"),),
        # 8-shot chain of thought with MGSM's own exemplars in the target language (lm-eval mgsm_native_cot_*: the
        # train split's 8 worked answers, the MGSM paper's main setting); greedy; the final number is the answer.
        LmEvalTask(
            "exact_match",
            "flexible-extract",
            "8-shot native chain of thought (MGSM train exemplars in the target language); greedy (em@maj1); "
            "flexible-extract: the last number of the generation, regex (-?[$0-9.,]{2,})|(-?[0-9]+) group_select -1, "
            "take_first; exact_match ignore_case+ignore_punctuation",
            8,
            task="mgsm_native_cot_{code}",
            folder="mgsm/native_cot",
            marker="{task}.yaml",
            missing="MGSM has no {key} split ({task} not in lm-eval)",
            code="mgsm",
            hub=HubSplits("juletxara/mgsm", "{code}", ("train", "test"), ("question", "answer_number")),
            work=MGSM_WORK,
            translation=AFRIMGSM,
            note=(
                "MGSM: 8-shot native chain of thought (lm-eval mgsm_native_cot_*, MGSM's own exemplars in the target "
                "language), greedy, the final number of the generation (flexible-extract), up to "
                "evaluation.tasks.mgsm.max_new_tokens new tokens (512 in config/paper.yaml; each evaluation file "
                "records its budget)."
            ),
        ),
        table5=("en", "targets", "avg"),
        selection=(("mgsm_en", "en"), ("mgsm_avg", "*"), ("mgsm_target", "{lang}")),
        selects=("math", "joint"),
        math=True,
    ),
    Benchmark(
        "belebele",
        "Belebele",
        "Belebele (accuracy)",
        "fraction",
        100,
        (("{lang}", "belebele.yaml"),),
        LmEvalTask(
            "acc",
            "none",
            "none (argmax loglikelihood over the letters A-D; lm-eval's first_n few-shot sampler over the test split)",
            5,
            task="belebele_{code}",
            folder="belebele",
            marker="{task}.yaml",
            missing="Belebele has no {code} ({task} not in lm-eval)",
            code="flores",
            hub=HubSplits(
                "facebook/belebele",
                "{code}",
                ("test",),
                ("flores_passage", "question", "mc_answer1", "mc_answer4", "correct_answer_num"),
            ),
            # a FLORES passage of ~4 sentences (~85 words) + question + 4 short answers + template ~200 tokens; the 4
            # choices are the letters A-D, one token each; first_n sampler over the test split: the same 5 shots for all
            work=ItemWork(900, 4, 200, 200, 1.5, 1.0, True, 1, 0, "estimate: passage, question, 4 answers ~200 tokens"),
        ),
        table5=("en", "targets"),
        toy_scoring="none (argmax loglikelihood over the 4 answer texts)",
        selection=(("belebele", "{lang}"),),
        selects=("language",),
    ),
    Benchmark(
        "flores",
        "FLORES",
        "FLORES (BLEU)",
        "bleu",
        30,
        (("en-{lang}", "flores_from_en.yaml"), ("{lang}-en", "flores_to_en.yaml")),
        LmEvalTask(
            None,
            None,
            "none (greedy generation up to newline; sacreBLEU corpus BLEU, tokenize ja-mecab for Japanese "
            "targets, 13a for the others)",
            0,
            task="layerswap_flores_{key}",
            folder=None,
            marker="flores_{key}.yaml",
            missing="no FLORES task YAML for {key} in layerswap/tasks/paper",
            code="flores",
            hub=HubSplits(None, "{code}", None, ("id", "text")),
            # one FLORES sentence ~25 words + the instruction naming both languages ~30 tokens: 60; 0-shot
            work=ItemWork(1012, 1, 60, 60, 3.0, 1.0, False, 0, 256, "estimate: ~25-word sentence + instruction"),
            directions=True,
            own_fewshot=False,
            yaml="_flores_template_yaml",
            note=(
                "FLORES: FLORES+ devtest, 0-shot, sacreBLEU corpus BLEU with tokenizer ja-mecab for Japanese targets "
                "and 13a for the others (the paper names none)."
            ),
        ),
        table5=("directions",),
        directions=True,
        corpus=True,
        toy_scoring="none (generation up to newline; sacrebleu corpus BLEU)",
        selection=(("flores_from_en", "en-{lang}"), ("flores_to_en", "{lang}-en")),
        selects=("language",),
    ),
    Benchmark(
        "mbpp",
        "MBPP",
        "MBPP (pass@1)",
        "fraction",
        40,
        (("{lang}", "mbpp.yaml"),),
        LmEvalTask(
            None,
            None,
            "execute: greedy generation run against test_list in the sandbox -> passed|failed|timeout",
            0,
            task="layerswap_mbpp",
            folder=None,
            marker=None,
            missing="",
            code=None,
            hub=HubSplits(None, None, None, ("task_id", "text", "test_list", "test_setup_code")),
            # an MBPP problem statement and its test ~150 tokens, 0-shot, English for every key (MBPP_VARIANT)
            work=ItemWork(500, 1, 150, 150, 2.0, 1.0, False, 0, 512, "estimate: problem + tests ~150 tokens"),
            unsafe=True,
            own_fewshot=False,
            yaml="mbpp.yaml",
            variant=MBPP_VARIANT,
            note=(
                "MBPP: English MBPP (google-research-datasets/mbpp), 0-shot pass@1, recorded under every language key:"
                " the paper's translated MBPP is not named and none is loadable."
            ),
        ),
        unsafe=True,
        toy_scoring="execute: greedy generation run against test_list in the sandbox -> passed|failed|timeout",
        selection=(("mbpp", "{lang}"),),
    ),
    Benchmark(
        "mmlu",
        "MMLU",
        "MMLU (accuracy)",
        "fraction",
        100,
        (("{lang}", "mmlu.yaml"),),
        LmEvalTask(
            "acc",
            "none",
            "none (argmax loglikelihood over A-D; group acc weighted by subtask size)",
            5,
            task="global_mmlu_full_{code}",
            folder="global_mmlu/full/{code}",
            marker="_{task}.yaml",
            missing="Global-MMLU has no {code} ({task} not in lm-eval)",
            code="mmlu",  # Global-MMLU's subsets: ISO 639-1 codes
            hub=HubSplits(
                "CohereForAI/Global-MMLU",
                "{code}",
                ("test", "dev"),
                ("question", "option_a", "option_d", "answer", "subject"),
            ),
            # a Global-MMLU question with 4 options ~120 tokens; some subjects (law, history) run to ~1,000: spread 8;
            # 5 dev-split shots of the item's own subject (first_n sampler), up to twice the mean in the longest subject
            work=ItemWork(14042, 4, 120, 120, 8.0, 2.0, True, 1, 0, "estimate: question + 4 options ~120 tokens"),
            group=True,
            note=(
                "MMLU: Global-MMLU (full, lm-eval global_mmlu_full_*), 5-shot, instead of the paper's unnamed "
                "translated MMLU."
            ),
        ),
        toy_scoring="none (argmax loglikelihood over the 4 choice texts)",
        selection=(("mmlu", "{lang}"),),
    ),
)


def by_name(registry: tuple[Benchmark, ...]) -> dict[str, Benchmark]:
    """The registry by name; a name given twice is refused with one line."""
    found: dict[str, Benchmark] = {}
    for bench in registry:
        if bench.name in found:
            raise UserError(f"layerswap/benchmarks.py: REGISTRY has two entries named '{bench.name}'")
        found[bench.name] = bench
    return found


def math_benchmark(registry: tuple[Benchmark, ...]) -> str:
    """The name of the registry's math benchmark (`math=True`): exactly one, else one line."""
    names = [b.name for b in registry if b.math]
    if len(names) != 1:
        raise UserError(f"layerswap/benchmarks.py: REGISTRY needs exactly one entry with math=True, has {names}")
    return names[0]


BENCHMARKS: dict[str, Benchmark] = by_name(REGISTRY)
NAMES: tuple[str, ...] = tuple(BENCHMARKS)
#: The math benchmark's name (its entry says `math=True`): the planning and report layers read it, not a name.
MATH: str = math_benchmark(REGISTRY)

#: The kinds of expert selection tells apart (layerswap.config.expert_type).
EXPERT_KINDS = ("math", "language", "joint")
#: Selection metric -> (benchmark whose evaluation file it reads, key of that file's `scores`): the entries' own.
#: The selection command computes them (layerswap/select.py), the config checks and the rules read which benchmark
#: each needs.
SELECTION_METRICS: dict[str, tuple[str, str]] = {m: (b.name, key) for b in REGISTRY for m, key in b.selection}
#: The selection metrics of an expert's target language (their score key names `{lang}`): language and joint experts
#: only, and a target language must have their benchmark's code.
TARGETED_METRICS: frozenset[str] = frozenset(m for m, (_, key) in SELECTION_METRICS.items() if "{lang}" in key)
#: Expert kind -> the benchmarks its checkpoints are evaluated on for selection whatever the weights name.
SELECT_READS: dict[str, list[str]] = {kind: [b.name for b in REGISTRY if kind in b.selects] for kind in EXPERT_KINDS}
#: A language expert's skill: the benchmarks its checkpoints are always selected on (Belebele, FLORES), which the
#: report's findings (layerswap/report/summary.py, transfer.py) compare with the base's.
LANGUAGE_SKILLS: tuple[str, ...] = tuple(SELECT_READS["language"])


def toy_sizes(given: dict | None = None) -> dict[str, int]:
    """Each benchmark's toy size: `given` (toy_world.sizes) where it names one, else the registry default."""
    return {name: (given or {}).get(name, b.toy_size) for name, b in BENCHMARKS.items()}


# config/schema.yaml holds the benchmark lists generated from here between these markers (tests/test_benchmarks.py
# checks the copy; `python -m layerswap.schema_blocks` rewrites it).
BEGIN = "  # BEGIN benchmarks: generated from layerswap/benchmarks.py by `python -m layerswap.schema_blocks`"
END = "  # END benchmarks"


def schema_defs() -> dict:
    """The schema's $defs that list benchmarks or what they give: the selection metrics of the weights and
    constraints, the evaluation tasks (an unsafe one also takes execute_code), the task lists, the toy sizes (each
    optional, with the registry default)."""
    unsafe = {
        "type": "object",
        "additionalProperties": False,
        "required": ["shots"],
        "properties": {
            "shots": {"$ref": "#/$defs/shots"},
            "languages": {"$ref": "#/$defs/language_list"},
            "max_new_tokens": {"$ref": "#/$defs/tokens"},
            "batch_size": {
                "description": "this benchmark's evaluation batch size, in place of evaluation.batch_size (a "
                "job evaluating several benchmarks takes the smallest of theirs)",
                "$ref": "#/$defs/batch",
            },
            "execute_code": {
                "description": "run model-written code against the tests (sandboxed); off unless opted in",
                "type": "boolean",
                "default": False,
            },
        },
    }
    return {
        "selection_weights": {
            "description": "{metric: weight}; a checkpoint's score is the weighted sum of its metrics",
            "type": "object",
            "minProperties": 1,
            "propertyNames": {"enum": list(SELECTION_METRICS)},
            "additionalProperties": {"type": "number"},
        },
        "selection_constraints": {
            "description": "{metric: margin >= 0}; the metric must be >= the base model's minus the margin",
            "type": "object",
            "propertyNames": {"enum": list(SELECTION_METRICS)},
            "additionalProperties": {"type": "number", "minimum": 0},
        },
        "benchmark_tasks": {
            "type": "object",
            "additionalProperties": False,
            "minProperties": 1,
            "properties": {n: dict(unsafe) if b.unsafe else {"$ref": "#/$defs/task"} for n, b in BENCHMARKS.items()},
        },
        "task_list": {"type": "array", "minItems": 1, "uniqueItems": True, "items": {"enum": list(NAMES)}},
        "benchmark_sizes": {
            "description": "items per language of each toy evaluation set (default: layerswap/benchmarks.py)",
            "properties": {n: {"$ref": "#/$defs/items", "default": b.toy_size} for n, b in BENCHMARKS.items()},
        },
    }


def schema_block() -> str:
    import yaml

    body = yaml.safe_dump(schema_defs(), sort_keys=False, width=110, default_flow_style=None)
    return "\n".join([BEGIN, *("  " + line for line in body.splitlines()), END])
