"""The language identifier word search stems by (issue 18): short texts in the languages
Snowball stems, told offline, the same way every time, among CANDIDATES only."""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path

import pytest

from memory.words.identify import CANDIDATES, IDENTIFIER, Guess, guesses

from .offline_probe import run_recorded, written_outside

SENTENCES = [
    ("en", "Sam cycles to the office."),
    ("en", "Who is allergic to shellfish?"),
    ("fr", "Claire joue du violoncelle le mardi soir."),
    ("fr", "Julien a peur des araignées."),
    ("de", "Wovor hat Bruno Angst?"),
    ("de", "Meine Schwester wohnt seit drei Jahren in Hamburg."),
    ("es", "Andrés conduce una furgoneta vieja."),
    ("es", "¿Dónde vive tu hermano ahora?"),
    ("pt", "Dona Lúcia é a avó materna de Rafael."),
    ("pt", "Ela assistia novela?"),
    ("ru", "Моя сестра живёт в Москве."),
    ("ru", "Кто боится собак?"),
    ("it", "Il gatto dorme sul divano."),
]


@pytest.mark.parametrize(("language", "text"), SENTENCES)
def test_a_short_sentence_is_told_in_its_language(language: str, text: str) -> None:
    first = guesses(text)[0]
    assert first.language == language, guesses(text)
    assert isinstance(first, Guess)


@pytest.mark.parametrize("text", ["", "   ", "🍕🍕 ♥", "12:30 — 14 €", "?!"])
def test_a_text_without_letters_gives_no_guess(text: str) -> None:
    assert guesses(text) == []


def test_guesses_are_candidates_only_most_likely_first() -> None:
    for _, text in SENTENCES:
        every = guesses(text, limit=len(CANDIDATES) + 10)
        assert {g.language for g in every} == CANDIDATES
        assert len(every) == len(CANDIDATES)
        probabilities = [g.probability for g in every]
        assert probabilities == sorted(probabilities, reverse=True)
        assert sum(probabilities) == pytest.approx(1.0, abs=1e-3)
        assert all(isinstance(p, float) for p in probabilities)


def test_candidates_are_snowballs_latin_and_cyrillic_languages() -> None:
    assert {"en", "fr", "de", "es", "pt", "it", "nl", "ru", "sr", "tr", "fi"} <= CANDIDATES
    assert not CANDIDATES & {"el", "ar", "hi", "zh", "ja", "ko", "uk"}


def test_limit_bounds_the_guesses() -> None:
    assert len(guesses("Claire joue du violoncelle le mardi soir.", limit=1)) == 1
    assert len(guesses("Claire joue du violoncelle le mardi soir.")) == 3
    with pytest.raises(ValueError, match="limit must be at least 1"):
        guesses("Claire joue du violoncelle.", limit=0)


def test_the_same_text_gives_the_same_guesses() -> None:
    for _, text in SENTENCES:
        assert guesses(text, limit=5) == guesses(text, limit=5)


def test_identifier_names_the_installed_model_version() -> None:
    assert f"py3langid {metadata.version('py3langid')}" == IDENTIFIER


# Runs after the recording hook: threads make the first calls together (the model
# loads once). py3langid unpacks its model through an anonymous temporary file, gone
# once loaded.
PROGRAM = r"""
import threading
from memory.words.identify import guesses
texts = json.loads(sys.argv[1])
barrier = threading.Barrier(4)
results = [None] * 4
def call(i):
    barrier.wait()
    results[i] = [[list(g) for g in guesses(t, limit=5)] for t in texts]
threads = [threading.Thread(target=call, args=(i,)) for i in range(4)]
for t in threads: t.start()
for t in threads: t.join()
print(json.dumps({"results": results, "sockets": sockets, "written": written}))
"""


def test_a_fresh_process_guesses_alike_offline_and_keeps_no_file(tmp_path: Path) -> None:
    texts = [text for _, text in SENTENCES]
    home, temporary, cache = tmp_path / "home", tmp_path / "tmp", tmp_path / "cache"
    env = {"XDG_CACHE_HOME": str(cache)}
    report = run_recorded(PROGRAM, json.dumps(texts), home=home, temporary=temporary, env=env)
    assert report["sockets"] == []
    assert report["written"]  # the model's temporary file: the hook does see writes
    assert written_outside(report, temporary) == []
    assert list(temporary.iterdir()) == []
    assert not home.exists()
    assert not cache.exists()
    here = [[list(g) for g in guesses(t, limit=5)] for t in texts]
    assert report["results"] == [here] * 4
