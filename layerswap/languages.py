"""Real languages the hf world knows, by ISO 639-3 code: the one owner of these facts (config checks, the paper's
evaluation tasks and the hub's FLORES sources read them from here)."""

from __future__ import annotations

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
