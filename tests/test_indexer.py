"""The background indexer's bookkeeping, with a stand-in embedder (DESIGN §8).

Quality is the real model's, in tests/test_semantic.py; here: which rows wait, that
each gets one vector, that writes never wait for embedding, and what happens when
the file's vectors are another model's.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

import anyio
import anyio.to_thread
import numpy as np
import numpy.typing as npt
import pytest

from memory import EmbedderError, GraphMemory, IndexerSettings
from memory.schema import LATEST_VERSION

from .embedders import GatedEmbedder, WordHashEmbedder
from .schema_versions import as_schema_7

pytestmark = pytest.mark.anyio

FAST = IndexerSettings(batch=4, idle_poll_s=0.05)


async def write_some(mem: GraphMemory) -> int:
    """An entity with two facts, a relation to a new entity, two turns: 7 rows."""
    alice = mem.scope(app="a", user="alice")
    await alice.remember("Alice", ["has three sisters", "plays the cello"], entity_type="person")
    await alice.relate("Alice", "works_at", "Acme")
    await alice.record_turns(
        "s1",
        [{"role": "user", "text": "I adopted a puppy"}, {"role": "assistant", "text": "Lovely!"}],
    )
    return 7


def vector_rows(path: Path) -> list[tuple[int, int, int]]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT kind, row_id, owner_id FROM vector ORDER BY kind, row_id")
        found = rows.fetchall()
    conn.close()
    return found


async def test_every_row_waits_for_its_vector_until_an_embedder_gives_it(db_path: Path) -> None:
    async with GraphMemory.open(db_path, embedder="none") as mem:
        assert mem.embedder is None
        rows = await write_some(mem)
        await mem.wait_until_indexed()  # no embedder: nothing to wait for
        stats = await mem.scope(app="a", user="alice").stats()
        assert (stats.vectors, stats.vectors_pending) == (0, rows)

    embedder = WordHashEmbedder()
    async with GraphMemory.open(db_path, embedder=embedder, indexing=FAST) as mem:
        await mem.wait_until_indexed()
        stats = await mem.scope(app="a", user="alice").stats()
        assert (stats.vectors, stats.vectors_pending) == (rows, 0)
        assert sorted(embedder.embedded) == sorted(
            [
                "Alice (person)",
                "Alice: has three sisters",
                "Alice: plays the cello",
                "Acme (general)",
                "Alice works at Acme",
                "user: I adopted a puppy",
                "assistant: Lovely!",
            ]
        )
        assert "MainThread" not in embedder.threads  # never on the event loop's thread
    assert len(vector_rows(db_path)) == rows


async def test_a_write_returns_while_the_embedder_is_busy(db_path: Path) -> None:
    embedder = GatedEmbedder()
    async with GraphMemory.open(db_path, embedder=embedder, indexing=FAST) as mem:
        alice = mem.scope(app="a", user="alice")
        await alice.remember("Alice", ["has three sisters"])
        with anyio.fail_after(30):
            await anyio.to_thread.run_sync(embedder.entered.wait)
        # The indexer holds a batch in the embedder: writes and reads go on.
        await alice.remember("Alice", ["plays the cello"])
        await alice.record_turns("s1", [{"role": "user", "text": "hello"}])
        hits = await alice.search_nodes("cello")
        assert [o.text for o in hits.hits[0].observations] == ["plays the cello"]
        assert (await alice.stats()).vectors == 0
        embedder.release()
        await mem.wait_until_indexed()
        assert (await alice.stats()).vectors == 4


async def test_vectors_of_another_model_are_never_compared(db_path: Path) -> None:
    async with GraphMemory.open(
        db_path, embedder=WordHashEmbedder("model-a"), indexing=FAST
    ) as mem:
        rows = await write_some(mem)
        await mem.wait_until_indexed()

    other = WordHashEmbedder("model-b")
    async with GraphMemory.open(db_path, embedder=other, indexing=FAST) as mem:
        with pytest.raises(EmbedderError, match=r"'model-a'.*reindex --all"):
            await mem.wait_until_indexed()
        alice = mem.scope(app="a", user="alice")
        await alice.remember("Alice", ["owns a red bicycle"])
        hits = await alice.search_nodes("bicycle")  # by its words, as without a model
        assert [o.text for o in hits.hits[0].observations] == ["owns a red bicycle"]
        with pytest.raises(EmbedderError, match="reindex --all"):
            await mem.reindex()
        progress = await mem.reindex(everything=True)
        assert (progress.indexed, progress.pending) == (rows + 1, 0)
        assert len([t for t in other.embedded if t != "bicycle"]) == rows + 1  # and the query
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("SELECT model FROM vector_state").fetchone() == ("model-b",)
    conn.close()


async def test_a_new_type_is_embedded_again(db_path: Path) -> None:
    embedder = WordHashEmbedder()
    async with GraphMemory.open(db_path, embedder=embedder, indexing=FAST) as mem:
        alice = mem.scope(app="a", user="alice")
        await alice.remember("Rex", ["barks at the postman"], entity_type="pet")
        await mem.wait_until_indexed()
        await alice.remember("Rex", ["sleeps a lot"], entity_type="dog")
        await mem.wait_until_indexed()
        assert embedder.embedded.count("Rex (pet)") == 1
        assert embedder.embedded.count("Rex (dog)") == 1
        assert (await alice.stats()).vectors == 3


async def test_purge_removes_the_vectors_and_the_backlog(db_path: Path) -> None:
    async with GraphMemory.open(db_path, embedder=WordHashEmbedder(), indexing=FAST) as mem:
        await write_some(mem)
        bob = mem.scope(app="a", user="bob")
        await bob.remember("Bob", ["likes chess"])
        await mem.wait_until_indexed()
        await bob.remember("Bob", ["likes go"])  # waits: purged before it is embedded
        await mem.scope(app="a", user="alice").purge("user")
        await bob.purge("user")
    assert vector_rows(db_path) == []
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("SELECT count(*) FROM vector_pending").fetchone() == (0,)
    conn.close()


async def test_an_older_file_queues_every_row_it_has(db_path: Path) -> None:
    async with GraphMemory.open(db_path, embedder="none") as mem:
        rows = await write_some(mem)
    as_schema_7(db_path)
    async with GraphMemory.open(db_path, embedder=WordHashEmbedder(), indexing=FAST) as mem:
        assert (await mem.index_progress()).pending == rows
        await mem.wait_until_indexed()
        assert await mem.index_progress() == (rows, 0)
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (LATEST_VERSION,)
    conn.close()


async def test_reindex_without_an_embedder_says_how_to_get_one(db_path: Path) -> None:
    async with GraphMemory.open(db_path, embedder="none") as mem:
        with pytest.raises(EmbedderError, match=r"chronomem\[semantic\]"):
            await mem.reindex()


def test_an_unknown_embedder_is_refused_naming_the_choices() -> None:
    async def open_it() -> None:
        async with GraphMemory.open(":memory:", embedder="bert"):
            pass

    with pytest.raises(ValueError, match=r"'bert' is not one of default, none"):
        anyio.run(open_it)


async def test_without_background_indexing_queries_rank_but_nothing_embeds(db_path: Path) -> None:
    embedder = WordHashEmbedder()
    quiet = IndexerSettings(background=False)
    async with GraphMemory.open(db_path, embedder=embedder, indexing=quiet) as mem:
        await write_some(mem)
        await mem.load_embedder()
        await mem.scope(app="a", user="alice").search_nodes("sisters")
        assert embedder.embedded == ["sisters"]  # the query alone
        with pytest.raises(EmbedderError, match="background=False"):
            await mem.wait_until_indexed()
        assert (await mem.index_progress()).pending == 7


class NotReading(WordHashEmbedder):
    """A model that reads none of the queries, and takes "kitty" for "cat"."""

    def reads(self, query: str) -> bool:
        return False

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return super().embed([text.replace("kitty", "cat") for text in texts])


async def test_a_query_the_model_cannot_read_ranks_by_meaning_only_where_words_fail() -> None:
    async with GraphMemory.open(":memory:", embedder=NotReading(), indexing=FAST) as mem:
        alice = mem.scope(app="a", user="alice")
        await alice.remember("Alice", ["adopted a cat", "walks to work"])
        await alice.remember("Bob", ["cat cat cat", "adopted a plan"])
        await mem.wait_until_indexed()
        hits = (await alice.search_nodes("adopted cat")).hits
        assert [o.text for o in hits[0].observations] == ["adopted a cat"]  # words alone
        assert [h.entity.name for h in hits] == ["Alice", "Bob"]
        # Nothing stored has its words: by meaning, which finds the cats.
        hits = (await alice.search_nodes("kitty")).hits
        assert {h.observations[0].text for h in hits} == {"adopted a cat", "cat cat cat"}


def test_the_bundled_model_reads_english_and_plain_keywords_only() -> None:
    from memory.embedding.minilm import MiniLM

    model = MiniLM()  # `reads` looks at the words only: nothing loads
    assert model.reads("how many siblings does she have?")
    assert model.reads("kitchen appliance")
    assert not model.reads("Combien de frères et sœurs a-t-elle ?")
    assert not model.reads("Wie heißt der Hund meiner Schwester?")
    assert not model.reads("她喜欢吃苹果吗")
    assert not model.loaded
