"""The results layout: the one place a path under the results folder is spelled.

Every file a job reads or writes has a method here, used by the rules (rules/*.smk), `Spec`, the report, the audit
and the tests. A method takes the parts that vary (an expert, a run, a merge config, ...) and returns the path as a
string; passing a Snakemake wildcard (`"{expert}"`) gives the rule's pattern, passing a value gives one file, so a
rule's output and the file lists that read it cannot drift apart.

Two roots: `root` (``results``, relative to the workflow's directory) for everything small, and `big` for the
expert checkpoints and merged models, the big artefacts, which live under `storage.scratch` when it is set (a
cluster's scratch file system), in the results folder's own namespace there (`<scratch>/<id>`:
layerswap/scratch.py), else under `root`. `Layout()` is the layout of a run without scratch: what the
package's own commands and tests use for the files that never move.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from layerswap.contracts import merge_model_id

R = "results"  # the results folder, relative to the workflow's directory

# Folders of the results root that hold no job's declared output: logs, and the evaluation store
# (layerswap/evaluation/store.py), which the evaluation jobs keep for themselves.
LOGS, STORE = "logs", "store"

# Names inside a folder that a command is given (`--data-dir`, `--out-dir`, a run's `--out-dir`): the commands use
# these, the layout's paths are built of them, so neither derives the other's name.
#: The run record `layerswap sft` writes beside its checkpoints (`<run dir>/checkpoints.json`).
RUN_RECORD = "checkpoints.json"


def eval_set_file(dataset: str) -> str:
    """An evaluation set in the evaluation data folder (`--data-dir`), by its dataset name `<benchmark>_<lang>`."""
    return f"{dataset}.jsonl"


def eval_data_file(benchmark: str, lang: str) -> str:
    """The evaluation set of `benchmark` in `lang` in the evaluation data folder: `<benchmark>_<lang>.jsonl`."""
    return eval_set_file(f"{benchmark}_{lang}")


def eval_result_file(model_id: str, benchmark: str) -> str:
    """A model's evaluation of one benchmark in an evaluations folder (`--out-dir`: `<results>/evals`, or a
    language's own folder `evals/by_language/<lang>`): `<model id>/<benchmark>.json`."""
    return f"{model_id}/{benchmark}.json"


@dataclass(frozen=True)
class Layout:
    """Each kind of file is spelled in one method; a method that needs a folder calls that folder's method."""

    root: str = R
    big: str = R  # <storage.scratch>/<the results folder's id>, else the results root

    @classmethod
    def at(cls, root: str | os.PathLike) -> Layout:
        """The layout of the results folder `root` with the big artefacts in it too: a finished run's folder as the
        audit, the scripts and the tests read it (`Layout.at(tmp_path / "results")`)."""
        return cls(str(root), str(root))

    # -- data: <root>/data/{raw,eval,sft}/ ----------------------------------------------------------------------
    def raw(self, file: str) -> str:
        """A raw source file (toy generator or hub download): `<name>_<lang>.jsonl`, `<name>.jsonl`, ..."""
        return f"{self.root}/data/raw/{file}"

    def hub_manifest(self, file: str) -> str:
        """The manifest a hub download writes beside its rows `file` (`<name>_<lang>.jsonl` ->
        `<name>_<lang>.manifest.json`)."""
        return self.raw(file.removesuffix(".jsonl") + ".manifest.json")

    def pretrain_corpus(self) -> str:
        return self.raw("pretrain.jsonl")

    def vocab(self) -> str:
        return self.raw("vocab.json")

    def eval_data_dir(self) -> str:
        """The evaluation sets' folder (`--data-dir` of the evaluation commands)."""
        return f"{self.root}/data/eval"

    def eval_set(self, dataset: str) -> str:
        """A toy evaluation set by the toy generator's name for it (`<benchmark>_<lang>`, rules/data.smk toy_eval)."""
        return f"{self.eval_data_dir()}/{eval_set_file(dataset)}"

    def eval_data(self, benchmark: str, lang: str) -> str:
        return f"{self.eval_data_dir()}/{eval_data_file(benchmark, lang)}"

    def sft_mix(self, expert: str, ext: str = "jsonl") -> str:
        """An expert type's SFT mix (`jsonl`) or its manifest (`manifest.json`)."""
        return f"{self.root}/data/sft/{expert}.{ext}"

    # -- base and experts: <root>/base, <big>/experts/<run>/ ----------------------------------------------------
    def base(self) -> str:
        return f"{self.root}/base"

    def base_config(self, base: str | None = None) -> str:
        """The `config.json` of a base model folder (default: the main base)."""
        return f"{base or self.base()}/config.json"

    def experts(self) -> str:
        return f"{self.big}/experts"

    def run_dir(self, run: str) -> str:
        return f"{self.experts()}/{run}"

    def checkpoint(self, run: str, name: str) -> str:
        return f"{self.run_dir(run)}/{name}"

    def checkpoints_record(self, run: str) -> str:
        """A run's `checkpoints.json`: what its SFT job wrote, checkpoint by checkpoint."""
        return f"{self.run_dir(run)}/{RUN_RECORD}"

    # -- selection and merges: <root>/selection/, <root>/merges/, <big>/merged/ ---------------------------------
    def selection_dir(self) -> str:
        return f"{self.root}/selection"

    def selection(self, expert: str, folder: str | os.PathLike | None = None) -> str:
        """An expert type's selection file, in `folder` (a command's `--selection-dir`; default: this layout's)."""
        return f"{folder or self.selection_dir()}/{expert}.json"

    def recipe_dir(self, cfg: str, lang: str) -> str:
        return f"{self.root}/merges/{cfg}/{lang}"

    def recipe(self, cfg: str, lang: str, pair: str) -> str:
        """A merge recipe: merge config `cfg` of language `lang`'s expert pair `pair` (or a soup-then-swap recipe:
        cfg `soupswap`, pair `langsoup` / `multisoup`)."""
        return f"{self.recipe_dir(cfg, lang)}/{pair}.json"

    def merged_model(self, cfg: str, lang: str, pair: str) -> str:
        return f"{self.big}/merged/{cfg}/{lang}/{pair}"

    # -- evaluations: <root>/evals/ -----------------------------------------------------------------------------
    def evals(self) -> str:
        return f"{self.root}/evals"

    def eval_file(self, model_id: str, benchmark: str, folder: str | os.PathLike | None = None) -> str:
        """A model's evaluation of one benchmark; `model_id`: `base`, `ckpt/<run>/<checkpoint>`,
        `merge/<cfg>/<lang>/<pair>` (layerswap/contracts.py); in `folder` (a command's `--evals-dir`, or a
        `language_evals` folder; default: this layout's)."""
        return f"{folder or self.evals()}/{eval_result_file(model_id, benchmark)}"

    def merge_eval(self, cfg: str, lang: str, pair: str, benchmark: str) -> str:
        """A merge's evaluation of one benchmark: `<evals>/merge/<cfg>/<lang>/<pair>/<benchmark>.json`."""
        return self.eval_file(merge_model_id(cfg, lang, pair), benchmark)

    def checkpoint_index(self, run: str, part: str | None = None, folder: str | os.PathLike | None = None) -> str:
        """The index of a run's checkpoint evaluations (`index.json`), or of one part of them (`index.<part>.json`:
        a benchmark, or `other`); in the evaluations folder `folder` (default: this layout's)."""
        return f"{folder or self.evals()}/ckpt/{run}/index{'.' + part if part else ''}.json"

    def leaders_index(self, expert: str, folder: str | os.PathLike | None = None) -> str:
        """The index of an expert type's constraint evaluations of the candidates its selection reaches in score
        order (`layerswap evaluate-leaders`; their files are the checkpoints' own, `eval_file`), in the evaluations
        folder `folder` (default: this layout's)."""
        return f"{folder or self.evals()}/leaders/{expert}.json"

    def ablation_leaders_index(self, name: str, set_name: str, expert: str) -> str:
        """`leaders_index` of an expert-set ablation's selection (`ablation_selection`)."""
        return self.leaders_index(f"ablations/{name}/{set_name}/{expert}")

    def evaluated_model(self, path: str | os.PathLike) -> str:
        """The model id of an evaluation file (`eval_file`'s, or in a `language_evals` folder): its folder relative to
        the evaluations folder, less `by_language/<lang>/`."""
        rel = Path(path).parent.relative_to(self.evals())
        by_language = Path(self.language_evals("-")).parent.relative_to(self.evals())
        return str(Path(*rel.parts[2:]) if rel.parts[: len(by_language.parts)] == by_language.parts else rel)

    def language_evals(self, lang: str, folder: str | os.PathLike | None = None) -> str:
        """The folder of the evaluations of language `lang` alone (Table 2's extra MGSM languages):
        `<folder>/<model id>/mgsm.json`, beside their index `table2_index(lang, ...)`; in the evaluations folder
        `folder` (default: this layout's)."""
        return f"{folder or self.evals()}/by_language/{lang}"

    def table2_index(self, lang: str, t2: str) -> str:
        """The index of Table 2's evaluations of the MGSM of language `lang` (Table 2 language `t2`)."""
        return f"{self.language_evals(lang)}/table2_{t2}.json"

    def table2_models(self, lang: str, t2: str) -> str:
        """The list of the models Table 2 reads in `lang` (rule table2_models), beside the index of their job."""
        return f"{self.language_evals(lang)}/table2_{t2}.models.json"

    def store(self) -> str:
        """The evaluation store (layerswap/evaluation/store.py): scores by the bytes that made them."""
        return f"{self.root}/{STORE}/evals"

    # -- tables, figures, report: <root>/tables/, <root>/figures/, <root>/config_used.*, <root>/manifest.json ----
    def table_dir(self) -> str:
        """The tables' folder (`--out-dir` of the commands that write tables)."""
        return f"{self.root}/tables"

    def table(self, stem: str, ext: str) -> str:
        return f"{self.table_dir()}/{stem}.{ext}"

    def figure_prefix(self, name: str) -> str:
        """A figure's files without their extension (`--out-prefix` of the commands that write `<prefix>.<ext>`)."""
        return f"{self.root}/figures/{name}"

    def figure(self, name: str, ext: str) -> str:
        return f"{self.figure_prefix(name)}.{ext}"

    def config_used_prefix(self) -> str:
        """`config_used.<ext>` without the extension (`charts config-html --out-prefix`)."""
        return f"{self.root}/config_used"

    def config_used(self, ext: str) -> str:
        return f"{self.config_used_prefix()}.{ext}"

    def manifest(self) -> str:
        return f"{self.root}/manifest.json"

    # -- ablations: <root>/ablations/<name>/ ----------------------------------------------------------------------
    def ablation_dir(self, name: str) -> str:
        return f"{self.root}/ablations/{name}"

    def ablation_file(self, name: str, file: str) -> str:
        return f"{self.ablation_dir(name)}/{file}"

    def ablation_base(self, name: str, base: str) -> str:
        return f"{self.ablation_dir(name)}/bases/{base}"

    def ablation_selection(self, name: str, set_name: str, expert: str) -> str:
        return f"{self.ablation_dir(name)}/selection/{set_name}/{expert}.json"

    def ablation_base_eval(self, name: str, base: str, benchmark: str) -> str:
        return self.eval_file(f"ablations/{name}/bases/{base}", benchmark)

    # -- logs: <root>/logs/ -------------------------------------------------------------------------------------
    def log(self, *parts: str) -> str:
        """A job's log: `log("select", expert)` -> results/logs/select/<expert>.log."""
        return f"{self.root}/{LOGS}/{'/'.join(parts)}.log"

    def relative(self, path: str, to: str | None = None) -> str:
        """`path` (one of this layout's) relative to `to` (one of its folders; default: the root), for a command
        given that folder: `Layout().relative(Layout().selection("math"), Layout().selection_dir())` -> `math.json`."""
        folder = (self.root if to is None else to).rstrip("/") + "/"
        if not path.startswith(folder):
            raise ValueError(f"{path} is not in {folder}")
        return path[len(folder) :]
