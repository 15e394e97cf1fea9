"""A project is an overlay on the global memory (DESIGN §2): nothing done inside
project P changes what the global memory or another project shows, and P's ids never
appear in what they read. A closing made inside P of a global row is P's own, on both
time axes."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from memory import GraphMemory, InvalidInputError, MemoryScope
from memory.schema import MIGRATIONS
from memory.timestamps import format_time
from memory.transfer import ExportRecord, export_lines

from .conftest import FakeClock
from .schema_versions import as_schema_7

pytestmark = pytest.mark.anyio


async def everything(scope: MemoryScope) -> str:
    """What a context reads, every read, as one JSON text."""
    names = ["Alice", "Acme", "Initech"]
    parts: list[Any] = [
        await scope.read_graph(include_history=True, limit=500),
        await scope.read_graph(limit=500),
        await scope.open_nodes(names=names, include_history=True),
        await scope.profile_card(),
    ]
    for history in (False, True):  # scores included: the ranking is the context's own
        parts.append(await scope.search_nodes(query="plan tea Acme works", include_history=history))
        parts.append(await scope.recall(query="plan tea Acme"))
    for name in names:
        try:
            parts.append(await scope.history(entity=name))
        except InvalidInputError as error:  # not visible in this context
            parts.append(str(error))
    return json.dumps(
        [part.model_dump(mode="json") if hasattr(part, "model_dump") else part for part in parts],
        sort_keys=True,
    )


async def _global_memory(world: MemoryScope) -> dict[str, str]:
    plan = await world.remember(entity="Alice", facts=["basic plan"], attribute="plan")
    tea = await world.remember(entity="Alice", facts=["likes tea"])
    job = await world.relate(source="Alice", relation="works at", target="Acme")
    return {"plan": plan.added[0].id, "tea": tea.added[0].id, "job": job.relation.id}


Change = Callable[[MemoryScope, dict[str, str]], Awaitable[Any]]
CHANGES: dict[str, Change] = {
    "attribute": lambda p, ids: p.remember(entity="Alice", facts=["pro plan"], attribute="plan"),
    "replaces": lambda p, ids: p.remember(
        entity="Alice", facts=["likes coffee"], replaces=[ids["tea"]]
    ),
    "forget ids": lambda p, ids: p.forget(ids=[ids["tea"], ids["job"]], reason="not here"),
    "forget entities": lambda p, ids: p.forget(entities=["Alice"]),
    "exclusive": lambda p, ids: p.relate(
        source="Alice", relation="works at", target="Initech", exclusive=True
    ),
    "relate replaces": lambda p, ids: p.relate(
        source="Alice", relation="works at", target="Initech", replaces=[ids["job"]]
    ),
}


@pytest.mark.parametrize("change", CHANGES)
async def test_a_closing_inside_a_project_changes_nothing_outside_it(
    change: str, world: MemoryScope, project_a: MemoryScope, project_b: MemoryScope
) -> None:
    ids = await _global_memory(world)
    await project_b.remember(entity="Alice", facts=["in B"])
    before = {"global": await everything(world), "B": await everything(project_b)}
    in_a_before = await everything(project_a)

    await CHANGES[change](project_a, ids)

    assert await everything(world) == before["global"]
    assert await everything(project_b) == before["B"]
    assert await everything(project_a) != in_a_before
    a_rows = (await project_a.read_graph(include_history=True, limit=500)).model_dump()
    a_ids = {o["id"] for e in a_rows["entities"] for o in e["observations"]} | {
        r["id"] for r in a_rows["relations"]
    }
    for own_id in a_ids - set(ids.values()):  # the project's own rows
        assert own_id not in before["global"] + await everything(world)
        assert own_id not in await everything(project_b)


async def test_the_project_sees_its_closing_on_both_time_axes(
    world: MemoryScope, project_a: MemoryScope, clock: FakeClock
) -> None:
    ids = await _global_memory(world)
    clock.advance(10)
    before_closing = clock.now - 1
    newer = await project_a.remember(entity="Alice", facts=["pro plan"], attribute="plan")
    assert [o.id for o in newer.superseded] == [ids["plan"]]
    closed = newer.superseded[0]
    assert closed.valid_to == closed.invalidated_at == newer.added[0].valid_from
    assert closed.reason == f"superseded by {newer.added[0].id}"

    facts = {o.id: o for o in (await project_a.history(entity="Alice")).timeline}
    assert facts[ids["plan"]].valid_to is not None and not facts[ids["plan"]].current
    then = await project_a.open_nodes(names=["Alice"], known_at=format_time(before_closing))
    assert ids["plan"] in {o.id for o in then.entities[0].observations}  # not known yet
    globally = {o.id: o for o in (await world.history(entity="Alice")).timeline}
    assert globally[ids["plan"]].current and globally[ids["plan"]].valid_to is None
    assert newer.added[0].id not in globally


async def test_a_global_closing_applies_everywhere_but_not_over_a_projects_own(
    world: MemoryScope, project_a: MemoryScope, project_b: MemoryScope, clock: FakeClock
) -> None:
    ids = await _global_memory(world)
    await project_a.forget(ids=[ids["tea"]], reason="not in A")
    clock.advance(5)
    result = await world.forget(ids=[ids["tea"]], reason="gone")
    assert result.invalidated == [ids["tea"]]
    in_a = {o.id: o for o in (await project_a.history(entity="Alice")).timeline}
    in_b = {o.id: o for o in (await project_b.history(entity="Alice")).timeline}
    assert in_a[ids["tea"]].reason == "not in A"
    assert in_b[ids["tea"]].reason == "gone"
    again = await project_a.forget(ids=[ids["tea"]])
    assert again.already_invalid == [ids["tea"]]


async def test_a_project_restating_a_global_fact_it_closed_records_its_own(
    world: MemoryScope, project_a: MemoryScope
) -> None:
    ids = await _global_memory(world)
    await project_a.forget(ids=[ids["tea"]])
    restated = await project_a.remember(entity="Alice", facts=["likes tea"])
    assert restated.added and not restated.duplicates
    assert (await world.remember(entity="Alice", facts=["likes tea"])).duplicates[0].id == ids[
        "tea"
    ]


async def test_stats_of_a_project_count_its_closings(
    world: MemoryScope, project_a: MemoryScope
) -> None:
    ids = await _global_memory(world)
    await project_a.forget(ids=[ids["tea"]])
    assert (await project_a.stats()).observations_closed == 1
    assert (await world.stats()).observations_closed == 0


async def test_export_and_import_keep_a_projects_closings(
    world: MemoryScope, project_a: MemoryScope, tmp_path: Path
) -> None:
    ids = await _global_memory(world)
    await project_a.forget(ids=[ids["tea"], ids["job"]], reason="not in A")
    await project_a.remember(entity="Acme", entity_type="client", facts=["pays late"])
    lines = list(export_lines(await world.export()))
    assert {"type": "entity_type", "name": "Acme", "entity_type": "client", "project": "A"} in [
        json.loads(line) for line in lines
    ]
    closings = [json.loads(line) for line in lines if '"type":"closing"' in line]
    assert {c["id"] for c in closings} == {ids["tea"], ids["job"]}
    assert {c["project"] for c in closings} == {"A"}

    async with GraphMemory.open(tmp_path / "copy.db") as copy:
        target = copy.scope(app="a", user="u")
        result = await target.import_lines(lines)
        assert result.closings == 2
        assert list(export_lines(await target.export())) == lines
        in_a = copy.scope(app="a", user="u", project="A")
        assert await everything(in_a) == await everything(project_a)
        assert await everything(target) == await everything(world)
        again = await target.import_lines(lines)
        assert again.closings == 0


async def test_an_export_read_in_pages_of_any_size_is_the_same(
    world: MemoryScope, project_a: MemoryScope
) -> None:
    """Each page is its own snapshot and resumes where the last left off, inside a kind
    ordered by two columns (closings, entity types) too; rows added meanwhile are left
    out."""
    ids = await _global_memory(world)
    await project_a.forget(ids=[ids["tea"], ids["job"]], reason="not in A")
    await project_a.remember(entity="Acme", entity_type="client", facts=["pays late"])
    await project_a.record_turns(session_id="s", turns=[{"role": "user", "text": "hi"}])
    await project_a.delete_entities(["Acme"])  # an entity_life record, paged too
    whole = await world.export()
    kinds = {record.type for record in whole}
    assert kinds == {
        "entity",
        "entity_type",
        "entity_type_version",
        "entity_life",
        "observation",
        "relation",
        "closing",
        "turn",
    }
    records = TypeAdapter(ExportRecord)  # each line reads back as the model it was
    assert [records.validate_json(line) for line in export_lines(whole)] == whole
    for size in (1, 2, 3, 7, len(whole), len(whole) + 1):
        assert [record async for record in world.export_records(page_size=size)] == whole
    paged = []
    async for record in world.export_records(page_size=2):
        if not paged:
            await world.remember(entity="Late", facts=["added during the export"])
        paged.append(record)
    assert paged == whole


async def test_purging_a_project_erases_its_closings(
    world: MemoryScope, project_a: MemoryScope, db_path: Path
) -> None:
    ids = await _global_memory(world)
    await project_a.forget(ids=[ids["tea"]], reason="secret reason")
    result = await project_a.purge("project")
    assert result.closings == 1
    assert ids["tea"] in {
        o.id for o in (await project_a.open_nodes(names=["Alice"])).entities[0].observations
    }
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("SELECT count(*) FROM observation_closing").fetchone()[0] == 0


def _as_schema_5(path: Path) -> None:
    """The file as schema 5 left it: no closing tables, the old closing triggers."""
    as_schema_7(path)
    conn = sqlite3.connect(path)
    for table in (
        "entity_life",  # schema 7's
        "entity_type_version",
        "observation_closing",
        "relation_closing",
        "entity_change",
        "file_secret",
        "project_entity_type",
    ):
        conn.execute(f"DROP TABLE {table}")
    for table in ("observation", "relation"):
        conn.execute(f"DROP TRIGGER {table}_closed")
        conn.execute(f"DROP TRIGGER {table}_closed_in_project")
    for statement in MIGRATIONS[2]:
        if "_closed AFTER UPDATE" in statement:
            conn.execute(statement)
    conn.execute("PRAGMA user_version = 5")
    conn.commit()
    conn.close()


async def test_migration_6_gives_projects_the_global_rows_they_superseded(
    db_path: Path, clock: FakeClock
) -> None:
    """Before schema 6, a supersession inside a project closed the global row itself;
    the rows that replaced it say which project did it."""
    async with GraphMemory.open(db_path, clock=clock) as mem:
        world = mem.scope(app="a", user="u")
        ids = await _global_memory(world)
        in_a = mem.scope(app="a", user="u", project="A")
        new_fact = (await in_a.remember(entity="Alice", facts=["pro plan"])).added[0].id
        new_job = (await in_a.relate(source="Alice", relation="knows", target="Bob")).relation.id
        forgotten = (await world.remember(entity="Bob", facts=["tall"])).added[0].id
    with sqlite3.connect(db_path) as conn:  # closed the old way, on the rows
        close = (
            "UPDATE {} SET valid_to = valid_from, invalidated_at = recorded_at,"
            " reason = ? WHERE id = ?"
        )
        conn.execute(close.format("observation"), (f"superseded by {new_fact}", ids["plan"]))
        conn.execute(close.format("relation"), (f"superseded by {new_job}, r_x", ids["job"]))
        conn.execute(close.format("observation"), ("user asked", forgotten))
    _as_schema_5(db_path)

    async with GraphMemory.open(db_path, clock=clock) as mem:
        world, in_a = mem.scope(app="a", user="u"), mem.scope(app="a", user="u", project="A")
        seen = {o.id: o for o in (await world.history(entity="Alice")).timeline}
        assert seen[ids["plan"]].current and seen[ids["job"]].current
        seen_in_a = {o.id: o for o in (await in_a.history(entity="Alice")).timeline}
        assert seen_in_a[ids["plan"]].reason == f"superseded by {new_fact}"
        assert not seen_in_a[ids["job"]].current
        bob = {o.id: o for o in (await world.history(entity="Bob")).timeline}
        assert not bob[forgotten].current  # a forget left no trace of its project


async def test_the_profile_card_orders_by_what_changed_in_its_own_context(
    world: MemoryScope, project_a: MemoryScope, project_b: MemoryScope, clock: FakeClock
) -> None:
    first = await world.remember(entity="Ann", facts=["likes tea"])
    clock.advance()
    await world.remember(entity="Ben", facts=["likes soup"])
    clock.advance()
    await project_a.remember(entity="Ann", facts=["in A"])
    clock.advance()
    await project_b.forget(ids=[first.added[0].id])  # Ann loses her only fact in B
    await project_b.remember(entity="Cid", facts=["in B"])
    clock.advance()
    await project_b.remember(entity="Ann", facts=["back in B"])
    assert (await world.profile_card()).entities == ["Ben", "Ann"]
    assert (await project_a.profile_card()).entities == ["Ann", "Ben"]
    assert (await project_b.profile_card()).entities == ["Ann", "Cid", "Ben"]
    assert (await world.profile_card(max_entities=1)).entities == ["Ben"]
    assert (await project_a.profile_card(max_entities=1)).entities == ["Ann"]


async def test_a_projects_rows_move_no_score_outside_it(
    world: MemoryScope, project_a: MemoryScope, project_b: MemoryScope
) -> None:
    """Ranking statistics are the context's own: a project storing many rows of the
    same words (past the rows a query ranks at once, so its windows of common words
    are taken too) changes no global or other project's result, scores included."""
    for i in range(30):
        await world.remember(entity=f"Cafe {i}", facts=[f"tea and cake number {i}"])
        await world.record_turns(session_id="s", turns=[{"role": "user", "text": f"tea {i}"}])
    await project_b.remember(entity="Cafe 1", facts=["tea in B"])
    queries = ["tea cake", "tea", "cafe tea number 7"]

    async def results(scope: MemoryScope) -> list[Any]:
        found = [await scope.search_nodes(query=q, limit=20) for q in queries]
        return [r.model_dump() for r in found] + [(await scope.recall(query="tea")).model_dump()]

    before = {"global": await results(world), "B": await results(project_b)}
    for batch in range(30):
        facts = [f"tea and cake in A {batch} {i}" for i in range(50)]
        await project_a.remember(entity=f"Cafe {batch % 5}", facts=facts)
        turns = [{"role": "user", "text": f"tea cake {i}"} for i in range(50)]
        await project_a.record_turns(session_id="a", turns=turns)
    assert await results(world) == before["global"]
    assert await results(project_b) == before["B"]
    in_a = await project_a.search_nodes(query="tea cake", limit=20)
    assert in_a.hits and in_a.model_dump() != before["global"][0]


async def test_a_type_given_inside_a_project_is_the_projects_own(
    world: MemoryScope, project_a: MemoryScope, project_b: MemoryScope
) -> None:
    await world.remember(entity="Acme", entity_type="company", facts=["makes anvils"])
    result = await project_a.remember(entity="Acme", entity_type="client", facts=["pays late"])
    assert result.entity.entity_type == "client"
    new = await project_a.relate(
        source="Rex", relation="likes", source_type="dog", target="Rex", target_type="pet"
    )
    assert new.created_entities == ["Rex"]

    def types(graph: Any) -> dict[str, str]:
        return {e.name: e.entity_type for e in graph.entities}

    assert types(await project_a.read_graph()) == {"Acme": "client", "Rex": "pet"}
    assert types(await world.read_graph()) == {"Acme": "company"}
    assert types(await project_b.open_nodes(names=["Acme"])) == {"Acme": "company"}
    clients = await project_a.search_nodes(query="anvils", entity_type="client")
    assert [hit.entity.name for hit in clients.hits] == ["Acme"]
    assert (await world.search_nodes(query="anvils", entity_type="client")).hits == []
    await world.remember(entity="Acme", entity_type="maker", facts=["old firm"])
    assert types(await project_a.open_nodes(names=["Acme"])) == {"Acme": "client"}
    assert types(await project_b.open_nodes(names=["Acme"])) == {"Acme": "maker"}
    assert "(client)" in (await project_a.profile_card()).text
