"""DESIGN §7: every limit enforced with an error naming the field; a rejected call
changes nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memory import InvalidInputError, MemoryScope

from .conftest import dump

pytestmark = pytest.mark.anyio

OK_REMEMBER = {"entity": "Alice", "facts": ["likes tea"]}
OK_RELATE = {"source": "Alice", "relation": "knows", "target": "Bob"}

CASES: list[tuple[str, dict[str, Any], str]] = [
    ("remember", {**OK_REMEMBER, "entity": ""}, "entity: must not be empty"),
    ("remember", {**OK_REMEMBER, "entity": " \t "}, "entity: must not be blank"),
    ("remember", {**OK_REMEMBER, "entity": "x" * 201}, "entity: 201 characters; at most 200"),
    ("remember", {**OK_REMEMBER, "entity": "a\x00b"}, "entity: contains a NUL character"),
    ("remember", {**OK_REMEMBER, "entity": "a\ud800"}, "entity: contains an unpaired surrogate"),
    ("remember", {**OK_REMEMBER, "entity": 42}, "entity: must be a string, got int"),
    ("remember", {**OK_REMEMBER, "facts": []}, "facts: needs at least 1 item"),
    ("remember", {**OK_REMEMBER, "facts": ["x"] * 51}, "facts: 51 items; at most 50"),
    ("remember", {**OK_REMEMBER, "facts": ["ok", ""]}, "facts[1]: must not be empty"),
    ("remember", {**OK_REMEMBER, "facts": ["ok", " \n "]}, "facts[1]: must not be blank"),
    (
        "remember",
        {**OK_REMEMBER, "facts": ["x" * 2001]},
        "facts[0]: 2,001 characters; at most 2,000",
    ),
    ("remember", {**OK_REMEMBER, "facts": "likes tea"}, "facts: must be a list"),
    ("remember", {**OK_REMEMBER, "facts": [{"text": "x"}]}, "facts[0]: must be a string, got dict"),
    ("remember", {**OK_REMEMBER, "entity_type": ""}, "entity_type: must not be empty"),
    (
        "remember",
        {**OK_REMEMBER, "entity_type": "t" * 65},
        "entity_type: 65 characters; at most 64",
    ),
    (
        "remember",
        {**OK_REMEMBER, "valid_from": "tomorrow"},
        "valid_from: 'tomorrow' is not a timestamp",
    ),
    ("remember", {**OK_REMEMBER, "valid_from": ""}, "valid_from: '' is not a timestamp"),
    ("remember", {**OK_REMEMBER, "valid_from": 1780306200}, "valid_from: expected an RFC 3339"),
    ("remember", {**OK_REMEMBER, "replaces": ["o_1"] * 101}, "replaces: 101 items; at most 100"),
    ("remember", {**OK_REMEMBER, "replaces": [""]}, "replaces[0]: must not be empty"),
    ("remember", {**OK_REMEMBER, "attribute": "a" * 65}, "attribute: 65 characters; at most 64"),
    ("relate", {**OK_RELATE, "source": ""}, "source: must not be empty"),
    ("relate", {**OK_RELATE, "target": "t" * 201}, "target: 201 characters; at most 200"),
    ("relate", {**OK_RELATE, "relation": ""}, "relation: must not be empty"),
    ("relate", {**OK_RELATE, "relation": "r" * 65}, "relation: 65 characters; at most 64"),
    ("relate", {**OK_RELATE, "relation": "aB" * 32}, "relation: 96 characters once in snake_case"),
    ("relate", {**OK_RELATE, "relation": "->"}, "relation: '->' has no letters or digits"),
    ("relate", {**OK_RELATE, "source_type": ""}, "source_type: must not be empty"),
    ("relate", {**OK_RELATE, "exclusive": "maybe"}, "exclusive: must be true or false"),
    ("relate", {**OK_RELATE, "exclusive": "yes"}, "exclusive: must be true or false"),
    ("relate", {**OK_RELATE, "exclusive": 1}, "exclusive: must be true or false"),
    (
        "relate",
        {**OK_RELATE, "valid_from": "2026-02-30"},
        "valid_from: '2026-02-30' is not a valid",
    ),
    ("forget", {"ids": ["o_1"] * 101}, "ids: 101 items; at most 100"),
    ("forget", {"entities": ["x"] * 101}, "entities: 101 items; at most 100"),
    ("forget", {"ids": ["o_1"], "reason": "r" * 501}, "reason: 501 characters; at most 500"),
    ("forget", {"ids": ["o_1"], "valid_to": "later"}, "valid_to: 'later' is not a timestamp"),
    ("forget", {}, "ids: forget needs at least one"),
    (
        "forget",
        {"ids": ["o_1"] * 60, "entities": ["x"] * 41},
        "ids: 101 ids and names in all; at most 100",
    ),
    ("open_nodes", {"names": []}, "names: needs at least 1 item"),
    ("open_nodes", {"names": ["x"] * 101}, "names: 101 items; at most 100"),
    ("open_nodes", {"names": ["x"], "as_of": "x"}, "as_of: 'x' is not a timestamp"),
    ("open_nodes", {"names": ["x"], "known_at": "x"}, "known_at: 'x' is not a timestamp"),
    ("open_nodes", {"names": ["x"], "include_history": "maybe"}, "include_history: must be true"),
    ("read_graph", {"limit": 0}, "limit: 0 is too small; the minimum is 1"),
    ("read_graph", {"limit": 501}, "limit: 501 is too large; the maximum is 500"),
    ("read_graph", {"limit": "10"}, "limit: must be an integer, got str"),
    ("read_graph", {"limit": True}, "limit: must be an integer, got bool"),
    ("read_graph", {"cursor": ""}, "cursor: must not be empty"),
    ("history", {"entity": ""}, "entity: must not be empty"),
    (
        "record_turns",
        {"session_id": "", "turns": [{"role": "u", "text": "x"}]},
        "session_id: must not be empty",
    ),
]


@pytest.mark.parametrize(("operation", "kwargs", "message"), CASES)
async def test_bad_input_names_the_field_and_changes_nothing(
    alice: MemoryScope, db_path: Path, operation: str, kwargs: dict[str, Any], message: str
) -> None:
    await alice.remember(entity="Alice", facts=["already here"])
    await alice.relate(source="Alice", relation="knows", target="Bob")
    before = dump(db_path)
    with pytest.raises(InvalidInputError) as caught:
        await getattr(alice, operation)(**kwargs)
    assert str(caught.value).startswith(message)
    assert isinstance(caught.value, ValueError)
    assert dump(db_path) == before


async def test_text_at_the_limits_is_accepted(alice: MemoryScope) -> None:
    result = await alice.remember(
        entity="e" * 200,
        entity_type="t" * 64,
        facts=["f" * 2000] + [f"fact {i}" for i in range(49)],
        attribute="a" * 64,
    )
    assert len(result.added) == 50
    await alice.relate(source="s" * 200, relation="r" * 64, target="x")
    await alice.forget(ids=["o_x"] * 50, entities=["y"] * 50, reason="r" * 500)
    assert (await alice.read_graph(limit=500)).total_entities == 3
    await alice.record_turns(
        session_id="s" * 200, turns=[{"role": "u", "text": "t" * 20_000}] * 200
    )


async def test_memory_text_keeps_newlines_and_unicode(alice: MemoryScope) -> None:
    text = "line one\nline two — ünïcødé 🎉 \t ok"
    result = await alice.remember(entity="Zoë", facts=[text])
    assert result.added[0].text == text
    opened = await alice.open_nodes(["ZOË"])
    assert opened.entities[0].name == "Zoë"
