"""Entities themselves on the time axes: created without facts, deleted (a record of its
own, per context), back when written about again, and their types versioned."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from memory import Entity, GraphMemory, InvalidInputError, MemoryScope
from memory.schema import LATEST_VERSION
from memory.transfer import export_lines

from .conftest import FakeClock, dump
from .schema_versions import as_schema_7

pytestmark = pytest.mark.anyio

T1 = "2026-06-01T00:00:01Z"  # after the first writes (the clock starts at T0)


async def names_in_graph(scope: MemoryScope, **at: str) -> list[str]:
    page = await scope.read_graph(limit=500, **at)
    assert page.total_entities == len(page.entities)
    return [e.name for e in page.entities]


async def hit_names(scope: MemoryScope, query: str, **at: str) -> list[str]:
    return [hit.entity.name for hit in (await scope.search_nodes(query, **at)).hits]


# ---------------------------------------------------------------- create_entity


async def test_create_entity_makes_an_entity_without_facts_once(world: MemoryScope) -> None:
    made = await world.create_entity("Bob")
    assert (made.name, made.entity_type, made.created) == ("Bob", "general", True)
    again = await world.create_entity("  bob ")
    assert (again.name, again.created) == ("Bob", False)
    typed = await world.create_entity("BOB", entity_type="person")
    assert (typed.entity_type, typed.created) == ("person", False)
    opened = await world.open_nodes(["bob"])
    assert [(e.name, e.entity_type, e.observations) for e in opened.entities] == [
        ("Bob", "person", [])
    ]


@pytest.mark.parametrize(
    ("arguments", "field"),
    [({"name": ""}, "name"), ({"name": "Bob", "entity_type": "x" * 65}, "entity_type")],
)
async def test_create_entity_refuses_bad_arguments_and_changes_nothing(
    world: MemoryScope, db_path: Path, arguments: dict[str, str], field: str
) -> None:
    await world.remember("Alice", ["likes tea"])
    before = dump(db_path)
    with pytest.raises(InvalidInputError, match=f"^{field}: "):
        await world.create_entity(**arguments)
    assert dump(db_path) == before


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"names": []}, "names"),
        ({"names": [""]}, "names[0]"),
        ({"names": ["Alice"], "valid_to": "yesterday"}, "valid_to"),
    ],
)
async def test_delete_entities_refuses_bad_arguments_and_changes_nothing(
    world: MemoryScope, db_path: Path, arguments: dict[str, object], field: str
) -> None:
    await world.remember("Alice", ["likes tea"])
    before = dump(db_path)
    with pytest.raises(InvalidInputError, match=f"^{re.escape(field)}: "):
        await world.delete_entities(**arguments)  # type: ignore[arg-type]  # bad on purpose
    assert dump(db_path) == before


async def test_a_fact_ending_before_it_began_refuses_the_whole_deletion(
    world: MemoryScope, db_path: Path
) -> None:
    await world.remember("Alice", ["likes tea"], valid_from="2026-05-01T00:00:00Z")
    await world.create_entity("Bob")
    before = dump(db_path)
    with pytest.raises(InvalidInputError, match="^valid_to: "):
        await world.delete_entities(["Bob", "Alice"], valid_to="2026-04-01T00:00:00Z")
    assert dump(db_path) == before


async def test_deleting_now_ends_the_facts_still_to_begin_where_they_begin(
    world: MemoryScope,
) -> None:
    planned = await world.remember("Bob", ["moves to Oslo"], valid_from="2030-01-01")
    await world.remember("Bob", ["lives in Rome"])
    relation = await world.relate("Bob", "joins", "Acme", valid_from="2030-02-01")
    done = await world.delete_entities(["Bob"])
    assert done.deleted == ["Bob"] and len(done.invalidated) == 3
    timeline = {item.id: item for item in (await world.history("Bob")).timeline}
    fact, link = timeline[planned.added[0].id], timeline[relation.relation.id]
    assert (fact.valid_from, fact.valid_to) == ("2030-01-01T00:00:00Z",) * 2
    assert (link.valid_from, link.valid_to) == ("2030-02-01T00:00:00Z",) * 2
    assert (await world.open_nodes(["Bob"])).missing == ["Bob"]


# ---------------------------------------------------------------- delete_entities


async def test_a_deleted_entity_is_gone_from_every_read_of_now(
    world: MemoryScope, clock: FakeClock
) -> None:
    await world.remember("Alice", ["likes tea"], entity_type="person")
    await world.relate("Alice", "knows", "Bob")
    await world.create_entity("Carol")
    clock.advance()
    result = await world.delete_entities(["alice", "Carol", "Nobody", "ALICE"])
    assert result.deleted == ["Alice", "Carol"]
    assert result.not_found == ["Nobody"]
    assert len(result.invalidated) == 2  # the fact and the relation

    assert await names_in_graph(world) == ["Bob"]
    opened = await world.open_nodes(["Alice", "Bob"])
    assert opened.missing == ["Alice"]
    assert opened.relations == []
    assert await hit_names(world, "Alice tea") == []
    assert "Alice" not in (await world.profile_card()).entities
    assert (await world.forget(entities=["Alice"])).not_found == ["Alice"]
    assert (await world.delete_entities(["Alice"])).not_found == ["Alice"]

    # As memory stood before the deletion, all is there.
    assert await names_in_graph(world, known_at="2026-06-01T00:00:00.5Z") == [
        "Alice",
        "Bob",
        "Carol",
    ]
    before = await world.open_nodes(["Alice"], known_at="2026-06-01T00:00:00.5Z")
    assert [o.text for o in before.entities[0].observations] == ["likes tea"]
    assert await hit_names(world, "tea", known_at="2026-06-01T00:00:00.5Z") == ["Alice"]

    history = await world.history("Alice")
    assert history.deleted_at == "2026-06-01T00:00:01Z"
    assert [(d.deleted_at, d.restored_at) for d in history.deletions] == [
        ("2026-06-01T00:00:01Z", None)
    ]
    assert all(not item.current for item in history.timeline)
    assert "deleted_at" not in (await world.history("Bob")).model_dump(mode="json")
    assert "deletions" not in (await world.history("Bob")).model_dump(mode="json")


async def test_writing_about_a_deleted_entity_brings_it_back(
    world: MemoryScope, clock: FakeClock
) -> None:
    await world.remember("Alice", ["likes tea"])
    clock.advance()
    await world.delete_entities(["Alice"])
    clock.advance()
    await world.remember("alice", ["likes coffee"])
    opened = await world.open_nodes(["Alice"])
    assert [o.text for o in opened.entities[0].observations] == ["likes coffee"]
    clock.advance()
    await world.delete_entities(["Alice"])
    assert await names_in_graph(world) == []
    clock.advance()
    await world.relate("Bob", "knows", "Alice")  # a relation brings it back too
    assert await names_in_graph(world) == ["Alice", "Bob"]
    clock.advance()
    await world.delete_entities(["Alice"])
    clock.advance()
    await world.create_entity("Alice")
    history = await world.history("Alice")
    assert history.deleted_at is None
    assert [(d.deleted_at, d.restored_at) for d in history.deletions] == [
        ("2026-06-01T00:00:01Z", "2026-06-01T00:00:02Z"),
        ("2026-06-01T00:00:03Z", "2026-06-01T00:00:04Z"),
        ("2026-06-01T00:00:05Z", "2026-06-01T00:00:06Z"),
    ]
    texts = {getattr(item, "text", None) for item in history.timeline}
    assert {"likes tea", "likes coffee"} <= texts  # both lives


async def test_a_deletion_inside_a_project_is_that_projects_own(
    world: MemoryScope, project_a: MemoryScope, project_b: MemoryScope, clock: FakeClock
) -> None:
    await world.remember("Alice", ["likes tea"])
    await world.relate("Alice", "works_at", "Acme")
    clock.advance()
    await project_a.delete_entities(["Alice"])
    assert await names_in_graph(project_a) == ["Acme"]
    assert (await project_a.open_nodes(["Alice"])).missing == ["Alice"]
    for other in (world, project_b):
        assert await names_in_graph(other) == ["Alice", "Acme"]
        opened = await other.open_nodes(["Alice"])
        assert [o.text for o in opened.entities[0].observations] == ["likes tea"]
        assert [r.relation for r in opened.relations] == ["works_at"]
        assert (await other.history("Alice")).deletions == []
    assert (await project_a.history("Alice")).deleted_at == "2026-06-01T00:00:01Z"

    # Back inside A once A writes about it; the global memory never saw it go.
    clock.advance()
    await project_a.remember("Alice", ["in A"])
    assert await names_in_graph(project_a) == ["Alice", "Acme"]


async def test_a_global_deletion_holds_in_every_context_until_one_writes_again(
    world: MemoryScope, project_a: MemoryScope, project_b: MemoryScope, clock: FakeClock
) -> None:
    await world.remember("Alice", ["likes tea"])
    await project_a.remember("Alice", ["in A"])
    clock.advance()
    await world.delete_entities(["Alice"])
    for scope in (world, project_a, project_b):
        assert (await scope.open_nodes(["Alice"])).missing == ["Alice"]
    clock.advance()
    await project_b.remember("Alice", ["in B"])
    opened = await project_b.open_nodes(["Alice"])
    assert [o.text for o in opened.entities[0].observations] == ["in B"]
    for scope in (world, project_a):
        assert await names_in_graph(scope) == []


async def test_purge_erases_the_deletion_and_type_records(
    mem: GraphMemory, world: MemoryScope, project_a: MemoryScope, db_path: Path
) -> None:
    await world.remember("Alice", ["likes tea"], entity_type="person")
    await project_a.remember("Alice", ["in A"], entity_type="client")
    await project_a.remember("Proj", ["only in A"], entity_type="thing")
    await project_a.delete_entities(["Alice"])
    await world.delete_entities(["Alice"])

    def rows(table: str) -> list[tuple[object, ...]]:
        with sqlite3.connect(db_path) as conn:
            return conn.execute(f"SELECT project FROM {table} ORDER BY project").fetchall()

    assert rows("entity_life") == [("",), ("A",)]
    assert rows("entity_type_version") == [("",), ("",), ("A",)]
    await project_a.purge("project")
    assert rows("entity_life") == [("",)]
    assert rows("entity_type_version") == [("",)]  # Alice's global type; Proj is gone
    await world.purge("user")
    assert rows("entity_life") == rows("entity_type_version") == []


# ---------------------------------------------------------------- type versions


async def test_a_read_at_an_earlier_moment_shows_the_type_as_it_stood(
    world: MemoryScope, clock: FakeClock
) -> None:
    await world.remember("Alice", ["likes tea"], entity_type="student")
    clock.advance(2)
    await world.remember("Alice", ["works at Acme"], entity_type="engineer")
    then = {"known_at": T1}

    def types(entities: Sequence[Entity]) -> list[str]:
        return [e.entity_type for e in entities]

    assert types((await world.open_nodes(["Alice"])).entities) == ["engineer"]
    assert types((await world.open_nodes(["Alice"], **then)).entities) == ["student"]
    assert types((await world.open_nodes(["Alice"], as_of=T1)).entities) == ["student"]
    assert types((await world.read_graph(**then)).entities) == ["student"]
    assert types((await world.read_graph()).entities) == ["engineer"]
    hits = (await world.search_nodes("tea", **then)).hits
    assert [h.entity.entity_type for h in hits] == ["student"]
    assert await hit_names(world, "Alice", entity_type="student", **then) == ["Alice"]
    assert await hit_names(world, "Alice", entity_type="engineer", **then) == []
    assert await hit_names(world, "Alice", entity_type="engineer") == ["Alice"]
    history = await world.history("Alice")
    assert [(t.entity_type, t.recorded_at) for t in history.entity_types] == [
        ("student", "2026-06-01T00:00:00Z"),
        ("engineer", "2026-06-01T00:00:02Z"),
    ]


async def test_a_projects_own_type_is_versioned_inside_it_alone(
    world: MemoryScope, project_a: MemoryScope, clock: FakeClock
) -> None:
    await world.remember("Acme", ["makes anvils"], entity_type="company")
    clock.advance(2)
    await project_a.remember("Acme", ["pays late"], entity_type="client")
    clock.advance(2)
    await world.remember("Acme", ["moved"], entity_type="corporation")
    at = "2026-06-01T00:00:03Z"  # after A's type, before the global change

    async def type_of(scope: MemoryScope, **moment: str) -> str:
        return (await scope.open_nodes(["Acme"], **moment)).entities[0].entity_type

    assert await type_of(project_a) == "client"  # a project's own type stands
    assert await type_of(project_a, known_at=T1) == "company"
    assert await type_of(project_a, known_at=at) == "client"
    assert await type_of(world) == "corporation"
    assert await type_of(world, known_at=at) == "company"
    in_a = [t.entity_type for t in (await project_a.history("Acme")).entity_types]
    assert in_a == ["company", "client"]
    globally = [t.entity_type for t in (await world.history("Acme")).entity_types]
    assert globally == ["company", "corporation"]


# ---------------------------------------------------------------- migration


def _as_schema_6(path: Path) -> None:
    """The file as schema 6 left it: no records of deletions or of past types."""
    as_schema_7(path)
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE entity_life")
        conn.execute("DROP TABLE entity_type_version")
        conn.execute("PRAGMA user_version = 6")
    conn.close()


async def test_migration_7_keeps_each_entitys_types_of_now_as_their_first_versions(
    db_path: Path, clock: FakeClock
) -> None:
    async with GraphMemory.open(db_path, clock=clock) as mem:
        world = mem.scope(app="a", user="u")
        await world.remember("Acme", ["makes anvils"], entity_type="company")
        await world.remember("Bob", ["tall"])
        clock.advance()
        await mem.scope(app="a", user="u", project="A").remember(
            "Acme", ["pays late"], entity_type="client"
        )
    _as_schema_6(db_path)

    async with GraphMemory.open(db_path, clock=clock) as mem:
        world, in_a = mem.scope(app="a", user="u"), mem.scope(app="a", user="u", project="A")
        assert [t.entity_type for t in (await world.history("Acme")).entity_types] == ["company"]
        assert [t.entity_type for t in (await in_a.history("Acme")).entity_types] == ["client"]
        assert [
            (t.entity_type, t.recorded_at) for t in (await world.history("Bob")).entity_types
        ] == [("general", "2026-06-01T00:00:00.000001Z")]
        clock.advance()
        await world.delete_entities(["Bob"])
        assert await names_in_graph(world) == ["Acme"]
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == LATEST_VERSION == 9
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    conn.close()


# ---------------------------------------------------------------- export and import


async def _reads(scope: MemoryScope, moments: list[str]) -> list[object]:
    """What a context reads of the entities, now and at each of `moments`."""
    seen: list[object] = []
    for known_at in [None, *moments]:
        at = {} if known_at is None else {"known_at": known_at}
        seen.append((await scope.read_graph(limit=500, include_history=True, **at)).model_dump())
        # By name: an import does not keep when a closing last changed an entity, which
        # orders hits of equal scores.
        hits = (await scope.search_nodes("Acme Bob tea", **at)).hits
        seen.append(sorted((h.model_dump() for h in hits), key=lambda h: h["entity"]["name"]))
    for name in ("Acme", "Bob"):
        seen.append((await scope.history(name)).model_dump())
    return seen


async def test_export_and_import_carry_deletions_and_type_versions(
    mem: GraphMemory, world: MemoryScope, project_a: MemoryScope, clock: FakeClock, tmp_path: Path
) -> None:
    await world.remember("Acme", ["makes anvils"], entity_type="company")
    await world.remember("Bob", ["likes tea"], entity_type="person")
    clock.advance()
    await project_a.remember("Acme", ["pays late"], entity_type="client")
    await world.remember("Acme", ["moved"], entity_type="corporation")
    clock.advance()
    await world.delete_entities(["Bob"])
    await project_a.delete_entities(["Acme"])
    clock.advance()
    await world.create_entity("Bob", entity_type="friend")
    moments = ["2026-06-01T00:00:00.5Z", "2026-06-01T00:00:01.5Z", "2026-06-01T00:00:02.5Z"]
    lines = list(export_lines(await world.export()))
    kinds = [json.loads(line)["type"] for line in lines]
    assert kinds.count("entity_type_version") == 5  # 2 of Acme, 1 of A, 2 of Bob
    assert kinds.count("entity_life") == 3  # Bob deleted and back, Acme deleted in A

    async with GraphMemory.open(tmp_path / "copy.db", clock=clock) as copy:
        target = copy.scope(app="a", user="u")
        await target.import_lines(lines)
        assert list(export_lines(await target.export())) == lines
        for source, copied in (
            (world, target),
            (project_a, copy.scope(app="a", user="u", project="A")),
        ):
            assert await _reads(copied, moments) == await _reads(source, moments)


async def test_an_export_without_the_new_lines_imports_todays_types_as_the_first(
    world: MemoryScope, project_a: MemoryScope, clock: FakeClock, tmp_path: Path
) -> None:
    await world.remember("Acme", ["makes anvils"], entity_type="company")
    clock.advance()
    await project_a.remember("Acme", ["pays late"], entity_type="client")
    await world.remember("Acme", ["moved"], entity_type="corporation")
    old_lines = [  # as chronomem wrote exports before schema 7
        line
        for line in export_lines(await world.export())
        if json.loads(line)["type"] not in ("entity_type_version", "entity_life")
    ]
    async with GraphMemory.open(tmp_path / "copy.db", clock=clock) as copy:
        target = copy.scope(app="a", user="u")
        await target.import_lines(old_lines)
        assert [t.entity_type for t in (await target.history("Acme")).entity_types] == [
            "corporation"
        ]
        in_a = copy.scope(app="a", user="u", project="A")
        assert [t.entity_type for t in (await in_a.history("Acme")).entity_types] == ["client"]
        again = list(export_lines(await target.export()))
        assert again == old_lines  # today's types as the first versions: implied, left out


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"type": "entity_life", "name": "Bob", "at": "2026-01-01T00:00:00Z"}, "'deleted'"),
        (
            {"type": "entity_life", "name": "", "at": "2026-01-01T00:00:00Z", "deleted": True},
            "'name'",
        ),
        ({"type": "entity_life", "name": "Bob", "deleted": True}, "'at'"),
        (
            {"type": "entity_type_version", "name": "Bob", "recorded_at": "2026-01-01T00:00:00Z"},
            "'entity_type'",
        ),
        (
            {
                "type": "entity_type_version",
                "name": "Bob",
                "entity_type": "x",
                "recorded_at": "later",
            },
            "recorded_at",
        ),
        (
            {
                "type": "entity_life",
                "name": "Nobody",
                "at": "2026-01-01T00:00:00Z",
                "deleted": True,
            },
            "no entity named 'Nobody'",
        ),
    ],
)
async def test_bad_entity_record_lines_keep_nothing(
    world: MemoryScope, db_path: Path, record: dict[str, object], message: str
) -> None:
    await world.remember("Bob", ["tall"])
    before = dump(db_path)
    line = json.dumps({**{"project": None}, **record})
    with pytest.raises(InvalidInputError, match=rf"^line 1: .*{re.escape(message)}"):
        await world.import_lines([line])
    assert dump(db_path) == before


async def test_the_profile_card_as_of_an_earlier_time_shows_the_type_then(
    world: MemoryScope, clock: FakeClock
) -> None:
    await world.remember("Alice", ["likes tea"], entity_type="student")
    clock.advance(2)
    await world.remember("Alice", ["works at Acme"], entity_type="engineer")
    assert "(engineer)" in (await world.profile_card()).text
    assert "(student)" in (await world.profile_card(as_of=T1)).text


async def test_iterate_graph_gives_every_page_in_order(world: MemoryScope) -> None:
    for n in range(7):
        await world.relate(f"E{n}", "knows", f"E{(n + 1) % 7}")
    pages = [page async for page in world.iterate_graph(page_size=3)]
    assert [len(page.entities) for page in pages] == [3, 3, 1]
    whole = await world.read_graph(limit=500)
    assert [e for page in pages for e in page.entities] == whole.entities
    assert [r for page in pages for r in page.relations] == whole.relations
    bad_sizes: list[Any] = [0, 501, "3"]
    for bad in bad_sizes:
        with pytest.raises(InvalidInputError, match="^page_size: "):
            _ = [page async for page in world.iterate_graph(page_size=bad)]
