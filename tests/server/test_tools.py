"""Every tool through an in-process MCP client: results, schemas, annotations, errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from mcp import Client

from memory import GraphMemory, models
from server import Settings, build_server
from server.tools import TOOLS, build_tools

pytestmark = pytest.mark.anyio

READS = {"search_nodes", "open_nodes", "read_graph", "profile_card", "history", "recall"}
WRITES = {"remember", "relate", "forget", "record_turns"}


async def call(client: Client, name: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(name, arguments)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    assert json.loads(result.content[0].text) == result.structured_content
    return result.structured_content


async def error(client: Client, name: str, **arguments: Any) -> str:
    result = await client.call_tool(name, arguments)
    assert result.is_error
    text = result.content[0].text
    assert "Traceback" not in text
    return text


async def test_the_ten_tools_with_schemas_and_annotations(client: Client) -> None:
    listed = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(listed) == READS | WRITES
    for fn, arguments, _ in TOOLS:
        tool = listed[fn.__name__]
        assert tool.input_schema == arguments.model_json_schema()
        assert tool.output_schema is not None
        assert tool.description and len(tool.description) > 80
        assert tool.annotations.read_only_hint is (tool.name in READS)
        if tool.name in WRITES:
            assert tool.annotations.destructive_hint is False
    assert listed["remember"].annotations.idempotent_hint is True
    assert listed["record_turns"].annotations.idempotent_hint is False
    entity = listed["remember"].input_schema["properties"]["entity"]
    assert (entity["minLength"], entity["maxLength"]) == (1, 200)
    limit = listed["read_graph"].input_schema["properties"]["limit"]
    assert (limit["minimum"], limit["maximum"]) == (1, 500)


async def test_every_tool_round_trips_structured_results(client: Client) -> None:
    listed = {tool.name: tool for tool in (await client.list_tools()).tools}
    results = {}
    results["remember"] = await call(
        client, "remember", entity="Alice", entity_type="person", facts=["likes tea"],
        attribute="drink", valid_from="2026-01-01",
    )  # fmt: skip
    fact_id = results["remember"]["added"][0]["id"]
    results["relate"] = await call(
        client, "relate", source="Alice", relation="works at", target="Acme", exclusive=True
    )
    results["search_nodes"] = await call(client, "search_nodes", query="tea", limit=5)
    results["open_nodes"] = await call(client, "open_nodes", names=["alice"])
    results["read_graph"] = await call(client, "read_graph", limit=1)
    results["profile_card"] = await call(client, "profile_card", max_chars=500)
    results["history"] = await call(client, "history", entity="Alice")
    results["record_turns"] = await call(
        client, "record_turns", session_id="s1", turns=[{"role": "user", "text": "I love tea"}]
    )
    results["recall"] = await call(client, "recall", query="tea")
    results["forget"] = await call(client, "forget", ids=[fact_id], reason="asked")
    for name, structured in results.items():
        jsonschema.validate(structured, listed[name].output_schema)
    assert results["search_nodes"]["hits"][0]["entity"]["name"] == "Alice"
    assert results["relate"]["relation"]["relation"] == "works_at"
    assert results["read_graph"]["next_cursor"] is not None
    assert results["profile_card"]["text"].startswith("[Known about the user]")
    assert results["recall"]["turns"][0]["text"] == "I love tea"
    assert results["forget"]["invalidated"] == [fact_id]


async def test_structured_content_equals_the_engine_result(client: Client, tmp_path) -> None:
    from memory import GraphMemory

    await call(client, "remember", entity="Alice", facts=["likes tea"])
    over_mcp = await call(client, "open_nodes", names=["Alice"], known_at="2030-01-01")
    async with GraphMemory.open(tmp_path / "memory.db") as mem:
        direct = await mem.scope(app="coach", user="alice").open_nodes(
            ["Alice"], known_at="2030-01-01"
        )
    assert over_mcp == direct.model_dump(mode="json")
    assert models.OpenNodesResult.model_validate(over_mcp) == direct


BAD = [
    ("remember", {"entity": "", "facts": ["x"]}, "entity: must not be empty"),
    ("remember", {"facts": ["x"]}, "entity: is required"),
    ("record_turns", {"session_id": "s"}, "turns: is required"),
    (
        "relate",
        {"source": "A", "relation": "r", "target": "B", "exclusive": "yes"},
        "exclusive: must be true or false",
    ),
    (
        "remember",
        {"entity": "A", "facts": ["x" * 2001]},
        "facts[0]: 2,001 characters; at most 2,000",
    ),
    ("remember", {"entity": "A", "facts": ["x"] * 51}, "facts: 51 items; at most 50"),
    ("remember", {"entity": "A", "facts": "x"}, "facts: must be a list"),
    (
        "remember",
        {"entity": "A", "facts": ["x"], "valid_from": "soon"},
        "valid_from: 'soon' is not a timestamp",
    ),
    (
        "remember",
        {"entity": "A", "facts": ["x"], "replaces": ["o_nope"]},
        "replaces[0]: no observation with id 'o_nope'",
    ),
    (
        "remember",
        {"entity": "A", "facts": ["x"], "user": "bob"},
        "user: is not an argument of remember",
    ),
    (
        "relate",
        {"source": "A", "relation": "!!", "target": "B"},
        "relation: '!!' has no letters or digits",
    ),
    (
        "relate",
        {"source": "A", "relation": "r" * 65, "target": "B"},
        "relation: 65 characters; at most 64",
    ),
    ("forget", {}, "ids: forget needs at least one"),
    ("forget", {"ids": ["x"] * 101}, "ids: 101 items; at most 100"),
    ("search_nodes", {"query": ""}, "query: must not be empty"),
    ("search_nodes", {"query": "x", "limit": 51}, "limit: 51 is too large; the maximum is 50"),
    ("search_nodes", {"query": "x", "limit": "5"}, "limit: must be an integer"),
    ("open_nodes", {"names": []}, "names: needs at least 1 item"),
    ("read_graph", {"limit": 501}, "limit: 501 is too large; the maximum is 500"),
    ("read_graph", {"cursor": "forged"}, "cursor: not a cursor returned by read_graph"),
    ("profile_card", {"max_chars": 50}, "max_chars: 50 is too small; the minimum is 100"),
    ("history", {"entity": "Nobody"}, "entity: no entity named 'Nobody'"),
    ("record_turns", {"session_id": "s", "turns": []}, "turns: needs at least 1 item"),
    (
        "record_turns",
        {"session_id": "s", "turns": [{"role": "u", "text": " "}]},
        "turns[0].text: must not be blank",
    ),
    ("recall", {"query": "x", "after": "yesterday"}, "after: 'yesterday' is not a timestamp"),
    ("recall", {"query": "x" * 1001}, "query: 1,001 characters; at most 1,000"),
]


@pytest.mark.parametrize(("name", "arguments", "message"), BAD)
async def test_bad_input_is_a_tool_error_with_the_engines_message(
    client: Client, name: str, arguments: dict[str, Any], message: str
) -> None:
    await call(client, "remember", entity="Alice", facts=["likes tea"])
    before = await call(client, "read_graph", include_history=True)
    text = await error(client, name, **arguments)
    assert text == message or text.startswith(message)  # the engine's message, unwrapped
    assert await call(client, "read_graph", include_history=True) == before


async def test_an_unknown_tool_is_an_error(client: Client) -> None:
    assert "unknown" in (await error(client, "delete_everything")).lower()


async def test_an_unexpected_failure_is_a_short_message_without_internals(
    client: Client, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from memory import MemoryScope

    async def broken(self, **_: Any) -> None:
        raise RuntimeError("internal detail: table turn is on fire")

    monkeypatch.setattr(MemoryScope, "recall", broken)
    text = await error(client, "recall", query="x")
    assert text == "Error executing tool recall"
    assert "on fire" in caplog.text  # logged on the server side, with its traceback


async def test_structured_results_are_the_engine_results_dumped_and_not_validated_again(
    tmp_path: Path,
) -> None:
    """`structuredContent` is the engine's result model dumped, so it is valid by
    construction: the output schema is advertised, and the SDK does not validate each
    result against it again (clients do)."""
    for tool in build_tools():
        assert tool.output_schema is not None and tool.fn_metadata.output_model is None
    settings = Settings(db=str(tmp_path / "memory.db"), app="coach", user="alice")
    async with (
        GraphMemory.open(settings.db) as memory,
        Client(build_server(settings, memory)) as client,
    ):
        scope = memory.scope(app="coach", user="alice")
        await call(client, "remember", entity="Alice", facts=["likes tea", "lives in Oslo"])
        await call(client, "relate", source="Alice", relation="knows", target="Bob")
        for name, arguments in [
            ("search_nodes", {"query": "tea", "limit": 5}),
            ("open_nodes", {"names": ["Alice", "Bob"]}),
            ("profile_card", {}),
            ("history", {"entity": "Alice"}),
        ]:
            expected = (await getattr(scope, name)(**arguments)).model_dump(mode="json")
            assert await call(client, name, **arguments) == expected
