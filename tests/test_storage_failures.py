"""What the file or the disk refuses, said in one line that names the file and the
cause: a full disk, a read-only file, a folder that cannot be made. Nothing changes."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from memory import DatabaseFileError, GraphMemory

pytestmark = pytest.mark.anyio


async def _pragma(mem: GraphMemory, statement: str) -> None:
    def run(conn: sqlite3.Connection) -> None:
        conn.execute(statement)

    await mem.on_connection(run)


async def test_a_full_disk_is_named_with_its_cause_and_nothing_is_kept(db_path: Path) -> None:
    async with GraphMemory.open(db_path) as mem:
        alice = mem.scope(app="coach", user="alice")
        await alice.remember(entity="Alice", facts=["likes tea"])
        pages = db_path.stat().st_size // 4096
        await _pragma(mem, f"PRAGMA max_page_count = {pages}")  # the disk holds no more
        facts = [f"fact {i} " + "long words " * 150 for i in range(50)]
        with pytest.raises(DatabaseFileError) as refused:
            await alice.remember(entity="Bob", facts=facts)
        message = str(refused.value)
        assert str(db_path) in message and "disk is full" in message and "SQLITE_FULL" in message
        assert "\n" not in message
        await _pragma(mem, "PRAGMA max_page_count = 1073741823")  # space freed
        assert (await alice.open_nodes(names=["Bob"])).missing == ["Bob"]
        assert (await alice.remember(entity="Bob", facts=["runs 5k"])).added


async def test_a_read_only_file_is_named_with_its_cause(db_path: Path) -> None:
    async with GraphMemory.open(db_path) as mem:
        alice = mem.scope(app="coach", user="alice")
        await alice.remember(entity="Alice", facts=["likes tea"])
        await _pragma(mem, "PRAGMA query_only = ON")  # as SQLite treats a read-only file
        with pytest.raises(DatabaseFileError) as refused:
            await alice.remember(entity="Alice", facts=["runs 5k"])
        assert str(db_path) in str(refused.value) and "read-only" in str(refused.value)
        assert [
            o.text for o in (await alice.open_nodes(names=["Alice"])).entities[0].observations
        ] == ["likes tea"]


async def test_a_folder_that_cannot_be_made_is_named(tmp_path: Path) -> None:
    (tmp_path / "notes").write_text("a file, not a folder")
    path = tmp_path / "notes" / "memory.db"
    with pytest.raises(DatabaseFileError) as refused:
        async with GraphMemory.open(path):
            pass
    message = str(refused.value)
    assert str(path) in message and f"{tmp_path / 'notes'} is not a folder" in message
