from __future__ import annotations

from pathlib import Path

import pytest

from memory import InvalidInputError, MemoryScope

from .conftest import FakeClock, dump

pytestmark = pytest.mark.anyio


async def test_remember_creates_the_entity_once(alice: MemoryScope) -> None:
    first = await alice.remember(entity="Alice", entity_type="person", facts=["likes tea"])
    again = await alice.remember(entity="alice", facts=["likes cake"])
    assert first.entity.model_dump() == {"name": "Alice", "entity_type": "person", "created": True}
    assert again.entity.model_dump() == {"name": "Alice", "entity_type": "person", "created": False}
    graph = await alice.read_graph()
    assert [e.name for e in graph.entities] == ["Alice"]
    assert [o.text for o in graph.entities[0].observations] == ["likes tea", "likes cake"]


@pytest.mark.parametrize("spelling", ["alice", " Alice ", "ALICE", "  alice\t"])
async def test_entity_names_ignore_case_and_whitespace(alice: MemoryScope, spelling: str) -> None:
    await alice.remember(entity="Alice", facts=["likes tea"])
    result = await alice.remember(entity=spelling, facts=["likes cake"])
    assert result.entity.name == "Alice"
    assert result.entity.created is False


async def test_first_spelling_is_kept_with_repeated_whitespace_collapsed(
    alice: MemoryScope,
) -> None:
    await alice.remember(entity="  Mary   Jane ", facts=["x"])
    result = await alice.remember(entity="MARY JANE", facts=["y"])
    assert result.entity.name == "Mary Jane"


async def test_type_defaults_to_general_and_a_given_type_replaces_it(alice: MemoryScope) -> None:
    assert (await alice.remember(entity="Acme", facts=["x"])).entity.entity_type == "general"
    assert (await alice.remember(entity="Acme", facts=["y"])).entity.entity_type == "general"
    result = await alice.remember(entity="acme", facts=["z"], entity_type="company")
    assert result.entity.entity_type == "company"
    opened = await alice.open_nodes(["Acme"])
    assert opened.entities[0].entity_type == "company"


async def test_fact_fields_and_default_times(alice: MemoryScope, clock: FakeClock) -> None:
    result = await alice.remember(entity="Alice", facts=["likes tea"])
    (fact,) = result.added
    assert fact.id.startswith("o_")
    assert (fact.attribute, fact.valid_to, fact.invalidated_at, fact.reason) == (None,) * 4
    # The JSON form leaves the null fields out (DESIGN §3: results are read by models).
    assert fact.model_dump(mode="json") == {
        "id": fact.id,
        "text": "likes tea",
        "valid_from": "2026-06-01T00:00:00Z",
        "recorded_at": "2026-06-01T00:00:00Z",
        "current": True,
    }


async def test_valid_from_is_normalised_to_utc(alice: MemoryScope) -> None:
    result = await alice.remember(
        entity="Alice", facts=["moved"], valid_from="2026-03-01T10:00:00.5+01:00"
    )
    assert result.added[0].valid_from == "2026-03-01T09:00:00.500000Z"


async def test_repeated_fact_is_a_duplicate(alice: MemoryScope) -> None:
    first = await alice.remember(entity="Alice", facts=["Likes tea"])
    again = await alice.remember(entity="Alice", facts=["  likes   TEA ", "likes cake"])
    assert [o.text for o in again.added] == ["likes cake"]
    assert [o.id for o in again.duplicates] == [first.added[0].id]
    graph = await alice.read_graph()
    assert len(graph.entities[0].observations) == 2


async def test_duplicates_within_one_call_are_stored_once(alice: MemoryScope) -> None:
    result = await alice.remember(entity="Alice", facts=["likes tea", "LIKES TEA"])
    assert [o.text for o in result.added] == ["likes tea"]
    assert [o.id for o in result.duplicates] == [result.added[0].id]


async def test_a_closed_fact_can_be_remembered_again(alice: MemoryScope, clock: FakeClock) -> None:
    first = await alice.remember(entity="Alice", facts=["likes tea"])
    clock.advance()
    await alice.forget(ids=[first.added[0].id])
    clock.advance()
    again = await alice.remember(entity="Alice", facts=["likes tea"])
    assert len(again.added) == 1 and again.duplicates == []


async def test_replaces_closes_at_the_new_valid_from(alice: MemoryScope, clock: FakeClock) -> None:
    old = await alice.remember(entity="Alice", facts=["lives in Paris"], valid_from="2024-01-01")
    clock.advance()
    new = await alice.remember(
        entity="Alice", facts=["lives in Rome"], valid_from="2026-02-01", replaces=[old.added[0].id]
    )
    (closed,) = new.superseded
    assert closed.id == old.added[0].id
    assert closed.valid_to == "2026-02-01T00:00:00Z"
    assert closed.invalidated_at == "2026-06-01T00:00:01Z"
    assert closed.current is False
    now = await alice.open_nodes(["Alice"])
    assert [o.text for o in now.entities[0].observations] == ["lives in Rome"]
    before = await alice.open_nodes(["Alice"], as_of="2025-06-01")
    assert [o.text for o in before.entities[0].observations] == ["lives in Paris"]


async def test_replaces_may_close_a_fact_of_another_entity(alice: MemoryScope) -> None:
    old = await alice.remember(entity="Alice", facts=["has a dog"])
    new = await alice.remember(entity="Rex", facts=["lives with Bob"], replaces=[old.added[0].id])
    assert [o.id for o in new.superseded] == [old.added[0].id]


async def test_replacing_an_already_closed_fact_is_a_harmless_retry(
    alice: MemoryScope, clock: FakeClock
) -> None:
    old = await alice.remember(entity="Alice", facts=["plan A"])
    clock.advance()
    first = await alice.remember(entity="Alice", facts=["plan B"], replaces=[old.added[0].id])
    clock.advance()
    retry = await alice.remember(entity="Alice", facts=["plan B"], replaces=[old.added[0].id])
    assert retry.added == [] and retry.superseded == []
    assert [o.id for o in retry.duplicates] == [first.added[0].id]


async def test_replaces_errors_change_nothing(
    alice: MemoryScope, mem, db_path: Path, clock: FakeClock
) -> None:
    fact = await alice.remember(entity="Alice", facts=["plan A"], valid_from="2026-05-01")
    rel = await alice.relate(source="Alice", relation="knows", target="Bob")
    bob = mem.scope(app="coach", user="bob")
    other = await bob.remember(entity="Bob", facts=["secret"])
    before = dump(db_path)
    cases = [
        (
            {"replaces": ["o_unknown"]},
            r"replaces\[0\]: no observation with id 'o_unknown' in this scope",
        ),
        ({"replaces": [other.added[0].id]}, r"replaces\[0\]: no observation with id"),
        ({"replaces": [rel.relation.id]}, r"replaces\[0\]: .* is not an observation"),
        (
            {"replaces": [fact.added[0].id], "valid_from": "2026-04-01"},
            "valid_from: 2026-04-01T00:00:00Z is before .* began",
        ),
    ]
    for extra, message in cases:
        with pytest.raises(InvalidInputError, match=message):
            await alice.remember(entity="Carol", facts=["new"], **extra)
        assert dump(db_path) == before


async def test_closing_at_the_instant_a_fact_began_is_a_correction(alice: MemoryScope) -> None:
    wrong = await alice.remember(entity="Alice", facts=["born 1990"], valid_from="2026-01-01")
    right = await alice.remember(
        entity="Alice", facts=["born 1991"], valid_from="2026-01-01", replaces=[wrong.added[0].id]
    )
    assert right.superseded[0].valid_to == right.superseded[0].valid_from
    at = await alice.open_nodes(["Alice"], as_of="2026-01-01")
    assert [o.text for o in at.entities[0].observations] == ["born 1991"]


async def test_attribute_makes_the_call_the_whole_slot(
    alice: MemoryScope, clock: FakeClock
) -> None:
    basic = await alice.remember(
        entity="Alice", facts=["basic plan"], attribute="plan", valid_from="2026-01-01"
    )
    other = await alice.remember(entity="Alice", facts=["likes tea"])
    clock.advance()
    pro = await alice.remember(
        entity="Alice", facts=["pro plan"], attribute="plan", valid_from="2026-03-01"
    )
    assert [o.id for o in pro.superseded] == [basic.added[0].id]
    assert pro.superseded[0].valid_to == "2026-03-01T00:00:00Z"
    assert pro.added[0].attribute == "plan"
    current = await alice.open_nodes(["Alice"])
    assert {o.text for o in current.entities[0].observations} == {"pro plan", "likes tea"}
    assert other.added[0].id in {o.id for o in current.entities[0].observations}


async def test_attribute_keeps_facts_already_in_the_slot(
    alice: MemoryScope, clock: FakeClock
) -> None:
    first = await alice.remember(
        entity="Alice", facts=["speaks French", "speaks Italian"], attribute="languages"
    )
    clock.advance()
    second = await alice.remember(
        entity="Alice", facts=["speaks french", "speaks German"], attribute="Languages"
    )
    assert [o.text for o in second.added] == ["speaks German"]
    assert [o.id for o in second.duplicates] == [first.added[0].id]
    assert [o.text for o in second.superseded] == ["speaks Italian"]


async def test_repeating_an_attribute_call_changes_nothing(
    alice: MemoryScope, db_path: Path, clock: FakeClock
) -> None:
    await alice.remember(entity="Alice", facts=["pro plan"], attribute="plan")
    before = dump(db_path, clock=False)
    clock.advance()
    again = await alice.remember(entity="Alice", facts=["pro plan"], attribute="plan")
    assert again.added == [] and again.superseded == [] and len(again.duplicates) == 1
    assert dump(db_path, clock=False) == before


async def test_backfill_is_born_closed_and_changes_nothing_current(
    alice: MemoryScope, clock: FakeClock
) -> None:
    await alice.remember(entity="Alice", facts=["basic"], attribute="plan", valid_from="2026-01-01")
    clock.advance()
    await alice.remember(entity="Alice", facts=["pro"], attribute="plan", valid_from="2026-03-01")
    clock.advance()
    trial = await alice.remember(
        entity="Alice", facts=["trial"], attribute="plan", valid_from="2025-12-01"
    )
    (fact,) = trial.added
    assert fact.valid_to == "2026-01-01T00:00:00Z"
    assert fact.invalidated_at == fact.recorded_at == "2026-06-01T00:00:02Z"
    assert fact.current is False and trial.superseded == []
    clock.advance()
    middle = await alice.remember(
        entity="Alice", facts=["team"], attribute="plan", valid_from="2026-02-01"
    )
    assert middle.added[0].valid_to == "2026-03-01T00:00:00Z"  # the next later fact, not the latest
    now = await alice.open_nodes(["Alice"])
    assert [o.text for o in now.entities[0].observations] == ["pro"]
    dec = await alice.open_nodes(["Alice"], as_of="2025-12-15")
    assert [o.text for o in dec.entities[0].observations] == ["trial"]


async def test_backfill_ends_at_the_next_fact_even_when_it_is_closed(
    alice: MemoryScope, clock: FakeClock
) -> None:
    old = await alice.remember(
        entity="Alice", facts=["UTC"], attribute="tz", valid_from="2026-02-01"
    )
    clock.advance()
    await alice.forget(ids=[old.added[0].id], valid_to="2026-04-01")
    clock.advance()
    backfill = await alice.remember(
        entity="Alice", facts=["CET"], attribute="tz", valid_from="2026-01-01"
    )
    assert backfill.added[0].valid_to == "2026-02-01T00:00:00Z"


async def test_a_future_fact_is_not_current_until_it_begins(alice: MemoryScope) -> None:
    await alice.remember(entity="Alice", facts=["starts at Acme"], valid_from="2026-07-01")
    assert (await alice.open_nodes(["Alice"])).entities[0].observations == []
    later = await alice.open_nodes(["Alice"], as_of="2026-07-01")
    assert [o.text for o in later.entities[0].observations] == ["starts at Acme"]


async def test_writes_in_one_clock_tick_get_distinct_transaction_times(
    alice: MemoryScope,
) -> None:
    a = await alice.remember(entity="Alice", facts=["one"])
    b = await alice.remember(entity="Alice", facts=["two"])
    assert a.added[0].recorded_at == "2026-06-01T00:00:00Z"
    assert b.added[0].recorded_at == "2026-06-01T00:00:00.000001Z"
    seen = await alice.open_nodes(["Alice"], known_at="2026-06-01T00:00:00Z")
    assert [o.text for o in seen.entities[0].observations] == ["one"]


async def test_a_same_text_fact_outside_the_slot_moves_into_it(
    alice: MemoryScope, clock: FakeClock
) -> None:
    loose = await alice.remember(entity="A", facts=["on pro plan"])
    clock.advance()
    basic = await alice.remember(entity="A", facts=["on basic plan"], attribute="plan")
    clock.advance()
    pro = await alice.remember(entity="A", facts=["On pro plan"], attribute="plan")
    assert [o.text for o in pro.added] == ["On pro plan"] and pro.duplicates == []
    assert {o.id for o in pro.superseded} == {loose.added[0].id, basic.added[0].id}
    current = (await alice.open_nodes(["A"])).entities[0].observations
    assert [(o.text, o.attribute) for o in current] == [("On pro plan", "plan")]
    clock.advance()
    again = await alice.remember(entity="A", facts=["on pro plan"], attribute="plan")
    assert again.added == [] and [o.id for o in again.duplicates] == [pro.added[0].id]
