"""The language of a Latin- or Cyrillic-script text, told by py3langid's model (it ships
inside the wheel: nothing is downloaded) restricted to the languages Snowball stems."""

from __future__ import annotations

import threading
from importlib import metadata
from typing import NamedTuple, Protocol

# Snowball's languages written in Latin or Cyrillic script, as ISO 639-1 codes.
CANDIDATES = frozenset(
    "ca cs da de en eo es et eu fi fr ga hu id it lt nl no pl pt ro ru sr st sv tr".split()
)

# Goes into the index's signature: another model may tell another language, and so stem
# the same text otherwise.
IDENTIFIER = f"py3langid {metadata.version('py3langid')}"


class Guess(NamedTuple):
    language: str  # ISO 639-1 code, one of CANDIDATES
    probability: float


class _Ranker(Protocol):
    def rank(self, text: str) -> list[tuple[str, float]]: ...


_lock = threading.Lock()
_model: _Ranker | None = None


def _loaded() -> _Ranker:
    global _model
    if _model is not None:
        return _model
    with _lock:
        if _model is None:
            from py3langid.langid import MODEL_FILE, LanguageIdentifier

            model = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
            model.set_languages(sorted(CANDIDATES))
            _model = model
        return _model


def guesses(text: str, limit: int = 3) -> list[Guess]:
    """The `limit` likeliest languages of `text`, most likely first; [] for a text with
    no letters, which no language can be told from."""
    if limit < 1:
        raise ValueError(f"limit must be at least 1, not {limit}")
    if not any(c.isalpha() for c in text):
        return []
    ranked = _loaded().rank(text)
    # Ties (rare) are broken by code, so that the order does not rest on the model's.
    ranked.sort(key=lambda pair: (-pair[1], pair[0]))
    return [Guess(code, float(p)) for code, p in ranked[:limit]]
