from __future__ import annotations

import pytest

from memory import GraphMemory, MemoryScope
from memory.search import session_scores
from memory.search_settings import SearchSettings

pytestmark = pytest.mark.anyio


async def _conversations(alice: MemoryScope) -> dict[str, list[str]]:
    ids = {}
    ids["s1"] = (
        await alice.record_turns(
            session_id="s1",
            turns=[
                {"role": "user", "text": "My beagle Rex chewed my new shoes", "at": "2026-05-01"},
                {
                    "role": "assistant",
                    "text": "Beagles love chewing; try a chew toy",
                    "at": "2026-05-01",
                },
            ],
        )
    ).ids
    ids["s2"] = (
        await alice.record_turns(
            session_id="s2",
            turns=[
                {"role": "user", "text": "I booked a flight to Lisbon", "at": "2026-05-10"},
                {
                    "role": "assistant",
                    "text": "Lisbon is lovely in spring",
                    "at": "2026-05-10T00:01:00Z",
                },
            ],
        )
    ).ids
    ids["s3"] = (
        await alice.record_turns(
            session_id="s3",
            turns=[{"role": "user", "text": "Rex the beagle ran away today", "at": "2026-05-20"}],
        )
    ).ids
    return ids


async def test_recall_ranks_matching_turns(alice: MemoryScope) -> None:
    await _conversations(alice)
    result = await alice.recall(query="Lisbon flight")
    first = result.turns[0]
    assert first.model_dump() == {
        "id": first.id,
        "session_id": "s2",
        "role": "user",
        "text": "I booked a flight to Lisbon",
        "at": "2026-05-10T00:00:00Z",
        "score": 1.0,
    }
    assert [t.session_id for t in result.turns] == ["s2", "s2"]
    assert result.turns[1].score < 1.0


async def test_recall_filters(alice: MemoryScope) -> None:
    ids = await _conversations(alice)
    everything = await alice.recall(query="beagle")
    assert {t.session_id for t in everything.turns} == {"s1", "s3"}
    only = await alice.recall(query="beagle", session_id="s3")
    assert [t.id for t in only.turns] == ids["s3"]
    after = await alice.recall(query="beagle", after="2026-05-20")  # inclusive
    assert [t.id for t in after.turns] == ids["s3"]
    before = await alice.recall(query="beagle", before="2026-05-20")  # exclusive
    assert {t.session_id for t in before.turns} == {"s1"}
    window = await alice.recall(query="beagle", after="2026-05-02", before="2026-05-20")
    assert window.turns == []


async def test_recall_limit(alice: MemoryScope) -> None:
    for i in range(30):
        await alice.record_turns(
            session_id=f"s{i}", turns=[{"role": "user", "text": f"the weather today is sunny {i}"}]
        )
    assert len((await alice.recall(query="weather")).turns) == 10
    assert len((await alice.recall(query="weather", limit=25)).turns) == 25


async def test_recall_never_crosses_scopes(mem: GraphMemory) -> None:
    alice = mem.scope(app="coach", user="alice")
    bob = mem.scope(app="coach", user="bob")
    project = mem.scope(app="coach", user="alice", project="p")
    await bob.record_turns(
        session_id="s", turns=[{"role": "user", "text": "my password is swordfish"}]
    )
    await project.record_turns(
        session_id="s", turns=[{"role": "user", "text": "swordfish project"}]
    )
    assert (await alice.recall(query="swordfish")).turns == []
    assert [t.text for t in (await project.recall(query="swordfish")).turns] == [
        "swordfish project"
    ]
    await alice.record_turns(session_id="g", turns=[{"role": "user", "text": "global swordfish"}])
    assert {t.text for t in (await project.recall(query="swordfish")).turns} == {
        "swordfish project",
        "global swordfish",
    }


def test_a_session_that_keeps_returning_to_the_subject_ranks_higher() -> None:
    scores = session_scores([(1, "a", 2.0), (2, "b", 1.9), (3, "b", 1.0), (4, "b", 1.0)])
    assert scores[1] == 2.0
    assert scores[2] == pytest.approx(1.9 + 0.25 * 2.0)
    assert sorted(scores, key=lambda seq: -scores[seq])[0] == 2


@pytest.mark.parametrize("search_settings", [SearchSettings(ranked_rows=3)])
async def test_recall_ranks_the_rare_words_of_a_large_memory(alice: MemoryScope) -> None:
    turns = [{"role": "user", "text": f"coffee talk number {i}"} for i in range(6)]
    turns.append({"role": "user", "text": "coffee in Lisbon was great"})
    ids = (await alice.record_turns(session_id="s", turns=turns)).ids
    found = await alice.recall(query="Lisbon coffee")
    assert [turn.id for turn in found.turns] == [ids[-1]]  # "coffee" (7 turns) is common
    newest = await alice.recall(query="coffee", limit=50)
    assert {turn.id for turn in newest.turns} <= set(ids) and newest.turns
