"""One operation, one definition: every surface takes exactly the arguments of the
operation's model (`memory.operations`), and hands each of them to the engine.

A surface that drops, renames or adds an argument fails here: each argument is sent
alone with a value no field accepts, through each surface, and the engine's message
must name that very argument; then every argument is sent with a valid value.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from memory import GraphMemory, InvalidInputError
from memory.operations import OPERATIONS
from server import Settings, build_server

pytestmark = pytest.mark.anyio

# A valid value for every argument of every operation. An argument added to a model
# without a value here fails `test_every_argument_has_a_sample`.
SAMPLES: dict[str, dict[str, Any]] = {
    "remember": {
        "entity": "Alice",
        "facts": ["likes tea"],
        "entity_type": "person",
        "valid_from": "2027-01-01",
        "replaces": ["{fact}"],
        "attribute": "drink",
    },
    "relate": {
        "source": "Alice",
        "relation": "knows",
        "target": "Bob",
        "source_type": "person",
        "target_type": "person",
        "valid_from": "2027-01-01",
        "exclusive": True,
        "replaces": ["{relation}"],
    },
    "forget": {
        "ids": ["o_missing"],
        "entities": ["Nobody"],
        "valid_to": "2027-02-01",
        "reason": "moved",
    },
    "search_nodes": {
        "query": "tea",
        "limit": 3,
        "facts_per_hit": 2,
        "entity_type": "person",
        "as_of": "2026-06-01",
        "known_at": "2030-01-01",
        "include_history": True,
    },
    "open_nodes": {
        "names": ["Alice"],
        "as_of": "2026-06-01",
        "known_at": "2030-01-01",
        "include_history": True,
    },
    "read_graph": {
        "as_of": "2026-06-01",
        "known_at": "2030-01-01",
        "include_history": True,
        "limit": 5,
        "cursor": None,
    },
    "profile_card": {
        "max_entities": 3,
        "max_facts_per_entity": 2,
        "max_chars": 500,
        "query": "tea",
        "as_of": "2026-06-01",
    },
    "history": {"entity": "Alice"},
    "record_turns": {"session_id": "s1", "turns": [{"role": "user", "text": "hi"}]},
    "recall": {
        "query": "hi",
        "limit": 3,
        "session_id": "s1",
        "after": "2020-01-01",
        "before": "2100-01-01",
    },
}
NO_FIELD_TAKES_THIS = {"not": "a value of any argument"}


def cases() -> list[tuple[str, str]]:
    return [(name, field) for name, op in OPERATIONS.items() for field in op.arguments.model_fields]


def with_bad(operation: str, field: str) -> dict[str, Any]:
    arguments = {
        name: value
        for name, value in SAMPLES[operation].items()
        if OPERATIONS[operation].arguments.model_fields[name].is_required()
    }
    return {**arguments, field: NO_FIELD_TAKES_THIS}


def ids_in(sample: dict[str, Any], fact: str, relation: str) -> dict[str, Any]:
    """`sample` with the ids of an existing fact and relation put in."""
    ids = {"{fact}": fact, "{relation}": relation}
    return {
        name: [ids.get(item, item) for item in value] if name == "replaces" else value
        for name, value in sample.items()
    }


def test_every_argument_has_a_sample() -> None:
    for name, operation in OPERATIONS.items():
        assert set(SAMPLES[name]) == set(operation.arguments.model_fields), name


def test_the_python_methods_take_the_models_arguments() -> None:
    from memory import MemoryScope

    for name, operation in OPERATIONS.items():
        parameters = inspect.signature(getattr(MemoryScope, name)).parameters
        fields = operation.arguments.model_fields
        assert set(parameters) - {"self"} == set(fields), name
        for field, info in fields.items():
            default = parameters[field].default
            if info.is_required():
                assert default is inspect.Parameter.empty, (name, field)
            else:
                assert default == info.get_default(call_default_factory=True), (name, field)


@pytest.fixture
async def memory(tmp_path: Path) -> Any:
    async with GraphMemory.open(str(tmp_path / "memory.db")) as opened:
        yield opened


@pytest.mark.parametrize(("operation", "field"), cases())
async def test_each_argument_reaches_the_engine_from_python(
    memory: GraphMemory, operation: str, field: str
) -> None:
    scope = memory.scope(app="coach", user="alice")
    with pytest.raises(InvalidInputError) as caught:
        await getattr(scope, operation)(**with_bad(operation, field))
    assert str(caught.value).startswith(field), str(caught.value)


async def test_each_argument_reaches_the_engine_over_mcp(tmp_path: Path) -> None:
    settings = Settings(db=str(tmp_path / "memory.db"), app="coach", user="alice")
    async with Client(build_server(settings)) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(listed) == set(OPERATIONS)
        for operation, field in cases():
            schema = listed[operation].input_schema
            model = OPERATIONS[operation].arguments
            assert set(schema["properties"]) == set(model.model_fields), operation
            required = {name for name, info in model.model_fields.items() if info.is_required()}
            assert set(schema.get("required", [])) == required, operation
            result = await client.call_tool(operation, with_bad(operation, field))
            assert result.is_error, (operation, field)
            assert result.content[0].text.startswith(field), (operation, field)


async def test_every_argument_at_once_through_both(tmp_path: Path) -> None:
    """A call with every argument given works the same from Python and over MCP."""
    settings = Settings(db=str(tmp_path / "memory.db"), app="coach", user="alice")
    async with (
        GraphMemory.open(str(tmp_path / "python.db")) as memory,
        Client(build_server(settings)) as client,
    ):
        scope = memory.scope(app="coach", user="alice")
        fact = (await scope.remember(entity="Alice", facts=["likes coffee"])).added[0].id
        link = (await scope.relate(source="Alice", relation="knows", target="Carol")).relation.id
        over = await client.call_tool("remember", {"entity": "Alice", "facts": ["likes coffee"]})
        mcp_fact = over.structured_content["added"][0]["id"]
        over = await client.call_tool(
            "relate", {"source": "Alice", "relation": "knows", "target": "Carol"}
        )
        mcp_link = over.structured_content["relation"]["id"]
        for name, sample in SAMPLES.items():
            result = await getattr(scope, name)(**ids_in(sample, fact, link))
            assert isinstance(result, OPERATIONS[name].result)
            over_mcp = await client.call_tool(name, ids_in(sample, mcp_fact, mcp_link))
            assert not over_mcp.is_error, (name, over_mcp.content)
            shape = OPERATIONS[name].result.model_validate(over_mcp.structured_content)
            assert set(shape.model_fields_set) == set(result.model_fields_set), name
