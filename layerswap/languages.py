"""Real languages the hf world knows, by ISO 639-3 code: the one owner of these facts (config checks, the paper's
evaluation tasks and the hub's FLORES sources read them from here), and the config check that a target language has
the codes its evaluations need."""

from __future__ import annotations

from layerswap.benchmarks import BENCHMARKS, MATH, SELECTION_METRICS, TARGETED_METRICS
from layerswap.config_schema import key_error

#: Real languages the hf world knows: MGSM split code and FLORES-200 / Belebele code.
HF_LANGUAGES: dict[str, dict[str, str]] = {
    "en": {"name": "English", "mgsm": "en", "flores": "eng_Latn"},
    "swh": {"name": "Swahili", "mgsm": "sw", "flores": "swh_Latn"},
    "tel": {"name": "Telugu", "mgsm": "te", "flores": "tel_Telu"},
    "ben": {"name": "Bengali", "mgsm": "bn", "flores": "ben_Beng"},
    "jpn": {"name": "Japanese", "mgsm": "ja", "flores": "jpn_Jpan"},
    "deu": {"name": "German", "mgsm": "de", "flores": "deu_Latn"},
    "fra": {"name": "French", "mgsm": "fr", "flores": "fra_Latn"},
    "zho": {"name": "Chinese (simplified)", "mgsm": "zh", "flores": "zho_Hans"},
    "rus": {"name": "Russian", "mgsm": "ru", "flores": "rus_Cyrl"},
    "spa": {"name": "Spanish", "mgsm": "es", "flores": "spa_Latn"},
    "tha": {"name": "Thai", "mgsm": "th", "flores": "tha_Thai"},
}


def check_codes(config: dict, languages: list[str]) -> None:
    """Each real target language has the code (HF_LANGUAGES) of every benchmark scored in it that a table or selection
    cannot do without: MGSM (Table 1, the best-config choice) and the benchmarks of its experts' selection metrics.
    Else its jobs would score nothing there and Table 1 or `select` would stop on the missing score."""
    needs = {
        MATH: "Table 1 and the best-config choice read every target language's MGSM (a translation of MGSM, such "
        "as AfriMGSM, cannot stand in for it yet: docs/EXTENDING.md)"
    }
    selection = config["selection"]
    for key in ("weights", "constraints"):
        for kind in ("language", "joint"):
            for metric in selection.get(key, {}).get(kind, {}):
                if metric in TARGETED_METRICS:
                    needs.setdefault(SELECTION_METRICS[metric][0], f"selection.{key}.{kind}.{metric} reads it")
    for i, lang in enumerate(languages):
        for bench, why in needs.items():
            task = BENCHMARKS[bench].paper
            if task is not None and task.code not in HF_LANGUAGES[lang]:
                raise key_error(
                    f"languages[{i}]",
                    f"'{lang}' has no {BENCHMARKS[bench].title} code ('{task.code}' in its layerswap/languages.py:"
                    f"HF_LANGUAGES entry), and {why}",
                    [code for code, info in HF_LANGUAGES.items() if code != "en" and task.code in info],
                )
