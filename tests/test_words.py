"""The analyzer's terms: what a stored text is indexed as and what a query looks for."""

from __future__ import annotations

import subprocess
import sys

import pytest

from memory.words import MAX_TERMS, index_text, query_terms
from memory.words.languages import LATIN, chosen_language, in_script
from memory.words.stemming import stemmer_of


@pytest.mark.parametrize(
    ("text", "terms"),
    [
        # English as FTS5's Porter tokenizer had it: accents folded first, short words kept
        ("Running runs, naïve café", "run run naiv cafe"),
        ("it is as he said", "it is as he said"),
        ("1980s", "1980"),
        # combining marks stay inside their word; Hindi is stemmed
        ("किताबें पढ़ना", "किताब पढ़"),
        # Han: characters and their pairs; Japanese split where the script changes
        ("苹果汁", "苹 果 汁 苹果 果汁"),
        ("猫が好き", "猫 が 好 き"),
        # hangul: the word, the word without its particle, its syllable pairs
        ("강아지를", "강아지를 강아지 강아 아지 지를"),
        # Thai: grapheme clusters (a consonant with its marks) and their pairs
        ("กิน", "กิ น กิน"),
        # symbols and emoji as themselves; variation selectors and ASCII operators dropped
        ("❤️ 🍕 5€ a+b=c", "❤ 🍕 5 € a b c"),
        # full-width letters are the usual ones
        ("ＡＢＣ", "abc"),
        ("", ""),
        ("?!", ""),
    ],
)
def test_a_stored_text_becomes_these_terms(text: str, terms: str) -> None:
    assert index_text(text) == terms


def test_a_long_text_is_stemmed_in_the_language_the_identifier_tells() -> None:
    french = "Marie travaillait à Lyon avant de partir vivre au Canada"
    assert "travaill" in index_text(french).split()  # French, not Porter's "travail"
    assert index_text("travaillait") == "travaillait"  # one word: the default, English


def test_a_short_text_takes_the_default_language() -> None:
    assert index_text("animaux", "fr") == "animal"
    assert index_text("animaux", "en") == "animaux"


def test_a_script_with_several_languages_takes_the_default_where_it_is_one() -> None:
    assert in_script("Devanagari", "en") == "hi"
    assert in_script("Devanagari", "ne") == "ne"
    assert in_script("Cyrillic", "sr") == "sr"
    assert "sr" in LATIN and "ru" not in LATIN and "hi" not in LATIN


def test_a_query_word_looks_for_its_stem_in_each_language_it_may_be_in() -> None:
    terms = query_terms("Où travaillait Marie quand elle vivait au Canada ?")
    assert '("travaillait" OR "travaill")' in terms  # English (the default), French
    assert '"où"' not in terms and '"elle"' not in terms  # French stop words


def test_a_query_of_han_looks_for_pairs_and_single_characters() -> None:
    assert query_terms("弹琴") == ['"弹琴"', '"弹"', '"琴"']
    assert query_terms("苹") == ['"苹"']
    assert query_terms("什么") == ['"什么"', '"什"', '"么"']  # only stop words: kept


def test_query_text_is_never_query_syntax() -> None:
    assert query_terms('say "hi" NEAR(x) OR y* ^z col:w') == [
        '"sai"',  # Porter's stem
        '"hi"',
        '"near"',
        '"x"',
        '"y"',
        '"z"',
        '"col"',
        '"w"',
    ]


def test_a_query_has_at_most_max_terms() -> None:
    words = " ".join(f"word{n}" for n in range(MAX_TERMS + 10))
    assert len(query_terms(words)) == MAX_TERMS


@pytest.mark.parametrize(("value", "code"), [("fr", "fr"), (" DE ", "de"), (None, None)])
def test_a_default_language_is_a_code_it_stems(value: str | None, code: str | None) -> None:
    assert chosen_language(value) == code


def test_a_language_it_does_not_stem_names_the_setting() -> None:
    with pytest.raises(ValueError, match=r"language: 'zz' is not one of .*CHRONOMEM_LANGUAGE"):
        chosen_language("zz")


ENGLISH_ONLY = r"""
import sys
from memory.words import index_text, query_terms
index_text("Caroline went to the support group with her friends, and they had fun")
query_terms("what does she do with her friends?")
index_text("likes tea")  # too short to be told: the default
print("py3langid" in sys.modules)
"""


def test_english_text_never_loads_the_identifiers_model() -> None:
    """Its model is tens of MiB: a memory written in English never pays for it."""
    done = subprocess.run(
        [sys.executable, "-c", ENGLISH_ONLY], capture_output=True, text=True, timeout=60
    )
    assert done.stdout.strip() == "False", done.stderr


WORDS = {
    "en": "running generously happiness relational",
    "fr": "chevaux travaillait mangeraient nationalité",
    "de": "häuser arbeitet gebacken schönheit",
    "ru": "книгу читала собаками прекрасный",
    "hi": "किताबें लड़के पढ़ना बच्चों",
    "ar": "الكتاب كتابه المعلمون مدرسة",
    "es": "vivió corriendo ciudades",
    "tr": "evlerimizden kitaplar",
}


@pytest.mark.parametrize("language", sorted(WORDS))
def test_both_snowball_implementations_stem_alike(language: str) -> None:
    """A file's index must not depend on which of them a process has."""
    pytest.importorskip("Stemmer", reason="PyStemmer has no wheel here")
    c, python = stemmer_of(language, "PyStemmer"), stemmer_of(language, "snowballstemmer")
    for word in WORDS[language].split():
        assert c.stemWord(word) == python.stemWord(word), word
