from __future__ import annotations

from pathlib import Path

import pytest

from memory import GraphMemory, InvalidInputError, MemoryScope

from .conftest import FakeClock, dump

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("works at", "works_at"),
        ("works_at", "works_at"),
        ("Works-At", "works_at"),
        ("worksAt", "works_at"),
        ("  lives   in ", "lives_in"),
        ("is parent of!", "is_parent_of"),
        ("CEO of", "ceo_of"),
        ("knows", "knows"),
    ],
)
async def test_relation_types_are_snake_case(alice: MemoryScope, given: str, stored: str) -> None:
    result = await alice.relate(source="Alice", relation=given, target="Acme")
    assert result.relation.relation == stored


async def test_relation_of_only_punctuation_is_rejected(alice: MemoryScope) -> None:
    with pytest.raises(InvalidInputError, match="^relation: '!!' has no letters or digits"):
        await alice.relate(source="Alice", relation="!!", target="Acme")


async def test_relate_creates_missing_entities_with_their_types(alice: MemoryScope) -> None:
    await alice.remember(entity="Alice", facts=["x"], entity_type="person")
    result = await alice.relate(
        source="alice", relation="works at", target="Acme", target_type="company"
    )
    assert result.created_entities == ["Acme"]
    assert result.existing is False
    relation = result.relation
    assert (relation.source, relation.relation, relation.target) == ("Alice", "works_at", "Acme")
    assert relation.id.startswith("r_") and relation.current is True
    opened = await alice.open_nodes(["Acme"])
    assert opened.entities[0].entity_type == "company"
    assert [r.id for r in opened.relations] == [relation.id]


async def test_relating_an_identical_open_triple_returns_it(
    alice: MemoryScope, db_path: Path, clock: FakeClock
) -> None:
    first = await alice.relate(source="Alice", relation="knows", target="Bob")
    before = dump(db_path, clock=False)
    clock.advance()
    again = await alice.relate(source="ALICE", relation="Knows", target=" bob ")
    assert again.existing is True
    assert again.relation == first.relation
    assert again.created_entities == [] and again.superseded == []
    assert dump(db_path, clock=False) == before


async def test_exclusive_closes_the_other_relations_of_that_type_from_that_source(
    alice: MemoryScope, clock: FakeClock
) -> None:
    acme = await alice.relate(source="Alice", relation="works_at", target="Acme")
    knows = await alice.relate(source="Alice", relation="knows", target="Bob")
    bob_job = await alice.relate(source="Bob", relation="works_at", target="Acme")
    clock.advance()
    beta = await alice.relate(source="Alice", relation="works at", target="Beta", exclusive=True)
    assert [r.id for r in beta.superseded] == [acme.relation.id]
    assert beta.superseded[0].valid_to == beta.relation.valid_from
    current = {r.id for r in (await alice.read_graph()).relations}
    assert current == {knows.relation.id, bob_job.relation.id, beta.relation.id}


async def test_exclusive_with_an_existing_triple_closes_the_others(
    alice: MemoryScope, clock: FakeClock
) -> None:
    acme = await alice.relate(source="Alice", relation="works_at", target="Acme")
    beta = await alice.relate(source="Alice", relation="works_at", target="Beta")
    clock.advance()
    again = await alice.relate(source="Alice", relation="works_at", target="Acme", exclusive=True)
    assert again.existing is True and again.relation.id == acme.relation.id
    assert [r.id for r in again.superseded] == [beta.relation.id]


async def test_exclusive_backfill_is_born_closed(alice: MemoryScope, clock: FakeClock) -> None:
    await alice.relate(
        source="Alice", relation="works_at", target="Acme", valid_from="2024-01-01", exclusive=True
    )
    clock.advance()
    beta = await alice.relate(
        source="Alice", relation="works_at", target="Beta", valid_from="2025-01-01", exclusive=True
    )
    clock.advance()
    old = await alice.relate(
        source="Alice", relation="works_at", target="Gamma", valid_from="2020-01-01", exclusive=True
    )
    assert old.superseded == []
    assert old.relation.valid_to == "2024-01-01T00:00:00Z"
    assert old.relation.current is False
    now = await alice.open_nodes(["Alice"])
    assert [r.id for r in now.relations] == [beta.relation.id]
    then = await alice.open_nodes(["Alice"], as_of="2021-01-01")
    assert [r.target for r in then.relations] == ["Gamma"]


async def test_relate_replaces_closes_named_relations(alice: MemoryScope, clock: FakeClock) -> None:
    old = await alice.relate(source="Alice", relation="lives_in", target="Paris")
    clock.advance()
    new = await alice.relate(
        source="Alice", relation="lives_in", target="Rome", replaces=[old.relation.id]
    )
    assert [r.id for r in new.superseded] == [old.relation.id]
    assert new.superseded[0].reason == f"superseded by {new.relation.id}"


async def test_relate_replaces_errors_change_nothing(alice: MemoryScope, db_path: Path) -> None:
    fact = await alice.remember(entity="Alice", facts=["x"])
    later = await alice.relate(
        source="Alice", relation="knows", target="Bob", valid_from="2026-09-01"
    )
    before = dump(db_path)
    with pytest.raises(InvalidInputError, match=r"replaces\[0\]: .* is not a relation"):
        await alice.relate(source="A", relation="r", target="B", replaces=[fact.added[0].id])
    with pytest.raises(InvalidInputError, match=r"replaces\[1\]: no relation with id 'r_nope'"):
        await alice.relate(
            source="A", relation="r", target="B", replaces=[later.relation.id, "r_nope"]
        )
    with pytest.raises(InvalidInputError, match="valid_from: .* is before"):
        await alice.relate(source="A", relation="r", target="B", replaces=[later.relation.id])
    assert dump(db_path) == before


async def test_exclusive_with_an_existing_triple_older_than_the_slot_changes_nothing(
    alice: MemoryScope, db_path: Path
) -> None:
    """A backfill closes nothing; with an identical open triple it is that triple."""
    acme = await alice.relate(
        source="Alice", relation="works_at", target="Acme", valid_from="2026-09-01"
    )
    await alice.relate(source="Alice", relation="works_at", target="Beta", valid_from="2026-10-01")
    before = dump(db_path, clock=False)
    again = await alice.relate(
        source="Alice", relation="works_at", target="Acme", exclusive=True, valid_from="2026-09-15"
    )
    assert again.existing is True and again.relation.id == acme.relation.id
    assert again.superseded == []
    assert dump(db_path, clock=False) == before


async def test_self_relation_is_allowed(alice: MemoryScope) -> None:
    result = await alice.relate(source="Alice", relation="mentors", target="alice")
    assert result.relation.source == result.relation.target == "Alice"
    assert result.created_entities == ["Alice"]


async def test_a_triple_open_globally_and_in_the_project_is_existing_unless_replaced(
    mem: GraphMemory,
) -> None:
    """Found by the temporal model test: with the same triple open twice in view (once
    global, once in the project), replacing one copy finds the other as existing."""
    world, project = mem.scope(app="a", user="u"), mem.scope(app="a", user="u", project="p")
    in_project = await project.relate(source="A", relation="works at", target="B")
    again = (await world.relate(source="A", relation="works at", target="B")).relation
    assert again.id != in_project.relation.id  # p's copy is not visible globally
    result = await project.relate(
        source="A", relation="works at", target="B", replaces=[in_project.relation.id]
    )
    assert result.existing and result.relation.id == again.id
    assert [r.id for r in result.superseded] == [in_project.relation.id]


async def test_a_project_replacing_a_global_relation_closes_it_for_itself_only(
    mem: GraphMemory,
) -> None:
    world, project = mem.scope(app="a", user="u"), mem.scope(app="a", user="u", project="p")
    first = (await world.relate(source="A", relation="works at", target="B")).relation
    in_project = await project.relate(
        source="A", relation="works at", target="B", replaces=[first.id]
    )
    assert not in_project.existing  # it replaced the only copy in p: recorded anew, in p
    again = await world.relate(source="A", relation="works at", target="B")
    assert again.existing and again.relation.id == first.id  # still open globally


async def test_an_entity_created_and_typed_twice_in_one_call_is_searchable(
    alice: MemoryScope,
) -> None:
    """Found in review: a relation to itself with two types created the entity and
    changed its type in one transaction, before its search entry existed."""
    await alice.relate(
        source="Zebra",
        relation="likes",
        target="Zebra",
        source_type="animal",
        target_type="mascot",
    )
    hits = (await alice.search_nodes(query="mascot")).hits
    assert [(h.entity.name, h.entity.entity_type) for h in hits] == [("Zebra", "mascot")]
