"""The toy world's languages and facts: synthetic languages and the sentence generators the toy datasets are made of.

Every toy language is a relexified English with its own vocabulary (invented words from its own syllables),
its own word order (svo, sov or vso) and no articles, so language skill has to be learned. Names, digits and
arithmetic symbols are shared across languages, as Arabic numerals are in MGSM. Toy languages are named
`toy_<code>` and are stand-ins, never the real languages.

Hand-written on purpose: no library generates parallel synthetic languages with controllable grammar.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from layerswap.errors import UserError

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
        if rng.random() < 0.5:  # where it lives
            answer, others, subject = self.home[animal], PLACES, "toy_geography"
            statement = lang.clause(["the", animal], ["lives"], [], ["in", "the", answer])
            question = lang.question(["where"], ["the", animal], ["live"])
        else:  # what it eats
            answer, others, subject = self.food[animal], FOODS, "toy_biology"
            statement = lang.clause(["the", animal], ["eats"], [answer])
            question = lang.question(["what", "food"], ["the", animal], ["eat"])
        return {
            "statement": statement,
            "question": question,
            "answer": lang.text(answer),
            "pool": [lang.text(w) for w in others if w != answer],
            "subject": subject,
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
