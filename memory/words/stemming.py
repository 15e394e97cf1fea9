"""Word forms folded by Snowball, one algorithm per language, and accents folded.

The stemmers are PyStemmer's (Snowball's C code) where it is installed, else the
pure-Python ones of `snowballstemmer`, imported by name. Both are pinned to the same
Snowball release and stem every word alike (tests/test_words.py checks), so a file's
index does not depend on which of them a process has; the C one is about a hundred
times faster.
"""

from __future__ import annotations

import functools
import importlib
import threading
import unicodedata
from typing import Protocol

from .languages import SNOWBALL

__all__ = ["STEMMERS", "stem", "without_accents"]


class _Stemmer(Protocol):
    def stemWord(self, word: str) -> str: ...


def _pure_python(name: str) -> _Stemmer:
    module = importlib.import_module(f"snowballstemmer.{name}_stemmer")
    cls = getattr(module, "".join(part.title() for part in name.split("_")) + "Stemmer")
    stemmer: _Stemmer = cls()
    return stemmer


def _c(name: str) -> _Stemmer:
    import Stemmer

    stemmer: _Stemmer = Stemmer.Stemmer(name)
    return stemmer


try:
    import Stemmer  # noqa: F401 (only whether it is there)

    _make = _c
    STEMMERS = "PyStemmer"
except ImportError:
    _make = _pure_python
    STEMMERS = "snowballstemmer"

_lock = threading.Lock()
_stemmers: dict[str, _Stemmer] = {}


def stemmer_of(language: str, make: str = STEMMERS) -> _Stemmer:
    """A Snowball stemmer of `language` from `make` ("PyStemmer" or
    "snowballstemmer"), made on first use."""
    if make != STEMMERS:
        return (_c if make == "PyStemmer" else _pure_python)(SNOWBALL[language])
    found = _stemmers.get(language)
    if found is None:
        found = _stemmers.setdefault(language, _make(SNOWBALL[language]))
    return found


@functools.lru_cache(maxsize=200_000)
def stem(language: str, word: str) -> str:
    """`word` (lower case) in its folded form for `language`. A stemmer keeps state
    while it stems a word, so calls are serialised (the cache answers most)."""
    stemmer = stemmer_of(language)
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
