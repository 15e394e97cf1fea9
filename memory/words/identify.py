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
            _model = _restricted_model()
        return _model


def _restricted_model() -> _Ranker:
    """py3langid's model with the columns of the candidate languages alone, as its
    `set_languages` would make them, but without keeping the whole model beside
    them in a server's memory."""
    from py3langid.langid import MODEL_DIR, MODEL_FILE, LanguageIdentifier
    from py3langid.modelio import load_model

    ptc, pc, classes, nextmove, row, output = load_model(MODEL_DIR / MODEL_FILE)
    kept = [i for i, code in enumerate(classes) if code in CANDIDATES]
    model: _Ranker = LanguageIdentifier(
        ptc[:, kept].copy(),
        pc[kept].copy(),
        [classes[i] for i in kept],
        nextmove,
        output,
        norm_probs=True,
        tk_row=row,
    )
    return model


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
