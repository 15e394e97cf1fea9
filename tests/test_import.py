"""The bulk import's two passes: every line checked first (a malformed line keeps
nothing), then the steps spooled to a file and written a batch per transaction."""

from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from memory import GraphMemory, InvalidInputError
from memory.store import BULK_CHECKPOINT_PAGES
from memory.transfer import ImportPlan, check_import
from memory.validation import (
    FACT_MAX,
    LABEL_MAX,
    NAME_MAX,
    FactText,
    Label,
    Name,
    plain_text,
)

from .conftest import dump

pytestmark = pytest.mark.anyio

T = "2026-01-01T00:00:00Z"


def _observation(i: int, entity: str = "Alice") -> str:
    return json.dumps({
        "type": "observation", "id": f"o{i}", "entity": entity, "text": f"fact {i}",
        "attribute": None, "project": None, "valid_from": T, "recorded_at": T,
        "valid_to": None, "invalidated_at": None, "reason": None,
    })  # fmt: skip


def _relation(i: int, relation: str) -> str:
    return json.dumps({
        "type": "relation", "id": f"r{i}", "source": "Alice", "relation": relation,
        "target": "Bob", "project": None, "valid_from": T, "recorded_at": T,
        "valid_to": None, "invalidated_at": None, "reason": None,
    })  # fmt: skip


async def test_a_one_shot_iterable_is_imported_in_batches(db_path: Path) -> None:
    lines = [_observation(i) for i in range(7)] + ["", _relation(1, "knows")]
    told: list[int] = []
    async with GraphMemory.open(db_path) as mem:
        scope = mem.scope(app="a", user="u")
        result = await scope.import_lines(iter(lines), batch_size=3, progress=told.append)
        assert (result.lines, result.observations, result.relations) == (8, 7, 1)
        assert result.entities == 0  # created by facts, not by entity lines
        assert told == [3, 3, 2]
        graph = await scope.open_nodes(names=["Alice"])
        assert len(graph.entities[0].observations) == 7
        again = await scope.import_lines(iter(lines), batch_size=3)
        assert again.skipped == 8


async def test_a_relation_type_with_no_letters_in_a_later_batch_keeps_nothing(
    db_path: Path,
) -> None:
    lines = [_observation(i) for i in range(4)] + [_relation(1, "--")]
    async with GraphMemory.open(db_path) as mem:
        with pytest.raises(InvalidInputError, match="^line 5: relation: '--' has no letters"):
            await mem.scope(app="a", user="u").import_lines(lines, batch_size=2)
    assert not dump(db_path)["observation"]


async def test_a_reference_relation_with_no_letters_keeps_nothing(db_path: Path) -> None:
    entity = {"type": "entity", "name": "A", "entityType": "t", "observations": ["x"]}
    relation = {"type": "relation", "from": "A", "to": "B", "relationType": "!!"}
    lines = [json.dumps(entity)] * 3 + [json.dumps(relation)]
    async with GraphMemory.open(db_path) as mem:
        with pytest.raises(InvalidInputError, match="^line 4: relation: '!!' has no letters"):
            await mem.scope(app="a", user="u").import_lines(lines, batch_size=1)
    assert not dump(db_path)["entity"]


async def test_batch_size_must_be_positive(db_path: Path) -> None:
    async with GraphMemory.open(db_path) as mem:
        with pytest.raises(ValueError, match="at least 1"):
            await mem.scope(app="a", user="u").import_lines([_observation(1)], batch_size=0)


def test_the_plan_spools_batches_and_reads_them_back_unchanged() -> None:
    spool = io.BytesIO()
    reason = "moved to Lyon ✓ ünïcode"  # kept as is
    line = json.loads(_observation(1))
    line["reason"] = reason
    lines = [_observation(i) for i in range(4)] + [json.dumps(line)]
    plan = check_import(lines, spool, batch_size=2)
    assert spool.tell() > 0  # two full batches already left memory
    batches = list(plan.batches())
    assert [len(b) for b in batches] == [2, 2, 1]
    assert [step[0] for b in batches for step in b] == [1, 2, 3, 4, 5]
    first = batches[0][0]
    assert first[:5] == (1, "observation", "o0", "Alice", "fact 0")
    assert batches[-1][0][6] == reason
    assert plan.lines == 5


def test_an_empty_plan_has_no_batches() -> None:
    plan = ImportPlan(io.BytesIO(), batch_size=10)
    assert list(plan.batches()) == []


def _accepts(kind: object, value: object) -> bool:
    try:
        TypeAdapter(kind).validate_python(value)
    except ValidationError:
        return False
    return True


TEXT_TYPES = [(Name, NAME_MAX), (Label, LABEL_MAX), (FactText, FACT_MAX)]
AWKWARD = st.text(
    alphabet=st.sampled_from(["a", "é", " ", "\t", "\u2003", "\x00", "\ud800", "字"]),
    max_size=70,
)


@given(value=AWKWARD, which=st.integers(0, 2))
def test_plain_text_never_accepts_what_the_text_types_refuse(value: str, which: int) -> None:
    kind, limit = TEXT_TYPES[which]
    if plain_text(value, limit):
        assert _accepts(kind, value)


@pytest.mark.parametrize(
    "value", ["", "   ", "\u2003", "a\x00b", "a\ud800", "x" * (LABEL_MAX + 1), 5, None]
)
def test_plain_text_refuses_what_a_label_refuses(value: object) -> None:
    assert not plain_text(value, LABEL_MAX)
    assert not _accepts(Label, value)


def test_plain_text_accepts_ordinary_text() -> None:
    assert plain_text("Zoë works at Acme", NAME_MAX)
    assert plain_text("x" * LABEL_MAX, LABEL_MAX)


async def test_an_import_checkpoints_less_often_and_restores_the_setting(db_path: Path) -> None:
    async with GraphMemory.open(db_path) as mem:
        store = mem._store
        usual = await store._in_thread(_checkpoint_pages)
        async with store.bulk():
            assert await store._in_thread(_checkpoint_pages) == BULK_CHECKPOINT_PAGES
        assert await store._in_thread(_checkpoint_pages) == usual
        scope = mem.scope(app="a", user="u")
        with pytest.raises(InvalidInputError):  # refused while checking: never raised
            await scope.import_lines(["{"])
        await scope.import_lines([_observation(1)])
        assert await store._in_thread(_checkpoint_pages) == usual


def _checkpoint_pages(conn: sqlite3.Connection) -> int:
    return conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0]


def _segments(db_path: Path, table: str) -> int:
    with sqlite3.connect(db_path) as conn:
        return conn.execute(f"SELECT count(DISTINCT segid) FROM {table}_idx").fetchone()[0]


async def test_a_large_import_merges_the_index_it_filled(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each transaction writes its full-text entries as a new index segment; after an
    import of many rows their index is one segment, and search finds the same."""
    monkeypatch.setattr("memory.scope.MERGE_AFTER_ROWS", 30)
    lines = [_observation(i, entity=f"E{i}") for i in range(60)]
    async with GraphMemory.open(db_path) as mem:
        scope = mem.scope(app="a", user="u")
        for i in range(12):  # segments of earlier writes, one transaction each
            await scope.remember(entity=f"Early {i}", facts=[f"fact early {i}"])
        assert _segments(db_path, "observation_fts") > 1
        await scope.import_lines(lines, batch_size=5)
        assert _segments(db_path, "observation_fts") == 1
        found = await scope.search_nodes(query="fact 42", limit=3)
        assert found.hits[0].entity.name == "E42"
        small = [_observation(i, entity="F") for i in range(100, 110)]  # under the threshold
        await scope.import_lines(small, batch_size=5)
        assert _segments(db_path, "observation_fts") > 1
    with sqlite3.connect(db_path) as conn:
        conn.execute(
            "INSERT INTO observation_fts (observation_fts, rank) VALUES ('integrity-check', 1)"
        )


def _turn(i: int, **fields: object) -> str:
    record = {
        "type": "turn", "id": f"t{i}", "session_id": "s", "role": "user", "text": f"turn {i}",
        "at": T, "recorded_at": T, "project": None,
    }  # fmt: skip
    return json.dumps({**record, **fields})


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        (json.dumps({**json.loads(_observation(9)), "reason": {"x": 1}}), "reason"),
        (json.dumps({**json.loads(_relation(9, "knows")), "reason": "r" * 501}), "reason"),
        (json.dumps({**json.loads(_observation(9)), "id": "o" * 201}), "'id'"),
        (_turn(9, role="r" * 65), "role"),
        (_turn(9, text="nul \x00 inside"), "text"),
        (_turn(9, session_id=" "), "session_id"),
        (_turn(9, id=""), "'id'"),
    ],
)
async def test_own_lines_are_checked_as_the_operations_check_them(
    db_path: Path, bad: str, field: str
) -> None:
    """Found in review: reasons, turns and ids of the export format reached the
    database unchecked (a dict as reason failed mid-import, after earlier batches)."""
    lines = [_observation(i) for i in range(6)] + [bad]
    async with GraphMemory.open(db_path) as mem:
        with pytest.raises(InvalidInputError, match=rf"line 7: .*{field}"):
            await mem.scope(app="a", user="u").import_lines(lines, batch_size=2)
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("SELECT count(*) FROM observation").fetchone() == (0,)


async def test_an_id_of_another_memory_says_what_earlier_batches_kept(db_path: Path) -> None:
    """Found in review: found only while writing, after earlier batches committed, the
    error claimed nothing was kept."""
    async with GraphMemory.open(db_path) as mem:
        await mem.scope(app="a", user="other").import_lines([_observation(5)])
        scope = mem.scope(app="a", user="u")
        lines = [_observation(100 + i) for i in range(5)] + [_observation(5)]
        with pytest.raises(InvalidInputError, match=r"line 6: .*another memory.*before 5 were"):
            await scope.import_lines(lines, batch_size=2)
        assert (await scope.stats()).observations_current == 4


async def test_a_cap_in_a_line_split_across_batches_says_part_was_kept(db_path: Path) -> None:
    many = json.dumps({"type": "entity", "name": "A", "entityType": "t", "observations": [
        f"fact {i}" for i in range(120)]})  # fmt: skip
    async with GraphMemory.open(db_path, max_facts=60) as mem:
        scope = mem.scope(app="a", user="u")
        with pytest.raises(InvalidInputError, match=r"part of line 1 was imported"):
            await scope.import_lines([many], batch_size=1)
