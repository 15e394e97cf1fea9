"""Word forms folded by Snowball, one algorithm per language, and accents folded.

The pure-Python algorithms of `snowballstemmer` are imported by name, never through
`snowballstemmer.stemmer()`, which prefers PyStemmer when it is installed: the index
must not change with what else is installed.
"""

from __future__ import annotations

import functools
import importlib
import threading
import unicodedata
from typing import Protocol

from .languages import SNOWBALL


class _Stemmer(Protocol):
    def stemWord(self, word: str) -> str: ...


_lock = threading.Lock()
_stemmers: dict[str, _Stemmer] = {}


def _stemmer(language: str) -> _Stemmer:
    """The Snowball stemmer of `language`; one per language, made on first use. A
    stemmer keeps state while it stems a word, so calls are serialised per stemmer
    (`stem` caches, so few reach it)."""
    found = _stemmers.get(language)
    if found is None:
        name = SNOWBALL[language]
        module = importlib.import_module(f"snowballstemmer.{name}_stemmer")
        cls = getattr(module, "".join(part.title() for part in name.split("_")) + "Stemmer")
        found = _stemmers.setdefault(language, cls())
    return found


@functools.lru_cache(maxsize=200_000)
def stem(language: str, word: str) -> str:
    """`word` (lower case) in its folded form for `language`."""
    stemmer = _stemmer(language)
    with _lock:
        return stemmer.stemWord(word)


@functools.lru_cache(maxsize=200_000)
def without_accents(word: str) -> str:
    """`word` with the combining marks of its letters taken away ("café" -> "cafe")."""
    if word.isascii():
        return word
    decomposed = unicodedata.normalize("NFKD", word)
    kept = "".join(c for c in decomposed if not unicodedata.combining(c))
    return unicodedata.normalize("NFC", kept)
