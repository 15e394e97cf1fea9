from __future__ import annotations

from pathlib import Path

import pytest

from memory import GraphMemory, InvalidInputError, MemoryScope

from .conftest import FakeClock, dump

pytestmark = pytest.mark.anyio


async def test_forget_closes_facts_and_relations_in_one_call(
    alice: MemoryScope, clock: FakeClock
) -> None:
    fact = (await alice.remember(entity="Alice", facts=["likes tea"])).added[0]
    rel = (await alice.relate(source="Alice", relation="knows", target="Bob")).relation
    clock.advance()
    result = await alice.forget(ids=[fact.id, rel.id, "o_missing"], reason="user asked")
    assert result.model_dump() == {
        "invalidated": [fact.id, rel.id],
        "already_invalid": [],
        "not_found": ["o_missing"],
    }
    history = await alice.history("Alice")
    closed = {item.id: item for item in history.timeline}
    assert closed[fact.id].valid_to == "2026-06-01T00:00:01Z"
    assert closed[fact.id].invalidated_at == "2026-06-01T00:00:01Z"
    assert closed[fact.id].reason == "user asked"
    assert closed[rel.id].current is False


async def test_forgetting_twice_reports_already_invalid(alice: MemoryScope) -> None:
    fact = (await alice.remember(entity="Alice", facts=["likes tea"])).added[0]
    await alice.forget(ids=[fact.id])
    again = await alice.forget(ids=[fact.id, fact.id])
    assert again.already_invalid == [fact.id] and again.invalidated == []


async def test_forget_with_a_past_valid_to(alice: MemoryScope) -> None:
    fact = (
        await alice.remember(entity="Alice", facts=["lived in Paris"], valid_from="2020-01-01")
    ).added[0]
    await alice.forget(ids=[fact.id], valid_to="2024-01-01")
    then = await alice.open_nodes(["Alice"], as_of="2023-01-01")
    assert [o.id for o in then.entities[0].observations] == [fact.id]
    assert (await alice.open_nodes(["Alice"])).entities[0].observations == []


async def test_forget_entities_closes_everything_about_them_but_keeps_them(
    alice: MemoryScope, clock: FakeClock
) -> None:
    facts = (await alice.remember(entity="Bob", facts=["one", "two"])).added
    out = (await alice.relate(source="Bob", relation="knows", target="Carol")).relation
    into = (await alice.relate(source="Alice", relation="knows", target="Bob")).relation
    keep = (await alice.relate(source="Alice", relation="knows", target="Carol")).relation
    clock.advance()
    result = await alice.forget(entities=["BOB", "Nobody"])
    assert set(result.invalidated) == {facts[0].id, facts[1].id, out.id, into.id}
    assert result.not_found == ["Nobody"]
    graph = await alice.read_graph()
    assert {e.name for e in graph.entities} == {"Bob", "Carol", "Alice"}
    assert [r.id for r in graph.relations] == [keep.id]
    assert len((await alice.history("Bob")).timeline) == 4


async def test_forget_needs_something_to_forget(alice: MemoryScope) -> None:
    for kwargs in ({}, {"ids": []}, {"ids": [], "entities": []}):
        with pytest.raises(InvalidInputError, match="^ids: forget needs at least one"):
            await alice.forget(**kwargs)


async def test_forget_before_a_fact_began_is_rejected_whole(
    alice: MemoryScope, db_path: Path
) -> None:
    early = (await alice.remember(entity="Alice", facts=["a"], valid_from="2026-01-01")).added[0]
    late = (await alice.remember(entity="Alice", facts=["b"], valid_from="2026-05-01")).added[0]
    before = dump(db_path)
    with pytest.raises(
        InvalidInputError, match=f"^valid_to: 2026-03-01T00:00:00Z is before {late.id}"
    ):
        await alice.forget(ids=[early.id, late.id], valid_to="2026-03-01")
    assert dump(db_path) == before


async def test_another_users_ids_are_not_found_and_untouched(
    mem: GraphMemory, alice: MemoryScope, db_path: Path
) -> None:
    bob = mem.scope(app="coach", user="bob")
    secret = (await bob.remember(entity="Bob", facts=["secret"])).added[0]
    rel = (await bob.relate(source="Bob", relation="knows", target="Eve")).relation
    await alice.remember(entity="Alice", facts=["x"])
    before = dump(db_path, clock=False)
    result = await alice.forget(ids=[secret.id, rel.id], entities=["Bob"])
    assert result.not_found == [secret.id, rel.id, "Bob"]
    assert result.invalidated == []
    assert dump(db_path, clock=False) == before
    stranger = mem.scope(app="coach", user="nobody-yet")
    assert (await stranger.forget(ids=[secret.id])).not_found == [secret.id]
