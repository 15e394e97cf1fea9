from __future__ import annotations

import base64

import pytest

from memory import GraphMemory, InvalidInputError, MemoryScope

from .conftest import FakeClock

pytestmark = pytest.mark.anyio


async def _plan_story(alice: MemoryScope, clock: FakeClock) -> dict[str, str]:
    """Basic plan from January, learned on June 1; on June 2 we learn it became pro in March."""
    basic = await alice.remember(
        entity="Alice", facts=["basic plan"], attribute="plan", valid_from="2026-01-01"
    )
    clock.set("2026-06-02T00:00:00Z")
    pro = await alice.remember(
        entity="Alice", facts=["pro plan"], attribute="plan", valid_from="2026-03-01"
    )
    clock.set("2026-06-03T00:00:00Z")
    return {"basic": basic.added[0].id, "pro": pro.added[0].id}


def _texts(result) -> list[str]:
    return [o.text for e in result.entities for o in e.observations]


async def test_now_then_and_what_we_believed(alice: MemoryScope, clock: FakeClock) -> None:
    await _plan_story(alice, clock)
    assert _texts(await alice.open_nodes(["Alice"])) == ["pro plan"]
    assert _texts(await alice.open_nodes(["Alice"], as_of="2026-02-01")) == ["basic plan"]
    believed = await alice.open_nodes(["Alice"], known_at="2026-06-01T12:00:00Z")
    assert _texts(believed) == ["basic plan"]
    # In April, as known on June 1: still basic; as known now: pro.
    april_then = await alice.open_nodes(
        ["Alice"], as_of="2026-04-01", known_at="2026-06-01T12:00:00Z"
    )
    assert _texts(april_then) == ["basic plan"]
    assert _texts(await alice.open_nodes(["Alice"], as_of="2026-04-01")) == ["pro plan"]


async def test_rows_are_shown_as_they_stood_at_known_at(
    alice: MemoryScope, clock: FakeClock
) -> None:
    ids = await _plan_story(alice, clock)
    old = await alice.open_nodes(["Alice"], known_at="2026-06-01T12:00:00Z", include_history=True)
    (basic,) = old.entities[0].observations
    assert basic.id == ids["basic"]
    assert basic.valid_to is None and basic.invalidated_at is None and basic.current is True
    assert basic.reason is None
    new = await alice.open_nodes(["Alice"], include_history=True)
    by_id = {o.id: o for o in new.entities[0].observations}
    assert by_id[ids["basic"]].valid_to == "2026-03-01T00:00:00Z"
    assert by_id[ids["basic"]].invalidated_at == "2026-06-02T00:00:00Z"
    assert by_id[ids["basic"]].current is False
    assert by_id[ids["pro"]].current is True


async def test_include_history_returns_closed_facts_flagged(
    alice: MemoryScope, clock: FakeClock
) -> None:
    await _plan_story(alice, clock)
    graph = await alice.read_graph(include_history=True)
    flags = [(o.text, o.current) for o in graph.entities[0].observations]
    assert flags == [("basic plan", False), ("pro plan", True)]
    past = await alice.read_graph(as_of="2026-02-01", include_history=True)
    assert [(o.text, o.current) for o in past.entities[0].observations] == [
        ("basic plan", True),
        ("pro plan", False),
    ]


async def test_an_entity_recorded_after_known_at_does_not_exist(
    alice: MemoryScope, clock: FakeClock
) -> None:
    await alice.remember(entity="Alice", facts=["x"], valid_from="2020-01-01")
    early = await alice.open_nodes(["Alice"], known_at="2026-05-31")
    assert early.entities == [] and early.missing == ["Alice"]
    assert (await alice.read_graph(known_at="2026-05-31")).total_entities == 0


async def test_open_nodes_returns_every_relation_touching_the_entities_once(
    alice: MemoryScope,
) -> None:
    out = await alice.relate(source="Alice", relation="knows", target="Bob")
    into = await alice.relate(source="Carol", relation="knows", target="Alice")
    between = await alice.relate(source="Alice", relation="likes", target="Carol")
    await alice.relate(source="Bob", relation="knows", target="Carol")
    result = await alice.open_nodes(["Alice", "carol", "alice", "Zed", "Zed"])
    assert [e.name for e in result.entities] == ["Alice", "Carol"]
    assert result.missing == ["Zed"]
    ids = [r.id for r in result.relations]
    assert len(ids) == len(set(ids)) == 4
    assert {out.relation.id, into.relation.id, between.relation.id} <= set(ids)


async def test_read_graph_pages_through_a_stable_order(alice: MemoryScope) -> None:
    names = [f"Entity {i}" for i in range(7)]
    for name in names:
        await alice.remember(entity=name, facts=[f"{name} fact"])
    await alice.relate(source="Entity 0", relation="next", target="Entity 6")
    await alice.relate(source="Entity 6", relation="next", target="Entity 0")
    seen, relations, cursor, pages = [], [], None, 0
    while True:
        page = await alice.read_graph(limit=3, cursor=cursor)
        pages += 1
        assert page.total_entities == 7
        seen += [e.name for e in page.entities]
        relations += [r.id for r in page.relations]
        for rel in page.relations:
            assert rel.source in {e.name for e in page.entities}
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == names and pages == 3
    assert len(relations) == len(set(relations)) == 2


async def test_an_exact_last_page_has_no_next_cursor(alice: MemoryScope) -> None:
    for i in range(2):
        await alice.remember(entity=f"E{i}", facts=["x"])
    assert (await alice.read_graph(limit=2)).next_cursor is None


@pytest.mark.parametrize(
    "cursor",
    [
        "nonsense",
        "ZW50aXR5Ong=",
        "!!!",
        "bm90IGEgY3Vyc29y",
        "ZW50aXR5Ojk5OTk5OTk5OTk5OTk5OTk5OTk5OTk5OTk5OTk5OTk5OTk5OTk5OTk=",
        "ZW50aXR5Oi01",
    ],
)
async def test_a_forged_cursor_is_an_input_error(alice: MemoryScope, cursor: str) -> None:
    with pytest.raises(InvalidInputError, match="^cursor: not a cursor returned by read_graph"):
        await alice.read_graph(cursor=cursor)


async def test_a_cursor_is_meaningful_only_in_its_own_scope(mem: GraphMemory) -> None:
    """Found by the adversarial test: a cursor was base64 of the global rowid, which
    counted every user's activity, and any scope took it."""
    alice, bob = mem.scope(app="a", user="alice"), mem.scope(app="a", user="bob")
    in_p = mem.scope(app="a", user="alice", project="p")
    for i in range(3):
        await alice.remember(entity=f"E{i}", facts=["x"])
        await bob.remember(entity=f"E{i}", facts=["x"])
    cursor = (await alice.read_graph(limit=1)).next_cursor
    assert cursor is not None
    assert b"entity" not in base64.urlsafe_b64decode(cursor + "==")
    assert cursor != (await bob.read_graph(limit=1)).next_cursor  # same position
    assert [e.name for e in (await alice.read_graph(limit=1, cursor=cursor)).entities] == ["E1"]
    for other in (bob, in_p, mem.scope(app="b", user="alice")):
        with pytest.raises(InvalidInputError, match="^cursor: not a cursor returned by read_graph"):
            await other.read_graph(cursor=cursor)
    tampered = cursor[:3] + ("A" if cursor[3] != "A" else "B") + cursor[4:]
    with pytest.raises(InvalidInputError, match="^cursor: not a cursor returned by read_graph"):
        await alice.read_graph(cursor=tampered)


async def test_empty_memory_reads_are_normal_answers(alice: MemoryScope) -> None:
    graph = await alice.read_graph()
    assert graph.model_dump() == {
        "entities": [],
        "relations": [],
        "total_entities": 0,
        "next_cursor": None,
    }
    assert (await alice.open_nodes(["x"])).missing == ["x"]


async def test_history_is_a_timeline_on_both_axes(alice: MemoryScope, clock: FakeClock) -> None:
    await _plan_story(alice, clock)
    rel = await alice.relate(
        source="Bob", relation="knows", target="Alice", valid_from="2026-02-01"
    )
    history = await alice.history(" alice ")
    assert history.entity == "Alice"
    assert [(item.kind, item.valid_from) for item in history.timeline] == [
        ("observation", "2026-01-01T00:00:00Z"),
        ("relation", "2026-02-01T00:00:00Z"),
        ("observation", "2026-03-01T00:00:00Z"),
    ]
    assert history.timeline[1].id == rel.relation.id
    assert history.timeline[0].invalidated_at == "2026-06-02T00:00:00Z"


async def test_history_orders_fractional_seconds_correctly(alice: MemoryScope) -> None:
    await alice.remember(entity="A", facts=["later"], valid_from="2026-01-01T00:00:00.5Z")
    await alice.remember(entity="A", facts=["earlier"], valid_from="2026-01-01T00:00:00Z")
    texts = [item.text for item in (await alice.history("A")).timeline]
    assert texts == ["earlier", "later"]


async def test_history_of_an_unknown_entity_names_the_field(alice: MemoryScope) -> None:
    with pytest.raises(InvalidInputError, match="^entity: no entity named 'Ghost'"):
        await alice.history("Ghost")


async def test_interval_edges_on_both_axes(alice: MemoryScope, clock: FakeClock) -> None:
    """Valid time is half-open; a row or closing recorded exactly at known_at counts."""
    fact = (await alice.remember(entity="A", facts=["x"], valid_from="2026-01-01")).added[0]
    clock.set("2026-06-05T00:00:00Z")
    await alice.forget(ids=[fact.id], valid_to="2026-02-01")

    async def seen(as_of: str, known_at: str | None = None) -> list[str]:
        result = await alice.open_nodes(["A"], as_of=as_of, known_at=known_at)
        return [o.id for o in result.entities[0].observations] if result.entities else []

    assert await seen("2026-01-01T00:00:00Z") == [fact.id]
    assert await seen("2025-12-31T23:59:59.999999Z") == []
    assert await seen("2026-01-31T23:59:59.999999Z") == [fact.id]
    assert await seen("2026-02-01T00:00:00Z") == []
    # Known just before the closing was recorded: still open as far as we knew.
    assert await seen("2026-03-01", known_at="2026-06-04T23:59:59.999999Z") == [fact.id]
    assert await seen("2026-03-01", known_at="2026-06-05T00:00:00Z") == []
    # Known exactly when the fact was recorded: it exists.
    assert await seen("2026-01-15", known_at=fact.recorded_at) == [fact.id]
