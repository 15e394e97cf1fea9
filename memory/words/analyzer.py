"""Text cut into the terms the full-text index holds, the same way for a stored row and
for a query, in every script.

- Words of alphabets and abugidas (Latin, Cyrillic, Greek, Arabic, Hebrew, Devanagari
  and the other Indic scripts) are runs of letters, digits and combining marks, so a
  vowel sign stays inside its word. Each is folded to its stem in its language
  (`stemming`): the script's own where one language has it, else the text's
  (`identify`), else the file's default. Latin words lose their accents.
- Han, kana and the scripts written without spaces (Thai, Lao, Khmer, Myanmar) are cut
  into single characters and overlapping pairs, so a query finds a word inside a longer
  run ("苹果" in "喜欢吃苹果"); Japanese runs also split where the script changes, so
  okurigana and particles fall away from their kanji.
- Hangul words give their pairs of syllables and themselves without a trailing
  particle or ending ("강아지를", "강아지가" -> "강아지").
- Emoji and symbols (€, ♥, 🍕) are terms of their own.

A stored text becomes one string of terms separated by spaces (`index_text`), which
FTS5 only splits at the spaces (`schema.WORDS_TOKENIZER`); a query becomes FTS5
expressions (`query_terms`), one per word, each word stemmed in every language the
query may be in.
"""

from __future__ import annotations

import functools
import itertools
import unicodedata
from collections.abc import Iterator
from typing import NamedTuple

import regex

from . import identify
from .languages import CYRILLIC, DEFAULT_LANGUAGE, LATIN, SCRIPT_LANGUAGES, in_script
from .stemming import stem, without_accents
from .stopwords import STOP_WORDS

__all__ = ["MAX_TERMS", "index_text", "query_terms"]

MAX_TERMS = 64  # a query's expressions at most
# A guess this likely decides a stored text's language, and adds its language to
# those a query is stemmed in (each more makes every word of the query an OR of
# stems: weaker guesses, which short texts get for any language, found no more on
# the language set and cost every search).
CONFIDENT = 0.5
# A stored text with fewer letters than this (a name, a few words) is too short for
# the identifier, whose guesses on it are often sure and wrong: it takes the default.
IDENTIFIABLE = 24

_SPACELESS = r"\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}"
_CJK = r"\p{Han}\p{Hiragana}\p{Katakana}々〆ヶーｰ"
_UNITS = regex.compile(
    rf"""
    (?P<cjk>[{_CJK}]+)
    | (?P<spaceless>[{_SPACELESS}]+)
    | (?P<hangul>\p{{Hangul}}+)
    | (?P<word>[[\p{{L}}\p{{N}}]--[{_CJK}{_SPACELESS}\p{{Hangul}}]]
               [[\p{{L}}\p{{M}}\p{{N}}]--[{_CJK}{_SPACELESS}\p{{Hangul}}]]*)
    | (?P<symbol>\p{{Extended_Pictographic}}|[\p{{Sc}}\p{{So}}]|[\p{{Sm}}--\p{{ASCII}}])
    """,
    regex.VERBOSE | regex.VERSION1,
)
_JAPANESE_SCRIPTS = regex.compile(r"[\p{Han}々〆ヶ]+|[\p{Hiragana}]+|[\p{Katakana}ーｰ]+")
_SCRIPT = regex.compile(
    r"[\p{N}\p{M}]*(?:(?P<Latin>\p{Latin})|(?P<Cyrillic>\p{Cyrillic})|(?P<Arabic>\p{Arabic})"
    r"|(?P<Devanagari>\p{Devanagari})|(?P<Greek>\p{Greek})|(?P<Armenian>\p{Armenian})"
    r"|(?P<Tamil>\p{Tamil}))"
)
_CLUSTER = regex.compile(r"\X")
_HAN = regex.compile(r"[\p{Han}々〆ヶ]")

# Korean particles and the commonest endings, longest first: what follows a noun.
_PARTICLES = sorted(
    """
    에서는 에게서 한테서 에서도 으로는 이라고 이라는 입니다 이에요 처럼 보다 부터 까지 마다
    에서 에게 한테 으로 이랑 하고 라고 이나 이다 예요 이야 은 는 이 가 을 를 의 에 도 와 과
    로 만 랑 야 다
    """.split(),
    key=len,
    reverse=True,
)


class Unit(NamedTuple):
    """A piece of a text as cut: what kind it is and its text (lower case)."""

    kind: str  # cjk, spaceless, hangul, word, symbol
    text: str


def _units(text: str) -> Iterator[Unit]:
    for match in _UNITS.finditer(unicodedata.normalize("NFKC", text).lower()):
        kind = match.lastgroup
        assert kind is not None
        yield Unit(kind, match.group())


def _script(word: str) -> str | None:
    if word.isascii():
        return "Latin"
    found = _SCRIPT.match(word)
    return found.lastgroup if found else None


class Languages(NamedTuple):
    """The languages a text's Latin and Cyrillic words are stemmed in, and the
    default (which of its script's languages a word of another script takes)."""

    latin: tuple[str, ...]
    cyrillic: tuple[str, ...]
    default: str


# Words only English has among the identifier's languages: a text with enough of them
# is English without asking the identifier, whose large model then never
# loads in a memory written in English.
_ENGLISH = frozenset(
    "the and of with that this have has was were what you they she for from about would"
    " could should their there which".split()
)
_ASCII_WORD = regex.compile(r"[a-z]+")


def _plainly_english(text: str) -> bool:
    words = _ASCII_WORD.findall(text.lower())
    found = sum(word in _ENGLISH for word in words)
    return found >= 2 and found * 6 >= len(words)


def _languages(text: str, default: str, *, query: bool) -> Languages:
    """A stored text's one language per alphabet: the identifier's confident guess,
    else the default. A query's: the default and every guess likely enough."""
    latin = [default if default in LATIN else DEFAULT_LANGUAGE]
    cyrillic = [in_script("Cyrillic", default)]
    if _plainly_english(text):
        english = tuple(dict.fromkeys([*latin, "en"])) if query else ("en",)
        return Languages(english, (cyrillic[0],), default)
    if not query and sum(map(str.isalpha, text)) < IDENTIFIABLE:
        return Languages((latin[0],), (cyrillic[0],), default)
    for guess in identify.guesses(text, 3):
        chosen = cyrillic if guess.language in CYRILLIC else latin
        if guess.language not in LATIN | CYRILLIC:
            continue
        if query and guess.probability >= CONFIDENT and guess.language not in chosen:
            chosen.append(guess.language)
        elif not query and guess.probability >= CONFIDENT:
            chosen[0] = guess.language
    if not query:
        return Languages((latin[0],), (cyrillic[0],), default)
    return Languages(tuple(latin), tuple(cyrillic), default)


@functools.lru_cache(maxsize=100_000)
def _folded(word: str, language: str) -> str:
    """A word's stem in `language`: English as FTS5's Porter tokenizer had it (accents
    first), other Latin-script languages stemmed with their accents, then without."""
    if language == "en":  # FTS5's Porter leaves words of one or two letters alone
        plain = without_accents(word)
        return plain if len(plain) < 3 else stem("en", plain) or plain
    stemmed = stem(language, word) or word
    return without_accents(stemmed) if _script(word) == "Latin" else stemmed


def _word_stems(word: str, languages: Languages) -> list[str]:
    """A word's stems: in each language it may be in, once each."""
    script = _script(word)
    if script == "Latin":
        candidates: tuple[str, ...] = languages.latin
    elif script == "Cyrillic":
        candidates = languages.cyrillic
    elif script in SCRIPT_LANGUAGES:
        candidates = (in_script(script, languages.default),)
    else:
        return [word]
    return list(dict.fromkeys(_folded(word, language) for language in candidates))


def _pairs(items: list[str]) -> list[str]:
    return [a + b for a, b in itertools.pairwise(items)]


def _runs(unit: Unit) -> list[list[str]]:
    """A run written without spaces, as runs of characters (grapheme clusters where
    marks join them); Japanese split where the script changes."""
    if unit.kind == "cjk":
        return [list(run) for run in _JAPANESE_SCRIPTS.findall(unit.text)]
    return [_CLUSTER.findall(unit.text)]


def _query_units(run: list[str]) -> list[str]:
    """What a query looks for in a run: its pairs, and its characters where each says
    something alone (Han: "弹琴" finds "弹钢琴"), or the one character of a short run."""
    if len(run) == 1:
        return run
    return _pairs(run) + (run if _HAN.match(run[0]) else [])


def _without_particle(word: str) -> str:
    for particle in _PARTICLES:
        if len(word) > len(particle) and word.endswith(particle):
            return word[: -len(particle)]
    return word


def _hangul_terms(word: str) -> list[str]:
    terms = list(dict.fromkeys([word, _without_particle(word)]))
    return terms + _pairs(list(word)) if len(word) > 1 else terms


def index_text(text: str, language: str = DEFAULT_LANGUAGE) -> str:
    """The terms of a stored text, separated by spaces; `language`: the file's default
    for words whose language neither script nor identifier tells."""
    languages: Languages | None = None
    terms: list[str] = []
    for unit in _units(text):
        if unit.kind == "word":
            if languages is None:
                languages = _languages(text, language, query=False)
            terms += _word_stems(unit.text, languages)
        elif unit.kind == "hangul":
            terms += _hangul_terms(unit.text)
        elif unit.kind == "symbol":
            terms.append(unit.text)
        else:
            for run in _runs(unit):
                terms += run + _pairs(run)
    return " ".join(terms)


def _quoted(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def _expression(stems: list[str]) -> str:
    if len(stems) == 1:
        return _quoted(stems[0])
    return "(" + " OR ".join(_quoted(s) for s in stems) + ")"


def query_terms(text: str, language: str = DEFAULT_LANGUAGE) -> list[str]:
    """The FTS5 expressions a query searches for, each word once, at most `MAX_TERMS`.

    Stop words are dropped unless nothing else is left ("who is it?" still searches).
    """
    languages = _languages(text, language, query=True)
    stops = _stop_words(languages)
    found: dict[str, bool] = {}  # expression -> whether it is only a stop word
    for unit in _units(text):
        stop = unit.text in stops
        if unit.kind == "word":
            found.setdefault(_expression(_word_stems(unit.text, languages)), stop)
        elif unit.kind == "hangul":
            for term in _hangul_terms(unit.text):
                found.setdefault(_quoted(term), stop)
        elif unit.kind == "symbol":
            found.setdefault(_quoted(unit.text), False)
        else:
            for run in _runs(unit):
                whole = "".join(run) in stops
                for term in _query_units(run):
                    found.setdefault(_quoted(term), whole or term in stops)
    kept = [term for term, stop in found.items() if not stop] or list(found)
    return kept[:MAX_TERMS]


def _stop_words(languages: Languages) -> frozenset[str]:
    chosen = {*languages.latin, *languages.cyrillic, "hi", "ar", "ja", "ko", "zh", "en"}
    return frozenset().union(*(STOP_WORDS.get(code, frozenset()) for code in chosen))
