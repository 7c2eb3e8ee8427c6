"""The toy world: synthetic languages and datasets in the real datasets' schemas.

Every toy language is a relexified English with its own vocabulary (invented words from its own syllables),
its own word order (svo, sov or vso) and no articles, so language skill has to be learned. Names, digits and
arithmetic symbols are shared across languages, as Arabic numerals are in MGSM. Toy languages are named
`toy_<code>` and are stand-ins, never the real languages.

Hand-written on purpose: no library generates parallel synthetic languages with controllable grammar.
"""

from __future__ import annotations

import argparse
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from layerswap.benchmarks import BENCHMARKS, toy_sizes
from layerswap.errors import UserError
from layerswap.workflow.layout import Layout

NAMES = ["tom", "mia", "sam", "ana", "leo", "eva", "max", "zoe", "ben", "ivy", "noa", "kai"]
OBJECTS = ["apples", "pens", "books", "cups", "balls", "coins", "cards", "eggs", "hats", "keys"]
ANIMALS = ["cat", "dog", "bird", "fish", "horse", "cow", "duck", "frog"]
COLORS = ["red", "blue", "green", "yellow", "black", "white"]
PLACES = ["park", "school", "house", "shop", "farm", "river", "city", "garden"]
FOODS = ["bread", "rice", "corn", "grass", "seeds", "milk", "meat", "fruit"]
GAIN = {"buys": "buys", "finds": "finds", "gets": "gets"}
LOSS = {"gives": "gives away", "loses": "loses", "sells": "sells"}
FUNCTION_WORDS = [
    "has",
    "have",
    "buys",
    "finds",
    "gets",
    "gives",
    "away",
    "loses",
    "sells",
    "more",
    "then",
    "how",
    "many",
    "does",
    "now",
    "the",
    "a",
    "answer",
    "is",
    "what",
    "where",
    "who",
    "lives",
    "live",
    "in",
    "likes",
    "like",
    "animal",
    "color",
    "eats",
    "eat",
    "food",
    "translate",
    "to",
    "write",
    "function",
    "that",
    "returns",
    "plus",
    "minus",
    "times",
    "x",
    "and",
    "sees",
    "big",
    "small",
    "day",
    "every",
    "goes",
    "with",
    "friend",
    "of",
    "at",
    "hat",
]
ARTICLES = {"the", "a", "does"}  # dropped in every toy language
SHARED = ["+", "-", "*", "=", ".", ",", "?", ":", "(", ")", "==", "def", "f", "return", "assert"]
SHARED += [str(n) for n in range(0, 100)]
ENGLISH_WORDS = NAMES + OBJECTS + ANIMALS + COLORS + PLACES + FOODS + FUNCTION_WORDS

SYLLABLES = {
    "svo": ["ka", "mi", "zu", "ta", "ne", "lo", "ri", "sa", "vu", "de", "po", "hi"],
    "sov": ["tel", "ru", "va", "nga", "di", "kon", "pa", "li", "mu", "se", "tho", "ri"],
    "vso": ["ko", "shi", "na", "ya", "to", "mo", "ki", "su", "ha", "ne", "ro", "wa"],
}


@dataclass(frozen=True)
class Language:
    """One language: code, word order and lexicon (English word -> word in this language)."""

    code: str
    order: str
    lexicon: dict[str, str]

    def words(self, tokens: list[str]) -> list[str]:
        if self.code == "en":
            return tokens
        return [self.lexicon.get(t, t) for t in tokens if t not in ARTICLES]

    def clause(self, s: list[str], v: list[str], o: list[str], x: list[str] = []) -> str:
        """Linearise a clause (subject, verb, object, extra) in this language's word order, ending with '.'."""
        parts = {"svo": (s, v, o, x), "sov": (s, o, x, v), "vso": (v, s, o, x)}[self.order]
        return " ".join(self.words([t for p in parts for t in p]) + ["."])

    def question(self, wh: list[str], s: list[str], v: list[str]) -> str:
        """A wh-question: English 'wh does s v ?', toy: s wh v (sov), v s wh (vso), wh s v (svo)."""
        if self.code == "en":
            return " ".join(wh + ["does"] + s + v + ["?"])
        parts = {"svo": (wh, s, v), "sov": (s, wh, v), "vso": (v, s, wh)}[self.order]
        return " ".join(self.words([t for p in parts for t in p]) + ["?"])

    def text(self, english: str) -> str:
        """Relexify a fixed English phrase (no reordering)."""
        return " ".join(self.words(english.split()))


def make_language(code: str, order: str, seed: int) -> Language:
    """A toy language with invented words of 2-3 syllables, unique within the language."""
    if order not in SYLLABLES:
        raise UserError(f"toy language '{code}': unknown word_order '{order}'; allowed: {', '.join(SYLLABLES)}")
    rng = random.Random(f"{seed}-{code}")
    syllables = SYLLABLES[order]
    used: set[str] = set(ENGLISH_WORDS) | set(SHARED)
    lexicon: dict[str, str] = {}
    for word in ENGLISH_WORDS:
        if word in NAMES or word in ARTICLES:
            continue
        while True:
            candidate = "".join(rng.choice(syllables) for _ in range(rng.choice([2, 3])))
            if candidate not in used:
                break
        used.add(candidate)
        lexicon[word] = candidate
    return Language(code, order, lexicon)


def english() -> Language:
    return Language("en", "svo", {})


def vocabulary(languages: list[Language]) -> list[str]:
    """Every word any generated text can contain, in a fixed order."""
    words = list(dict.fromkeys(ENGLISH_WORDS + SHARED))
    for lang in languages:
        words += [w for w in lang.lexicon.values() if w not in words]
    return words + ["\n", "Q:", "A:", "en"] + [lang.code for lang in languages]


class World:
    """Fixed facts of the toy world (where animals live, what they eat) and sentence generators."""

    def __init__(self, seed: int, languages: list[Language]):
        self.rng = random.Random(seed)
        self.languages = languages
        self.home = dict(zip(ANIMALS, self.rng.sample(PLACES, len(ANIMALS))))
        self.food = dict(zip(ANIMALS, self.rng.sample(FOODS, len(ANIMALS))))

    # ---- math -------------------------------------------------------------------------------------------
    def math_problem(self, rng: random.Random, steps: int) -> dict:
        name, obj = rng.choice(NAMES), rng.choice(OBJECTS)
        total = rng.randint(1, 9)
        story = [("has", [str(total)])]
        equations = []
        for _ in range(steps):
            if (rng.random() < 0.5 or total < 2) and total < 15:
                verb, n = rng.choice(list(GAIN)), rng.randint(1, 4)
                equations.append((total, "+", n, total + n))
                total += n
                story.append((verb, [str(n), "more"]))
            else:
                verb, n = rng.choice(list(LOSS)), rng.randint(1, min(4, total - 1))
                equations.append((total, "-", n, total - n))
                total -= n
                story.append((verb, [str(n)]))
        return {"name": name, "obj": obj, "story": story, "equations": equations, "answer": total}

    def render_math(self, p: dict, lang: Language) -> tuple[str, str]:
        sentences = []
        for i, (verb, amount) in enumerate(p["story"]):
            v = LOSS.get(verb, GAIN.get(verb, verb)).split()
            x = ["then"] if i > 1 else []
            sentences.append(lang.clause([p["name"]], v, amount + [p["obj"]], x))
        question = lang.question(["how", "many", p["obj"]], [p["name"]], ["have", "now"])
        work = " . ".join(f"{a} {op} {b} = {c}" for a, op, b, c in p["equations"])
        solution = f"{work} . {lang.text('the answer is')} {p['answer']}"
        return " ".join(sentences + [question]), solution

    # ---- reading comprehension and facts ------------------------------------------------------------------
    def fact(
        self, rng: random.Random, kind: str | None = None, name: str | None = None
    ) -> tuple[list[str], list[str], list[str], list[str], str, str]:
        """A random fact about a person: (s, v, o, x, question kind, answer word)."""
        name = name or rng.choice(NAMES)
        kind = kind or rng.choice(["animal", "place", "likes", "color"])
        if kind == "animal":
            animal = rng.choice(ANIMALS)
            return [name], ["has"], ["a", animal], [], "animal", animal
        if kind == "place":
            place = rng.choice(PLACES)
            return [name], ["lives"], [], ["in", "the", place], "place", place
        if kind == "likes":
            obj = rng.choice(OBJECTS)
            return [name], ["likes"], [obj], [], "likes", obj
        color = rng.choice(COLORS)
        return [name], ["has"], ["a", color, "hat"], [], "color", color

    def comprehension(self, rng: random.Random, lang: Language, n_facts: int = 3) -> dict:
        # One fact per kind, about different people: answering needs the language's words for each kind.
        kinds = rng.sample(["animal", "place", "likes", "color"], n_facts)
        facts = [self.fact(rng, kind, name) for kind, name in zip(kinds, rng.sample(NAMES, n_facts))]
        s, _, _, _, kind, answer = rng.choice(facts)
        wh, verb = {
            "animal": (["what", "animal"], ["have"]),
            "place": (["where"], ["live"]),
            "likes": (["what"], ["like"]),
            "color": (["what", "color", "hat"], ["have"]),
        }[kind]
        pool = {"animal": ANIMALS, "place": PLACES, "likes": OBJECTS, "color": COLORS}[kind]
        # Distractors: the other facts' answers (in the passage, wrong kind) and one word of the right kind that
        # is not in the passage; so knowing the language's words for each kind and reading the passage both count.
        others = [f[5] for f in facts if f[5] != answer]
        same_kind = [w for w in pool if w != answer]
        distractors = (others + rng.sample(same_kind, 3))[:2] + [rng.choice(same_kind)]
        while len(set(distractors)) < 3:
            distractors[-1] = rng.choice(same_kind)
        passage = " ".join(lang.clause(fs, fv, fo, fx) for fs, fv, fo, fx, _, _ in facts)
        return {
            "passage": passage,
            "question": lang.question(wh, s, verb),
            "answer": lang.text(answer),
            "options": [lang.text(w) for w in distractors],
            "kind": kind,
        }

    def world_fact(self, rng: random.Random, lang: Language) -> dict:
        animal = rng.choice(ANIMALS)
        if rng.random() < 0.5:
            statement = lang.clause(["the", animal], ["lives"], [], ["in", "the", self.home[animal]])
            question = lang.question(["where"], ["the", animal], ["live"])
            return {
                "statement": statement,
                "question": question,
                "answer": lang.text(self.home[animal]),
                "pool": [lang.text(p) for p in PLACES if p != self.home[animal]],
                "subject": "toy_geography",
            }
        statement = lang.clause(["the", animal], ["eats"], [self.food[animal]])
        question = lang.question(["what", "food"], ["the", animal], ["eat"])
        return {
            "statement": statement,
            "question": question,
            "answer": lang.text(self.food[animal]),
            "pool": [lang.text(f) for f in FOODS if f != self.food[animal]],
            "subject": "toy_biology",
        }

    def story(self, rng: random.Random, lang: Language, n: int = 4) -> str:
        sentences = []
        for _ in range(n):
            s, v, o, x, _, _ = self.fact(rng)
            if rng.random() < 0.3:
                sentences.append(self.world_fact(rng, lang)["statement"])
            else:
                sentences.append(lang.clause(s, v, o, x))
        return " ".join(sentences)

    def code_task(self, rng: random.Random, lang: Language) -> dict:
        op, word = rng.choice([("+", "plus"), ("-", "minus"), ("*", "times")])
        k = rng.randint(1, 9)
        text = lang.text(f"write a function that returns x {word}") + f" {k}"
        code = f"def f ( x ) : return x {op} {k}"
        xs = [x + k if op == "-" else x for x in rng.sample(range(1, 12), 3)]  # results stay in 0..99
        tests = [f"assert f ( {x} ) == {eval(f'{x} {op} {k}')}" for x in xs]
        return {"text": text, "code": code, "tests": tests}


# ---- writers in the real datasets' schemas ----------------------------------------------------------------


def _write_jsonl(path: Path, rows: Iterator[dict] | list[dict]) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    n = 0
    try:
        with tmp.open("w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
                n += 1
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    tmp.replace(path)
    return n


#: The files the generator writes, by dataset name (rules/data.smk runs one job per dataset): the pretraining corpus
#: (with the vocabulary), the SFT sources per language, and the evaluation sets per benchmark (layerswap/benchmarks.py;
#: its writer below, WRITERS) and language.
SOURCES = ("aya", "nllb")


def datasets(languages: list[str]) -> list[str]:
    """Every dataset name of a toy world with these languages (files: raw/<name>.jsonl or eval/<name>.jsonl)."""
    names = ["pretrain", "orca_math"] + [f"{src}_{l}" for src in SOURCES for l in languages]
    return names + [f"{b}_{l}" for b, bench in BENCHMARKS.items() for l in ["en", *languages] if bench.keys(l)]


def is_evaluation_set(name: str) -> bool:
    """Whether a dataset is an evaluation set (eval/<name>.jsonl) rather than raw data (raw/<name>.jsonl)."""
    return name.split("_", 1)[0] in BENCHMARKS


def dataset_inputs(name: str, languages: dict[str, dict], sizes: dict[str, int], mixes: dict | None = None) -> dict:
    """What one dataset depends on, besides the seed: its languages and its size, and for the pretraining corpus and
    the Aya sets their complete mix (`mixes`: {"pretrain": toy_world.pretrain_mix, "aya": toy_world.aya_mix}, each
    may be None; an omitted share and its default value give the same params). Nothing else reaches its job, so a
    changed size or an added language reruns only the datasets it touches."""
    mixes = mixes or {}
    if name == "pretrain":
        return {"languages": languages, "size": sizes["pretrain_docs"], "mix": pretrain_mix(mixes.get("pretrain"))}
    if name == "orca_math":
        return {"languages": {}, "size": sizes["math_sft"]}
    kind, lang = name.split("_", 1)
    size = sizes[f"{kind}_per_language"] if kind in SOURCES else toy_sizes(sizes)[kind]
    out = {"languages": {lang: languages[lang]} if lang != "en" else {}, "size": size}
    return out | ({"mix": aya_mix(mixes.get("aya"))} if kind == "aya" else {})


def _stream(seed: int, *names: str) -> random.Random:
    """A dataset's own random stream: no dataset draws from another's, so one's size changes no other file."""
    return random.Random("-".join([str(seed), *names]))


def write_dataset(
    name: str, out: Path, seed: int, languages: dict[str, dict], size: int, mix: dict | None = None
) -> None:
    """Write one dataset (`out`: its .jsonl; the pretraining corpus also writes vocab.json beside it). Every word of
    its text is checked against the vocabulary (`in_vocabulary`)."""
    langs = [make_language(code, spec["word_order"], seed) for code, spec in sorted(languages.items())]
    en = english()
    world = World(seed, langs)
    out = Path(out)
    rng, kind = _stream(seed, name), name
    if name == "pretrain":
        writer, rows = _pretrain, ({"text": d} for d in _pretrain(world, rng, en, langs, size, pretrain_mix(mix)))
    elif name == "orca_math":  # Orca-Math style English math (one- and two-step word problems, worked solutions)
        writer, rows = (
            World.render_math,
            (
                {"question": q, "answer": a}
                for q, a in (
                    world.render_math(world.math_problem(rng, steps=rng.choice([1, 2, 2])), en) for _ in range(size)
                )
            ),
        )
    else:
        kind, _, code = name.partition("_")  # benchmark and source names have no "_"
        if kind not in SOURCES + tuple(WRITERS) or not code or (code != "en" and len(langs) != 1):
            raise UserError(
                f"toy dataset '{name}': unknown; allowed: pretrain, orca_math, <aya|nllb>_<language>, "
                f"<{'|'.join(WRITERS)}>_<language> with that language's spec"
            )
        lang = en if code == "en" else langs[0]
        if kind == "aya":
            writer, rows = _aya, _aya(world, rng, lang, size, aya_mix(mix))
        elif kind == "nllb":
            writer, rows = _nllb, _nllb(world, rng, lang, size)
        else:  # an evaluation set: the same items in every language (the benchmark's stream), translated
            writer = WRITERS[kind]
            rows = writer(world, _stream(seed, kind), lang, size)
    _write_jsonl(out, in_vocabulary(name, kind, writer.__qualname__, rows, set(vocabulary(langs))))
    if name == "pretrain":
        vocab = out.with_name(Path(Layout().vocab()).name)  # beside the corpus, as the results layout has it
        vocab.write_text(json.dumps(vocabulary(langs), ensure_ascii=False), encoding="utf-8")


def in_vocabulary(
    name: str, kind: str, writer: str, rows: Iterator[dict] | list[dict], vocab: set[str]
) -> Iterator[dict]:
    """The rows of dataset `name` (of `kind`), refused with one line at the first word of model text (every string
    of a row, in lists and dicts too, but the fields `METADATA[kind]` names) that is not in the toy vocabulary: the
    word-level tokenizer would read it as <unk>, so the model could never see or write it."""
    metadata = METADATA.get(kind, frozenset())
    for row in rows:
        for key, value in row.items():
            unknown = [] if key in metadata else [w for text in strings(value) for w in text.split() if w not in vocab]
            if unknown:
                raise UserError(
                    f"toy dataset '{name}' (writer {writer} in layerswap/data/toyworld.py): the word "
                    f"'{unknown[0]}' of field '{key}' is not in the toy vocabulary; append it to "
                    f"FUNCTION_WORDS, or, if no prompt shows the field, add '{key}' to METADATA['{kind}']"
                )
        yield row


def strings(value) -> Iterator[str]:
    """The strings of a JSON value (a string, or those inside its lists and dicts)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


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


def generate(
    out_raw: Path,
    out_eval: Path,
    seed: int,
    languages: dict[str, dict],
    sizes: dict[str, int],
    mixes: dict | None = None,
) -> None:
    """Write every dataset of the toy world (what the workflow's per-dataset jobs write, in one call)."""
    for name in datasets(sorted(languages)):
        folder = out_eval if is_evaluation_set(name) else out_raw
        folder.mkdir(parents=True, exist_ok=True)
        write_dataset(name, folder / f"{name}.jsonl", seed, **dataset_inputs(name, languages, sizes, mixes))


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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", required=True, help="pretrain, orca_math, <aya|nllb>_<lang> or <benchmark>_<lang>")
    parser.add_argument("--out", required=True, type=Path, help="the dataset's .jsonl file")
    parser.add_argument(
        "--params-json", required=True, help="{seed, languages, size}: what the dataset depends on (see dataset_inputs)"
    )


def run(args: argparse.Namespace) -> None:
    params = json.loads(args.params_json)
    write_dataset(args.dataset, args.out, params["seed"], params["languages"], params["size"], params.get("mix"))
