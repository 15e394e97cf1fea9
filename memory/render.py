"""Rendering memory for a prompt, where memory text is data and never instructions.

Every piece of stored text (names, types, facts, turns) goes through `inline`: line
breaks and control characters become spaces, so stored text always continues a line
that chronomem began and can never start a line of its own (no forged header or
bullet); angle brackets, and whatever may be read as one, become look-alikes, so it
cannot close the block that delimits it; and bidirectional controls are dropped.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["CARD_HEADER", "CardEntity", "inline", "inline_heading", "render_card"]

CARD_HEADER = "[Known about the user]"
EMPTY_CARD = "(nothing remembered yet)"
ELLIPSIS = "…"
MIN_CUT = 20  # a fact cut shorter than this says too little to be worth showing


# What a reader may take for an angle bracket, and so for the end of the block: the
# ASCII ones, those NFKC folds into them (a test checks every code point), and the
# brackets drawn alike. All become the look-alikes ‹ and ›.
OPENING = "<\ufe64\uff1c\u2329\u3008\u27e8\u276c\u276e\u29fc\u1438\u02c2"
CLOSING = ">\ufe65\uff1e\u232a\u3009\u27e9\u276d\u276f\u29fd\u1433\u02c3"
# Bidirectional controls reorder what follows them on screen ("</memory>" can be
# stored so it displays as something else, or the reverse): dropped.
BIDI_CONTROLS = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_INERT = str.maketrans(
    {**dict.fromkeys(OPENING, "‹"), **dict.fromkeys(CLOSING, "›"), **dict.fromkeys(BIDI_CONTROLS)}
)


def inline(text: str) -> str:
    """`text` as one line of inert data."""
    cleaned = "".join(" " if unicodedata.category(ch) in ("Cc", "Zl", "Zp") else ch for ch in text)
    return " ".join(cleaned.split()).translate(_INERT)


def inline_heading(text: str) -> str:
    """`text` inside a `[...]` heading: also with look-alike brackets, so that it
    cannot close the heading and go on as chronomem's own words."""
    return inline(text).replace("[", "⟦").replace("]", "⟧")


@dataclass
class CardEntity:
    name: str
    entity_type: str
    facts: list[str]  # newest first, already capped to what the card may show
    relations: list[tuple[str, str]]  # (relation, target), newest first
    more: bool = False  # facts or relations were left out by the per-entity cap


@dataclass
class Card:
    text: str
    entities: list[str] = field(default_factory=list)
    truncated: bool = False


def render_card(entities: Sequence[CardEntity], max_chars: int, more: bool) -> Card:
    """The profile card, never longer than `max_chars`.

    `more`: entities were left out before rendering (by `max_entities`).
    """
    lines = [CARD_HEADER]
    used = len(CARD_HEADER)
    shown: list[str] = []
    truncated = more
    for entity in entities:
        room = max_chars - used - 1  # the newline before the entity's line
        line, complete = _entity_line(entity, room)
        if line is None:
            truncated = True
            break
        lines.append(line)
        used += 1 + len(line)
        shown.append(entity.name)
        truncated = truncated or entity.more or not complete
        for relation, target in entity.relations:
            rel_line = f"  - {inline(relation)} → {inline(target)}"
            if used + 1 + len(rel_line) > max_chars:
                truncated = True
                break
            lines.append(rel_line)
            used += 1 + len(rel_line)
    if not entities and used + 1 + len(EMPTY_CARD) <= max_chars:
        lines.append(EMPTY_CARD)
    return Card(text="\n".join(lines), entities=shown, truncated=truncated)


def _entity_line(entity: CardEntity, room: int) -> tuple[str | None, bool]:
    """`• Name (type): fact; fact` within `room` characters, and whether all facts fit."""
    line = f"• {inline(entity.name)} ({inline(entity.entity_type)})"
    if len(line) > room:
        return None, False
    for index, fact in enumerate(entity.facts):
        piece = ("; " if index else ": ") + inline(fact)
        if len(line) + len(piece) <= room:
            line += piece
            continue
        cut = room - len(line) - len(ELLIPSIS)
        if cut - 2 >= MIN_CUT:
            line += piece[:cut].rstrip() + ELLIPSIS
        return line, False
    return line, True
