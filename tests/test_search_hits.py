"""DESIGN §3, "A search answers the question": each hit carries the entity's facts that
best answer the query, best first, bounded by facts_per_hit, with counts of the rest."""

from __future__ import annotations

import pytest

from memory import GraphMemory, InvalidInputError, MemoryScope

from .conftest import FakeClock

pytestmark = pytest.mark.anyio


def _texts(hit) -> list[str]:
    return [o.text for o in hit.observations]


async def _diary(alice: MemoryScope, facts: int = 30) -> None:
    await alice.remember(
        entity="Alice",
        entity_type="person",
        facts=[f"note {i} about the weather in spring" for i in range(facts)],
    )


async def test_the_fact_that_answers_comes_first_even_when_added_last(
    alice: MemoryScope,
) -> None:
    await _diary(alice)
    await alice.remember(entity="Alice", facts=["her sister Maria lives in Lisbon"])
    (hit,) = (await alice.search_nodes(query="where does her sister live?")).hits
    assert _texts(hit) == ["her sister Maria lives in Lisbon"]
    assert hit.more_observations == 30


async def test_facts_are_best_first_and_bounded_by_facts_per_hit(alice: MemoryScope) -> None:
    await alice.remember(
        entity="Alice",
        facts=[
            "likes green tea in the morning",
            "tea",  # shortest: the best match of one word
            "once had tea with the mayor of a small town near the coast",
            "grows tomatoes",
        ],
    )
    (hit,) = (await alice.search_nodes(query="tea", facts_per_hit=2)).hits
    assert _texts(hit) == ["tea", "likes green tea in the morning"]
    assert hit.more_observations == 2  # one more about tea, and the tomatoes
    (hit,) = (await alice.search_nodes(query="tea")).hits  # default: 5
    assert len(hit.observations) == 3 and hit.more_observations == 1


async def test_facts_per_hit_is_checked(alice: MemoryScope) -> None:
    for bad, message in ((0, "0 is too small"), (21, "21 is too large"), ("3", "must be an")):
        with pytest.raises(InvalidInputError, match="^facts_per_hit: " + message):
            await alice.search_nodes(query="tea", facts_per_hit=bad)
    await alice.remember(entity="A", facts=[f"tea {i}" for i in range(25)])
    (hit,) = (await alice.search_nodes(query="tea", facts_per_hit=20)).hits
    assert len(hit.observations) == 20 and hit.more_observations == 5


async def test_a_hit_found_by_its_name_shows_its_newest_current_facts(
    alice: MemoryScope, clock: FakeClock
) -> None:
    for i in range(8):
        clock.advance()
        await alice.remember(entity="Rex", entity_type="pet", facts=[f"fact {i}"])
    closed = (await alice.remember(entity="Rex", facts=["newest but closed"])).added[0]
    await alice.forget(ids=[closed.id])
    for i in range(7):
        await alice.relate(source="Rex", relation=f"friend {i}", target=f"Dog {i}")
    (hit,) = (await alice.search_nodes(query="rex", facts_per_hit=3)).hits
    assert _texts(hit) == ["fact 7", "fact 6", "fact 5"]
    assert hit.more_observations == 5
    assert [r.target for r in hit.relations] == ["Dog 6", "Dog 5", "Dog 4"]
    assert hit.more_relations == 4


async def test_only_matching_relations_are_shown_and_the_rest_counted(
    alice: MemoryScope,
) -> None:
    await alice.remember(entity="Alice", facts=["plays chess"])
    await alice.relate(source="Alice", relation="works at", target="Acme")
    for i in range(3):
        await alice.relate(source="Alice", relation="knows", target=f"Friend {i}")
    (hit,) = [h for h in (await alice.search_nodes(query="chess")).hits if h.entity.name == "Alice"]
    assert hit.relations == [] and hit.more_relations == 4
    hits = (await alice.search_nodes(query="where does she work")).hits
    alice_hit = next(h for h in hits if h.entity.name == "Alice")
    assert [(r.relation, r.target) for r in alice_hit.relations] == [("works_at", "Acme")]
    assert alice_hit.more_relations == 3


async def test_a_relation_to_an_entity_found_by_name_matches(alice: MemoryScope) -> None:
    await alice.remember(entity="Alice", facts=["plays chess", "reads novels"])
    await alice.relate(source="Alice", relation="knows", target="Bob")
    await alice.relate(source="Alice", relation="works at", target="Acme")
    await alice.remember(entity="Acme", facts=["makes rocket skates"])
    hits = (await alice.search_nodes(query="Acme chess")).hits
    alice_hit = next(h for h in hits if h.entity.name == "Alice")
    assert _texts(alice_hit) == ["plays chess"]
    assert [r.target for r in alice_hit.relations] == ["Acme"]


async def test_time_and_history_apply_to_the_bounded_facts(
    alice: MemoryScope, clock: FakeClock
) -> None:
    old = await alice.remember(entity="Alice", facts=["lives in Paris"], valid_from="2020-01-01")
    await alice.remember(
        entity="Alice",
        facts=[f"visited Paris in {y}" for y in range(2010, 2016)],
        valid_from="2016-01-01",
    )
    clock.advance()
    await alice.remember(
        entity="Alice", facts=["lives in Rome"], valid_from="2026-01-01", replaces=[old.added[0].id]
    )
    now = (await alice.search_nodes(query="lives", facts_per_hit=3)).hits[0]
    assert _texts(now) == ["lives in Rome"] and now.more_observations == 6
    past = (await alice.search_nodes(query="lives", as_of="2021-01-01")).hits[0]
    assert _texts(past) == ["lives in Paris"]
    assert past.more_observations == 6  # Rome was not yet true
    history = (await alice.search_nodes(query="lives", include_history=True)).hits[0]
    assert sorted((o.text, o.current) for o in history.observations) == [
        ("lives in Paris", False),
        ("lives in Rome", True),
    ]
    assert history.more_observations == 6
    before = (await alice.search_nodes(query="lives", known_at="2026-06-01T00:00:00Z")).hits[0]
    assert _texts(before) == ["lives in Paris"]  # Rome was learned one second later
    assert before.observations[0].current and before.observations[0].valid_to is None


async def test_hits_are_ranked_by_their_best_facts_and_names(alice: MemoryScope) -> None:
    await alice.remember(entity="Bob", facts=["has a cat", "likes jazz", "owns a boat"])
    await alice.remember(entity="Carol", facts=["sails a boat every summer on the lake"])
    await alice.remember(entity="Boat Club", facts=["meets on Fridays"])
    names = [h.entity.name for h in (await alice.search_nodes(query="boat")).hits]
    assert names[0] == "Boat Club"  # the name says most
    assert set(names[1:]) == {"Bob", "Carol"}


async def test_the_result_stays_small_however_many_facts_an_entity_has(
    alice: MemoryScope,
) -> None:
    for start in range(0, 500, 50):
        await alice.remember(
            entity="Alice",
            facts=[f"went running on day {i} of the year" for i in range(start, start + 50)],
        )
    result = await alice.search_nodes(query="running day", limit=10)
    (hit,) = result.hits
    assert len(hit.observations) == 5 and hit.more_observations == 495
    assert len(result.model_dump_json()) < 2_000


async def test_isolation_and_cost_follow_the_scope_among_many_users(
    mem: GraphMemory, tmp_path
) -> None:
    """Thousands of other users' rows hold the same words; this user's results, scores
    included, are exactly what they are with this user alone in a file: the ranking's
    statistics are this user's own (and so is its cost)."""

    async def fill(scope: MemoryScope) -> None:
        await scope.remember(entity="Alice", facts=["drinks green tea", "hates coffee"])
        await scope.remember(entity="Tea Shop", facts=["sells tea and cakes"])
        await scope.record_turns(
            session_id="s", turns=[{"role": "user", "text": "I love tea in the garden"}]
        )

    for user in range(40):
        other = mem.scope(app="coach", user=f"user {user}")
        for batch in range(2):
            await other.remember(
                entity=f"E{batch}", facts=[f"tea garden coffee {user} {i}" for i in range(50)]
            )
        await other.record_turns(
            session_id="s",
            turns=[{"role": "user", "text": f"tea and coffee {i}"} for i in range(50)],
        )
    alice = mem.scope(app="coach", user="alice")
    await fill(alice)
    async with GraphMemory.open(tmp_path / "alone.db") as alone_mem:
        alone = alone_mem.scope(app="coach", user="alice")
        await fill(alone)
        for query in ("tea", "green tea garden", "coffee"):
            shared, single = (
                await alice.search_nodes(query=query),
                await alone.search_nodes(query=query),
            )
            assert [(h.entity.name, h.score, _texts(h)) for h in shared.hits] == [
                (h.entity.name, h.score, _texts(h)) for h in single.hits
            ]
            turns = [(t.text, t.score) for t in (await alice.recall(query=query)).turns]
            assert turns == [(t.text, t.score) for t in (await alone.recall(query=query)).turns]
    assert "user" not in str((await alice.search_nodes(query="tea garden coffee")).model_dump())
