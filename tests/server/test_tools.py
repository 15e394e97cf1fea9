"""Every tool through an in-process MCP client: results, schemas, annotations, errors."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from mcp import Client

from memory import GraphMemory, models
from memory.operations import OPERATIONS
from server import Settings, build_server
from server.text import render
from server.tools import build_tools

pytestmark = pytest.mark.anyio

# tools/list as bench/sizes.py measures it: json.dumps of every listed tool.
TOOLS_LIST_BYTES = 19_000
READS = {"search_nodes", "open_nodes", "read_graph", "profile_card", "history", "recall"}
WRITES = {"remember", "relate", "forget", "record_turns"}


async def call(client: Client, name: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(name, arguments)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    # The text block renders the very result the structured content holds.
    model = OPERATIONS[name].result
    (block,) = result.content
    assert block.text == render(model.model_validate(result.structured_content))
    return result.structured_content


async def error(client: Client, name: str, **arguments: Any) -> str:
    result = await client.call_tool(name, arguments)
    assert result.is_error
    text = result.content[0].text
    assert "Traceback" not in text
    return text


LIMITS = {"minLength", "maxLength", "minimum", "maximum", "minItems", "maxItems"}


def limits(schema: dict[str, Any], path: str = "", defs: Any = None) -> set[tuple[str, str, Any]]:
    """Every (field path, limit, value) in `schema`, refs and anyOfs followed."""
    defs = schema.get("$defs", {}) if defs is None else defs
    if "$ref" in schema:
        return limits(defs[schema["$ref"].rsplit("/", 1)[-1]], path, defs)
    found = {(path, key, schema[key]) for key in LIMITS & set(schema)}
    for option in schema.get("anyOf", []):
        found |= limits(option, path, defs)
    for name, field in schema.get("properties", {}).items():
        found |= limits(field, f"{path}.{name}", defs)
    if "items" in schema:
        found |= limits(schema["items"], f"{path}[]", defs)
    return found


async def test_the_ten_tools_with_schemas_and_annotations(client: Client) -> None:
    listed = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(listed) == READS | WRITES
    for name, operation in OPERATIONS.items():
        tool = listed[name]
        engine_schema = operation.arguments.model_json_schema()
        assert set(tool.input_schema["properties"]) == set(engine_schema["properties"])
        assert tool.input_schema.get("required") == engine_schema.get("required")
        assert limits(tool.input_schema) == limits(engine_schema), tool.name
        assert tool.input_schema["additionalProperties"] is False
        assert '"title"' not in json.dumps([tool.input_schema, tool.output_schema])
        assert tool.output_schema is not None
        assert tool.description and len(tool.description) > 80
        assert bool(tool.annotations.read_only_hint) is (tool.name in READS)  # default: false
        if tool.name in WRITES:
            assert tool.annotations.destructive_hint is False
    assert listed["remember"].annotations.idempotent_hint is True
    assert not listed["record_turns"].annotations.idempotent_hint  # default: false
    entity = listed["remember"].input_schema["properties"]["entity"]
    assert (entity["minLength"], entity["maxLength"]) == (1, 200)
    limit = listed["read_graph"].input_schema["properties"]["limit"]
    assert (limit["minimum"], limit["maximum"], limit["default"]) == (1, 500, 50)
    per_hit = listed["search_nodes"].input_schema["properties"]["facts_per_hit"]
    assert (per_hit["minimum"], per_hit["maximum"], per_hit["default"]) == (1, 20, 5)
    # An optional argument is its plain type, to be left out, never "or null".
    as_of = listed["search_nodes"].input_schema["properties"]["as_of"]
    assert as_of["type"] == "string" and "YYYY-MM-DD" in as_of["description"]
    assert "anyOf" not in json.dumps([tool.input_schema for tool in listed.values()])


async def test_tools_list_stays_small(client: Client) -> None:
    """tools/list is read whole by clients and often by the model: ~31 kB before
    titles and output prose went; this bound keeps it from growing back."""
    tools = (await client.list_tools()).tools
    dumped = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]
    assert len(json.dumps(dumped)) <= TOOLS_LIST_BYTES


def object_schemas(schema: Any, root: Any = None) -> Iterator[dict[str, Any]]:
    """Every object schema in `schema`, with what its `allOf` references brings in
    (the time fields an output schema writes once under `$defs`)."""
    root = schema if root is None else root
    if isinstance(schema, dict):
        if "properties" in schema:
            merged = {
                "properties": dict(schema["properties"]),
                "required": list(schema.get("required", [])),
            }
            for part in schema.get("allOf", []):
                shared = root["$defs"][part["$ref"].rsplit("/", 1)[-1]]
                merged["properties"].update(shared["properties"])
                merged["required"] += shared.get("required", [])
            yield merged
        for value in schema.values():
            yield from object_schemas(value, root)
    elif isinstance(schema, list):
        for item in schema:
            yield from object_schemas(item, root)


def nullable(schema: Any, path: str = "") -> Iterator[str]:
    if isinstance(schema, dict):
        kind = schema.get("type")
        if kind == "null" or (isinstance(kind, list) and "null" in kind):
            yield path
        for key, value in schema.items():
            yield from nullable(value, f"{path}/{key}")
    elif isinstance(schema, list):
        for index, item in enumerate(schema):
            yield from nullable(item, f"{path}/{index}")


async def test_output_schemas_require_exactly_what_every_result_carries(client: Client) -> None:
    listed = {tool.name: tool for tool in (await client.list_tools()).tools}
    left_out_when_null = {"attribute", "valid_to", "invalidated_at", "reason"}
    always = {"id", "valid_from", "recorded_at", "current"}
    rows = 0
    for tool in listed.values():
        for schema in object_schemas(tool.output_schema):
            if not always <= set(schema["properties"]):
                continue
            rows += 1
            assert always <= set(schema["required"]), tool.name
            assert not left_out_when_null & set(schema["required"]), tool.name
            for name in left_out_when_null & set(schema["properties"]):
                assert schema["properties"][name] == {"type": "string"}, (tool.name, name)
    assert rows == 10  # the observation and relation schemas of the six tools with them
    # Null is sent in one place only: the last page's next_cursor.
    everywhere = {name: list(nullable(tool.output_schema)) for name, tool in listed.items()}
    assert {name: paths for name, paths in everywhere.items() if paths} == {
        "read_graph": ["/properties/next_cursor"]
    }
    timeline = listed["history"].output_schema["properties"]["timeline"]["items"]["oneOf"]
    assert all("kind" in item["required"] for item in timeline)
    assert listed["read_graph"].output_schema["required"] == [
        "entities",
        "relations",
        "total_entities",
        "next_cursor",
    ]


async def test_every_tool_round_trips_structured_results(client: Client) -> None:
    listed = {tool.name: tool for tool in (await client.list_tools()).tools}
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in listed}

    async def keep(name: str, **arguments: Any) -> dict[str, Any]:
        results[name].append(await call(client, name, **arguments))
        return results[name][-1]

    first = await keep(
        "remember",
        entity="Alice",
        entity_type="person",
        facts=["likes tea"],
        attribute="drink",
        valid_from="2026-01-01",
    )
    fact_id = first["added"][0]["id"]
    await keep("remember", entity="Alice", facts=["likes coffee"], attribute="drink")
    await keep("remember", entity="Alice", facts=["likes coffee", "runs"])
    await keep("relate", source="Alice", relation="works at", target="Acme", exclusive=True)
    await keep("relate", source="Alice", relation="works at", target="Beta", exclusive=True)
    await keep("search_nodes", query="coffee", limit=5)
    await keep("search_nodes", query="coffee Beta", facts_per_hit=1, include_history=True)
    await keep("open_nodes", names=["alice", "Nobody"], include_history=True)
    await keep("read_graph", limit=1)
    await keep("read_graph", include_history=True)
    await keep("profile_card", max_chars=500)
    await keep("history", entity="Alice")
    await keep("record_turns", session_id="s1", turns=[{"role": "user", "text": "I love tea"}])
    await keep("recall", query="tea")
    await keep("forget", ids=[fact_id, "o_nope"], reason="asked")
    await keep("forget", entities=["Alice"], reason="moved away", valid_to="2030-01-01")
    for name, structured in results.items():
        assert structured, name
        for one in structured:
            jsonschema.validate(one, listed[name].output_schema)
    timeline = results["history"][0]["timeline"]
    closed = next(item for item in timeline if "valid_to" in item and "reason" in item)
    assert closed["kind"] == "observation" and closed["current"] is False
    history_schema = listed["history"].output_schema
    with pytest.raises(jsonschema.ValidationError):  # left out, never null
        jsonschema.validate(
            {**results["history"][0], "timeline": [{**closed, "attribute": None}]}, history_schema
        )
    with pytest.raises(jsonschema.ValidationError):  # always there
        jsonschema.validate(
            {
                "entity": "Alice",
                "timeline": [{key: value for key, value in closed.items() if key != "recorded_at"}],
            },
            history_schema,
        )
    assert results["search_nodes"][0]["hits"][0]["entity"]["name"] == "Alice"
    assert results["relate"][0]["relation"]["relation"] == "works_at"
    assert results["read_graph"][0]["next_cursor"] is not None
    assert results["read_graph"][1]["next_cursor"] is None
    assert results["profile_card"][0]["text"].startswith("[Known about the user]")
    assert results["recall"][0]["turns"][0]["text"] == "I love tea"
    assert results["forget"][0]["already_invalid"] == [fact_id]  # closed by "likes coffee"
    assert results["forget"][0]["not_found"] == ["o_nope"]


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


async def test_search_nodes_bounds_each_hit_by_facts_per_hit(client: Client, tmp_path) -> None:
    facts = [f"training note {n}: ran {n} km by the river" for n in range(6)]
    await call(client, "remember", entity="Alice", facts=facts)
    for knows in ("Bob", "Carol", "Dan"):
        await call(client, "relate", source="Alice", relation="runs with", target=knows)
    for per_hit, shown in [(2, 2), (5, 5), (None, 5), (20, 6)]:
        arguments = {"query": "river training Alice"}
        if per_hit is not None:
            arguments["facts_per_hit"] = per_hit
        (hit,) = (await call(client, "search_nodes", **arguments))["hits"]
        # Which facts the engine picks is its own business; how many it shows is not.
        assert len(hit["observations"]) == shown
        assert len(hit["observations"]) + hit["more_observations"] == 6
        assert len(hit["relations"]) <= min(shown, 3)
        assert len(hit["relations"]) + hit["more_relations"] == 3
    async with GraphMemory.open(tmp_path / "memory.db") as mem:
        direct = await mem.scope(app="coach", user="alice").search_nodes(
            "river training Alice", facts_per_hit=2
        )
    over_mcp = await call(client, "search_nodes", query="river training Alice", facts_per_hit=2)
    assert over_mcp == direct.model_dump(mode="json")


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
    (
        "search_nodes",
        {"query": "x", "facts_per_hit": 21},
        "facts_per_hit: 21 is too large; the maximum is 20",
    ),
    ("search_nodes", {"query": "x", "facts_per_hit": 0}, "facts_per_hit: 0 is too small"),
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
