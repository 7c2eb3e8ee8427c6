"""The data jobs of a config: what each toy dataset depends on, the sources of each expert type's SFT mix, and every
data file the default DAG writes. A part of `Spec` (layerswap/workflow/spec.py), for rules/data.smk.
"""

from __future__ import annotations

from pathlib import Path

from layerswap.benchmarks import MATH
from layerswap.data.mixes import language_mix
from layerswap.layout import Layout
from layerswap.workflow.evaluation_jobs import EvaluationJobs
from layerswap.workflow.runs import Runs
from layerswap.workflow.words import as_json


class DataJobs:
    def __init__(self, config: dict, layout: Layout, runs: Runs, evals: EvaluationJobs):
        self._config, self._layout, self._runs, self._evals = config, layout, runs, evals

    def toy_dataset_params(self, name: str) -> str:
        """Only what one dataset depends on (seed, its languages, its size): a changed size or an added language
        reruns the datasets it touches, and what reads them, nothing else."""
        from layerswap.data import toyworld

        world = self._config["toy_world"]
        mixes = {"pretrain": world.get("pretrain_mix"), "aya": world.get("aya_mix")}
        return as_json(
            {"seed": world["seed"], **toyworld.dataset_inputs(name, world["languages"], world["sizes"], mixes)}
        )

    def mix_sources(self, expert: str) -> list[dict]:
        """[{name, schema, path, n, lang}] for an expert type, from `mixes` and `data_sources`."""
        mixes, sources = self._config["mixes"], self._config["data_sources"]

        def entries(group, lang):
            mix = language_mix(mixes, lang) if group == "language" else mixes[group]
            files = {
                name: sources[name].get("file", "{name}_{lang}.jsonl").format(name=name, lang=lang) for name in mix
            }
            return [
                {
                    "name": name,
                    "schema": sources[name]["schema"],
                    "n": n,
                    "lang": lang,
                    "path": self._layout.raw(files[name]),
                }
                for name, n in mix.items()
            ]

        if expert == "math":
            found = entries("math", "en")
        elif expert.startswith("joint_"):
            found = entries("math", "en") + entries("language", expert[len("joint_") :])
        else:
            found = entries("language", expert)
        return sorted(found, key=lambda e: (e["name"], e["lang"]))  # a mapping's key order means nothing

    def data_files(self) -> list[str]:
        """The data files the default DAG's jobs write: raw sources (toy generator or hub), evaluation sets (toy
        world), SFT mixes."""
        from layerswap.data import toyworld

        config, layout, evals = self._config, self._layout, self._evals
        experts, sources = self._runs.expert_types(), config["data_sources"]
        mixed = [s for e in experts for s in self.mix_sources(e)]
        if config["world"] == "toy":  # rules/data.smk toy_source (a source file of the user's is no output)
            made = set(toyworld.datasets(sorted(config["toy_world"]["languages"])))
            raw = [s["path"] for s in mixed if Path(s["path"]).name.removesuffix(".jsonl") in made]
            if config["base"]["source"] == "toy":  # toy_corpus: what the toy base pretrains on
                raw += [layout.pretrain_corpus(), layout.vocab()]
        else:  # hub_data: rows + their manifest, of the hub sources
            raw = [
                p
                for s in mixed
                if "hub_id" in sources[s["name"]]
                for p in (s["path"], layout.hub_manifest(Path(s["path"]).name))
            ]
        evals_data = evals.task_data_files(evals.benchmarks) + evals.task_data_files([MATH], evals.t2_langs)
        evals_data += [f for l in config["languages"] for f in evals.task_data_files(evals.merge_benchmarks, [l])]
        mixes = [layout.sft_mix(e, ext) for e in experts for ext in ("jsonl", "manifest.json")]
        return sorted(set(raw)) + sorted(set(evals_data)) + mixes
