"""What the rules need from a validated config: run, pair and language lists, file lists, params (JSON words).

``Spec(config, ablations, ablation_merge_configs)`` is built once at parse time (rules/common.smk), after the config
is validated and the ablations planned, and never changes the config. The rules read its attributes and call its
methods for their inputs, outputs and params; rules/common.smk keeps only what needs Snakemake's own objects
(`wildcards`, `resources`, `report()`, `workflow`). Nothing here reads files written by jobs, so the whole DAG is
known at dry-run time; no Snakemake import, so the package's tests build a Spec from a config alone.

Params are compared by Snakemake for reruns: every method returning one keeps it canonical (sorted JSON keys,
languages in canonical order), so only a change of meaning reruns a job.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from layerswap.benchmarks import BENCHMARKS
from layerswap.config import METRIC_TASK, checkpoints_of, effective_runs, language_mix
from layerswap.contracts import pair_ids
from layerswap.merge.registry import SWAP, best_of_methods
from layerswap.train.gguf_base import is_gguf_source
from layerswap.train.sft import checkpoint_name
from layerswap.workflow.site import Site

R = "results"  # shell commands spell it out ("results/..."): a shell reads only its rule's own values (--lint)

# Benchmarks `layerswap select` reads for each expert kind (layerswap/select.py: metrics_of), plus those its
# configured weights name; checkpoint evaluations of these benchmarks are the only ones selection depends on.
SELECT_READS = {"math": ["mgsm"], "joint": ["mgsm"], "language": ["belebele", "flores"]}

SOUPS = ["langsoup", "multisoup"]  # the soup-then-swap recipes of each language

# report entries of the figures: name -> (subcategory, caption)
FIGURES = {
    "param_change": ("Parameter change", "../report/heatmap.rst"),
    "param_change_mean": ("Parameter change", "../report/param_change_mean.rst"),
    "swap_grid": ("Layer-swap grid", "../report/swap_grid.rst"),
    "table1_bars": ("Table 1 bars", "../report/table1_bars.rst"),
}
TABLE_NUMBERS = [1, 2, 5, 6]
ABLATION_FILES = ["table.csv", "table.md", "figure.svg", "figure.png"]


def as_json(value: Any) -> str:
    """A config value as one shell-quoted JSON word (params compare it for reruns)."""
    return shlex.quote(json.dumps(value, sort_keys=True))


def canonical_languages(langs) -> list[str]:
    """Evaluation languages in a canonical order (English, then by code): the order of a mapping or list in the
    config means nothing to an evaluation, so it must not reach params (only stale outputs rerun)."""
    return sorted(set(langs), key=lambda l: (l != "en", l))


def expert_kind(expert: str) -> str:
    if expert == "math":
        return "math"
    return "joint" if expert.startswith("joint_") else "language"


class Spec:
    """The rules' view of one validated config (plus the planned ablations). Read-only: nothing here writes to
    `config`, `ablations` or `ablation_merge_configs`."""

    def __init__(self, config: dict, ablations: dict[str, dict] | None = None,
                 ablation_merge_configs: dict[str, dict] | None = None, selected_ablations: list[str] | None = None,
                 site: Site | None = None):
        self.config = config
        self.site = site
        # storage paths: the config's, else the site file's (cluster/site.yaml: hf_home, scratch), else none
        self.storage = {**config["storage"], **{k: getattr(site, k) for k in ("hf_home", "scratch")
                                                if site and not config["storage"].get(k) and getattr(site, k)}}
        ablations = ablations or {}
        self.ablations = ablations
        self.selected_ablations = list(ablations) if selected_ablations is None else list(selected_ablations)
        self.soups = SOUPS
        self.merge_configs = {**config["merges"]["configs"], **(ablation_merge_configs or {})}

        # Expert checkpoints are the big artefacts: they live under storage.scratch when it is set (cluster scratch).
        big = (self.storage.get("scratch") or R).rstrip("/")
        self.experts = f"{big}/experts"
        self.merged = f"{big}/merged"  # merged models written by request (storage.keep_merged), same place rule
        self.langs = list(config["languages"])
        self.runs = effective_runs(config)
        self.pairs = pair_ids(config["selection"]["top_k"])
        self.eval = config["evaluation"]
        self.task_set = "toy" if config["world"] == "toy" else "paper"  # the lm-eval task set `evaluate` builds
        self.backend = self.eval.get("backend", "hf")
        self.gpus = 0 if config["world"] == "toy" else 1  # GPUs per evaluation job
        # grouped: one evaluation job per model group (all its tasks); single: one job per (model group, task), so
        # an edit to one task's settings reruns only that task's evaluations (paper config: GPU start-up is cheap).
        self.single_task_jobs = self.eval["tasks_per_job"] == "single"
        self.benchmarks = list(self.eval["checkpoint_tasks"])
        self.merge_benchmarks = list(self.eval["merge_tasks"])
        self.pair_configs = list(config["merges"]["configs"])
        keep = self.storage["keep_merged"]
        self.keep_merged = self.pair_configs if keep is True else list(keep or [])
        self.merged_models = [f"{self.merged}/{c}/{l}/{p}" for c in self.keep_merged for l in self.langs
                              for p in self.pairs]
        hf_home = self.storage.get("hf_home")  # else the job's environment (HF_HOME)
        self.hf_home_arg = f"--hf-home {shlex.quote(hf_home)}" if hf_home else ""
        world_langs = config["toy_world"]["languages"] if config["world"] == "toy" else self.langs
        self.all_langs = canonical_languages(["en", *world_langs])

        # Expert-set ablations (ablations.py docstring): their extra runs (never in `runs`, so runs_of and the main
        # selection ignore them; run_spec finds a run's params in either), bases, selections and merge configs.
        self.expert_ablations = {n: a for n, a in ablations.items() if "runs" in a}
        self.ablation_runs: dict[str, dict] = {}
        self.ablation_run_base: dict[str, str | None] = {}  # run -> its base directory (None: results/base)
        self.ablation_bases: dict[str, dict] = {}  # "<ablation>/<base>" -> base spec
        self.ablation_merges: dict[str, dict] = {}  # ax_* merge config -> {merge, set, lang_from, task_from, ablation}
        for name, abl in self.expert_ablations.items():
            self.ablation_runs.update(abl["runs"])
            for run, base in abl["run_base"].items():
                self.ablation_run_base[run] = None if base == "main" else f"{R}/ablations/{name}/bases/{base}"
            for base, bspec in abl["bases"].items():
                self.ablation_bases[f"{name}/{base}"] = bspec
            for cfg, m in abl["merges"].items():
                self.ablation_merges[cfg] = {**m, "ablation": name}
        self.ablation_extra = sorted({b for n in ablations for b in self.ablation_extra_benchmarks(n)})
        self.other_base_runs = sorted(r for r, b in self.ablation_run_base.items() if b)

        # rules/evaluate.smk: the base's evaluation jobs; Table 2's language, configs, column groups and the extra
        # languages whose MGSM gets jobs of its own (evaluate_table2).
        self.base_rest, self.base_constrained = self.base_eval_groups()
        self.t2 = config["analysis"]["table2_language"]
        self.t2_configs = sorted({config["merges"]["default_swap"]}.union(*self.best_of_configs(2)))
        self.t2_groups = self.table2_groups()
        self.t2_langs = [l for l in canonical_languages(["en", *config["mgsm_languages"]]) if self.table2_models(l)]

        # rules/analysis.smk: tables, report pages and figures.
        self.tables = [f"{R}/tables/table{n}.{ext}" for n in TABLE_NUMBERS for ext in ("csv", "md", "tex")]
        self.best_configs = [f"{R}/tables/table{n}_best_configs.{ext}" for n in (1, 2) for ext in ("csv", "md")]
        self.paper_world = config["world"] != "toy"
        # report entries: file stem -> (subcategory, caption)
        pages = {f"table{n}": (f"Table {n}", f"../report/table{n}.rst") for n in TABLE_NUMBERS}
        pages |= {f"table{n}_best_configs": (f"Table {n}", "../report/best_configs.rst") for n in (1, 2)}
        if self.paper_world:
            pages |= {f"table{n}_paper_vs_ours": (f"Table {n}", "../report/paper_vs_ours.rst") for n in TABLE_NUMBERS}
        self.table_pages = pages
        self.table_html = [f"{R}/tables/{t}.html" for t in pages]
        self.figures = FIGURES
        self.report_files = self.tables + self.table_html + [f"{R}/figures/{f}.{e}" for f in FIGURES
                                                             for e in ("svg", "png", "csv")]
        self.report_files += [f"{R}/config_used.yaml", f"{R}/config_used.html"]
        # the layer_swap configs of the swap-grid figure (lang_layers ones are listed in its CSV, not plotted)
        self.swap_configs = {n: c for n, c in config["merges"]["configs"].items() if c["method"] == SWAP}

    # -----------------------------------------------------------------------------------------------------------
    # runs and expert types

    @staticmethod
    def revision_arg(base: dict) -> str:
        """`--revision <rev>` of a hub base (`base` or an ablation's second base), or nothing."""
        return f"--revision {shlex.quote(base['revision'])}" if base.get("revision") else ""

    def run_spec(self, run: str) -> dict:
        return self.runs[run] if run in self.runs else self.ablation_runs[run]

    def runs_of(self, expert: str) -> list[str]:
        return sorted(r for r, p in self.runs.items() if p["expert"] == expert)

    def expert_types(self) -> list[str]:
        return sorted({p["expert"] for p in self.runs.values()})

    expert_kind = staticmethod(expert_kind)

    def run_manifests(self, expert: str) -> list[str]:
        return [f"{self.experts}/{run}/checkpoints.json" for run in self.runs_of(expert)]

    def sft_params(self, run: str) -> str:
        return as_json({**self.run_spec(run), "template": self.config["prompt_template"]})

    def sft_gpus(self, run: str) -> int:
        """GPUs an SFT job asks for (its rule's `gpu` resource): none in the toy world; under `accelerate launch`
        the most of one node's GPUs (the site file's gpus_per_node; 1 without a site file) that split the run's
        global batch evenly (batch 4 on an 8-GPU node: 4), so a job holds only the GPUs its processes use; else 1."""
        if self.gpus == 0:
            return 0
        if self.config["sft"]["launcher"] != "accelerate":
            return 1
        return self.processes(run, self.site.gpus_per_node if self.site else 1)

    def processes(self, run: str, gpus: int) -> int:
        """Data-parallel processes of a run on `gpus` GPUs: the most that split its global batch evenly."""
        batch, gpus = int(self.run_spec(run)["batch_size"]), max(1, int(gpus))
        return max(n for n in range(1, min(batch, gpus) + 1) if batch % n == 0)

    def sft_launch(self, run: str, gpus: int, basedir: str | Path) -> str:
        """The command that runs `layerswap sft`: the plain CLI, or `accelerate launch` with the repo's accelerate
        config and one process per GPU the job gets (resources.gpu: `sft_gpus`, or what --set-resources says), at
        most batch_size. A derived param: moving a workflow from one launcher to the other does not retrain finished
        runs. `basedir`: the workflow's directory (a relative accelerate config not found here is its)."""
        sft = self.config["sft"]
        if sft["launcher"] != "accelerate":
            return "layerswap sft"
        procs = self.processes(run, gpus)
        # a relative accelerate config is the repository's (cluster/...), wherever --directory points
        accel = Path(sft["accelerate_config"])
        accel = accel if accel.is_absolute() or accel.exists() else Path(basedir) / accel
        return (f"accelerate launch --config_file {shlex.quote(str(accel))} "
                f"--num_processes {procs} -m layerswap.train.sft")

    # -----------------------------------------------------------------------------------------------------------
    # benchmarks and evaluation files

    def selection_benchmarks(self, run: str) -> list[str]:
        kind = expert_kind(self.run_spec(run)["expert"])
        used = set(SELECT_READS[kind]) | set(self.constraint_benchmarks(kind)) | {
            METRIC_TASK[m] for m in self.config["selection"]["weights"].get(kind, {})}
        return [b for b in self.eval["tasks"] if b in used]

    def constraint_benchmarks(self, kind: str) -> list[str]:
        """Benchmarks of the selection constraints of an expert type: candidates and the base are compared on them."""
        used = {METRIC_TASK[m] for m in self.config["selection"]["constraints"].get(kind, {})}
        return [b for b in self.eval["tasks"] if b in used]

    def other_checkpoint_benchmarks(self, run: str) -> list[str]:
        """Checkpoint tasks selection does not read (Table 5 only)."""
        return [b for b in self.benchmarks if b not in self.selection_benchmarks(run)]

    def selection_indexes(self, expert: str) -> list[str]:
        """The index files `select` reads: per run, the checkpoint evaluations of the selection benchmarks only."""
        return [f"{R}/evals/ckpt/{run}/index.json" for run in self.runs_of(expert)]

    def checkpoint_eval_indexes(self, run: str, benchmarks=None) -> list[str]:
        """Index files of a run's checkpoint evaluations (one per evaluation job), narrowed to the jobs that evaluate
        one of `benchmarks` if given: what reads those evaluations depends on these files."""
        wanted = set(self.eval["tasks"] if benchmarks is None else benchmarks)
        selected, other = self.selection_benchmarks(run), self.other_checkpoint_benchmarks(run)
        if self.single_task_jobs:
            jobs = {f"index.{b}.json": [b] for b in selected + other}
        else:
            jobs = {"index.json": selected, "index.other.json": other}
        return [f"{R}/evals/ckpt/{run}/{name}" for name, bs in jobs.items() if wanted & set(bs)]

    def checkpoint_indexes(self, expert: str, benchmarks=None) -> list[str]:
        return [f for run in self.runs_of(expert) for f in self.checkpoint_eval_indexes(run, benchmarks)]

    def task_languages(self, benchmark: str, languages=None) -> list[str]:
        """Languages an evaluation job runs `benchmark` in: `languages` if given, else the task's own list, else
        all."""
        langs = languages if languages is not None else self.eval["tasks"][benchmark].get("languages") or self.all_langs
        return [l for l in canonical_languages(langs) if BENCHMARKS[benchmark].keys(l)]  # FLORES: no English alone

    def task_data_files(self, benchmarks, languages=None) -> list[str]:
        """Exactly the data files an evaluation job of these benchmarks reads (none in the hf world: lm-eval's own
        tasks read the pre-staged hub datasets)."""
        if self.config["world"] != "toy":
            return []
        return [f"{R}/data/eval/{b}_{l}.jsonl" for b in benchmarks for l in self.task_languages(b, languages)]

    def benchmark_params(self, benchmarks, languages=None) -> str:
        """The benchmarks' settings as JSON, with explicit languages (see task_languages) and limit: all that an
        evaluation job computes with, and only for its own benchmarks (a change to another benchmark reruns
        nothing)."""
        spec = {}
        for b in benchmarks:
            task = dict(self.eval["tasks"][b])
            task["languages"] = self.task_languages(b, languages)
            task.setdefault("limit", self.eval.get("limit"))
            spec[b] = task
        return as_json(spec)

    def checkpoint_languages(self, run: str) -> list[str] | None:
        """Languages a run's checkpoints are evaluated in: all for math runs (Table 5), else English + the run's own
        language. Table 2's extra languages are files of their own (rules/evaluate.smk: evaluate_table2)."""
        expert = self.run_spec(run)["expert"]
        if expert == "math":
            return None
        return ["en", expert.removeprefix("joint_")]

    @staticmethod
    def eval_files(model_dir: str, benchmarks) -> list[str]:
        return [f"{R}/evals/{model_dir}/{b}.json" for b in benchmarks]

    # -----------------------------------------------------------------------------------------------------------
    # rules/data.smk

    def toy_dataset_params(self, name: str) -> str:
        """Only what one dataset depends on (seed, its languages, its size): a changed size or an added language
        reruns the datasets it touches, and what reads them, nothing else."""
        from layerswap.data import toyworld

        world = self.config["toy_world"]
        mixes = {"pretrain": world.get("pretrain_mix"), "aya": world.get("aya_mix")}
        return as_json({"seed": world["seed"], **toyworld.dataset_inputs(name, world["languages"], world["sizes"],
                                                                         mixes)})

    def mix_sources(self, expert: str) -> list[dict]:
        """[{name, schema, path, n, lang}] for an expert type, from `mixes` and `data_sources`."""
        mixes, sources = self.config["mixes"], self.config["data_sources"]

        def entries(group, lang):
            mix = language_mix(mixes, lang) if group == "language" else mixes[group]
            files = {name: sources[name].get("file", "{name}_{lang}.jsonl").format(name=name, lang=lang)
                     for name in mix}
            return [
                {"name": name, "schema": sources[name]["schema"], "n": n, "lang": lang,
                 "path": f"{R}/data/raw/{files[name]}"}
                for name, n in mix.items()
            ]

        if expert == "math":
            found = entries("math", "en")
        elif expert.startswith("joint_"):
            found = entries("math", "en") + entries("language", expert[len("joint_"):])
        else:
            found = entries("language", expert)
        return sorted(found, key=lambda e: (e["name"], e["lang"]))  # a mapping's key order means nothing

    # -----------------------------------------------------------------------------------------------------------
    # rules/select.smk

    def checkpoint_models(self, run: str) -> dict[str, str]:
        return {
            f"ckpt/{run}/{checkpoint_name(s)}": f"{self.experts}/{run}/{checkpoint_name(s)}"
            for s in checkpoints_of(self.run_spec(run))
        }

    def checkpoint_model_args(self, run: str) -> str:
        return " ".join(f"--model {i}={p}" for i, p in self.checkpoint_models(run).items())

    def checkpoint_eval_data(self, run: str, benchmarks) -> list[str]:
        """The data files a checkpoint evaluation job of `run` reads for these benchmarks."""
        return self.task_data_files(benchmarks, self.checkpoint_languages(run))

    def checkpoint_eval_rule_params(self, run: str, benchmarks) -> str:
        return self.benchmark_params(benchmarks, self.checkpoint_languages(run))

    def selection_params(self, expert: str) -> str:
        kind = expert_kind(expert)
        lang = None if kind == "math" else expert.removeprefix("joint_")
        sel = self.config["selection"]
        return as_json({
            "kind": kind, "lang": lang, "weights": sel["weights"][kind],
            "constraints": sel["constraints"].get(kind, {}),
            "top_k": sel["top_k"], "max_per_run": sel["max_per_run"],
            "mgsm_languages": self.config["mgsm_languages"],
        })

    # -----------------------------------------------------------------------------------------------------------
    # rules/evaluate.smk

    def merge_eval_outputs(self, group: str, lang: str, names, benchmarks=None) -> list[str]:
        return [f for n in names for f in self.eval_files(f"merge/{group}/{lang}/{n}",
                                                          benchmarks or self.merge_benchmarks)]

    @staticmethod
    def merge_models(group: str, lang: str, names, recipes) -> str:
        return " ".join(f"--model merge/{group}/{lang}/{n}={r}" for n, r in zip(names, recipes))

    def merge_eval_patterns(self, group: str, names, benchmarks) -> list[str]:
        """Output patterns of the merge evaluations with {cfg}/{lang} (and {benchmark}) wildcards."""
        files = self.merge_eval_outputs("GROUP", "LANG", names, benchmarks)
        return [f.replace("GROUP", group).replace("LANG", "{lang}") for f in files]

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
        constrained = [b for b in self.benchmarks
                       if any(b in self.constraint_benchmarks(k) for k in ("math", "language", "joint"))]
        rest = [b for b in self.benchmarks if b not in constrained]
        return (rest, constrained) if rest and constrained else (self.benchmarks, [])

    def table2_groups(self) -> list[tuple[dict[str, str], list[str], list[str]]]:
        """[(models {id: source}, their input files, the languages their own MGSM files hold)] of Table 2's columns
        (computed once, t2_groups)."""
        mgsm = "mgsm" in self.benchmarks
        t2 = self.t2
        groups = [({"base": f"{R}/base"}, [f"{R}/base/config.json"], self.task_languages("mgsm") if mgsm else [])]
        for run in [r for e in ("math", t2, f"joint_{t2}") for r in self.runs_of(e)]:
            langs = self.task_languages("mgsm", self.checkpoint_languages(run)) if mgsm else []
            groups.append((self.checkpoint_models(run), [f"{self.experts}/{run}/checkpoints.json"], langs))
        for cfg in self.t2_configs:
            recipes = {f"merge/{cfg}/{t2}/{p}": f"{R}/merges/{cfg}/{t2}/{p}.json" for p in self.pairs}
            groups.append((recipes, list(recipes.values()), self.task_languages("mgsm", [t2])))
        return groups

    def table2_models(self, lang: str) -> dict[str, str]:
        """Table 2's models whose own evaluation files lack MGSM in `lang`: {model id: checkpoint dir or recipe}."""
        return {m: src for models, _, langs in self.t2_groups if lang not in langs for m, src in models.items()}

    def table2_inputs(self, lang: str) -> list[str]:
        return sorted({f for _, files, langs in self.t2_groups if lang not in langs for f in files})

    def table2_model_args(self, lang: str) -> str:
        return " ".join(f"--model {m}={src}" for m, src in self.table2_models(lang).items())

    def table2_index(self, lang: str) -> str:
        return f"{R}/evals/by_language/{lang}/table2_{self.t2}.json"

    # -----------------------------------------------------------------------------------------------------------
    # rules/analysis.smk

    def table_inputs(self) -> list[str]:
        experts = self.expert_types()
        files = [f"{R}/selection/{e}.json" for e in experts]
        files += [i for e in experts for i in self.checkpoint_indexes(e)]
        files += self.eval_files("base", self.benchmarks)
        for cfg in self.pair_configs:
            for lang in self.langs:
                files += self.merge_eval_outputs(cfg, lang, self.pairs)
        for lang in self.langs:
            files += self.merge_eval_outputs("soupswap", lang, SOUPS)
        return files + [self.table2_index(lang) for lang in self.t2_langs]

    def table_params(self, table2: bool = True) -> str:
        """The tables' params; table2=False: without the Table 2 language and Table 5's benchmarks (the Table 1
        figure shows neither)."""
        config = self.config
        m = config["merges"]
        params = {
            "languages": self.langs, "mgsm_languages": config["mgsm_languages"],
            "top_k": config["selection"]["top_k"], "best_of": m["best_of"], "default_swap": m["default_swap"],
            "world": config["world"], "language_names": config.get("language_names", {}), "seed": config["seed"],
            "bootstrap_draws": config["analysis"]["bootstrap_draws"],
        }
        if table2:  # Table 5 shows what the checkpoints were evaluated on
            params |= {"table2_language": config["analysis"]["table2_language"], "benchmarks": sorted(self.benchmarks)}
        return as_json(params)

    def heatmap_experts(self) -> list[str]:
        return ["math"] + self.langs

    def heatmap_expert_args(self) -> str:
        return " ".join(f"--expert-from-selection {e}={R}/selection/{e}.json" for e in self.heatmap_experts())

    def heatmap_thresholds(self) -> str:
        thresholds = self.config["analysis"]["heatmap_thresholds"]
        return as_json({e: thresholds[expert_kind(e)] for e in self.heatmap_experts()})

    def swap_grid_params(self) -> str:
        config = self.config
        return as_json({
            "configs": self.swap_configs, "languages": self.langs, "top_k": config["selection"]["top_k"],
            "default_swap": config["merges"]["default_swap"], "world": config["world"],
            "language_names": config.get("language_names", {}),
        })

    def swap_grid_inputs(self) -> list[str]:
        return [f"{R}/evals/merge/{c}/{l}/{p}/mgsm.json" for c in self.swap_configs for l in self.langs
                for p in self.pairs]

    def table1_bars_inputs(self) -> list[str]:
        """Exactly what Table 1 reads: selections and checkpoint indexes of math + each language, base MGSM, and the
        MGSM of every pair of the default swap and the best-of configs of the methods Table 1 shows."""
        m = self.config["merges"]
        experts = ["math"] + self.langs
        files = [f"{R}/selection/{e}.json" for e in experts]
        files += [i for e in experts for i in self.checkpoint_indexes(e, ["mgsm"])]
        files += self.eval_files("base", ["mgsm"])
        configs = dict.fromkeys([c for names in self.best_of_configs(1) for c in names] + [m["default_swap"]])
        files += [f"{R}/evals/merge/{c}/{l}/{p}/mgsm.json" for c in configs for l in self.langs for p in self.pairs]
        return files

    def best_of_configs(self, table: int) -> list[list[str]]:
        """The best_of configs of each merge method with a best-config column in Table `table`, in column order."""
        best_of = self.config["merges"]["best_of"]
        return [best_of[m.name] for m in best_of_methods(best_of, table)]

    def config_json(self) -> str:
        """The config (defaults filled, keys sorted) as one shell word: config_used and the manifest record it."""
        return shlex.quote(json.dumps(self.config, default=str, sort_keys=True))

    # -----------------------------------------------------------------------------------------------------------
    # rules/audit.smk

    def results(self) -> list[str]:
        """Every file a job of the default DAG declares as output (the manifest's excepted), once each: targets of
        `all`, so a deleted one is rebuilt by the next run (Snakemake >= 7.7 does not revisit the intermediates of
        targets that are present) and what reads it reruns after it; and the manifest's inputs, so it runs last."""
        files = self.data_files() + [f"{R}/base/config.json"]
        files += [f"{self.experts}/{run}/checkpoints.json" for run in self.runs]
        files += [f for run in self.runs for f in self.checkpoint_eval_indexes(run)]
        files += [f for e in self.expert_types() for f in self.selection_indexes(e)]  # single layout: checkpoint_index
        files += [f"{R}/merges/{c}/{l}/{p}.json" for c in self.pair_configs for l in self.langs for p in self.pairs]
        files += [f"{R}/merges/soupswap/{l}/{m}.json" for l in self.langs for m in SOUPS]
        files += self.table_inputs() + self.tables + self.best_configs + [f"{R}/tables/summary.md"]
        if self.paper_world:
            files += [f"{R}/tables/table{n}_paper_vs_ours.{e}" for n in TABLE_NUMBERS for e in ("csv", "md")]
        files += self.report_files + self.merged_models
        return list(dict.fromkeys(files))

    def data_files(self) -> list[str]:
        """The data files the default DAG's jobs write: raw sources (toy generator or hub), evaluation sets (toy
        world), SFT mixes."""
        from layerswap.data import toyworld

        experts, sources = self.expert_types(), self.config["data_sources"]
        mixed = [s for e in experts for s in self.mix_sources(e)]
        if self.config["world"] == "toy":  # rules/data.smk toy_source (a source file of the user's is no output)
            made = set(toyworld.datasets(sorted(self.config["toy_world"]["languages"])))
            raw = [s["path"] for s in mixed if Path(s["path"]).name.removesuffix(".jsonl") in made]
            if not is_gguf_source(self.config["base"]["source"]):  # toy_corpus: what the toy base pretrains on
                raw += [f"{R}/data/raw/pretrain.jsonl", f"{R}/data/raw/vocab.json"]
        else:  # hub_data: rows + their manifest, of the hub sources
            raw = [p for s in mixed if "hub_id" in sources[s["name"]]
                   for p in (s["path"], s["path"].removesuffix(".jsonl") + ".manifest.json")]
        evals = self.task_data_files(self.benchmarks) + self.task_data_files(["mgsm"], self.t2_langs)
        evals += [f for l in self.langs for f in self.task_data_files(self.merge_benchmarks, [l])]
        mixes = [f"{R}/data/sft/{e}.{ext}" for e in experts for ext in ("jsonl", "manifest.json")]
        return sorted(set(raw)) + sorted(set(evals)) + mixes

    # -----------------------------------------------------------------------------------------------------------
    # rules/ablations.smk

    def ablation_runs_of(self, name: str, set_name: str, expert: str) -> list[str]:
        prefix = f"ax_{name}_{set_name}_"
        return sorted(r for r, p in self.expert_ablations[name]["runs"].items()
                      if r.startswith(prefix) and p["expert"] == expert)

    def ablation_selection_indexes(self, name: str, set_name: str, expert: str) -> list[str]:
        return [f"{R}/evals/ckpt/{r}/index.json" for r in self.ablation_runs_of(name, set_name, expert)]

    @staticmethod
    def ablation_selection(name: str, set_name: str, expert: str) -> str:
        return f"{R}/ablations/{name}/selection/{set_name}/{expert}.json"

    def ablation_base_evals(self, name: str, set_name: str, expert: str) -> list[str]:
        """The base evaluations an ablation selection's constraints compare with: of the base its runs trained
        from."""
        benchmarks = self.constraint_benchmarks(expert_kind(expert))
        (base,) = {self.ablation_run_base[r] for r in self.ablation_runs_of(name, set_name, expert)} or {None}
        return self.eval_files("base" if base is None else base.removeprefix(f"{R}/"), benchmarks)

    def ablation_merge_selection(self, cfg: str, lang: str, which: str) -> str:
        m = self.ablation_merges[cfg]
        expert = lang if which == "lang" else "math"
        if m[f"{which}_from"] == "main":
            return f"{R}/selection/{expert}.json"
        return self.ablation_selection(m["ablation"], m["set"], expert)

    def ablation_configs(self, name: str) -> list[str]:
        return list(dict.fromkeys(v["config"] for v in self.ablations[name]["variants"] if v["config"]))

    def ablation_extra_benchmarks(self, name: str) -> list[str]:
        """Benchmarks an ablation reports beyond the merge tasks every merge gets (evaluate_ablation_merges)."""
        return [b for b in self.ablations[name]["metrics"] if b not in self.merge_benchmarks]

    def ablation_inputs(self, name: str) -> list[str]:
        files = []
        if name in self.expert_ablations:  # every selection of the ablation's own experts (also those no merge reads)
            files += [self.ablation_selection(name, s, e)
                      for s, es in self.expert_ablations[name]["selections"].items() for e in es]
        for cfg in self.ablation_configs(name):
            for lang in self.langs:
                files += self.merge_eval_outputs(cfg, lang, self.pairs, self.ablations[name]["metrics"])
        return files

    def ablation_params(self, name: str) -> str:
        spec, config = self.ablations[name], self.config
        return as_json({
            "name": name, "title": spec["title"], "plan": spec["plan"], "metrics": spec["metrics"],
            "variants": spec["variants"], "languages": self.langs, "top_k": config["selection"]["top_k"],
            "world": config["world"], "language_names": config.get("language_names", {}),
            "seed": config["seed"], "bootstrap_draws": config["analysis"]["bootstrap_draws"],
        })

    def ablation_outputs(self, name: str) -> list[str]:
        return [f"{R}/ablations/{name}/{f}" for f in ABLATION_FILES]

    def ablation_base_spec(self, ablation: str, base: str) -> dict:
        return self.ablation_bases[f"{ablation}/{base}"]
