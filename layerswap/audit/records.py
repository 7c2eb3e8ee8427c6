"""Records put back are cross-checked against what they describe (issues 43 and 49).

`results/manifest.json` travels with the results and can be edited: a job's params changed there (to the current
config's), then `.snakemake/` deleted, would have `provenance.restore` put back a record saying the file was made
with params it was not made with, and Snakemake would keep it. So before a record is put back, the file it
describes is checked against it where the file's bytes carry what made it:

- a merge recipe holds its merge config (method, params and the top-level keys): the record's `merge` param, the
  JSON the recipes job was given;
- an SFT run's `checkpoints.json` holds the run's params (`params`): the record's `--params-json`;
- a selection holds its top_k, weights, constraints, cap and kind: the record's selection params;
- `config_used.yaml` is the config: the record's config param;
- an evaluation file (`layerswap evaluate`, `evaluate-merges`: the base's, the checkpoints', the merges', Table 2's,
  the ablations'; an index: each file it lists) holds its benchmark, shots, limit, task keys (the languages), seed,
  generation budget, task set, whether code ran and the backend that scored it: the record's `--benchmarks-json`,
  `--seed`, `--task-set`, `--backend`;
- an SFT mix's manifest holds its sources (name, language, schema, file, rows taken) and seed: `--sources-json`,
  `--seed`; a hub source's manifest its dataset, subset, split, revision, schema and seed: `--spec-json`, `--seed`;
- the toy base's `config.json` and `layerswap_meta.json` hold its shapes, layers, seed and tokens seen:
  `--model-json`, `--num-layers`, `--seed`, `--train-json`; a linked hub base's or a GGUF base's
  `layerswap_source.json` its source and revision (layers): `--source`, `--revision` (`--num-layers`);
- Table 2's model list holds its language: `--languages`.

Where a describer reads the shell command (the options above), each option's value must also be one of the record's
params, the values Snakemake compares: a record whose params were forged and whose shell command was not is refused
too. A record that does not describe its file is not put back: the file is named (it has no record now, and the run
stops with the repair, `provenance.check`). Outputs whose bytes do not carry their params (weights, the toy data,
tables, figures, table pages) are checked by their sha256 against the manifest's entry (`provenance._same_bytes`)
and by their job's other rerun triggers; what they are built from is checked above. What no file records is not
checked: an evaluation's batch size (log-likelihoods move in the last bits with the batch; the store's key holds
it), the toy data's generator params, a table's or figure's params (docs/SECURITY.md).
"""

from __future__ import annotations

import ast
import itertools
import json
import shlex
from pathlib import Path

#: Rules whose outputs are merge recipes (`layerswap recipes`), with their `merge` param: the merge config as JSON.
RECIPE_RULES = ("merge_recipes", "soup_then_swap_recipes", "ablation_merge_recipes")
TOP_LEVEL = ("allow_different_base",)  # merge config keys a recipe keeps beside `params` (`merge.recipes`)


def _json_params(params, kind=dict) -> list:
    """The JSON values of type `kind` among a record's params (each kept as the repr of its value: a shell-quoted
    JSON word)."""
    out = []
    for item in params if isinstance(params, list) else []:
        value = item
        try:
            value = ast.literal_eval(item) if isinstance(item, str) else item
        except (ValueError, SyntaxError):
            pass
        if not isinstance(value, str):
            continue
        try:
            words = shlex.split(value)
        except ValueError:
            continue
        for word in words if len(words) == 1 else [value]:
            try:
                parsed = json.loads(word)
            except ValueError:
                continue
            if isinstance(parsed, kind):
                out.append(parsed)
    return out


def _recipe(params, output: str) -> str | None:
    configs = [p for p in _json_params(params) if "method" in p]
    if not configs:
        return "its params hold no merge config"
    try:
        recipe = json.loads(Path(output).read_text())
    except (OSError, ValueError):
        return "the recipe is not readable JSON"
    if not isinstance(recipe, dict):
        return "the recipe is not a JSON object"
    cfg = dict(configs[0])
    want = {"method": cfg.pop("method"), **{k: cfg.pop(k) for k in TOP_LEVEL if k in cfg}, "params": cfg}
    got = {k: recipe.get(k) for k in want}
    if got != want:
        differ = sorted(k for k in want if got.get(k) != want[k])
        return f"the recipe's {', '.join(differ)} {'is' if len(differ) == 1 else 'are'} not the record's merge config"
    return None


def _object(params, output: str, load) -> tuple[dict | None, dict | str]:
    """(the record's one JSON object param, the output's object) or (None, why not)."""
    objects = _json_params(params)
    if len(objects) != 1:
        return None, "its params hold no single JSON object"
    try:
        value = load(Path(output).read_text())
    except (OSError, ValueError):
        return None, "the file is not readable"
    if not isinstance(value, dict):
        return None, "the file is not an object"
    return objects[0], value


def _sft(params, output: str) -> str | None:
    if Path(output).name != "checkpoints.json":
        return None
    want, got = _object(params, output, json.loads)
    if want is None:
        return got
    return None if got.get("params") == want else "the run's params in it are not the record's"


def _selection(params, output: str) -> str | None:
    want, got = _object(params, output, json.loads)
    if want is None:
        return got
    differ = sorted(k for k in want if k in got and got[k] != want[k])
    return f"its {', '.join(differ)} differ from the record's" if differ else None


def _config_used(params, output: str) -> str | None:
    if not output.endswith((".yaml", ".yml")):
        return None
    import yaml

    want, got = _object(params, output, yaml.safe_load)
    if want is None:
        return got
    return None if got == want else "the config in it is not the record's"


def _param_values(params) -> set[str]:
    """Every param of a record as the word it becomes in a shell command (its repr unquoted)."""
    out = set()
    for item in params if isinstance(params, list) else []:
        try:
            value = ast.literal_eval(item) if isinstance(item, str) else item
        except (ValueError, SyntaxError):
            value = item
        for word in _words(str(value)) or [str(value)]:
            out.add(word)
        out.add(str(value))
    return out


def _words(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError:
        return []


def _options(shellcmd, params, names: tuple[str, ...]) -> tuple[dict[str, list[str]], str | None]:
    """({option: its words} of the `layerswap` shell command, why not) for the options `names`; each value must be a
    word of the record's params too (a JSON value: equal to one of its JSON params)."""
    words = _words(str(shellcmd or ""))
    found: dict[str, list[str]] = {}
    for i, w in enumerate(words):
        if w in names:
            found[w] = list(itertools.takewhile(lambda x: not x.startswith("-") and x != ">", words[i + 1 :]))
    values = _param_values(params)
    for name, got in found.items():
        for value in got:
            try:
                parsed = json.loads(value)
            except ValueError:
                parsed = None
            if isinstance(parsed, (dict, list)):
                if parsed not in _json_params(params, type(parsed)):
                    return found, f"its shell command's {name} is not its params'"
            elif value not in values:
                return found, f"its shell command's {name} {value} is not among its params"
    return found, None


def _load(path) -> dict | None:
    try:
        value = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _differ(pairs: dict[str, tuple]) -> str | None:
    differ = sorted(k for k, (got, want) in pairs.items() if got != want)
    return f"its {', '.join(differ)} {'is' if len(differ) == 1 else 'are'} not the record's" if differ else None


# ------------------------------------------------------------------------------------------------- evaluations
def _evaluation(params, output: str, shellcmd=None) -> str | None:
    opts, why = _options(shellcmd, params, ("--benchmarks-json", "--seed", "--task-set", "--backend"))
    if why:
        return why
    # the shell command's --benchmarks-json (checked above to be one of the params), where a job has other JSON
    # params too (the leaders' selection params); else the one JSON object among the params
    given = opts.get("--benchmarks-json") or []
    try:
        benchmarks = [json.loads(given[0])] if given else _json_params(params)
    except ValueError:
        benchmarks = []
    if (
        len(benchmarks) != 1
        or not isinstance(benchmarks[0], dict)
        or not all(isinstance(v, dict) or v is None for v in benchmarks[0].values())
    ):
        return "its params hold no single benchmarks object"
    doc = _load(output)
    if doc is None:
        return "the file is not a readable JSON object"
    seed = (opts.get("--seed") or [None])[0]
    paper = (opts.get("--task-set") or ["toy"])[0] == "paper"
    backend = (opts.get("--backend") or ["hf"])[0]
    listed = doc.get("files") if "benchmark" not in doc else None  # an index: {model id: {benchmark: file}}
    files = [output] if listed is None else [f for by in listed.values() if isinstance(by, dict) for f in by.values()]
    for path in files:
        result = doc if path == output else _load(path)
        if result is None:
            continue  # missing: Snakemake and the audit name it
        why = _evaluation_file(result, benchmarks[0], seed, paper, backend)
        if why:
            return why if path == output else f"{path}: {why}"
    return None


def _evaluation_file(doc: dict, benchmarks: dict, seed: str | None, paper: bool, backend: str) -> str | None:
    """Why an evaluation file's own record of what made it is not the job's (`benchmarks`: --benchmarks-json,
    `backend`: --backend, which a benchmark's own `backend` overrides)."""
    from layerswap.benchmarks import BENCHMARKS

    name = doc.get("benchmark")
    if name not in benchmarks or name not in BENCHMARKS:
        return f"its benchmark {name!r} is not one the record evaluates"
    want, bench = benchmarks[name] or {}, BENCHMARKS[name]
    pairs = {"shots": (doc.get("shots"), want.get("shots", 0)), "limit": (doc.get("limit"), want.get("limit"))}
    if want.get("languages") is not None:
        keys = [k for lang in want["languages"] for k in bench.keys(lang)]
        pairs["languages"] = (sorted(doc.get("lm_eval_tasks") or {}), sorted(keys))
    if want.get("max_new_tokens") is not None:
        pairs["max_new_tokens"] = (doc.get("max_new_tokens"), want["max_new_tokens"])
    if seed is not None:
        pairs["seed"] = (str(doc.get("seed")), seed)
    pairs["task set"] = (doc.get("task_set") == "paper", paper)
    if "backend" in doc:  # written where something was scored (files made before it was recorded hold none)
        pairs["backend"] = (doc["backend"], want.get("backend") or backend)
    if bench.unsafe:  # model-written code runs only with execute_code; the file says when it did not
        pairs["execute_code"] = ("model-written code" in str(doc.get("skipped")), not want.get("execute_code", False))
    return _differ(pairs)


# ---------------------------------------------------------------------------------------------- data and bases
def _mix(params, output: str, shellcmd=None) -> str | None:
    if not output.endswith(".manifest.json"):
        return None  # the mix itself: its manifest, an output of the same job, carries what made it
    opts, why = _options(shellcmd, params, ("--seed",))
    doc = _load(output)
    sources = _json_params(params, list)
    if why or doc is None or len(sources) != 1:
        return why or ("the manifest is not readable" if doc is None else "its params hold no single source list")
    got = [(s.get("name"), s.get("lang"), s.get("schema"), s.get("path"), s.get("taken")) for s in doc.get("sources")]
    want = [(s.get("name"), s.get("lang", "en"), s.get("schema"), s.get("path"), s.get("n")) for s in sources[0]]
    return _differ({"sources": (got, want), "seed": (str(doc.get("seed")), (opts.get("--seed") or [None])[0])})


def _hub_data(params, output: str, shellcmd=None) -> str | None:
    if not output.endswith(".manifest.json"):
        return None
    opts, why = _options(shellcmd, params, ("--seed",))
    doc, spec = _load(output), _json_params(params)
    if why or doc is None or len(spec) != 1:
        return why or ("the manifest is not readable" if doc is None else "its params hold no single source spec")
    keys = ("lang", "hub_id", "subset", "split", "data_files", "revision", "schema", "columns")
    pairs = {k: (doc.get(k), spec[0].get(k)) for k in keys if k in spec[0]}
    pairs["source"] = (doc.get("source"), spec[0].get("name"))
    pairs["seed"] = (str(doc.get("seed")), (opts.get("--seed") or [None])[0])
    return _differ(pairs)


def _toy_base(params, output: str, shellcmd=None) -> str | None:
    opts, why = _options(shellcmd, params, ("--model-json", "--train-json", "--num-layers", "--seed"))
    if why:
        return why
    config, meta = _load(output), _load(Path(output).with_name("layerswap_meta.json"))
    model = next((o for o in _json_params(params) if "hidden_size" in o), None)
    train = next((o for o in _json_params(params) if "steps" in o), None)
    if config is None or meta is None or model is None or train is None:
        return "the base's config.json or layerswap_meta.json, or its params' model or training, is missing"
    pairs = {k: (config.get(k), v) for k, v in model.items()}
    pairs["num_layers"] = (str(config.get("num_hidden_layers")), (opts.get("--num-layers") or [None])[0])
    pairs["seed"] = (str(meta.get("seed")), (opts.get("--seed") or [None])[0])
    tokens = train.get("steps", 0) * train.get("batch_size", 0) * train.get("seq_len", 0)
    pairs["tokens seen"] = (meta.get("tokens_seen"), tokens)
    return _differ(pairs)


def _linked_base(params, output: str, shellcmd=None) -> str | None:
    """A hub base (`prepare-base`) or a GGUF base (`gguf-base`): its `layerswap_source.json`."""
    opts, why = _options(shellcmd, params, ("--source", "--revision", "--num-layers"))
    doc = _load(Path(output).with_name("layerswap_source.json"))
    if why or doc is None:
        return why or "its layerswap_source.json is not readable"
    pairs = {"source": (doc.get("source"), (opts.get("--source") or [None])[0])}
    if "--num-layers" in opts:
        pairs["num_layers"] = (str(doc.get("num_layers")), opts["--num-layers"][0])
    else:
        pairs["revision"] = (doc.get("revision"), (opts.get("--revision") or [None])[0])
    return _differ(pairs)


def _table2_models(params, output: str, shellcmd=None) -> str | None:
    opts, why = _options(shellcmd, params, ("--languages",))
    doc = _load(output)
    if why or doc is None:
        return why or "the model list is not readable"
    return None if doc.get("language") in (opts.get("--languages") or []) else "its language is not the record's"


DESCRIBERS = {
    **{rule: _recipe for rule in RECIPE_RULES},
    "sft": _sft,
    "select": _selection,
    "config_used": _config_used,
}
#: Describers by the `layerswap` command a rule runs (whatever the rule's name: `use rule ... as ...` variants too,
#: the ablations' among them); DESCRIBERS by rule where the command is not spelled `layerswap <command>`.
COMMANDS = {
    "recipes": lambda params, output, _: _recipe(params, output),
    "sft": lambda params, output, _: _sft(params, output),
    "select": lambda params, output, _: _selection(params, output),
    "evaluate": _evaluation,
    "evaluate-merges": _evaluation,
    "evaluate-leaders": _evaluation,  # its index lists the constraint evaluations it wrote
    "mix": _mix,
    "hub-data": _hub_data,
    "toy-base": _toy_base,
    "prepare-base": _linked_base,
    "gguf-base": _linked_base,
    "table2-models": _table2_models,
}


def _command(shellcmd) -> str | None:
    """The `layerswap` command a record's shell command runs (after any `VAR=value` words)."""
    words = _words(str(shellcmd or ""))
    return words[words.index("layerswap") + 1] if "layerswap" in words[:-1] else None


def mismatch(rule: str, params, output: str, shellcmd: str | None = None) -> str | None:
    """Why the record (rule, params, shell command) does not describe `output`'s bytes, or None (it does, or they
    carry nothing to compare)."""
    if not Path(output).is_file():
        return None
    check = COMMANDS.get(_command(shellcmd))
    if check is not None:
        return check(params, output, shellcmd)
    check = DESCRIBERS.get(rule)
    return check(params, output) if check else None
