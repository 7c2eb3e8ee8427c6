"""Every repository of the Hub replica: the real repository's layout with a few synthetic rows.

One `Repo` per hub repository that `layerswap prestage --configfile config/paper.yaml` lists (SFT sources, the
evaluation datasets lm-eval reads, the base models), plus the external files a loading script used to read. Each
mirrors its real counterpart's file paths, config and split names, column names, row shapes and access (gated,
loading script); the evidence for each layout is in EVIDENCE.md beside this file. Rows are synthetic: short
numbered strings in the language's script, enough for the paper-shaped config's mixes and evaluation limits.

`build(root, breaks=...)` writes them as git repositories in olah's mirror layout
(`<root>/<datasets|models>/<org>/<name>`); `breaks` applies the deliberate faults the pre-flight tests use.
"""

from __future__ import annotations

import io

from .eval_repos import _eval_repos
from .files import Repo, card, parquet
from .model_repos import _model_repos
from .sft_repos import _sft_repos, external_files  # noqa: F401  (hub_replica.build writes them)


# ------------------------------------------------------------------------------------------- all, and the faults
def all_repos() -> list[Repo]:
    return _sft_repos() + _eval_repos() + _model_repos()


def _find(repos: list[Repo], repo_id: str) -> Repo:
    return next(r for r in repos if r.repo_id == repo_id)


def _drop_column(repos: list[Repo], arg: tuple[str, str]) -> None:
    """Rewrite every parquet file of a repository without one column."""
    import pyarrow.parquet as pq

    repo = _find(repos, arg[0])
    for path, content in list(repo.files.items()):
        if path.endswith(".parquet"):
            table = pq.read_table(io.BytesIO(content() if callable(content) else content))
            repo.files[path] = parquet(table.drop_columns([arg[1]]).to_pylist())


def _rename_config(repos: list[Repo], arg: tuple[str, str, str]) -> None:
    """Rename a config in the card (and its folder, where the files live in one)."""
    repo = _find(repos, arg[0])
    old, new = arg[1], arg[2]
    repo.files = {p.replace(f"{old}/", f"{new}/", 1): c for p, c in repo.files.items()}
    readme = repo.files["README.md"]
    repo.files["README.md"] = readme.replace(old.encode(), new.encode())


def _script_only(repos: list[Repo], repo_id: str) -> None:
    """Replace a repository's data by a loading script (as allenai/nllb is)."""
    repo = _find(repos, repo_id)
    repo.files = {"README.md": card(), f"{repo_id.split('/')[1]}.py": b"import datasets\n"}
    repo.refs = {}


def _language_code(repos: list[Repo], arg: tuple[str, str, str, str]) -> None:
    """Change one language value in a column of every parquet file (e.g. Aya's Swahili 'Swahili' -> 'Kiswahili')."""
    import pyarrow.parquet as pq

    repo_id, column, old, new = arg
    repo = _find(repos, repo_id)
    for path, content in list(repo.files.items()):
        if path.endswith(".parquet"):
            rows = pq.read_table(io.BytesIO(content() if callable(content) else content)).to_pylist()
            repo.files[path] = parquet([{**r, column: new if r.get(column) == old else r.get(column)} for r in rows])


#: name -> fault(repos, argument)
BREAKS = {
    "drop_column": _drop_column,
    "rename_config": _rename_config,
    "script_only": _script_only,
    "language_value": _language_code,
}
