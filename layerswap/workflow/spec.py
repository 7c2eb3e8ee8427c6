"""What the rules need from a validated config: run, pair and language lists, file lists, params (JSON words).

``Spec(config, ablations, ablation_merge_configs)`` is built once at parse time (rules/common.smk), after the config
is validated and the ablations planned, and never changes the config. The rules read its attributes and call its
methods for their inputs, outputs and params; rules/common.smk keeps only what needs Snakemake's own objects
(`wildcards`, `resources`, `report()`, `workflow`). Nothing here reads files written by jobs, so the whole DAG is
known at dry-run time; no Snakemake import, so the package's tests build a Spec from a config alone.

Params are compared by Snakemake for reruns: every method returning one keeps it canonical (sorted JSON keys,
languages in canonical order), so only a change of meaning reruns a job.

Two parts of `Spec` have modules of their own: the evaluation jobs (layerswap/workflow/evaluation_jobs.py) and the
ablations' jobs (layerswap/workflow/ablation_jobs.py); every results path is the layout's (`spec.layout`,
layerswap/workflow/layout.py); params words and the evaluation shell command are layerswap/workflow/words.py's.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from layerswap.config import effective_runs, expert_type, language_mix
from layerswap.contracts import merge_model_id, pair_ids
from layerswap.merge.registry import SWAP, best_of_methods
from layerswap.train.gguf_base import is_gguf_source
from layerswap.workflow.ablation_jobs import AblationJobs
from layerswap.workflow.evaluation_jobs import EvaluationJobs
from layerswap.workflow.layout import R, Layout
from layerswap.workflow.site import Site
from layerswap.workflow.words import as_json, canonical_languages

SOUPS = ["langsoup", "multisoup"]  # the soup-then-swap recipes of each language

# report entries of the figures: name -> (subcategory, caption)
FIGURES = {
    "param_change": ("Parameter change", "../report/heatmap.rst"),
    "param_change_mean": ("Parameter change", "../report/param_change_mean.rst"),
    "swap_grid": ("Layer-swap grid", "../report/swap_grid.rst"),
    "table1_bars": ("Table 1 bars", "../report/table1_bars.rst"),
}
TABLE_NUMBERS = [1, 2, 5, 6]


class Spec(EvaluationJobs, AblationJobs):
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
        self.selected_ablations = list(ablations) if selected_ablations is None else list(selected_ablations)
        self.soups = SOUPS
        self.merge_configs = {**config["merges"]["configs"], **(ablation_merge_configs or {})}

        # Expert checkpoints are the big artefacts: they live under storage.scratch when it is set (cluster scratch).
        # Merged models written by request (storage.keep_merged) follow the same rule.
        self.layout = Layout(root=R, big=(self.storage.get("scratch") or R).rstrip("/"))
        layout = self.layout
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
        self.merged_models = [layout.merged_model(c, l, p) for c in self.keep_merged for l in self.langs
                              for p in self.pairs]
        hf_home = self.storage.get("hf_home")  # else the job's environment (HF_HOME)
        self.hf_home_arg = f"--hf-home {shlex.quote(hf_home)}" if hf_home else ""
        world_langs = config["toy_world"]["languages"] if config["world"] == "toy" else self.langs
        self.all_langs = canonical_languages(["en", *world_langs])
        self.init_ablations(ablations)  # layerswap/workflow/ablation_jobs.py


        # rules/evaluate.smk: the base's evaluation jobs; Table 2's language, configs, column groups and the extra
        # languages whose MGSM gets jobs of its own (evaluate_table2).
        self.base_rest, self.base_constrained = self.base_eval_groups()
        self.t2 = config["analysis"]["table2_language"]
        self.t2_configs = sorted({config["merges"]["default_swap"]}.union(*self.best_of_configs(2)))
        self.t2_groups = self.table2_groups()
        self.t2_langs = [l for l in canonical_languages(["en", *config["mgsm_languages"]]) if self.table2_models(l)]

        # rules/analysis.smk: tables, report pages and figures.
        self.tables = [layout.table(f"table{n}", ext) for n in TABLE_NUMBERS for ext in ("csv", "md", "tex")]
        self.best_configs = [layout.table(f"table{n}_best_configs", ext) for n in (1, 2) for ext in ("csv", "md")]
        self.paper_world = config["world"] != "toy"
        # report entries: file stem -> (subcategory, caption)
        pages = {f"table{n}": (f"Table {n}", f"../report/table{n}.rst") for n in TABLE_NUMBERS}
        pages |= {f"table{n}_best_configs": (f"Table {n}", "../report/best_configs.rst") for n in (1, 2)}
        if self.paper_world:
            pages |= {f"table{n}_paper_vs_ours": (f"Table {n}", "../report/paper_vs_ours.rst") for n in TABLE_NUMBERS}
        self.table_pages = pages
        self.table_html = [layout.table(t, "html") for t in pages]
        self.figures = FIGURES
        self.report_files = self.tables + self.table_html + [layout.figure(f, e) for f in FIGURES
                                                             for e in ("svg", "png", "csv")]
        self.report_files += [layout.config_used("yaml"), layout.config_used("html")]
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

    expert_kind = staticmethod(expert_type)

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
        runs. `basedir`: the workflow's directory (a relative accelerate config not found here is its).
        `--main_process_port 0`: accelerate asks the OS for a free rendezvous port as the job starts, so SFT jobs that
        start together on one node never share one (its default, 29500, is one port for all); the same words for
        every job and every run, so the param never differs between identical runs."""
        sft = self.config["sft"]
        if sft["launcher"] != "accelerate":
            return "layerswap sft"
        procs = self.processes(run, gpus)
        # a relative accelerate config is the repository's (cluster/...), wherever --directory points
        accel = Path(sft["accelerate_config"])
        accel = accel if accel.is_absolute() or accel.exists() else Path(basedir) / accel
        return (f"accelerate launch --config_file {shlex.quote(str(accel))} "
                f"--num_processes {procs} --main_process_port 0 -m layerswap.train.sft")

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
                 "path": self.layout.raw(files[name])}
                for name, n in mix.items()
            ]

        if expert == "math":
            found = entries("math", "en")
        elif expert.startswith("joint_"):
            found = entries("math", "en") + entries("language", expert[len("joint_"):])
        else:
            found = entries("language", expert)
        return sorted(found, key=lambda e: (e["name"], e["lang"]))  # a mapping's key order means nothing

    def selection_params(self, expert: str) -> str:
        kind = expert_type(expert)
        lang = None if kind == "math" else expert.removeprefix("joint_")
        sel = self.config["selection"]
        return as_json({
            "kind": kind, "lang": lang, "weights": sel["weights"][kind],
            "constraints": sel["constraints"].get(kind, {}),
            "top_k": sel["top_k"], "max_per_run": sel["max_per_run"],
            "mgsm_languages": self.config["mgsm_languages"],
        })

    # -----------------------------------------------------------------------------------------------------------
    # rules/analysis.smk

    def table_inputs(self) -> list[str]:
        experts = self.expert_types()
        files = [self.layout.selection(e) for e in experts]
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
        return " ".join(f"--expert-from-selection {e}={self.layout.selection(e)}" for e in self.heatmap_experts())

    def heatmap_thresholds(self) -> str:
        thresholds = self.config["analysis"]["heatmap_thresholds"]
        return as_json({e: thresholds[expert_type(e)] for e in self.heatmap_experts()})

    def swap_grid_params(self) -> str:
        config = self.config
        return as_json({
            "configs": self.swap_configs, "languages": self.langs, "top_k": config["selection"]["top_k"],
            "default_swap": config["merges"]["default_swap"], "world": config["world"],
            "language_names": config.get("language_names", {}),
        })

    def swap_grid_inputs(self) -> list[str]:
        return self.merge_mgsm_files(self.swap_configs)

    def table1_bars_inputs(self) -> list[str]:
        """Exactly what Table 1 reads: selections and checkpoint indexes of math + each language, base MGSM, and the
        MGSM of every pair of the default swap and the best-of configs of the methods Table 1 shows."""
        m = self.config["merges"]
        experts = ["math"] + self.langs
        files = [self.layout.selection(e) for e in experts]
        files += [i for e in experts for i in self.checkpoint_indexes(e, ["mgsm"])]
        files += self.eval_files("base", ["mgsm"])
        configs = dict.fromkeys([c for names in self.best_of_configs(1) for c in names] + [m["default_swap"]])
        return files + self.merge_mgsm_files(configs)

    def merge_mgsm_files(self, configs) -> list[str]:
        """The MGSM evaluation files of every pair of these merge configs in every language."""
        return [f for c in configs for l in self.langs for p in self.pairs
                for f in self.eval_files(merge_model_id(c, l, p), ["mgsm"])]

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
        layout = self.layout
        files = self.data_files() + [layout.base_config()]
        files += [layout.checkpoints_record(run) for run in self.runs]
        files += [f for run in self.runs for f in self.checkpoint_eval_indexes(run)]
        files += [f for e in self.expert_types() for f in self.selection_indexes(e)]  # single layout: checkpoint_index
        files += self.recipes(self.pair_configs)
        files += [layout.recipe("soupswap", l, m) for l in self.langs for m in SOUPS]
        files += self.table_inputs() + self.tables + self.best_configs + [layout.table("summary", "md")]
        if self.paper_world:
            files += [layout.table(f"table{n}_paper_vs_ours", e) for n in TABLE_NUMBERS for e in ("csv", "md")]
        files += self.report_files + self.merged_models
        return list(dict.fromkeys(files))

    def selection_results(self) -> list[str]:
        """The selections and the files they are built from, the data aside: base, SFT mixes, the experts' records,
        the checkpoint evaluations `select` reads and the base's evaluations its constraints compare with (what the
        ablations' merges read of the main DAG: Spec.ablation_results), of the experts merges read."""
        experts = [e for e in self.expert_types() if e == "math" or e in self.langs]  # no joint experts
        files = [self.layout.base_config()]
        files += [self.layout.sft_mix(e, x) for e in experts for x in ("jsonl", "manifest.json")]
        for e in experts:
            files += [f for run in self.runs_of(e) for f in self.run_selection_files(run)]
            files += self.eval_files("base", self.constraint_benchmarks(expert_type(e))) + [self.layout.selection(e)]
        return files

    def run_selection_files(self, run: str) -> list[str]:
        """A run's checkpoint record and the indexes of the checkpoint evaluations `select` reads (single layout:
        one per benchmark, and the index.json made of them)."""
        return [self.layout.checkpoints_record(run), self.layout.checkpoint_index(run),
                *self.checkpoint_eval_indexes(run, self.selection_benchmarks(run))]

    def recipes(self, configs) -> list[str]:
        """The recipe files of these merge configs: every language and expert pair (rule merge_recipes)."""
        return [self.layout.recipe(c, l, p) for c in configs for l in self.langs for p in self.pairs]

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
                raw += [self.layout.pretrain_corpus(), self.layout.vocab()]
        else:  # hub_data: rows + their manifest, of the hub sources
            raw = [p for s in mixed if "hub_id" in sources[s["name"]]
                   for p in (s["path"], self.layout.hub_manifest(Path(s["path"]).name))]
        evals = self.task_data_files(self.benchmarks) + self.task_data_files(["mgsm"], self.t2_langs)
        evals += [f for l in self.langs for f in self.task_data_files(self.merge_benchmarks, [l])]
        mixes = [self.layout.sft_mix(e, ext) for e in experts for ext in ("jsonl", "manifest.json")]
        return sorted(set(raw)) + sorted(set(evals)) + mixes
