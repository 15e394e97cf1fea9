from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory import GraphMemory, InvalidInputError, MemoryScope
from memory.search import query_terms
from memory.search_settings import SearchSettings

from .conftest import FakeClock

pytestmark = pytest.mark.anyio


async def _household(alice: MemoryScope) -> None:
    await alice.remember(
        entity="Alice", entity_type="person", facts=["prefers morning sessions", "runs 5k daily"]
    )
    await alice.relate(source="Alice", relation="training for", target="Berlin Marathon")
    await alice.remember(entity="Rex", entity_type="pet", facts=["a beagle who chews shoes"])
    await alice.remember(entity="Acme", entity_type="company", facts=["makes rocket skates"])
    await alice.relate(source="Alice", relation="works at", target="Acme")


def _names(result) -> list[str]:
    return [hit.entity.name for hit in result.hits]


async def test_the_best_match_comes_first_with_score_one(alice: MemoryScope) -> None:
    await _household(alice)
    result = await alice.search_nodes(query="beagle")
    assert _names(result) == ["Rex"]
    (hit,) = result.hits
    assert hit.score == 1.0
    assert hit.entity.model_dump() == {"name": "Rex", "entity_type": "pet"}
    assert [o.text for o in hit.observations] == ["a beagle who chews shoes"]


async def test_scores_are_in_zero_one_and_descending(alice: MemoryScope) -> None:
    await _household(alice)
    result = await alice.search_nodes(query="Alice marathon rocket shoes")
    scores = [hit.score for hit in result.hits]
    assert len(scores) >= 3
    assert scores == sorted(scores, reverse=True)
    assert all(0 < score <= 1 for score in scores) and scores[0] == 1.0


async def test_stemming_finds_other_forms(alice: MemoryScope) -> None:
    await _household(alice)
    assert _names(await alice.search_nodes(query="chewing"))[0] == "Rex"
    assert _names(await alice.search_nodes(query="running"))[0] == "Alice"


async def test_a_name_match_outranks_a_passing_mention(alice: MemoryScope) -> None:
    await alice.remember(entity="Paris", entity_type="city", facts=["capital of France"])
    await alice.remember(entity="Bob", facts=["once visited paris in 2019"])
    assert _names(await alice.search_nodes(query="Paris")) == ["Paris", "Bob"]


async def test_relation_text_and_names_are_searched(alice: MemoryScope) -> None:
    await _household(alice)
    result = await alice.search_nodes(query="what is she training for?")
    assert _names(result)[0] == "Alice"
    assert "Berlin Marathon" in _names(result)
    alice_hit = result.hits[0]
    # Only the relation that matches; the other one is counted.
    assert [(r.relation, r.target) for r in alice_hit.relations] == [
        ("training_for", "Berlin Marathon")
    ]
    assert alice_hit.more_relations == 1


async def test_entity_type_filter(alice: MemoryScope) -> None:
    await _household(alice)
    await alice.remember(entity="Shoe Shop", entity_type="Company", facts=["sells shoes"])
    result = await alice.search_nodes(query="shoes", entity_type="company")
    assert _names(result) == ["Shoe Shop"]


async def test_limit_is_honoured_up_to_fifty(alice: MemoryScope) -> None:
    for i in range(60):
        await alice.remember(entity=f"Item {i}", facts=[f"a red widget number {i}"])
    assert len((await alice.search_nodes(query="widget")).hits) == 10
    assert len((await alice.search_nodes(query="widget", limit=3)).hits) == 3
    assert len((await alice.search_nodes(query="widget", limit=50)).hits) == 50
    with pytest.raises(InvalidInputError, match="^limit: 51 is too large"):
        await alice.search_nodes(query="widget", limit=51)


async def test_closed_facts_are_found_only_with_history_or_in_the_past(
    alice: MemoryScope, clock: FakeClock
) -> None:
    old = await alice.remember(entity="Alice", facts=["lives in Paris"], valid_from="2020-01-01")
    clock.advance()
    await alice.remember(
        entity="Alice", facts=["lives in Rome"], valid_from="2026-01-01", replaces=[old.added[0].id]
    )
    assert (await alice.search_nodes(query="Paris")).hits == []
    past = await alice.search_nodes(query="Paris", as_of="2021-01-01")
    assert [o.text for o in past.hits[0].observations] == ["lives in Paris"]
    history = await alice.search_nodes(query="Paris", include_history=True)
    assert [(o.text, o.current) for o in history.hits[0].observations] == [
        ("lives in Paris", False)
    ]
    assert history.hits[0].more_observations == 1  # lives in Rome
    before = await alice.search_nodes(query="Rome", known_at="2026-06-01T00:00:00Z")
    assert before.hits == []  # Rome was learned one second later


async def test_search_never_crosses_scopes(mem: GraphMemory) -> None:
    alice = mem.scope(app="coach", user="alice")
    bob = mem.scope(app="coach", user="bob")
    other_app = mem.scope(app="diary", user="alice")
    project = mem.scope(app="coach", user="alice", project="secret")
    await bob.remember(entity="Bob", facts=["hides the treasure map"])
    await other_app.remember(entity="Diary", facts=["treasure in the attic"])
    await project.remember(entity="Plan", facts=["treasure hunt next week"])
    assert (await alice.search_nodes(query="treasure")).hits == []
    assert _names(await project.search_nodes(query="treasure")) == ["Plan"]
    assert (await mem.scope(app="coach", user="nobody").search_nodes(query="treasure")).hits == []


async def test_an_empty_result_is_a_normal_answer(alice: MemoryScope) -> None:
    await _household(alice)
    assert (await alice.search_nodes(query="zeppelin")).hits == []
    assert (await alice.search_nodes(query="?!...")).hits == []


@pytest.mark.parametrize(
    "query",
    [
        '"unbalanced rocket',
        "rocket-skates",
        "NOT rocket",
        "rocket AND OR NOT",
        "^rocket",
        "text:rocket",
        "(rocket",
        "rocket)",
        "NEAR(rocket skates)",
        "-rocket",
        "{rocket}",
        "rocket + skates",
        "'rocket'",
    ],
)
async def test_query_syntax_is_plain_text(alice: MemoryScope, query: str) -> None:
    await _household(alice)
    result = await alice.search_nodes(query=query)
    assert _names(result)[:1] == ["Acme"]
    turns = await alice.recall(query=query)
    assert turns.turns == []


async def test_a_star_is_not_a_prefix_operator(alice: MemoryScope) -> None:
    await _household(alice)
    assert (await alice.search_nodes(query="rock*")).hits == []


def test_query_terms_quotes_every_word() -> None:
    # quoted: a word, as the index holds it (lower case, its stem)
    assert query_terms('what is "NEAR(x)" AND y*') == ['"near"', '"x"', '"y"']
    assert query_terms("who is it?") == ['"who"', '"is"', '"it"']  # only stop words: keep them
    assert query_terms("?!") == []


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(query=st.text(min_size=1, max_size=200))
def test_any_text_is_a_safe_query(query: str) -> None:
    """No input raises from FTS5: the query always parses or is refused as input."""
    import anyio

    async def run() -> None:
        async with GraphMemory.open(":memory:") as mem:
            scope = mem.scope(app="a", user="u")
            await scope.remember(entity="Acme", facts=["makes rocket skates"])
            await scope.record_turns(session_id="s", turns=[{"role": "user", "text": "rocket"}])
            for call in (scope.search_nodes, scope.recall):
                try:
                    result = await call(query=query)
                except InvalidInputError as exc:
                    assert str(exc).startswith("query: ")
                else:
                    assert result is not None

    anyio.run(run)


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("", "query: must not be empty"),
        ("  ", "query: must not be blank"),
        ("x" * 1001, "query: 1,001 characters; at most 1,000"),
    ],
)
async def test_query_limits(alice: MemoryScope, query: str, message: str) -> None:
    with pytest.raises(InvalidInputError, match=f"^{message}"):
        await alice.search_nodes(query=query)
    with pytest.raises(InvalidInputError, match=f"^{message}"):
        await alice.recall(query=query)


# Bounded ranking: with `ranked_rows` 3, "tea" (in 6 facts) is a common word and
# "matcha", "green" and "oolong" (in fewer) are rare ones.
THREE_ROWS = SearchSettings(ranked_rows=3, newest_window=2)


async def _teas(alice: MemoryScope) -> None:
    await alice.remember(entity="Matcha", facts=["tea powder, matcha"])
    await alice.remember(entity="Sencha", facts=["green tea leaves"])
    await alice.remember(entity="Gyokuro", facts=["shaded green tea"])
    await alice.remember(entity="Oolong", facts=["oolong tea, half oxidised"])
    await alice.remember(entity="Chai", facts=["spiced tea with milk"])
    await alice.remember(entity="Earl Grey", facts=["black tea with bergamot"])


@pytest.mark.parametrize("search_settings", [THREE_ROWS])
async def test_a_common_word_gives_way_to_the_rare_ones(alice: MemoryScope) -> None:
    await _teas(alice)
    assert _names(await alice.search_nodes(query="matcha tea")) == ["Matcha"]
    # Two rare words fit in the budget together (1 + 2 rows); "tea" does not.
    found = _names(await alice.search_nodes(query="tea oolong green"))
    assert set(found) == {"Oolong", "Sencha", "Gyokuro"}


async def test_the_default_bounds_rank_the_common_word_too(alice: MemoryScope) -> None:
    """The counterpart of the test above: it is the small bound that leaves "tea" out."""
    await _teas(alice)
    assert len(_names(await alice.search_nodes(query="tea oolong green"))) == 6


async def test_only_common_words_rank_rows_with_all_of_them_and_the_newest(
    db_path: Path, clock: FakeClock
) -> None:
    async with GraphMemory.open(db_path, clock=clock, search=THREE_ROWS) as mem:
        alice = mem.scope(app="coach", user="alice")
        await _teas(alice)
        await alice.remember(entity="Genmaicha", facts=["tea with rice"])
        await alice.remember(entity="Hojicha", facts=["roasted tea with rice"])
        await alice.remember(entity="Kukicha", facts=["twig tea with rice"])
        await alice.remember(entity="Rice", facts=["a grain"])
    two_rows = SearchSettings(ranked_rows=2, newest_window=2)
    async with GraphMemory.open(db_path, clock=clock, search=two_rows) as mem:
        alice = mem.scope(app="coach", user="alice")
        # "tea" (9 facts) and "rice" (3 facts and a name) are both common now: the
        # facts with both words all come back (the newest `every_word_window` of them),
        # the oldest too, not only the newest window of 2 of each word.
        names = _names(await alice.search_nodes(query="rice tea"))
        assert {"Genmaicha", "Hojicha", "Kukicha"} <= set(names)
        # One common word alone: the newest rows that have it (a window of 2), grown
        # while they hold fewer entities than asked for.
        assert _names(await alice.search_nodes(query="tea", limit=2)) == ["Kukicha", "Hojicha"]
        assert len(_names(await alice.search_nodes(query="tea"))) == 9


async def test_small_memories_rank_every_word(alice: MemoryScope) -> None:
    await _teas(alice)  # "tea" is in 6 rows: far below the default budget
    names = _names(await alice.search_nodes(query="matcha tea", limit=10))
    assert names[0] == "Matcha" and len(names) == 6


# The first windows hold 2 rows.
@pytest.mark.parametrize("search_settings", [SearchSettings(candidates=2, recall_candidates=2)])
async def test_the_window_grows_past_rows_the_filters_drop(mem: GraphMemory) -> None:
    """Another user's rows, closed rows or a session filter can fill the first windows
    of ranked matches; the match that passes the filters is still found."""
    alice, bob = mem.scope(app="a", user="alice"), mem.scope(app="a", user="bob")
    await alice.remember(entity="Alice", facts=["drinks tea"])
    await alice.record_turns(session_id="s2", turns=[{"role": "user", "text": "tea time"}])
    for i in range(6):
        await bob.remember(entity=f"Bob {i}", facts=["tea tea tea, tea"])
    await alice.record_turns(
        session_id="s1", turns=[{"role": "user", "text": "tea tea tea"} for _ in range(6)]
    )
    assert _names(await alice.search_nodes(query="tea")) == ["Alice"]
    found = await alice.recall(query="tea", session_id="s2")
    assert [turn.text for turn in found.turns] == ["tea time"]


async def test_search_honours_limit_and_entity_type_past_many_matches(alice: MemoryScope) -> None:
    """Found in review: the candidates must be enough for `limit` up to 50, and for a
    type filter applied to them."""
    for i in range(40):
        await alice.remember(entity=f"Short {i}", facts=["tea", "tea tea", "tea tea tea"])
    for i in range(30):
        await alice.remember(entity=f"Long {i}", facts=[f"a long story that mentions tea {i}"])
    await alice.remember(entity="Bob", entity_type="person", facts=["a long note with tea"])
    assert len((await alice.search_nodes(query="tea", limit=50)).hits) == 50
    hits = await alice.search_nodes(query="tea", entity_type="person")
    assert _names(hits) == ["Bob"]


@pytest.mark.parametrize("search_settings", [THREE_ROWS])
async def test_common_words_of_other_users_and_times_hide_no_match(
    mem: GraphMemory, alice: MemoryScope
) -> None:
    """Found in review: when a word is common in the whole file (here: more than 3
    rows, another user's), the newest-rows window must still reach this user's match,
    and one at an earlier `known_at` or in one session."""
    await alice.remember(entity="Alice", facts=["loves green tea"])
    await alice.record_turns(session_id="old", turns=[{"role": "user", "text": "tea time"}])
    bob = mem.scope(app="coach", user="bob")
    for i in range(8):
        await bob.remember(entity=f"Bob {i}", facts=[f"tea number {i}"])
        await bob.record_turns(session_id="s", turns=[{"role": "user", "text": f"tea {i}"}])
    await alice.record_turns(
        session_id="new", turns=[{"role": "user", "text": f"more tea {i}"} for i in range(8)]
    )
    assert _names(await alice.search_nodes(query="tea")) == ["Alice"]
    assert [t.text for t in (await alice.recall(query="tea", session_id="old")).turns] == [
        "tea time"
    ]


async def _apples(scope: MemoryScope, count: int) -> None:
    for i in range(count):
        await scope.remember(entity=f"E{i}", facts=[f"apple {i}"])


async def test_an_entity_of_several_middling_facts_is_not_cut(alice: MemoryScope) -> None:
    """Found in review: with only the best 200 rows kept, an entity whose three facts
    each rank below them, but whose score adds up past every other, was lost."""
    await _apples(alice, 300)
    facts = ["apple pie baked", "apple cider vinegar", "apple orchard visited"]
    await alice.remember(entity="X", facts=facts)
    for limit in (10, 11, 50):
        assert _names(await alice.search_nodes(query="apple", limit=limit))[0] == "X"


async def test_another_users_rows_do_not_hide_a_match(mem: GraphMemory) -> None:
    """Found in review: the window stopped growing once half of it passed the filters,
    so another user's equal rows could push this user's best entity out."""
    u, v = mem.scope(app="a", user="u"), mem.scope(app="a", user="v")
    await _apples(u, 260)
    await u.remember(
        entity="X", facts=["apple pie baked", "apple cider vinegar", "apple orchard visited"]
    )
    await _apples(v, 260)
    assert _names(await u.search_nodes(query="apple", limit=50))[0] == "X"


# The first chunk holds 3 rows.
@pytest.mark.parametrize("search_settings", [SearchSettings(candidates=3)])
async def test_rows_are_read_until_enough_pass_the_filters(mem: GraphMemory) -> None:
    """A bounded query reads its best rows in chunks: when the first chunk has too few
    of this user's rows, more are read, and no more than the best `candidates` that
    pass are kept, as when every row was read at once."""
    alice, bob = mem.scope(app="a", user="alice"), mem.scope(app="a", user="bob")
    # Shorter facts rank higher; the ranks alternate between bob's rows and alice's.
    for k in range(12):
        owner = alice if k % 2 else bob
        await owner.remember(entity=f"E{k}", facts=[" ".join(["tea", *["filler"] * k])])
    # alice's best three of her six rows: E1, E3, E5 (rows 2, 4, 6 of 12).
    assert _names(await alice.search_nodes(query="tea")) == ["E1", "E3", "E5"]
    await alice.forget(entities=["E3"])
    assert _names(await alice.search_nodes(query="tea")) == ["E1", "E5", "E7"]


@pytest.mark.parametrize("search_settings", [SearchSettings(candidates=2)])
async def test_equal_rows_at_the_cut_go_to_the_newest(alice: MemoryScope) -> None:
    for name in ("First", "Second", "Third"):
        await alice.remember(entity=name, facts=["green tea"])
    assert _names(await alice.search_nodes(query="tea")) == ["Third", "Second"]


async def test_facts_of_every_length_rank_shortest_first(alice: MemoryScope) -> None:
    """A row's length comes from FTS5's docsize entry: one byte under 128 tokens (read
    in SQL), more from there (read by the engine's function); both agree."""
    for words in (3, 127, 128, 300):  # newest last: ties would rank it first
        await alice.remember(entity=f"E{words}", facts=["zebra " + "grass " * (words - 1)])
    result = await alice.search_nodes(query="zebra", limit=4)
    assert _names(result) == ["E3", "E127", "E128", "E300"]
    scores = [hit.score for hit in result.hits]
    assert scores == sorted(scores, reverse=True) and len(set(scores)) == 4


@pytest.mark.parametrize("search_settings", [THREE_ROWS])
async def test_filters_that_drop_the_rare_words_rows_do_not_hide_the_common_ones(
    mem: GraphMemory, alice: MemoryScope, clock: FakeClock
) -> None:
    """Found in review: the rows of a query's rarest word were ranked alone, so when the
    filters (another project, a closed fact, another session) dropped them all, the
    visible matches of its other words were not found."""
    await _teas(alice)  # "tea" in 6 facts: common with `ranked_rows` 3
    await mem.scope(app="coach", user="alice", project="p").remember(
        entity="Z", facts=["zebra tea"]
    )
    assert len(_names(await alice.search_nodes(query="zebra tea", limit=10))) == 6
    gone = (await alice.remember(entity="G", facts=["giraffe tea"])).added[0]
    clock.advance()
    await alice.forget(ids=[gone.id])
    assert len(_names(await alice.search_nodes(query="giraffe tea", limit=10))) == 6
    await alice.record_turns(
        session_id="s1", turns=[{"role": "user", "text": f"tea {i}"} for i in range(5)]
    )
    await alice.record_turns(session_id="s2", turns=[{"role": "user", "text": "walrus tea"}])
    found = await alice.recall(query="walrus tea", session_id="s1")
    assert len(found.turns) == 5


@pytest.mark.parametrize("search_settings", [SearchSettings(candidates=3)])
async def test_a_type_filter_looks_past_the_best_candidates(alice: MemoryScope) -> None:
    """Found in review: the type filter came after the cut to the best candidates."""
    await alice.remember(entity="Coffee lover", entity_type="person", facts=["drinks a lot"])
    for i in range(6):  # newer, so the best at equal scores
        await alice.remember(entity=f"Coffee {i}", entity_type="place", facts=["a café"])
    found = await alice.search_nodes(query="coffee", entity_type="person")
    assert _names(found) == ["Coffee lover"]


async def test_words_are_found_as_the_index_folds_them(alice: MemoryScope) -> None:
    """Found in review: the query was casefolded ("ß" -> "ss") before FTS5 folded it its
    own way, so "Hauptstraße" found nothing."""
    await alice.remember(entity="Anna", facts=["lives on the Hauptstraße", "spricht fließend"])
    assert _names(await alice.search_nodes(query="HAUPTSTRASSE? Hauptstraße")) == ["Anna"]
    assert _names(await alice.search_nodes(query="fließend")) == ["Anna"]
