"""Per-user storage caps (issue 7): a write past a cap is refused whole, with a clear error."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from memory import GraphMemory, InvalidInputError, MemoryFullError

from .conftest import dump

pytestmark = pytest.mark.anyio


async def test_a_write_past_the_fact_cap_stores_nothing(db_path: Path) -> None:
    async with GraphMemory.open(db_path, max_facts=3) as mem:
        alice = mem.scope(app="a", user="alice")
        await alice.remember(entity="Alice", facts=["likes tea", "runs"])
        before = dump(db_path)
        with pytest.raises(MemoryFullError, match=r"max_facts") as refused:
            await alice.remember(entity="Alice", facts=["swims", "sings"])
        assert isinstance(refused.value, InvalidInputError)  # a tool error, exit 2 in the CLI
        assert "already stores 2 facts" in str(refused.value)
        assert dump(db_path) == before
        await alice.remember(entity="Alice", facts=["swims"])  # up to the cap is fine
        with pytest.raises(MemoryFullError):
            await alice.relate(source="Alice", relation="knows", target="Bob")  # a fact too


async def test_the_turn_cap_and_the_caps_are_per_user(db_path: Path) -> None:
    async with GraphMemory.open(db_path, max_turns=2) as mem:
        alice, bob = mem.scope(app="a", user="alice"), mem.scope(app="a", user="bob")
        turns = [{"role": "user", "text": f"turn {i}"} for i in range(3)]
        with pytest.raises(MemoryFullError, match="max_turns"):
            await alice.record_turns(session_id="s", turns=turns)
        assert (await alice.stats()).turns == 0
        assert (await bob.record_turns(session_id="s", turns=turns[:2])).stored == 2
        assert (await alice.record_turns(session_id="s", turns=turns[:2])).stored == 2


async def test_purging_frees_room_and_repeats_are_not_counted(db_path: Path) -> None:
    async with GraphMemory.open(db_path, max_facts=2) as mem:
        alice = mem.scope(app="a", user="alice")
        await alice.remember(entity="Alice", facts=["likes tea", "runs"])
        await alice.remember(entity="Alice", facts=["likes tea"])  # a duplicate adds nothing
        await alice.purge("user")
        await alice.remember(entity="Alice", facts=["swims", "sings"])


async def test_an_import_past_the_cap_is_refused(db_path: Path) -> None:
    lines = ['{"type":"entity","name":"A","entityType":"person","observations":["x","y","z"]}']
    async with GraphMemory.open(db_path, max_facts=2) as mem:
        with pytest.raises(MemoryFullError):
            await mem.scope(app="a", user="u").import_lines(lines)
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("SELECT count(*) FROM observation").fetchone() == (0,)


async def test_caps_must_be_positive(db_path: Path) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        async with GraphMemory.open(db_path, max_facts=0):
            pass


async def test_an_import_that_fills_memory_midway_says_what_was_kept(db_path: Path) -> None:
    lines = [
        f'{{"type":"entity","name":"E{i}","entityType":"t","observations":["x"]}}' for i in range(5)
    ]
    async with GraphMemory.open(db_path, max_facts=3) as mem:
        scope = mem.scope(app="a", user="u")
        with pytest.raises(MemoryFullError, match=r"lines 3-4: .*lines before 3 were imported"):
            await scope.import_lines(lines, batch_size=2)
        assert (await scope.read_graph()).total_entities == 2


async def test_facts_added_before_a_retype_in_one_transaction_are_counted(db_path: Path) -> None:
    """Found in review: a type change writes the pending full-text entries mid-way; the
    facts added before it must still count against the cap."""
    lines = [
        '{"type":"entity","name":"A","entityType":"person","observations":["x","y"]}',
        '{"type":"entity","name":"A","entityType":"place","observations":["z"]}',
    ]
    async with GraphMemory.open(db_path, max_facts=2) as mem:
        with pytest.raises(MemoryFullError, match="would add 3"):
            await mem.scope(app="a", user="u").import_lines(lines)
    async with GraphMemory.open(db_path) as mem:
        await mem.scope(app="a", user="u").import_lines(lines)
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("SELECT facts FROM owner").fetchone() == (3,)
