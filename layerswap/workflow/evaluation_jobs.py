"""The evaluation jobs of a config: which benchmarks each job runs in which languages, the files it reads and writes,
its params. A part of `Spec` (layerswap/workflow/spec.py), for rules/select.smk (checkpoint evaluations; the
selections themselves are layerswap/workflow/selection_jobs.py's) and rules/evaluate.smk (the base, merges, Table 2's
extra languages).
"""

from __future__ import annotations

from layerswap.benchmarks import BENCHMARKS, MATH, SELECT_READS, SELECTION_METRICS, TARGETED_METRICS
from layerswap.config import METRIC_TASK, backend_for, checkpoints_of, expert_type
from layerswap.contracts import checkpoint_model_id, checkpoint_name, merge_model_id
from layerswap.fingerprint import command_hash
from layerswap.layout import Layout
from layerswap.merge.registry import METHODS
from layerswap.workflow.batch_fit import Sizing
from layerswap.workflow.merge_jobs import MergeJobs
from layerswap.workflow.runs import Runs
from layerswap.workflow.words import as_json, canonical_languages


class EvaluationJobs:
    def __init__(
        self, config: dict, layout: Layout, runs: Runs, merges: MergeJobs, hf_home_arg: str, hf_home: str | None = None
    ):
        """`hf_home_arg`: the `--hf-home` words of the jobs (empty: the job's environment's HF_HOME); `hf_home`: that
        cache, where the token counts are (layerswap/workflow/token_counts.py)."""
        self._config, self._layout, self._runs, self._merges = config, layout, runs, merges
        self._eval = config["evaluation"]
        self.tasks = list(self._eval["tasks"])
        self.threads = self._eval["threads"]
        self.task_set = "toy" if config["world"] == "toy" else "paper"  # the lm-eval task set `evaluate` builds
        # --backend of every job: evaluation.backend where it is one backend; where it is a mapping, hf, and each
        # benchmark the mapping gives vllm says so in its own settings (benchmark_params): a job's params name only the
        # backends of its own benchmarks, and a string backend gives the params it always gave
        backend = self._eval.get("backend", "hf")
        self.backend = "hf" if isinstance(backend, dict) else backend
        self.gpus = 0 if config["world"] == "toy" else 1  # GPUs per evaluation job
        self.hf_home_arg = hf_home_arg
        # per (benchmark, language key) lengths, batch and context of a world sized for a GPU (None: the toy world)
        self.sizing = Sizing.of(config, hf_home)
        if self.sizing is not None:  # every evaluated key fits the GPU, else one line naming it, before any job
            self.sizing.check()
        # grouped: one evaluation job per model group (all its tasks); single: one job per (model group, task), so
        # an edit to one task's settings reruns only that task's evaluations (paper config: GPU start-up is cheap).
        self.single_task_jobs = self._eval["tasks_per_job"] == "single"
        self.benchmarks = list(self._eval["checkpoint_tasks"])
        self.merge_benchmarks = list(self._eval["merge_tasks"])
        world_langs = config["toy_world"]["languages"] if config["world"] == "toy" else merges.langs
        self.all_langs = canonical_languages(["en", *world_langs])
        # rules/evaluate.smk: the base's evaluation jobs; Table 2's language, configs, column groups and the extra
        # languages whose MGSM gets jobs of its own (evaluate_table2).
        self.base_rest, self.base_constrained = self.base_eval_groups()
        self.t2 = config["analysis"]["table2_language"]
        self.t2_configs = sorted({config["merges"]["default_swap"]}.union(*merges.best_of_configs(2)))
        self.t2_groups = self.table2_groups()
        self.t2_langs = [l for l in canonical_languages(["en", *config["mgsm_languages"]]) if self.table2_models(l)]

    def evaluation_params(self, command: str) -> dict:
        """The params every evaluation rule passes besides its benchmarks (and models): batch size, seed, task set,
        backend, HF cache and the code of its command (`evaluate` or `evaluate-merges`)."""
        return {
            "batch_size": self._eval["batch_size"],
            "seed": self._config["seed"],
            "task_set": self.task_set,
            "backend": self.backend,
            "hf_home": self.hf_home_arg,
            "code": command_hash(command),
        }

    # -----------------------------------------------------------------------------------------------------------
    # benchmarks and evaluation files

    def selection_benchmarks(self, run: str) -> list[str]:
        kind = expert_type(self._runs.spec(run)["expert"])
        used = (
            set(SELECT_READS[kind])
            | set(self.constraint_benchmarks(kind))
            | {METRIC_TASK[m] for m in self._config["selection"]["weights"].get(kind, {})}
        )
        return [b for b in self.tasks if b in used]

    def constraint_benchmarks(self, kind: str) -> list[str]:
        """Benchmarks of the selection constraints of an expert type: candidates and the base are compared on them."""
        used = {METRIC_TASK[m] for m in self._config["selection"]["constraints"].get(kind, {})}
        return [b for b in self.tasks if b in used]

    def leader_benchmarks(self, kind: str) -> list[str]:
        """The constraint benchmarks of an expert type evaluated on the leaders only (selection.constraint_evaluation:
        leaders; rule evaluate_checkpoint_leaders): those no metric of its weights reads. None with `all`."""
        sel = self._config["selection"]
        if sel["constraint_evaluation"] != "leaders":
            return []
        primary = set(SELECT_READS[kind]) | {METRIC_TASK[m] for m in sel["weights"].get(kind, {})}
        return [b for b in self.constraint_benchmarks(kind) if b not in primary]

    def primary_benchmarks(self, run: str) -> list[str]:
        """The selection benchmarks every checkpoint of a run is evaluated on (evaluate_checkpoints): all but the
        leaders' (leader_benchmarks)."""
        leaders = self.leader_benchmarks(expert_type(self._runs.spec(run)["expert"]))
        return [b for b in self.selection_benchmarks(run) if b not in leaders]

    def skipped(self, benchmark: str) -> bool:
        """A benchmark that scores nothing (model-written code without `execute_code`): its files say 'skipped', and
        a local job writes them (no GPU, no cluster job)."""
        return BENCHMARKS[benchmark].unsafe and not self._eval["tasks"][benchmark].get("execute_code", False)

    def selection_languages(self, run: str, bench: str) -> list[str]:
        """The languages of `bench` that selection reads for a run's checkpoints: those its weights' and
        constraints' metrics name (layerswap/select.py: metrics_of; `*` is every MGSM language), all the run's
        languages of a benchmark it reads without naming a metric of it."""
        expert = self._runs.spec(run)["expert"]
        kind, target = expert_type(expert), expert.removeprefix("joint_")
        sel = self._config["selection"]
        wanted: set[str] = set()
        for metric in [*sel["weights"].get(kind, {}), *sel["constraints"].get(kind, {})]:
            b, key = SELECTION_METRICS[metric]
            if b == bench and key == "*":
                wanted |= set(self._config["mgsm_languages"])
            elif b == bench:
                wanted.add(target if metric in TARGETED_METRICS else key)
        langs = self.task_languages(bench, self.checkpoint_languages(run))
        return [l for l in langs if l in wanted] if wanted else langs

    def table5_parts(self, run: str) -> dict[str, tuple[dict[str, list[str]], str]]:
        """The jobs of a run's evaluations after selection, on its selected checkpoints: {index part: ({benchmark:
        languages}, output folder)}. The benchmarks selection does not read, in the run's languages, in the
        checkpoints' own files (part `other`; single layout `other_<benchmark>`); and the languages of a selection
        benchmark that selection does not read (a language expert's English MGSM and Belebele: Tables 2 and 5 show
        them for the selected ones), in files of that language alone (evals/by_language/<lang>/, found there by
        layerswap.report.evals.Evals; part `other_<lang>`, single layout `other_<benchmark>_<lang>`). None for runs
        of an expert type Table 5 does not show (joint runs: Table 2 reads their MGSM, all of it before selection)."""
        if expert_type(self._runs.spec(run)["expert"]) == "joint":
            return {}
        selected = self.selection_benchmarks(run)
        own: dict[str, list[str]] = {}
        extra: dict[str, dict[str, list[str]]] = {}
        for b in self.benchmarks:
            langs = self.task_languages(b, self.checkpoint_languages(run))
            if b not in selected:
                if langs:
                    own[b] = langs
                continue
            for lang in (l for l in langs if l not in self.selection_languages(run, b)):
                extra.setdefault(lang, {})[b] = [lang]
        root = self._layout.evals()
        if self.single_task_jobs:
            parts = {f"other_{b}": ({b: langs}, root) for b, langs in own.items()}
            for lang, bs in extra.items():
                parts |= {f"other_{b}_{lang}": ({b: ls}, self._layout.language_evals(lang)) for b, ls in bs.items()}
            return parts
        parts = {"other": (own, root)} if own else {}
        return parts | {f"other_{lang}": (bs, self._layout.language_evals(lang)) for lang, bs in extra.items()}

    def table5_part_names(self, skipped: bool) -> str:
        """The parts of every run's Table 5 jobs whose benchmarks all score nothing (`skipped`) or not, as a
        wildcard constraint (one that matches nothing where there are none)."""
        parts = {
            part
            for run in self._runs.main
            for part, (bs, _) in self.table5_parts(run).items()
            if all(self.skipped(b) for b in bs) == skipped
        }
        return "|".join(sorted(parts)) or "(?!)"

    def table5_part(self, run: str, part: str) -> tuple[dict[str, list[str]], str]:
        return self.table5_parts(run)[part]

    def checkpoint_eval_indexes(self, run: str, benchmarks=None) -> list[str]:
        """Index files of a run's checkpoint evaluations (one per evaluation job), narrowed to the jobs that evaluate
        one of `benchmarks` if given: what reads those evaluations depends on these files."""
        wanted = set(self.tasks if benchmarks is None else benchmarks)
        primary = self.primary_benchmarks(run)
        jobs = {b: [b] for b in primary} if self.single_task_jobs else {None: primary}
        jobs |= {part: list(bs) for part, (bs, _) in self.table5_parts(run).items()}
        return [self._layout.checkpoint_index(run, part) for part, bs in jobs.items() if wanted & set(bs)]

    def checkpoint_indexes(self, expert: str, benchmarks=None) -> list[str]:
        """The index files of an expert type's checkpoint evaluations (of `benchmarks`, if given): its runs' and the
        index of its leaders' constraint evaluations (leaders_index)."""
        files = [f for run in self._runs.of(expert) for f in self.checkpoint_eval_indexes(run, benchmarks)]
        wanted = set(self.tasks if benchmarks is None else benchmarks)
        return files + [
            i for i in self.leaders_index(expert) if wanted & set(self.leader_benchmarks(expert_type(expert)))
        ]

    def leaders_index(self, expert: str) -> list[str]:
        """The index of an expert type's evaluate_checkpoint_leaders job, if it has one (a list of one or none)."""
        return [self._layout.leaders_index(expert)] if self.leader_benchmarks(expert_type(expert)) else []

    def task_languages(self, benchmark: str, languages=None) -> list[str]:
        """Languages an evaluation job runs `benchmark` in: those of `languages` the task lists (its own list, else
        all), else the task's list."""
        own = self._eval["tasks"][benchmark].get("languages") or self.all_langs
        langs = own if languages is None else [l for l in languages if l in own]  # never one the task does not list
        return [l for l in canonical_languages(langs) if BENCHMARKS[benchmark].keys(l)]  # FLORES: no English alone

    def task_data_files(self, benchmarks, languages=None) -> list[str]:
        """Exactly the data files an evaluation job of these benchmarks reads (none in the hf world: lm-eval's own
        tasks read the pre-staged hub datasets)."""
        if self._config["world"] != "toy":
            return []
        return [self._layout.eval_data(b, l) for b in benchmarks for l in self.task_languages(b, languages)]

    def benchmark_params(self, benchmarks, languages=None) -> str:
        """The benchmarks' settings as JSON, with explicit languages (see task_languages; `languages` may be a
        {benchmark: languages} mapping), limit and, where evaluation.backend gives a benchmark another backend than
        the jobs' --backend (`self.backend`), that backend: all that an evaluation job computes with, and only for its
        own benchmarks (a change to another benchmark reruns nothing)."""
        spec = {}
        for b in benchmarks:
            task = dict(self._eval["tasks"][b])
            task["languages"] = self.task_languages(b, languages[b] if isinstance(languages, dict) else languages)
            task.setdefault("limit", self._eval.get("limit"))
            if backend_for(self._eval, b) != self.backend:
                task["backend"] = backend_for(self._eval, b)
            if self.sizing is not None and not self.skipped(b):  # keys' batches where one differs, the job's context
                task |= self.sizing.params(b, [k for l in task["languages"] for k in BENCHMARKS[b].keys(l)])
            spec[b] = task
        return as_json(spec)

    def checkpoint_languages(self, run: str) -> list[str] | None:
        """Languages a run's checkpoints are evaluated in: all for math runs (Table 5), else English + the run's own
        language. Table 2's extra languages are files of their own (rules/evaluate.smk: evaluate_table2)."""
        expert = self._runs.spec(run)["expert"]
        if expert == "math":
            return None
        return ["en", expert.removeprefix("joint_")]

    def eval_files(self, model_id: str, benchmarks) -> list[str]:
        return [self._layout.eval_file(model_id, b) for b in benchmarks]

    # -----------------------------------------------------------------------------------------------------------
    # checkpoint evaluations (rules/select.smk)

    def checkpoint_models(self, run: str) -> dict[str, str]:
        return {
            checkpoint_model_id(run, checkpoint_name(s)): self._layout.checkpoint(run, checkpoint_name(s))
            for s in checkpoints_of(self._runs.spec(run))
        }

    def checkpoint_model_args(self, run: str) -> str:
        return " ".join(f"--model {i}={p}" for i, p in self.checkpoint_models(run).items())

    def checkpoint_eval_data(self, run: str, benchmarks) -> list[str]:
        """The data files a checkpoint evaluation job of `run` reads for these (selection) benchmarks."""
        return [f for b in benchmarks for f in self.task_data_files([b], self.selection_languages(run, b))]

    def checkpoint_eval_rule_params(self, run: str, benchmarks) -> str:
        """Before selection: each benchmark in the languages selection reads."""
        return self.benchmark_params(benchmarks, {b: self.selection_languages(run, b) for b in benchmarks})

    def table5_data(self, run: str, part: str) -> list[str]:
        langs = self.table5_part(run, part)[0]
        return [f for b, ls in langs.items() for f in self.task_data_files([b], ls)]

    def table5_params(self, run: str, part: str) -> str:
        langs = self.table5_part(run, part)[0]
        return self.benchmark_params(list(langs), langs)

    # -----------------------------------------------------------------------------------------------------------
    # rules/evaluate.smk

    def merge_eval_outputs(self, cfg: str, lang: str, pairs, benchmarks=None) -> list[str]:
        """The evaluation files of merge config `cfg`'s merges of `lang` (`pairs`: expert pairs, or the soup-then-swap
        recipes), of `benchmarks` (default: evaluation.merge_tasks): Layout.merge_eval, pair by pair."""
        benchmarks = benchmarks or self.merge_benchmarks
        return [self._layout.merge_eval(cfg, lang, pair, b) for pair in pairs for b in benchmarks]

    @staticmethod
    def merge_models(cfg: str, lang: str, pairs, recipes) -> str:
        """The --model words of a merge evaluation job: `merge/<cfg>/<lang>/<pair>=<recipe>`."""
        return " ".join(f"--model {merge_model_id(cfg, lang, p)}={r}" for p, r in zip(pairs, recipes))

    # Each evaluation rule serves both job layouts of evaluation.tasks_per_job. A grouped job evaluates a fixed list
    # of benchmarks, a single job the one in its {benchmark} wildcard.
    def job_benchmarks(self, wildcards, grouped) -> list[str]:
        """The benchmarks of one evaluation job: `grouped`, or the job's {benchmark} in the single layout."""
        return [wildcards.benchmark] if self.single_task_jobs else grouped

    def per_layout(self, grouped, single):
        """An evaluation job's output (or log) path(s): `grouped`, or the {benchmark} pattern `single` (single
        layout)."""
        return single if self.single_task_jobs else grouped

    def base_eval_groups(self) -> tuple[list[str], list[str]]:
        """grouped: the base's benchmarks that selection constraints read get a job of their own
        (evaluate_base_select), so that editing another task's settings reruns no selection; (rest, constrained).
        single: (all, [])."""
        if self.single_task_jobs:
            return self.benchmarks, []
        constrained = [
            b for b in self.benchmarks if any(b in self.constraint_benchmarks(k) for k in ("math", "language", "joint"))
        ]
        rest = [b for b in self.benchmarks if b not in constrained]
        return (rest, constrained) if rest and constrained else (self.benchmarks, [])

    def table2_groups(self) -> list[tuple[dict[str, str], list[str], list[str]]]:
        """[(models {id: source}, their input files, the languages their own MGSM files hold)] of Table 2's columns
        (computed once, t2_groups)."""
        has_math = MATH in self.benchmarks
        t2 = self.t2
        layout, pairs = self._layout, self._merges.pairs
        groups = [({"base": layout.base()}, [layout.base_config()], self.task_languages(MATH) if has_math else [])]
        for run in [r for e in ("math", t2, f"joint_{t2}") for r in self._runs.of(e)]:
            langs = self.task_languages(MATH, self.checkpoint_languages(run)) if has_math else []
            groups.append((self.checkpoint_models(run), [layout.checkpoints_record(run)], langs))
        for cfg in self.t2_configs:
            recipes = {merge_model_id(cfg, t2, p): layout.recipe(cfg, t2, p) for p in pairs}
            groups.append((recipes, list(recipes.values()), self.task_languages(MATH, [t2])))
        return groups

    def table2_models(self, lang: str) -> dict[str, str]:
        """The candidates of Table 2's extra language `lang`: every model of its columns whose own evaluation files
        lack MGSM in `lang` ({model id: checkpoint dir or recipe}); the job evaluates those its model list names."""
        return {m: src for models, _, langs in self.t2_groups if lang not in langs for m, src in models.items()}

    def table2_inputs(self, lang: str) -> list[str]:
        return sorted({f for _, files, langs in self.t2_groups if lang not in langs for f in files})

    def table2_models_file(self, lang: str) -> str:
        """The list of the models Table 2 reads in `lang` (rule table2_models), beside the index of their job."""
        return self._layout.table2_models(lang, self.t2)

    def table2_covered(self) -> str:
        """--covered-json of `layerswap table2-models` (table2_covered_languages)."""
        return as_json(self.table2_covered_languages())

    def table2_covered_languages(self) -> dict[str, list[str]]:
        """Per Table 2 column, the MGSM languages its models' own evaluation files hold (the base and the math
        experts: their own lists; the language and joint experts: English and the table's language; merges: the
        table's language)."""
        has_math = MATH in self.benchmarks
        own = self.task_languages(MATH) if has_math else []
        kinds = {"base": own, "math_expert": own if has_math else []}
        kinds["language_expert"] = kinds["joint_sft"] = self.task_languages(MATH, ["en", self.t2]) if has_math else []
        merged = self.task_languages(MATH, [self.t2])
        kinds |= {"swap_default": merged} | {m.best_column: merged for m in METHODS.values()}
        return kinds

    def table2_choice_inputs(self) -> list[str]:
        """What `layerswap table2-models` reads: the selections of the experts Table 2 shows and the MGSM evaluations
        in the table's language of every best-of config it compares (the winners are chosen on them)."""
        experts = [e for e in ("math", self.t2, f"joint_{self.t2}") if e in self._runs.expert_types()]
        files = [self._layout.selection(e) for e in experts]
        configs = dict.fromkeys(c for names in self._merges.best_of_configs(2) for c in names)
        return files + [f for c in configs for f in self.merge_eval_outputs(c, self.t2, self._merges.pairs, [MATH])]

    def table2_choice_params(self) -> str:
        """The params of `layerswap table2-models`: only what Table 2's choice of models depends on."""
        c = self._config
        return as_json(
            {
                "languages": [self.t2],  # Table 2's choice reads no other target language
                "mgsm_languages": c["mgsm_languages"],
                "top_k": self._merges.top_k,
                "best_of": c["merges"]["best_of"],
                "default_swap": c["merges"]["default_swap"],
                "world": c["world"],
                "table2_language": self.t2,
            }
        )

    def table2_model_args(self, lang: str) -> str:
        return " ".join(f"--model {m}={src}" for m, src in self.table2_models(lang).items())

    def table2_index(self, lang: str) -> str:
        return self._layout.table2_index(lang, self.t2)
