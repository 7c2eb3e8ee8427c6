"""layerswap: layer swapping for zero-shot cross-lingual transfer, as a reproducible workflow."""

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys

__version__ = "0.1.0"

# Issue 18 laid the package out by stage (data/, train/, evaluation/, report/, workflow/). The old flat names still
# import, for users' scripts and notebooks: each is an alias of the moved module itself (`layerswap.tables is
# layerswap.report.tables`), so a monkeypatch through either name patches the one module. The package, rules, scripts
# and tests use the new names only (tests/test_layout.py), so code fingerprints follow the real files. Not aliased:
# `layerswap.data`, once data.py and now the data stage's package (its mixes are `layerswap.data.mixes`).
MOVED = {old: f"{stage}.{old}" for stage, olds in {
    "data": ("toyworld", "hub", "prestage", "preflight"), "train": ("pretrain", "sft", "training", "gguf_base"),
    "evaluation": ("evaluate", "evaluate_merges"), "report": ("tables", "intervals", "summary", "figures", "charts"),
    "workflow": ("ablations", "plan", "cost")}.items() for old in olds}


class _OldNames(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        package, _, old = fullname.rpartition(".")
        if package == __name__ and old in MOVED:
            return importlib.machinery.ModuleSpec(fullname, self, loader_state=f"{__name__}.{MOVED[old]}")
        return None

    def create_module(self, spec):
        module = importlib.import_module(spec.loader_state)
        spec.loader_state = module.__spec__  # the import system sets module.__spec__ = spec next; exec_module undoes it
        return module

    def exec_module(self, module):
        module.__spec__ = module.__spec__.loader_state

    def get_code(self, fullname):  # `python -m <old name>` (an old accelerate launch line) runs the moved module
        new = f"{__name__}.{MOVED[fullname.rpartition('.')[2]]}"
        return importlib.util.find_spec(new).loader.get_code(new)


sys.meta_path.insert(0, _OldNames())  # first: an older tree's editable-install finder must not answer
