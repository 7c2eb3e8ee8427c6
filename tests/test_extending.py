"""The rules docs/EXTENDING.md states for a new benchmark or ablation are checked where they apply, and the files it
cites as examples exist."""

from __future__ import annotations

import re

import pytest
import yaml
from conftest import REPO

from layerswap import benchmarks
from layerswap.benchmarks import BENCHMARKS, REGISTRY, Benchmark
from layerswap.data import toy_writers, toyworld
from layerswap.errors import UserError

EXTENDING = REPO / "docs" / "EXTENDING.md"


def _entry(name: str) -> Benchmark:
    return Benchmark(name, "Copa", "Copa (accuracy)", "fraction", 4, (("{lang}", "copa.yaml"),), None)


@pytest.mark.parametrize("name", ["toy_copa", "Copa", "x-copa", "2copa", ""])
def test_a_bad_benchmark_name_is_refused_at_its_entry(name):
    """The toy data files are <benchmark>_<language>.jsonl, split on the first '_': a name with '_' would be read as
    another benchmark's file. The entry is refused, and the message does not offer the bad name as an allowed one."""
    with pytest.raises(
        UserError,
        match=rf"^layerswap/benchmarks.py: benchmark '{name}': a benchmark name is "
        r"lower-case letters and digits.* no '_' \(the toy data files",
    ) as err:
        _entry(name)
    assert "allowed" not in str(err.value) and "\n" not in str(err.value)
    assert _entry("xcopa2").name == "xcopa2"


def test_a_benchmark_registered_twice_is_refused():
    with pytest.raises(UserError, match=r"^layerswap/benchmarks.py: REGISTRY has two entries named 'mgsm'$"):
        benchmarks.by_name((*REGISTRY, BENCHMARKS["mgsm"]))
    assert list(benchmarks.by_name(REGISTRY)) == [b.name for b in REGISTRY]


def test_the_math_benchmark_is_the_one_entry_that_says_so():
    """Tables 1, 2 and 6, the best-config choice and the merges' evaluations read the registry's math benchmark
    (`MATH`, from the entry with `math=True`), not a name written in the planning or report code."""
    import dataclasses

    assert benchmarks.MATH == "mgsm" and [b.name for b in REGISTRY if b.math] == ["mgsm"]
    other = dataclasses.replace(BENCHMARKS["belebele"], math=True)
    with pytest.raises(UserError, match=r"exactly one entry with math=True, has \['mgsm', 'belebele'\]"):
        benchmarks.math_benchmark((*REGISTRY, other))
    with pytest.raises(UserError, match="exactly one entry with math=True"):
        benchmarks.math_benchmark(tuple(b for b in REGISTRY if not b.math))


def test_a_toy_word_outside_the_vocabulary_is_refused_where_the_data_is_written(tmp_path, monkeypatch):
    """A word the toy vocabulary lacks would be <unk> to the word-level tokenizer: the writer's dataset is refused
    with one line naming it, the word and the field, and leaves no file; only the fields METADATA gives the
    dataset's kind are not model text."""

    def writer(world, rng, lang, n):
        yield {"question": "tom has 3 pens ?", "equation_solution": "1+2=3", "answer_number": 3}
        yield {"question": "tom", "choices": ["pens", "the cat purrs ."], "answer_number": 3}

    monkeypatch.setitem(toy_writers.WRITERS, "mgsm", writer)
    out = tmp_path / "mgsm_en.jsonl"
    with pytest.raises(
        UserError,
        match=r"^toy dataset 'mgsm_en' \(writer test_a_toy_word.*writer in "
        r"layerswap/data/toy_writers.py\): the word 'purrs' of field 'choices' is not in "
        r"the toy vocabulary; append it to FUNCTION_WORDS, or, if no prompt shows the "
        r"field, add 'choices' to METADATA\['mgsm'\]$",
    ):
        toyworld.write_dataset("mgsm_en", out, 0, {}, 2)
    assert list(tmp_path.iterdir()) == []
    # Belebele's metadata field is model text in an MGSM row
    monkeypatch.setitem(toy_writers.WRITERS, "mgsm", lambda world, rng, lang, n: [{"question": "tom", "link": "x:y"}])
    with pytest.raises(UserError, match="the word 'x:y' of field 'link'"):
        toyworld.write_dataset("mgsm_en", out, 0, {}, 1)
    monkeypatch.setitem(
        toy_writers.WRITERS, "belebele", lambda world, rng, lang, n: [{"question": "tom", "link": "x:y"}]
    )
    toyworld.write_dataset("belebele_en", out, 0, {}, 1)
    assert out.read_text() == '{"question": "tom", "link": "x:y"}\n'


def test_the_files_extending_md_cites_exist():
    """The doc's examples are files of the repository (a path with a <placeholder> is a pattern, not a citation)."""
    cited = set(
        re.findall(r"`((?:layerswap|tests|config|scripts|docs|rules)/[^`<>\s:]+)(?:::(\w+))?`", EXTENDING.read_text())
    )
    assert len(cited) > 10 and any(test for _, test in cited)
    assert [path for path, _ in sorted(cited) if not (REPO / path).exists()] == []
    assert [
        (path, test) for path, test in sorted(cited) if test and f"def {test}(" not in (REPO / path).read_text()
    ] == []


def test_readme_states_no_hand_kept_ablation_count():
    """The ablations are the files of config/ablations/: a README count of them goes stale with the next file."""
    words = r"(?:two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|\d+)"
    for doc in ("README.md", "docs/ABLATIONS.md"):
        text = (REPO / doc).read_text()
        assert not re.search(rf"\b{words} ablations\b|\ball {words}\b", text, re.IGNORECASE), doc


def test_a_new_toy_language_runs_from_config_edits_alone(tmp_path):
    """The toy-Yoruba steps of docs/EXTENDING.md ("A new target language"), taken from the doc's own YAML block: the
    config is accepted by check-config and the dry run plans the language's data, SFT runs, selection and merges."""
    from conftest import snakemake

    from layerswap.config import load_config

    block = EXTENDING.read_text().split("## A new target language", 1)[1].split("```yaml\n", 1)[1].split("```")[0]
    edits = yaml.safe_load(block)
    cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    cfg["toy_world"]["languages"].update(edits["toy_world"]["languages"])
    cfg["languages"], cfg["mgsm_languages"] = edits["languages"], edits["mgsm_languages"]
    cfg["language_names"].update(edits["language_names"])
    cfg["sft"]["runs"].update(edits["sft"]["runs"])
    cfg["evaluation"]["tasks"]["mgsm"] = edits["evaluation"]["tasks"]["mgsm"]
    path = tmp_path / "toy5.yaml"
    path.write_text(yaml.safe_dump(cfg))
    load_config(path)  # check-config's checks
    proc = snakemake(tmp_path / "work", "-n", configfile=path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for wanted in ("results/data/sft/toy_yor.jsonl", "results/selection/toy_yor.json", "results/merges/swap"):
        assert wanted in proc.stdout, wanted


def test_a_toy_language_standing_for_one_mgsm_lacks_runs_end_to_end(tmp_path):
    """A toy language standing for Yoruba (which MGSM lacks; the toy world makes every benchmark for every toy
    language) added to the micro config as docs/EXTENDING.md says: the whole DAG runs, and its language expert, its
    selection, its merges and Table 1's rows of it come out."""
    from conftest import MICRO, snakemake

    cfg = yaml.safe_load(MICRO.read_text())
    cfg["toy_world"]["languages"]["toy_yor"] = {"stands_for": "yor", "word_order": "svo"}
    cfg["languages"].append("toy_yor")
    cfg["mgsm_languages"].append("toy_yor")
    cfg["language_names"]["toy_yor"] = "toy-Yoruba (synthetic)"
    cfg["sft"]["runs"]["toy_yor_1"] = {"expert": "toy_yor", "scheduler": "wsd"}
    cfg["evaluation"]["tasks"]["mgsm"]["languages"].append("toy_yor")
    path = tmp_path / "micro_yor.yaml"
    path.write_text(yaml.safe_dump(cfg))
    proc = snakemake(tmp_path / "work", configfile=path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = tmp_path / "work" / "results"
    assert (results / "selection" / "toy_yor.json").is_file()
    assert list((results / "evals" / "merge" / "swap_default" / "toy_yor").rglob("*mgsm*.json"))
    table1 = (results / "tables" / "table1.csv").read_text()
    assert "toy-Yoruba (synthetic) avg" in table1 and "toy-Swahili (synthetic) avg" in table1
