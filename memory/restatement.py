"""Restatements: an open fact that a new fact of the same entity says again (DESIGN §8).

`remember` lists them as `similar` ("lives in Paris" for "lives in Paris, France") so
the agent can `forget` one or use `replaces`. They are found by words, never by the
model: embedding is off the write path. A fact's words are its lower-cased Unicode
words, accents folded, stop words dropped, number words as digits, lightly stemmed;
a fact restates another when every word of the shorter one is in the longer one
(overlap coefficient at `RESTATES_AT`), and never when only one of them is negated.
The rule and its threshold were chosen on tests/data/restatements.jsonl:
`python -m bench.similar` measures them.
"""

from __future__ import annotations

import functools
import itertools
import operator
import re
import unicodedata
from collections.abc import Sequence
from typing import NamedTuple

from .words.stopwords import STOP_WORDS

__all__ = ["RESTATES_AT", "FactWords", "Likeness", "fact_words", "likeness", "restated"]

# The overlap coefficient from which a fact restates another. On facts of a few words
# anything lower lets one changed value through ("lives in Paris" / "lives in Berlin").
# `restated` tests it as "the words of one are all words of the other".
RESTATES_AT = 1.0

_WORD = re.compile(r"\w+")
# "doesn't" is the words "doesn" and "t": a lone "t" is the negation.
NEGATIONS = frozenset("not no never nor t cannot without neither".split())
NUMBERS = {
    word: str(value)
    for value, word in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen"
        " fourteen fifteen sixteen seventeen eighteen nineteen twenty".split()
    )
} | {
    word: str(10 * tens)
    for tens, word in enumerate("thirty forty fifty sixty seventy eighty ninety".split(), 3)
}
_DROPPED = STOP_WORDS["en"] | NEGATIONS
_KEEP_DOUBLE = frozenset("lsz")  # "spelled" stays "spell", "running" becomes "run"


class FactWords(NamedTuple):
    words: frozenset[str]
    negated: bool


class Likeness(NamedTuple):
    """How much two facts share, most telling first: they compare as a sort key."""

    overlap: float  # shared words / the words of the shorter fact
    jaccard: float  # shared words / all their words


def _folded(text: str) -> str:
    if text.isascii():
        return text.lower()
    decomposed = unicodedata.normalize("NFKD", text.lower())
    return "".join(char for char in decomposed if not unicodedata.combining(char))


@functools.lru_cache(maxsize=8_192)
def stem(word: str) -> str:
    """A light suffix stripper: "likes", "liked" and "liking" all become "lik"."""
    if len(word) <= 3 or word.isdigit():
        return word
    if word.endswith("ies") or word.endswith("ied"):
        return word[:-3] + "y"
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    for suffix in ("ing", "ed"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            if word[-1] == word[-2] and word[-1] not in _KEEP_DOUBLE:
                word = word[:-1]
            break
    if word.endswith("e") and len(word) > 3:
        word = word[:-1]
    return word


# An entity's open facts are compared again on every `remember` about it.
@functools.lru_cache(maxsize=8_192)
def fact_words(text: str, stemming: bool = True) -> FactWords:
    words = _WORD.findall(_folded(text))
    content = itertools.filterfalse(_DROPPED.__contains__, words)
    numbers = [NUMBERS.get(word, word) for word in content]
    kept = frozenset(map(stem, numbers) if stemming else numbers)
    return FactWords(kept, not NEGATIONS.isdisjoint(words))


_NUMBER_WORDS: dict[str, list[str]] = {}
for _word, _digits in NUMBERS.items():
    _NUMBER_WORDS.setdefault(_digits, []).append(_word)


def _search_keys(word: str) -> list[str]:
    """What is in the folded text of every fact that has `word` (a stem): the stem
    itself, but for a final "y" ("study" for "studies"), and a number's words."""
    keys = [word[:-1] if word.endswith("y") and len(word) > 1 else word]
    return keys + _NUMBER_WORDS.get(word, [])


_NOTHING = Likeness(0.0, 0.0)
_words_of = operator.attrgetter("words")


def likeness(a: FactWords, b: FactWords) -> Likeness:
    """Nothing in common when only one of them is negated ("likes tea" / "doesn't")."""
    if a.negated != b.negated or a.words.isdisjoint(b.words):
        return _NOTHING
    shared = len(a.words & b.words)
    return Likeness(shared / min(len(a.words), len(b.words)), shared / len(a.words | b.words))


def restated(added: Sequence[str], known: Sequence[str]) -> list[int]:
    """The indexes of the `known` facts that one of the `added` facts restates, each
    once, most alike first (ties in the order given).

    At `RESTATES_AT` (1.0) a fact restates another when the words of one are all
    words of the other: two subset tests a fact, in C. This runs for every open fact
    of the entity on every `remember`, and most share little with the new facts."""
    new = [fact for fact in map(fact_words, added) if fact.words]
    if not new:
        return []
    # A fact restating another shares a word with it, and each word's search key is
    # in the text of any fact that has the word: most open facts are passed over by
    # a substring test each, without working out their words.
    keys = {key for fact in new for word in fact.words for key in _search_keys(word)}
    folded = map(_folded, known)
    passing = [i for i, text in enumerate(folded) if any(key in text for key in keys)]
    words = [fact_words(known[i]) for i in passing]
    sets = list(map(_words_of, words))
    best: dict[int, Likeness] = {}
    for fact in new:
        either = map(operator.or_, map(fact.words.issuperset, sets), map(fact.words.issubset, sets))
        for position in itertools.compress(range(len(sets)), either):
            other, index = words[position], passing[position]
            if other.words and other.negated == fact.negated:
                alike = likeness(fact, other)
                best[index] = max(best.get(index, alike), alike)
    return sorted(best, key=lambda index: (-best[index].overlap, -best[index].jaccard, index))
