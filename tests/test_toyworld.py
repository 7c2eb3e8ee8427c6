import hashlib
import json
from pathlib import Path

from conftest import TINY_LANGS, TINY_SIZES, read_jsonl

from layerswap.data.toy_language import ENGLISH_WORDS, NAMES, english, make_language
from layerswap.data.toy_writers import METADATA
from layerswap.data.toyworld import generate, strings


def digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_same_seed_same_files(tmp_path):
    generate(tmp_path / "a" / "raw", tmp_path / "a" / "eval", 3, TINY_LANGS, TINY_SIZES)
    generate(tmp_path / "b" / "raw", tmp_path / "b" / "eval", 3, TINY_LANGS, TINY_SIZES)
    assert digest(tmp_path / "a") == digest(tmp_path / "b")
    generate(tmp_path / "c" / "raw", tmp_path / "c" / "eval", 4, TINY_LANGS, TINY_SIZES)
    assert digest(tmp_path / "a") != digest(tmp_path / "c")


def test_each_dataset_draws_from_its_own_stream(tmp_path):
    """A bigger MGSM leaves every other file byte-identical (no dataset shares another's random stream), and the
    items of the sets that stayed are the same."""
    generate(tmp_path / "a" / "raw", tmp_path / "a" / "eval", 3, TINY_LANGS, TINY_SIZES)
    generate(
        tmp_path / "b" / "raw", tmp_path / "b" / "eval", 3, TINY_LANGS, {**TINY_SIZES, "mgsm": TINY_SIZES["mgsm"] + 5}
    )
    a, b = digest(tmp_path / "a"), digest(tmp_path / "b")
    changed = {name for name in a if a[name] != b[name]}
    assert changed == {f"eval/mgsm_{lang}.jsonl" for lang in ["en", *TINY_LANGS]}
    old = read_jsonl(tmp_path / "a" / "eval" / "mgsm_en.jsonl")
    assert read_jsonl(tmp_path / "b" / "eval" / "mgsm_en.jsonl")[: len(old)] == old  # the first items stay


def test_an_added_language_leaves_the_other_languages_files_alone(tmp_path):
    """Only the pretraining corpus and vocabulary (which hold every language) and the new language's files change."""
    (first, spec), *_ = TINY_LANGS.items()
    generate(tmp_path / "a" / "raw", tmp_path / "a" / "eval", 3, {first: spec}, TINY_SIZES)
    generate(
        tmp_path / "b" / "raw", tmp_path / "b" / "eval", 3, {first: spec, "toy_new": {"word_order": "vso"}}, TINY_SIZES
    )
    a, b = digest(tmp_path / "a"), digest(tmp_path / "b")
    assert {n for n in a if a[n] != b[n]} == {"raw/pretrain.jsonl", "raw/vocab.json"}
    assert all("toy_new" in n for n in set(b) - set(a)) and set(a) <= set(b)


def test_unknown_dataset_is_one_line(tmp_path):
    import pytest

    from layerswap.data.toyworld import write_dataset
    from layerswap.errors import UserError

    with pytest.raises(UserError, match="toy dataset 'gsm8k_en': unknown"):
        write_dataset("gsm8k_en", tmp_path / "x.jsonl", 0, {}, 3)
    assert not (tmp_path / "x.jsonl").exists()


def test_toy_language_has_its_own_words_and_order():
    toy = make_language("toy_x", "sov", 1)
    en = english()
    content = [w for w in ENGLISH_WORDS if w not in NAMES and w in toy.lexicon]
    assert all(toy.lexicon[w] not in ENGLISH_WORDS for w in content)
    assert len(set(toy.lexicon.values())) == len(toy.lexicon)
    s, v, o = ["tom"], ["likes"], ["cups"]
    assert en.clause(s, v, o) == "tom likes cups ."
    assert toy.clause(s, v, o) == f"tom {toy.lexicon['cups']} {toy.lexicon['likes']} ."


def test_files_use_the_real_schemas(toy_world):
    orca = read_jsonl(toy_world / "raw" / "orca_math.jsonl")[0]
    assert set(orca) == {"question", "answer"}
    aya = read_jsonl(toy_world / "raw" / "aya_toy_swh.jsonl")[0]
    assert {"inputs", "targets", "language", "language_code", "annotation_type", "user_id"} <= set(aya)
    nllb = read_jsonl(toy_world / "raw" / "nllb_toy_swh.jsonl")[0]
    assert set(nllb["translation"]) == {"eng_Latn", "toy_swh"}
    mgsm = read_jsonl(toy_world / "eval" / "mgsm_toy_swh.jsonl")
    assert {"question", "answer", "answer_number", "equation_solution"} <= set(mgsm[0])
    assert all(m["answer"].endswith(str(m["answer_number"])) for m in mgsm)
    bele = read_jsonl(toy_world / "eval" / "belebele_en.jsonl")[0]
    assert bele[f"mc_answer{bele['correct_answer_num']}"] in bele["flores_passage"].split()
    mmlu = read_jsonl(toy_world / "eval" / "mmlu_toy_swh.jsonl")[0]
    assert len(mmlu["choices"]) == 4 and 0 <= mmlu["answer"] < 4
    mbpp = read_jsonl(toy_world / "eval" / "mbpp_en.jsonl")[0]
    scope: dict = {}
    exec(mbpp["code"].replace(" ( ", "(").replace(" ) ", ")"), scope)  # the reference solution passes its tests
    for test in mbpp["test_list"]:
        exec(test, scope)


def test_mgsm_is_parallel_across_languages(toy_world):
    en = read_jsonl(toy_world / "eval" / "mgsm_en.jsonl")
    sw = read_jsonl(toy_world / "eval" / "mgsm_toy_swh.jsonl")
    assert [r["answer_number"] for r in en] == [r["answer_number"] for r in sw]
    assert en[0]["question"] != sw[0]["question"]


def test_vocabulary_covers_every_generated_word(toy_world):
    vocab = set(json.loads((toy_world / "raw" / "vocab.json").read_text()))
    for path in list((toy_world / "eval").glob("*.jsonl")) + list((toy_world / "raw").glob("*.jsonl")):
        for row in read_jsonl(path)[:20]:
            for key, value in row.items():
                if key not in METADATA.get(path.stem.split("_")[0], ()):
                    for text in strings(value):
                        assert set(text.replace("\n", " ").split()) <= vocab, (path.name, key, text)


def test_pretrain_mix_defaults_are_the_corpus_of_old_and_omitted_equals_explicit():
    """An omitted share and its default value give the same job params (no spurious rerun) and the same corpus as
    before the mix became configurable (the branch thresholds are the old constants)."""
    import random

    from layerswap.data.toy_language import World
    from layerswap.data.toy_writers import PRETRAIN_MIX, _pretrain
    from layerswap.data.toyworld import dataset_inputs

    sizes = {**TINY_SIZES}
    omitted = dataset_inputs("pretrain", TINY_LANGS, sizes)
    explicit = dataset_inputs("pretrain", TINY_LANGS, sizes, {"pretrain": dict(PRETRAIN_MIX)})
    partial = dataset_inputs("pretrain", TINY_LANGS, sizes, {"pretrain": {"parallel": PRETRAIN_MIX["parallel"]}})
    assert omitted == explicit == partial and omitted["mix"] == PRETRAIN_MIX
    assert dataset_inputs("pretrain", TINY_LANGS, sizes, {"pretrain": {"toy_math": 0.2}})["mix"]["toy_math"] == 0.2
    assert "mix" not in dataset_inputs("orca_math", TINY_LANGS, sizes)  # only the corpus and Aya depend on one
    lang = next(iter(TINY_LANGS))
    assert dataset_inputs(f"aya_{lang}", TINY_LANGS, sizes)["mix"] == {"math": 0.0}
    assert dataset_inputs(f"aya_{lang}", TINY_LANGS, sizes, {"aya": {"math": 0.0}}) == dataset_inputs(
        f"aya_{lang}", TINY_LANGS, sizes, {"pretrain": {"toy_math": 0.3}}
    )  # the corpus's mix is not Aya's
    langs = [make_language(code, spec["word_order"], 3) for code, spec in sorted(TINY_LANGS.items())]
    docs = _pretrain(World(3, langs), random.Random(5), english(), langs, 300)
    assert docs == _pretrain(World(3, langs), random.Random(5), english(), langs, 300, dict(PRETRAIN_MIX))


def test_pretrain_mix_shares_shape_the_corpus(tmp_path):
    """All toy documents code-switched: English word order with toy words mixed in; all English: no toy words."""
    import random

    from layerswap.data.toy_language import ENGLISH_WORDS, SHARED, World
    from layerswap.data.toy_writers import _pretrain

    langs = [make_language(code, spec["word_order"], 3) for code, spec in sorted(TINY_LANGS.items())]
    toy_words = {w for lang in langs for w in lang.lexicon.values()}
    only_switched = {"english": 0.0, "toy_math": 0.0, "parallel": 0.0, "code_switched": 1.0}
    docs = _pretrain(World(3, langs), random.Random(5), english(), langs, 200, only_switched)
    mixed = [d.split() for d in docs]
    assert all(
        set(words) & toy_words and set(words) & set(ENGLISH_WORDS) - set(NAMES) for words in mixed if len(words) > 12
    )  # a story of 2+ sentences holds both kinds of words
    assert all("=" not in d and "Q:" not in d for d in docs)  # no parallel pairs, no math
    only_english = {"english": 1.0}
    docs = _pretrain(World(3, langs), random.Random(5), english(), langs, 200, {**only_switched, **only_english})
    assert not {w for d in docs for w in d.split()} & toy_words
    assert {w for d in docs for w in d.split()} <= set(ENGLISH_WORDS) | set(SHARED) | {"Q:", "A:"}


def test_pretrain_mix_errors_name_the_key():
    import pytest

    from layerswap.data.toy_writers import pretrain_mix
    from layerswap.errors import UserError

    with pytest.raises(UserError, match=r"toy_world.pretrain_mix: unknown key 'toy_code'; allowed: english"):
        pretrain_mix({"toy_code": 0.1})
    with pytest.raises(UserError, match=r"toy_world.pretrain_mix: toy_math \+ parallel \+ code_switched is 1.1"):
        pretrain_mix({"toy_math": 0.5, "parallel": 0.4, "code_switched": 0.2})


def test_aya_math_share_adds_worked_one_step_problems_in_the_language(tmp_path):
    """aya_mix.math: that share of the items are one-step word problems with the toy language's worked solution;
    share 0 writes the same file as before the knob existed (no extra random draw)."""
    from layerswap.data.toyworld import write_dataset

    lang = next(iter(TINY_LANGS))
    write_dataset(f"aya_{lang}", tmp_path / "a.jsonl", 3, {lang: TINY_LANGS[lang]}, 200)
    write_dataset(f"aya_{lang}", tmp_path / "b.jsonl", 3, {lang: TINY_LANGS[lang]}, 200, {"math": 0.0})
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    assert not any("=" in r["targets"] for r in read_jsonl(tmp_path / "a.jsonl"))
    write_dataset(f"aya_{lang}", tmp_path / "m.jsonl", 3, {lang: TINY_LANGS[lang]}, 400, {"math": 0.5})
    math = [r for r in read_jsonl(tmp_path / "m.jsonl") if " = " in r["targets"]]
    assert 150 < len(math) < 250  # about half
    toy = make_language(lang, TINY_LANGS[lang]["word_order"], 3)
    assert all(r["targets"].split(" . ")[-1].startswith(toy.text("the answer is")) for r in math)
