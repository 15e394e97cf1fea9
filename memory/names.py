"""How names, fact texts and relation types are normalised for matching."""

from __future__ import annotations

import re
import unicodedata

import regex

from .errors import InvalidInputError
from .validation import LABEL_MAX

__all__ = ["display_name", "match_key", "relation_type"]

_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
# Not a letter, a combining mark (a vowel sign of Devanagari stays inside its word)
# or a digit.
_NOT_WORD = regex.compile(r"[^\p{L}\p{M}\p{N}]+")


def display_name(text: str) -> str:
    """The spelling kept for display: surrounding and repeated whitespace removed."""
    return " ".join(text.split())


def match_key(text: str) -> str:
    """Key under which two spellings are the same: case, whitespace and Unicode form ignored.

    "alice", " Alice " and "ALICE" share a key; so do two fact texts that differ only so.
    """
    return unicodedata.normalize("NFC", display_name(text)).casefold()


def relation_type(text: str, field: str = "relation") -> str:
    """Normalise a relation type to snake_case: "works at", "worksAt", "Works-At" -> works_at.

    Raises:
        InvalidInputError: nothing of the type is left, or it grows past the limit.
    """
    snake = _NOT_WORD.sub("_", _CAMEL_BOUNDARY.sub("_", text.strip())).strip("_").lower()
    if not snake:
        raise InvalidInputError(f"{field}: {text!r} has no letters or digits to name a relation")
    if len(snake) > LABEL_MAX:
        raise InvalidInputError(
            f"{field}: {len(snake)} characters once in snake_case; at most {LABEL_MAX} are allowed"
        )
    return snake
