"""The word indexes filled again: by migration 9 from FTS5's Porter indexes, and when
a file's default language changes; each reports its progress and loses nothing."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from memory import GraphMemory
from memory.schema import LATEST_VERSION, RECOUNT_FTS_STATS
from memory.store import add_functions
from memory.word_index import WordProgress

from .conftest import FakeClock
from .schema_versions import as_schema_8

pytestmark = pytest.mark.anyio

FACTS = {
    "Wang": ["王磊喜欢吃苹果", "王磊每天早上喝咖啡"],
    "Alice": ["runs every morning", "likes green tea"],
    "Moka": ["animaux interdits dans l'immeuble"],
}


async def _store(path: Path, clock: FakeClock, language: str | None = None) -> None:
    async with GraphMemory.open(path, clock=clock, language=language) as mem:
        scope = mem.scope(app="a", user="u")
        for entity, facts in FACTS.items():
            await scope.remember(entity=entity, facts=facts)
        await scope.record_turns(session_id="s1", turns=[{"role": "user", "text": "我想买苹果"}])


async def _found(mem: GraphMemory, query: str) -> list[str]:
    result = await mem.scope(app="a", user="u").search_nodes(query=query)
    return [o.text for hit in result.hits for o in hit.observations]


def _stats(path: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT * FROM fts_stats ORDER BY 1, 2, 3").fetchall()


def _check_indexes(path: Path) -> None:
    """FTS5's own check of each index against the rows, and the statistics as counted
    again from the index."""
    before = _stats(path)
    with sqlite3.connect(path) as conn:
        add_functions(conn)
        for table in ("entity_fts", "observation_fts", "relation_fts", "turn_fts"):
            conn.execute(f"INSERT INTO {table} ({table}, rank) VALUES ('integrity-check', 1)")
        owner = conn.execute("SELECT id FROM owner").fetchone()[0]
        for statement in RECOUNT_FTS_STATS:
            conn.execute(statement, {"owner": owner})
        recounted = conn.execute("SELECT * FROM fts_stats ORDER BY 1, 2, 3").fetchall()
        conn.rollback()
    conn.close()
    assert recounted == before


async def test_migration_9_indexes_every_row_again_with_progress(
    db_path: Path, clock: FakeClock
) -> None:
    await _store(db_path, clock)
    as_schema_8(db_path)
    with sqlite3.connect(db_path) as conn:  # schema 8's index: the Han run is one token
        found = "SELECT count(*) FROM observation_fts WHERE observation_fts MATCH '苹果'"
        assert conn.execute(found).fetchone() == (0,)
    conn.close()

    heard: list[WordProgress] = []
    async with GraphMemory.open(db_path, clock=clock, on_progress=heard.append) as mem:
        assert await _found(mem, "苹果") == ["王磊喜欢吃苹果"]
        assert await _found(mem, "running") == ["runs every morning"]
        turns = await mem.scope(app="a", user="u").recall(query="苹果")
        assert [t.text for t in turns.turns] == ["我想买苹果"]
    rows = 3 + 5 + 1  # entities, facts, turns
    assert heard[0] == WordProgress(0, rows) and heard[-1] == WordProgress(rows, rows)
    assert [p.done for p in heard] == sorted(p.done for p in heard)
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == LATEST_VERSION
        assert conn.execute("SELECT language FROM word_index").fetchone() == ("en",)
    conn.close()
    _check_indexes(db_path)


async def test_a_new_default_language_indexes_the_words_again(
    db_path: Path, clock: FakeClock
) -> None:
    await _store(db_path, clock)
    async with GraphMemory.open(db_path, clock=clock) as mem:
        assert await _found(mem, "animal") == []  # English stems it "anim"
    heard: list[WordProgress] = []
    async with GraphMemory.open(
        db_path, clock=clock, language="fr", on_progress=heard.append
    ) as mem:
        assert await _found(mem, "animal") == ["animaux interdits dans l'immeuble"]
        assert await _found(mem, "苹果") == ["王磊喜欢吃苹果"]  # other scripts unchanged
    assert heard and heard[-1].done == heard[-1].total == 9
    _check_indexes(db_path)

    again: list[WordProgress] = []
    async with GraphMemory.open(db_path, clock=clock, on_progress=again.append) as mem:
        assert await _found(mem, "animal") == ["animaux interdits dans l'immeuble"]
    async with GraphMemory.open(
        db_path, clock=clock, language="fr", on_progress=again.append
    ) as mem:
        pass
    assert again == []  # the file's own language: nothing to do


async def test_the_default_language_comes_from_the_environment(
    db_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHRONOMEM_LANGUAGE", "FR")
    await _store(db_path, clock)
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("SELECT language FROM word_index").fetchone() == ("fr",)
    conn.close()


@pytest.mark.parametrize("language", ["xx", "french", ""])
async def test_a_language_it_does_not_stem_is_refused_and_changes_nothing(
    db_path: Path, clock: FakeClock, language: str
) -> None:
    await _store(db_path, clock)
    before = _stats(db_path)
    with pytest.raises(ValueError, match=r"^language: .* is not one of ar, ca, .*ISO 639-1"):
        async with GraphMemory.open(db_path, clock=clock, language=language):
            pass
    assert _stats(db_path) == before
