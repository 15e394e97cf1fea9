"""The language identifier word search stems by (issue 18): short texts in the languages
Snowball stems, told offline, the same way every time, among CANDIDATES only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from memory.words.identify import CANDIDATES, IDENTIFIER, Guess, guesses

ROOT = Path(__file__).resolve().parents[1]

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


# A fresh interpreter: threads make the first calls together (the model loads once),
# while every network socket or name lookup and every file opened for writing is recorded.
# py3langid unpacks its model through an anonymous temporary file, gone once loaded.
PROGRAM = r"""
import json, os, socket, sys, threading
sockets, written = [], []
def watch(event, args):
    if event == "socket.__new__" and args[1] in (socket.AF_INET, socket.AF_INET6) or event in (
        "socket.connect", "socket.getaddrinfo", "socket.gethostbyname", "urllib.Request"
    ):
        sockets.append(event)
    elif event == "open" and len(args) > 1 and isinstance(args[0], str):
        mode, flags = args[1], args[2] if len(args) > 2 else 0
        if (mode and any(c in mode for c in "wax+")) or (flags & (os.O_WRONLY | os.O_RDWR)):
            written.append(args[0])
sys.addaudithook(watch)

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
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    env = dict(
        os.environ,
        HOME=str(tmp_path / "home"),
        XDG_CACHE_HOME=str(tmp_path / "cache"),
        TMPDIR=str(temporary),
        TMP=str(temporary),
        TEMP=str(temporary),
    )
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, json.dumps(texts)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    report = json.loads(done.stdout)
    assert report["sockets"] == []
    assert report["written"]  # the model's temporary file: the hook does see writes
    assert all(Path(path).is_relative_to(temporary) for path in report["written"])
    assert list(temporary.iterdir()) == []
    assert not (tmp_path / "home").exists()
    assert not (tmp_path / "cache").exists()
    here = [[list(g) for g in guesses(t, limit=5)] for t in texts]
    assert report["results"] == [here] * 4
