"""Real languages the hf world knows, by ISO 639-3 code: the one owner of these facts (config checks, the paper's
evaluation tasks and the hub's FLORES sources read them from here), and the config check that a target language has
the codes its evaluations need."""

from __future__ import annotations

from layerswap.benchmarks import BENCHMARKS, MATH, PAPER_TASK_DIR, SELECTION_METRICS, TARGETED_METRICS, LmEvalTask
from layerswap.config_schema import key_error

#: Real languages the hf world knows: per dataset, the language's code there (an `LmEvalTask.code` key), none where
#: the dataset lacks the language: "mgsm" MGSM's split, "afrimgsm" AfriMGSM's subset (a language MGSM lacks: its math
#: benchmark is that translation, layerswap/benchmarks.py: AFRIMGSM), "flores" its FLORES-200 code (FLORES, Belebele,
#: the NLLB/FLORES sources), "mmlu" its Global-MMLU subset. Adding a language: docs/EXTENDING.md.
HF_LANGUAGES: dict[str, dict[str, str]] = {
    "en": {"name": "English", "mgsm": "en", "flores": "eng_Latn", "mmlu": "en"},
    "swh": {"name": "Swahili", "mgsm": "sw", "flores": "swh_Latn", "mmlu": "sw"},
    "tel": {"name": "Telugu", "mgsm": "te", "flores": "tel_Telu", "mmlu": "te"},
    "ben": {"name": "Bengali", "mgsm": "bn", "flores": "ben_Beng", "mmlu": "bn"},
    "jpn": {"name": "Japanese", "mgsm": "ja", "flores": "jpn_Jpan", "mmlu": "ja"},
    "deu": {"name": "German", "mgsm": "de", "flores": "deu_Latn", "mmlu": "de"},
    "fra": {"name": "French", "mgsm": "fr", "flores": "fra_Latn", "mmlu": "fr"},
    "zho": {"name": "Chinese (simplified)", "mgsm": "zh", "flores": "zho_Hans", "mmlu": "zh"},
    "rus": {"name": "Russian", "mgsm": "ru", "flores": "rus_Cyrl", "mmlu": "ru"},
    "spa": {"name": "Spanish", "mgsm": "es", "flores": "spa_Latn", "mmlu": "es"},
    "tha": {"name": "Thai", "mgsm": "th", "flores": "tha_Thai"},  # Global-MMLU has no Thai
    "yor": {"name": "Yoruba", "afrimgsm": "yor", "flores": "yor_Latn", "mmlu": "yo"},  # MGSM has no Yoruba
}


def task_for(task: LmEvalTask, lang: str) -> LmEvalTask | None:
    """The task that scores `task`'s benchmark in `lang`: `task` where the language's entry has its dataset's code
    (or the task names no code), else its translation where the entry has that one's, else None (the dataset lacks
    the language)."""
    info = HF_LANGUAGES[lang]
    if task.code is None or task.code in info:
        return task
    if task.translation is not None and task.translation.code in info:
        return task.translation
    return None


def translation_note(task: LmEvalTask, lang: str) -> str | None:
    """Where `task`'s translation stands in for it in `lang` (layerswap/benchmarks.py: AFRIMGSM for MGSM): the
    translation's `variant`, naming the language and its lm-eval task (what each evaluation file and the tables' notes
    record); else None."""
    own = task_for(task, lang) if lang in HF_LANGUAGES else None
    if own is None or own is task or own.variant is None:
        return None
    return own.variant.format(key=lang, task=own.task.format(key=lang, code=HF_LANGUAGES[lang][own.code]))


def math_notes(langs) -> list[str]:
    """A note per language of `langs` whose math benchmark is a translation (AfriMGSM, for a language MGSM lacks): the
    paper world's tables and figures show its scores in the math benchmark's place."""
    bench = BENCHMARKS[MATH]
    notes = (translation_note(bench.paper, lang) for lang in dict.fromkeys(langs))
    return [f"{note}; shown in {bench.title}'s place." for note in notes if note]


def check_codes(config: dict, languages: list[str]) -> None:
    """Each real target language has the code (HF_LANGUAGES) of every benchmark scored in it that a table or selection
    cannot do without, and our task YAML where the task is ours (FLORES): the math benchmark (Table 1, the best-config
    choice; MGSM, or its translation) and the benchmarks of its experts' selection metrics. Else its jobs would score
    nothing there and Table 1 or `select` would stop on the missing score."""
    needs = {MATH: "Table 1 and the best-config choice read every target language's math benchmark"}
    selection = config["selection"]
    for key in ("weights", "constraints"):
        for kind in ("language", "joint"):
            for metric in selection.get(key, {}).get(kind, {}):
                if metric in TARGETED_METRICS:
                    needs.setdefault(SELECTION_METRICS[metric][0], f"selection.{key}.{kind}.{metric} reads it")
    for i, lang in enumerate(languages):
        for bench, why in needs.items():
            task, title = BENCHMARKS[bench].paper, BENCHMARKS[bench].title
            if task is None:  # a toy-world benchmark: the paper task set does not run it
                continue
            own = task_for(task, lang)
            if own is None:
                codes = " or ".join(f"'{t.code}'" for t in (task, task.translation) if t is not None)
                raise key_error(
                    f"languages[{i}]",
                    f"'{lang}' has no {title} code ({codes} in its layerswap/languages.py:HF_LANGUAGES entry), "
                    f"and {why}",
                    [code for code in HF_LANGUAGES if code != "en" and task_for(task, code) is not None],
                )
            if own.folder is not None or own.marker is None:  # lm-eval's own task, or one that is always there
                continue
            for key in BENCHMARKS[bench].keys(lang):  # ours (FLORES): a YAML per key, else scored "unavailable"
                path = PAPER_TASK_DIR / own.marker.format(key=key)
                if not path.is_file():
                    raise key_error(
                        f"languages[{i}]",
                        f"'{lang}' has no {title} task for it (layerswap/tasks/paper/{path.name}; docs/EXTENDING.md: "
                        f"adding a language), and {why}",
                    )
