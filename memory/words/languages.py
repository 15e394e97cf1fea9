"""The languages whose word forms search folds: ISO 639-1 codes, the Snowball algorithm
of each, and the scripts that tell a text's language by themselves."""

from __future__ import annotations

import os

# English keeps Porter's original algorithm, which FTS5's `porter` tokenizer ran before
# the analyzer existed: English words are indexed as they were.
SNOWBALL = {
    "ar": "arabic",
    "ca": "catalan",
    "cs": "czech",
    "da": "danish",
    "de": "german",
    "el": "greek",
    "en": "porter",
    "eo": "esperanto",
    "es": "spanish",
    "et": "estonian",
    "eu": "basque",
    "fa": "persian",
    "fi": "finnish",
    "fr": "french",
    "ga": "irish",
    "hi": "hindi",
    "hu": "hungarian",
    "hy": "armenian",
    "id": "indonesian",
    "it": "italian",
    "lt": "lithuanian",
    "ne": "nepali",
    "nl": "dutch",
    "no": "norwegian",
    "pl": "polish",
    "pt": "portuguese",
    "ro": "romanian",
    "ru": "russian",
    "sr": "serbian",
    "st": "sesotho",
    "sv": "swedish",
    "ta": "tamil",
    "tr": "turkish",
}
LANGUAGES = frozenset(SNOWBALL)
DEFAULT_LANGUAGE = "en"

# The languages each script is written in, the usual one first. A word of one of
# these takes its script's usual language, or the default where that is written in
# it too (Nepali, Persian); Latin and Cyrillic words take their text's (`identify`).
SCRIPT_LANGUAGES = {
    "Arabic": ("ar", "fa"),
    "Armenian": ("hy",),
    "Devanagari": ("hi", "ne"),
    "Greek": ("el",),
    "Tamil": ("ta",),
    "Cyrillic": ("ru", "sr"),
}
CYRILLIC = frozenset(SCRIPT_LANGUAGES["Cyrillic"])
LATIN = LANGUAGES - {code for codes in SCRIPT_LANGUAGES.values() for code in codes} | {"sr"}


def in_script(script: str, default: str) -> str:
    """The language a word of `script` is stemmed in, given the default language."""
    codes = SCRIPT_LANGUAGES[script]
    return default if default in codes else codes[0]


def language_error(value: str) -> str | None:
    """Why `value` is not a language code chronomem stems, or None when it is one."""
    if value in LANGUAGES:
        return None
    return f"{value!r} is not one of {', '.join(sorted(LANGUAGES))} (ISO 639-1 codes)"


ENV = "CHRONOMEM_LANGUAGE"


def chosen_language(language: str | None) -> str | None:
    """The default language asked for: `language`, else $CHRONOMEM_LANGUAGE, else None
    (the file's own).

    Raises:
        ValueError: it is not a language chronomem stems.
    """
    value = language if language is not None else os.environ.get(ENV) or None
    if value is None:
        return None
    code = value.strip().lower()
    if (error := language_error(code)) is not None:
        raise ValueError(f"language: {error} (--language / {ENV})")
    return code
