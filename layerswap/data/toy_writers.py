"""The toy world's datasets in the real datasets' schemas: the pretraining corpus and the Aya sets (their mixes
configurable), the NLLB pairs, and one evaluation set writer per benchmark (`WRITERS`), each drawing from the toy
languages' sentence generators (layerswap/data/toy_language.py). `layerswap.data.toyworld` writes them as files."""

from __future__ import annotations

import random
from typing import Iterator

from layerswap.data.toy_language import Language, World, english
from layerswap.errors import UserError

#: The Aya sets' shares (`toy_world.aya_mix`): `math` of the items are one-step word problems in the language with
#: worked solutions (the pretraining corpus's toy math); the rest are reading QA, facts and story continuation.
AYA_MIX = {"math": 0.0}


def aya_mix(given: dict | None) -> dict[str, float]:
    unknown = sorted(set(given or {}) - set(AYA_MIX))
    if unknown:
        raise UserError(f"toy_world.aya_mix: unknown key '{unknown[0]}'; allowed: {', '.join(AYA_MIX)}")
    return {**AYA_MIX, **(given or {})}


#: The pretraining corpus's shares (`toy_world.pretrain_mix` overrides any of them): `english` of the documents are
#: English (the rest: a toy language, drawn uniformly); of the toy-language documents, `toy_math` are one-step word
#: problems, `parallel` English = toy sentence pairs, `code_switched` English stories with each word swapped for the
#: toy language's word with probability 1/2 (English word order), the rest toy-language stories. English documents
#: are fixed: 20% one-step math, 15% comprehension, 5% code, the rest stories.
PRETRAIN_MIX = {"english": 0.62, "toy_math": 0.06, "parallel": 0.24, "code_switched": 0.0}


def pretrain_mix(given: dict | None) -> dict[str, float]:
    """The complete pretraining mix: PRETRAIN_MIX with the config's values; one-line error if the toy shares
    exceed 1."""
    unknown = sorted(set(given or {}) - set(PRETRAIN_MIX))
    if unknown:
        raise UserError(f"toy_world.pretrain_mix: unknown key '{unknown[0]}'; allowed: {', '.join(PRETRAIN_MIX)}")
    mix = {**PRETRAIN_MIX, **(given or {})}
    toy = mix["toy_math"] + mix["parallel"] + mix["code_switched"]
    if toy > 1 + 1e-9:
        raise UserError(
            f"toy_world.pretrain_mix: toy_math + parallel + code_switched is {toy:g}, more than 1 "
            "(they are shares of the toy-language documents)"
        )
    return mix


def _pretrain(
    world: "World", rng: random.Random, en: "Language", langs: list, n: int, mix: dict[str, float] = PRETRAIN_MIX
) -> list[str]:
    """Pretraining corpus: English-heavy (like Llama), a little of each toy language, some parallel text."""
    math_to, parallel_to = mix["toy_math"], mix["toy_math"] + mix["parallel"]
    switched_to = parallel_to + mix["code_switched"]
    docs: list[str] = []
    for _ in range(n):
        r = rng.random()
        lang = en if r < mix["english"] or not langs else rng.choice(langs)
        kind = rng.random()
        if lang is en and kind < 0.2:
            q, a = world.render_math(world.math_problem(rng, steps=1), en)
            docs.append(f"Q: {q}\nA: {a}")
        elif lang is en and kind < 0.35:
            c = world.comprehension(rng, en)
            docs.append(f"Q: {c['passage']} {c['question']}\nA: {c['answer']}")
        elif lang is en and kind < 0.40:
            t = world.code_task(rng, en)
            docs.append(f"Q: {t['text']}\nA: {t['code']}")
        elif lang is not en and kind < math_to:
            q, a = world.render_math(world.math_problem(rng, steps=1), lang)
            docs.append(f"Q: {q}\nA: {a}")
        elif lang is not en and kind < parallel_to:
            s, v, o, x, _, _ = world.fact(rng)
            docs.append(f"{en.clause(s, v, o, x)} = {lang.clause(s, v, o, x)}")
        elif lang is not en and kind < switched_to:
            words = world.story(rng, en, n=rng.randint(2, 5)).split()
            docs.append(" ".join(lang.lexicon.get(w, w) if rng.random() < 0.5 else w for w in words))
        else:
            docs.append(world.story(rng, lang, n=rng.randint(2, 5)))
    return docs


def _aya(world: World, rng: random.Random, lang: Language, n: int, mix: dict[str, float] = AYA_MIX) -> Iterator[dict]:
    """Aya-style generic instructions in a toy language: reading QA, facts and story continuation; a `mix["math"]`
    share of one-step word problems (none by default)."""
    for i in range(n):
        kind = rng.random()
        if mix["math"] and rng.random() < mix["math"]:  # no draw at share 0: the default sets stay as they were
            inputs, targets = world.render_math(world.math_problem(rng, steps=1), lang)
        elif kind < 0.45:
            c = world.comprehension(rng, lang, n_facts=rng.choice([2, 3]))
            inputs, targets = f"{c['passage']} {c['question']}", c["answer"]
        elif kind < 0.7:
            f = world.world_fact(rng, lang)
            inputs, targets = f["question"], f["answer"]
        else:
            story = world.story(rng, lang, n=rng.randint(2, 4)).split(" . ")
            inputs, targets = " . ".join(story[:-1]) + " .", story[-1]
        yield {
            "inputs": inputs,
            "targets": targets,
            "language": lang.code,
            "language_code": lang.code,
            "annotation_type": "synthetic-toy",
            "user_id": f"toy-{i % 7}",
        }


def _nllb(world: World, rng: random.Random, lang: Language, n: int) -> Iterator[dict]:
    en = english()
    for _ in range(n):
        facts = [world.fact(rng)[:4] for _ in range(rng.choice([1, 2]))]
        yield {
            "translation": {
                "eng_Latn": " ".join(en.clause(*f) for f in facts),
                lang.code: " ".join(lang.clause(*f) for f in facts),
            },
            "laser_score": 1.0,
            "source_sentence_lid": 1.0,
            "target_sentence_lid": 1.0,
        }


def _mgsm(world: World, rng: random.Random, lang: Language, n: int) -> list[dict]:
    """Two-step word problems, parallel across languages like MGSM (all problems drawn first, then rendered)."""
    rows = []
    for p in [world.math_problem(rng, steps=2) for _ in range(n)]:
        q, a = world.render_math(p, lang)
        eq = "; ".join(f"{x}{op}{y}={z}" for x, op, y, z in p["equations"])
        rows.append({"question": q, "answer": a, "answer_number": p["answer"], "equation_solution": eq})
    return rows


def _belebele(world: World, rng: random.Random, lang: Language, n: int) -> Iterator[dict]:
    for i in range(n):
        c = world.comprehension(rng, lang, n_facts=3)
        options = c["options"] + [c["answer"]]
        order = rng.sample(range(4), 4)
        shuffled = [options[j] for j in order]
        row = {
            "link": f"toy://belebele/{i}",
            "question_number": 1,
            "flores_passage": c["passage"],
            "question": c["question"],
            "correct_answer_num": str(order.index(3) + 1),
            "dialect": lang.code,
            "ds": "toy",
        }
        row.update({f"mc_answer{k + 1}": shuffled[k] for k in range(4)})
        yield row


def _mmlu(world: World, rng: random.Random, lang: Language, n: int) -> Iterator[dict]:
    for _ in range(n):
        f = world.world_fact(rng, lang)
        choices = rng.sample(f["pool"], 3) + [f["answer"]]
        rng.shuffle(choices)
        yield {
            "question": f["question"],
            "subject": f["subject"],
            "choices": choices,
            "answer": choices.index(f["answer"]),
        }


def _mbpp(world: World, rng: random.Random, lang: Language, n: int) -> Iterator[dict]:
    for i in range(n):
        t = world.code_task(rng, lang)
        yield {
            "task_id": i + 1,
            "text": t["text"],
            "code": t["code"],
            "test_list": t["tests"],
            "test_setup_code": "",
            "challenge_test_list": [],
        }


def _flores(world: World, rng: random.Random, lang: Language, n: int) -> Iterator[dict]:
    en = english()
    for i in range(n):
        facts = [world.fact(rng)[:4] for _ in range(2)]
        yield {
            "id": i,
            "sentence_eng": " ".join(en.clause(*f) for f in facts),
            "sentence": " ".join(lang.clause(*f) for f in facts),
        }


#: The toy evaluation set of each benchmark of layerswap/benchmarks.py: writer(world, rng, language, n) -> rows in the
#: real dataset's schema (docs/ARCHITECTURE.md, results/data/eval/).
WRITERS = {"mgsm": _mgsm, "belebele": _belebele, "flores": _flores, "mbpp": _mbpp, "mmlu": _mmlu}

#: The fields of each kind of dataset (a benchmark or a source) that hold no text a model reads (ids, links, codes,
#: labels): `in_vocabulary` checks the words of every other string.
METADATA = {
    "aya": frozenset({"language", "language_code", "annotation_type", "user_id"}),
    "mgsm": frozenset({"equation_solution"}),
    "belebele": frozenset({"link", "dialect", "ds", "correct_answer_num"}),
    "mmlu": frozenset({"subject"}),
}
