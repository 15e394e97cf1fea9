"""The drop-in mode for the reference memory server (`@modelcontextprotocol/server-memory`
2026.8.31): its nine tools, schemas and result shapes, over chronomem's engine.

REFERENCE_TOOLS is the reference's own `tools/list` answer (name, title, description,
inputSchema, outputSchema, annotations), copied from a run of its `dist/index.js`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from mcp import Client

from memory import GraphMemory
from server.compat import DELETED_ENTITY, DELETED_OBSERVATION, build_compat_server
from server.settings import Settings

pytestmark = pytest.mark.anyio

# Output schemas the reference repeats across its tools.
DELETE_OUTPUT = {
    "type": "object",
    "properties": {"success": {"type": "boolean"}, "message": {"type": "string"}},
    "required": ["success", "message"],
    "$schema": "http://json-schema.org/draft-07/schema#",
    "additionalProperties": False,
}

GRAPH_OUTPUT = {
    "type": "object",
    "properties": {
        "entities": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "The name of the entity"},
                    "entityType": {
                        "type": "string",
                        "description": "The type of the entity",
                    },
                    "observations": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "An array of observation contents associated with the entity",
                    },
                },
                "required": ["name", "entityType", "observations"],
                "additionalProperties": False,
            },
        },
        "relations": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "from": {
                        "type": "string",
                        "description": "The name of the entity where the relation starts",
                    },
                    "to": {
                        "type": "string",
                        "description": "The name of the entity where the relation ends",
                    },
                    "relationType": {
                        "type": "string",
                        "description": "The type of the relation",
                    },
                },
                "required": ["from", "to", "relationType"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["entities", "relations"],
    "$schema": "http://json-schema.org/draft-07/schema#",
    "additionalProperties": False,
}


REFERENCE_TOOLS = [
    {
        "name": "create_entities",
        "title": "Create Entities",
        "description": "Create multiple new entities in the knowledge graph",
        "inputSchema": {
            "type": "object",
            "properties": {
                "entities": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "name": {"type": "string", "description": "The name of the entity"},
                            "entityType": {
                                "type": "string",
                                "description": "The type of the entity",
                            },
                            "observations": {
                                "type": "array",
                                "items": {"type": "string"},
                                "description": "An array of observation contents associated with the entity",
                            },
                        },
                        "required": ["name", "entityType", "observations"],
                    },
                }
            },
            "required": ["entities"],
            "$schema": "http://json-schema.org/draft-07/schema#",
        },
        "outputSchema": {
            "type": "object",
            "properties": {
                "entities": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "name": {"type": "string", "description": "The name of the entity"},
                            "entityType": {
                                "type": "string",
                                "description": "The type of the entity",
                            },
                            "observations": {
                                "type": "array",
                                "items": {"type": "string"},
                                "description": "An array of observation contents associated with the entity",
                            },
                        },
                        "required": ["name", "entityType", "observations"],
                        "additionalProperties": False,
                    },
                }
            },
            "required": ["entities"],
            "$schema": "http://json-schema.org/draft-07/schema#",
            "additionalProperties": False,
        },
        "annotations": {
            "readOnlyHint": False,
            "destructiveHint": False,
            "idempotentHint": False,
            "openWorldHint": False,
        },
    },
    {
        "name": "create_relations",
        "title": "Create Relations",
        "description": "Create multiple new relations between entities in the knowledge graph. Relations should be in active voice",
        "inputSchema": {
            "type": "object",
            "properties": {
                "relations": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "from": {
                                "type": "string",
                                "description": "The name of the entity where the relation starts",
                            },
                            "to": {
                                "type": "string",
                                "description": "The name of the entity where the relation ends",
                            },
                            "relationType": {
                                "type": "string",
                                "description": "The type of the relation",
                            },
                        },
                        "required": ["from", "to", "relationType"],
                    },
                }
            },
            "required": ["relations"],
            "$schema": "http://json-schema.org/draft-07/schema#",
        },
        "outputSchema": {
            "type": "object",
            "properties": {
                "relations": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "from": {
                                "type": "string",
                                "description": "The name of the entity where the relation starts",
                            },
                            "to": {
                                "type": "string",
                                "description": "The name of the entity where the relation ends",
                            },
                            "relationType": {
                                "type": "string",
                                "description": "The type of the relation",
                            },
                        },
                        "required": ["from", "to", "relationType"],
                        "additionalProperties": False,
                    },
                }
            },
            "required": ["relations"],
            "$schema": "http://json-schema.org/draft-07/schema#",
            "additionalProperties": False,
        },
        "annotations": {
            "readOnlyHint": False,
            "destructiveHint": False,
            "idempotentHint": False,
            "openWorldHint": False,
        },
    },
    {
        "name": "add_observations",
        "title": "Add Observations",
        "description": "Add new observations to existing entities in the knowledge graph",
        "inputSchema": {
            "type": "object",
            "properties": {
                "observations": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "entityName": {
                                "type": "string",
                                "description": "The name of the entity to add the observations to",
                            },
                            "contents": {
                                "type": "array",
                                "items": {"type": "string"},
                                "description": "An array of observation contents to add",
                            },
                        },
                        "required": ["entityName", "contents"],
                    },
                }
            },
            "required": ["observations"],
            "$schema": "http://json-schema.org/draft-07/schema#",
        },
        "outputSchema": {
            "type": "object",
            "properties": {
                "results": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "entityName": {"type": "string"},
                            "addedObservations": {"type": "array", "items": {"type": "string"}},
                        },
                        "required": ["entityName", "addedObservations"],
                        "additionalProperties": False,
                    },
                }
            },
            "required": ["results"],
            "$schema": "http://json-schema.org/draft-07/schema#",
            "additionalProperties": False,
        },
        "annotations": {
            "readOnlyHint": False,
            "destructiveHint": False,
            "idempotentHint": False,
            "openWorldHint": False,
        },
    },
    {
        "name": "delete_entities",
        "title": "Delete Entities",
        "description": "Delete multiple entities and their associated relations from the knowledge graph",
        "inputSchema": {
            "type": "object",
            "properties": {
                "entityNames": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "An array of entity names to delete",
                }
            },
            "required": ["entityNames"],
            "$schema": "http://json-schema.org/draft-07/schema#",
        },
        "outputSchema": DELETE_OUTPUT,
        "annotations": {
            "readOnlyHint": False,
            "destructiveHint": True,
            "idempotentHint": True,
            "openWorldHint": False,
        },
    },
    {
        "name": "delete_observations",
        "title": "Delete Observations",
        "description": "Delete specific observations from entities in the knowledge graph",
        "inputSchema": {
            "type": "object",
            "properties": {
                "deletions": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "entityName": {
                                "type": "string",
                                "description": "The name of the entity containing the observations",
                            },
                            "observations": {
                                "type": "array",
                                "items": {"type": "string"},
                                "description": "An array of observations to delete",
                            },
                        },
                        "required": ["entityName", "observations"],
                    },
                }
            },
            "required": ["deletions"],
            "$schema": "http://json-schema.org/draft-07/schema#",
        },
        "outputSchema": DELETE_OUTPUT,
        "annotations": {
            "readOnlyHint": False,
            "destructiveHint": True,
            "idempotentHint": True,
            "openWorldHint": False,
        },
    },
    {
        "name": "delete_relations",
        "title": "Delete Relations",
        "description": "Delete multiple relations from the knowledge graph",
        "inputSchema": {
            "type": "object",
            "properties": {
                "relations": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "from": {
                                "type": "string",
                                "description": "The name of the entity where the relation starts",
                            },
                            "to": {
                                "type": "string",
                                "description": "The name of the entity where the relation ends",
                            },
                            "relationType": {
                                "type": "string",
                                "description": "The type of the relation",
                            },
                        },
                        "required": ["from", "to", "relationType"],
                    },
                    "description": "An array of relations to delete",
                }
            },
            "required": ["relations"],
            "$schema": "http://json-schema.org/draft-07/schema#",
        },
        "outputSchema": DELETE_OUTPUT,
        "annotations": {
            "readOnlyHint": False,
            "destructiveHint": True,
            "idempotentHint": True,
            "openWorldHint": False,
        },
    },
    {
        "name": "read_graph",
        "title": "Read Graph",
        "description": "Read the entire knowledge graph",
        "inputSchema": {
            "type": "object",
            "properties": {},
            "$schema": "http://json-schema.org/draft-07/schema#",
        },
        "outputSchema": GRAPH_OUTPUT,
        "annotations": {
            "readOnlyHint": True,
            "destructiveHint": False,
            "idempotentHint": True,
            "openWorldHint": False,
        },
    },
    {
        "name": "search_nodes",
        "title": "Search Nodes",
        "description": "Search for nodes in the knowledge graph based on a query",
        "inputSchema": {
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "description": "The search query to match against entity names, types, and observation content",
                }
            },
            "required": ["query"],
            "$schema": "http://json-schema.org/draft-07/schema#",
        },
        "outputSchema": GRAPH_OUTPUT,
        "annotations": {
            "readOnlyHint": True,
            "destructiveHint": False,
            "idempotentHint": True,
            "openWorldHint": False,
        },
    },
    {
        "name": "open_nodes",
        "title": "Open Nodes",
        "description": "Open specific nodes in the knowledge graph by their names",
        "inputSchema": {
            "type": "object",
            "properties": {
                "names": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "An array of entity names to retrieve",
                }
            },
            "required": ["names"],
            "$schema": "http://json-schema.org/draft-07/schema#",
        },
        "outputSchema": GRAPH_OUTPUT,
        "annotations": {
            "readOnlyHint": True,
            "destructiveHint": False,
            "idempotentHint": True,
            "openWorldHint": False,
        },
    },
]

REFERENCE = {tool["name"]: tool for tool in REFERENCE_TOOLS}

# The reference's answer to create_relations, text exactly as its JSON.stringify(_, null, 2)
# lays it out.
REFERENCE_RELATIONS_TEXT = (
    '[\n  {\n    "from": "Alice",\n    "to": "Bob",\n    "relationType": "knows"\n  }\n]'
)


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "m.db")


@pytest.fixture
async def client(db: str) -> AsyncIterator[Client]:
    async with Client(build_compat_server(Settings(db=db))) as connected:
        yield connected


async def call(client: Client, name: str, **arguments: Any) -> Any:
    """The structured result, checked against the tool's output schema; returns what the
    text content holds (the reference puts a bare list there for the create tools)."""
    result = await client.call_tool(name, arguments)
    assert not result.is_error, result.content
    jsonschema.validate(result.structured_content, REFERENCE[name]["outputSchema"])
    [content] = result.content
    text = json.loads(content.text) if content.text.startswith(("[", "{")) else content.text
    if not isinstance(text, str):  # JSON.stringify(_, null, 2): no escapes for non-ASCII
        assert content.text == json.dumps(text, indent=2, ensure_ascii=False)
    return result.structured_content, text


async def graph(client: Client, name: str = "read_graph", **arguments: Any) -> dict[str, Any]:
    structured, text = await call(client, name, **arguments)
    assert text == structured
    return structured


async def error(client: Client, name: str, **arguments: Any) -> str:
    result = await client.call_tool(name, arguments)
    assert result.is_error, result
    [content] = result.content
    assert "Traceback" not in content.text
    return content.text


def entity(name: str, entity_type: str, *observations: str) -> dict[str, Any]:
    return {"name": name, "entityType": entity_type, "observations": list(observations)}


def relation(source: str, target: str, relation_type: str) -> dict[str, str]:
    return {"from": source, "to": target, "relationType": relation_type}


ALICE = entity("Alice", "person", "likes tea", "lives in Paris")
BOB = entity("Bob", "person")


async def test_the_nine_tools_with_the_reference_schemas(client: Client) -> None:
    listed = (await client.list_tools()).tools
    assert [tool.name for tool in listed] == [tool["name"] for tool in REFERENCE_TOOLS]
    for tool in listed:
        wire = tool.model_dump(mode="json", by_alias=True, exclude_none=True)
        expected = REFERENCE[tool.name]
        for field in ("title", "description", "inputSchema", "outputSchema", "annotations"):
            assert wire[field] == expected[field], (tool.name, field)


async def test_results_have_the_reference_shapes(client: Client) -> None:
    structured, text = await call(client, "create_entities", entities=[ALICE, BOB])
    assert structured == {"entities": [ALICE, BOB]}
    assert text == [ALICE, BOB]

    result = await client.call_tool(
        "create_relations", {"relations": [relation("Alice", "Bob", "knows")]}
    )
    assert result.content[0].text == REFERENCE_RELATIONS_TEXT
    assert result.structured_content == {"relations": [relation("Alice", "Bob", "knows")]}

    structured, text = await call(
        client,
        "add_observations",
        observations=[{"entityName": "Alice", "contents": ["likes tea", "plays chess"]}],
    )
    added = [{"entityName": "Alice", "addedObservations": ["plays chess"]}]
    assert (structured, text) == ({"results": added}, added)

    alice = entity("Alice", "person", "likes tea", "lives in Paris", "plays chess")
    whole = {"entities": [alice, BOB], "relations": [relation("Alice", "Bob", "knows")]}
    assert await graph(client) == whole
    assert await graph(client, "search_nodes", query="chess") == {
        "entities": [alice],
        "relations": [relation("Alice", "Bob", "knows")],
    }
    assert await graph(client, "open_nodes", names=["Bob", "Missing"]) == {
        "entities": [BOB],
        "relations": [relation("Alice", "Bob", "knows")],
    }
    assert await graph(client, "open_nodes", names=[]) == {"entities": [], "relations": []}

    for name, arguments, message in [
        ("delete_observations", {"deletions": []}, "Observations deleted successfully"),
        ("delete_relations", {"relations": []}, "Relations deleted successfully"),
        ("delete_entities", {"entityNames": []}, "Entities deleted successfully"),
    ]:
        structured, text = await call(client, name, **arguments)
        assert structured == {"success": True, "message": message}
        assert text == message


async def test_create_skips_existing_names_and_returns_only_new_ones(client: Client) -> None:
    await call(client, "create_entities", entities=[ALICE])
    again = [entity("alice", "robot", "is a robot"), entity("Carol", "person", "sings")]
    structured, _ = await call(client, "create_entities", entities=again)
    assert structured == {"entities": [entity("Carol", "person", "sings")]}
    assert (await graph(client, "open_nodes", names=["Alice"]))["entities"] == [ALICE]

    # A relation that already holds is not created again.
    await call(client, "create_relations", relations=[relation("Alice", "Carol", "knows")])
    structured, _ = await call(
        client,
        "create_relations",
        relations=[relation("Alice", "Carol", "knows"), relation("Carol", "Alice", "knows")],
    )
    assert structured == {"relations": [relation("Carol", "Alice", "knows")]}


async def test_an_entity_known_only_by_name_is_filled_in(client: Client) -> None:
    await call(client, "create_relations", relations=[relation("Alice", "Acme", "works at")])
    structured, _ = await call(
        client, "create_entities", entities=[entity("Acme", "company", "makes anvils")]
    )
    assert structured == {"entities": [entity("Acme", "company", "makes anvils")]}
    assert await graph(client, "open_nodes", names=["Acme"]) == {
        "entities": [entity("Acme", "company", "makes anvils")],
        "relations": [relation("Alice", "Acme", "works_at")],  # types are stored snake_case
    }


async def test_deletes_are_invalidations_and_history_survives(client: Client, db: str) -> None:
    await call(client, "create_entities", entities=[ALICE, BOB])
    await call(client, "create_relations", relations=[relation("Alice", "Bob", "knows")])
    await call(
        client,
        "delete_observations",
        deletions=[
            {"entityName": "Alice", "observations": ["likes tea"]},
            {"entityName": "Missing", "observations": ["anything"]},
        ],
    )
    await call(
        client,
        "delete_relations",
        relations=[relation("Alice", "Bob", "knows"), relation("Bob", "Alice", "knows")],
    )
    assert await graph(client) == {
        "entities": [entity("Alice", "person", "lives in Paris"), BOB],
        "relations": [],
    }
    await call(client, "create_relations", relations=[relation("Bob", "Alice", "likes")])
    await call(client, "delete_entities", entityNames=["Bob", "Missing"])
    gone = {"entities": [entity("Alice", "person", "lives in Paris")], "relations": []}
    assert await graph(client) == gone
    assert await graph(client, "open_nodes", names=["Bob"]) == {"entities": [], "relations": []}
    assert await graph(client, "search_nodes", query="Bob") == {"entities": [], "relations": []}

    async with GraphMemory.open(db) as memory:
        scope = memory.scope(app="default", user="default")
        timeline = (await scope.history("Alice")).timeline
        tea = next(item for item in timeline if getattr(item, "text", None) == "likes tea")
        assert (tea.current, tea.reason) == (False, DELETED_OBSERVATION)
        assert tea.valid_to is not None
        bob = (await scope.history("Bob")).timeline
        assert {(item.relation, item.reason) for item in bob} == {
            ("knows", "deleted with delete_relations"),
            ("likes", DELETED_ENTITY),
        }
        assert not any(item.current for item in bob)
        bob_history = await scope.history("Bob")
        assert bob_history.deleted_at is not None
        assert [d.deleted_at for d in bob_history.deletions] == [bob_history.deleted_at]
        assert (await scope.history("Alice")).deleted_at is None

    # Bob is back once created again; his old relations stay closed.
    async with Client(build_compat_server(Settings(db=db))) as reopened:
        structured, _ = await call(
            reopened, "create_entities", entities=[entity("Bob", "person", "new")]
        )
        assert structured == {"entities": [entity("Bob", "person", "new")]}
        assert await graph(reopened, "open_nodes", names=["Bob"]) == {
            "entities": [entity("Bob", "person", "new")],
            "relations": [],
        }
    async with GraphMemory.open(db) as memory:
        back = await memory.scope(app="default", user="default").history("Bob")
        assert back.deleted_at is None
        (deletion,) = back.deletions
        assert deletion.restored_at is not None


async def test_an_entity_without_observations_lives_until_deleted(client: Client) -> None:
    await call(client, "create_entities", entities=[BOB, entity("Carol", "person")])
    await call(client, "add_observations", observations=[{"entityName": "bob", "contents": []}])
    assert await graph(client) == {"entities": [BOB, entity("Carol", "person")], "relations": []}
    await call(client, "add_observations", observations=[{"entityName": "Bob", "contents": ["x"]}])
    await call(
        client, "delete_observations", deletions=[{"entityName": "Bob", "observations": ["X"]}]
    )
    assert (await graph(client))["entities"] == [BOB, entity("Carol", "person")]
    await call(client, "create_relations", relations=[relation("Bob", "Carol", "knows")])
    await call(client, "delete_entities", entityNames=["bob"])
    assert await graph(client) == {"entities": [entity("Carol", "person")], "relations": []}

    # Two entities known only through each other, deleted together.
    await call(client, "create_relations", relations=[relation("Dan", "Eve", "knows")])
    await call(client, "delete_entities", entityNames=["Eve", "Dan"])
    assert await graph(client) == {"entities": [entity("Carol", "person")], "relations": []}


async def test_deleting_an_entity_with_nothing_current(client: Client) -> None:
    await call(client, "create_entities", entities=[BOB])
    await call(client, "delete_entities", entityNames=["Bob"])
    assert await graph(client) == {"entities": [], "relations": []}
    assert await graph(client, "open_nodes", names=["Bob"]) == {"entities": [], "relations": []}
    assert (
        await error(
            client, "add_observations", observations=[{"entityName": "Bob", "contents": ["x"]}]
        )
        == "Entity with name Bob not found"
    )
    structured, _ = await call(client, "create_entities", entities=[BOB])
    assert structured == {"entities": [BOB]}
    assert await graph(client) == {"entities": [BOB], "relations": []}


async def test_a_forget_whose_reason_reads_like_a_deletion_deletes_nothing(
    client: Client, db: str
) -> None:
    await call(client, "create_entities", entities=[entity("Bob", "person", "tall")])
    async with GraphMemory.open(db) as memory:
        scope = memory.scope(app="default", user="default")
        await scope.forget(entities=["Bob"], reason=f'{DELETED_ENTITY}: ["Bob"]')
    assert await graph(client) == {"entities": [BOB], "relations": []}


async def test_search_is_ranked(client: Client) -> None:
    await call(
        client,
        "create_entities",
        entities=[
            entity("Alice", "person", "drinks coffee every morning"),
            entity("Trip to Kyoto", "plan", "visiting temples in spring", "booked a ryokan"),
            entity("Bob", "person", "mentioned a trip once"),
            entity("Zoë", "person", "runs a café in Zürich"),
        ],
    )
    result = await client.call_tool("search_nodes", {"query": "cafe zurich"})
    assert '"runs a café in Zürich"' in result.content[0].text
    assert result.structured_content["entities"] == [
        entity("Zoë", "person", "runs a café in Zürich")
    ]
    found = await graph(client, "search_nodes", query="the Kyoto trip plan")
    assert [e["name"] for e in found["entities"]][:2] == ["Trip to Kyoto", "Bob"]
    assert await graph(client, "search_nodes", query="zeppelin") == {
        "entities": [],
        "relations": [],
    }


async def test_search_answers_with_whole_entities_as_the_reference_does(
    client: Client,
) -> None:
    """chronomem's own search_nodes shows each hit's best few facts; the reference's
    shows every observation of each entity found, and so does compat mode."""
    notes = [f"note {n} about the garden" for n in range(11)]
    await call(
        client, "create_entities", entities=[entity("Alice", "person", "plays chess", *notes)]
    )
    friends = [relation("Alice", f"Friend {n}", "knows") for n in range(7)]
    await call(client, "create_relations", relations=friends)
    found = await graph(client, "search_nodes", query="chess")
    assert found["entities"] == [entity("Alice", "person", "plays chess", *notes)]
    assert sorted(found["relations"], key=str) == sorted(friends, key=str)
    await call(client, "delete_relations", relations=friends[:3])
    await call(
        client,
        "delete_observations",
        deletions=[{"entityName": "Alice", "observations": notes[:4]}],
    )
    found = await graph(client, "search_nodes", query="chess")
    assert found["entities"] == [entity("Alice", "person", "plays chess", *notes[4:])]
    assert sorted(found["relations"], key=str) == sorted(friends[3:], key=str)


async def test_batches_past_the_engine_limits_are_split(client: Client) -> None:
    facts = [f"fact number {i}" for i in range(120)]  # the engine takes 50 a call
    structured, _ = await call(client, "create_entities", entities=[entity("Big", "thing", *facts)])
    assert structured["entities"][0]["observations"] == facts
    more = [f"more {i}" for i in range(60)]
    structured, _ = await call(
        client, "add_observations", observations=[{"entityName": "Big", "contents": more}]
    )
    assert structured["results"][0]["addedObservations"] == more

    names = [f"n{i}" for i in range(130)]  # open_nodes and forget take 100 names a call
    await call(client, "create_entities", entities=[entity(n, "thing", "x") for n in names])
    opened = await graph(client, "open_nodes", names=names)
    assert [e["name"] for e in opened["entities"]] == names
    await call(
        client,
        "delete_observations",
        deletions=[{"entityName": "Big", "observations": [*facts, *more]}],
    )
    assert (await graph(client, "open_nodes", names=["Big"]))["entities"] == [
        entity("Big", "thing")
    ]
    await call(client, "delete_entities", entityNames=names)
    assert [e["name"] for e in (await graph(client))["entities"]] == ["Big"]


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        ("create_entities", {}, "entities: is required"),
        ("create_entities", {"entities": "Alice"}, "entities: must be a list, got str"),
        (
            "create_entities",
            {"entities": [{"name": "X"}]},
            "entities[0].entityType: is required; entities[0].observations: is required",
        ),
        (
            "create_entities",
            {"entities": [{"name": "x" * 201, "entityType": "t", "observations": []}]},
            "entities[0].name: 201 characters; at most 200 are allowed",
        ),
        (
            "create_entities",
            {"entities": [{"name": "X", "entityType": " ", "observations": []}]},
            "entities[0].entityType: must not be blank",
        ),
        (
            "create_entities",
            {"entities": [{"name": "X", "entityType": "t", "observations": ["ok", "y" * 2001]}]},
            "entities[0].observations[1]: 2,001 characters; at most 2,000 are allowed",
        ),
        (
            "create_relations",
            {"relations": [{"from": "A", "to": "B", "relationType": "!!"}]},
            "relations[0].relationType: '!!' has no letters or digits to name a relation",
        ),
        (
            "create_relations",
            {"relations": [{"from": "A", "relationType": "knows"}]},
            "relations[0].to: is required",
        ),
        (
            "add_observations",
            {"observations": [{"entityName": "Zed", "contents": ["x"]}]},
            "Entity with name Zed not found",
        ),
        ("delete_entities", {"entityNames": [1]}, "entityNames[0]: must be a string, got int"),
        ("search_nodes", {"query": ""}, "query: must not be empty"),
        (
            "search_nodes",
            {"query": "q" * 1001},
            "query: 1,001 characters; at most 1,000 are allowed",
        ),
        ("open_nodes", {"names": "Alice"}, "names: must be a list, got str"),
    ],
)
async def test_bad_input_is_a_tool_error_and_changes_nothing(
    client: Client, name: str, arguments: dict[str, Any], message: str
) -> None:
    await call(client, "create_entities", entities=[ALICE])
    assert await error(client, name, **arguments) == message
    assert await graph(client) == {"entities": [ALICE], "relations": []}


async def test_a_failing_batch_writes_nothing(client: Client) -> None:
    await call(client, "create_entities", entities=[ALICE])
    good = entity("Carol", "person", "sings")
    bad = entity("Dave", "person", "z" * 2001)
    assert "entities[1].observations[0]" in await error(
        client, "create_entities", entities=[good, bad]
    )
    assert (
        await error(
            client,
            "add_observations",
            observations=[
                {"entityName": "Alice", "contents": ["x"]},
                {"entityName": "Nobody", "contents": ["y"]},
            ],
        )
        == "Entity with name Nobody not found"
    )
    assert await graph(client) == {"entities": [ALICE], "relations": []}


async def test_the_scope_comes_from_the_settings(tmp_path: Path) -> None:
    async with GraphMemory.open(tmp_path / "shared.db") as memory:
        server = build_compat_server(
            Settings(db="unused", app="coach", user="alice"), memory=memory
        )
        async with Client(server) as client:
            await call(client, "create_entities", entities=[ALICE])
        coach = await memory.scope(app="coach", user="alice").open_nodes(["Alice"])
        assert [fact.text for fact in coach.entities[0].observations] == ALICE["observations"]
        other = await memory.scope(app="default", user="default").read_graph()
        assert other.entities == []


async def test_the_knowledge_graph_resource(client: Client) -> None:
    await call(client, "create_entities", entities=[ALICE, BOB])
    [resource] = (await client.list_resources()).resources
    assert (resource.name, str(resource.uri), resource.mime_type) == (
        "knowledge-graph",
        "memory://knowledge-graph",
        "application/json",
    )
    contents = (await client.read_resource("memory://knowledge-graph")).contents
    assert json.loads(contents[0].text) == await graph(client)


async def test_the_request_scope_guards_every_tool(db: str) -> None:
    """The tools find their memory as the normal server's do: over HTTP with auth a
    token is needed, so an unauthenticated in-process client gets a tool error."""
    server = build_compat_server(Settings(db=db, auth_tokens="tokens.json"))
    async with Client(server) as client:
        for name, arguments in [
            ("create_entities", {"entities": [ALICE]}),
            ("delete_entities", {"entityNames": ["Alice"]}),
            ("read_graph", {}),
            ("search_nodes", {"query": "tea"}),
        ]:
            assert await error(client, name, **arguments) == "this server requires a bearer token"


async def test_serve_compat_over_stdio_as_a_client_config_runs_it(tmp_path) -> None:
    import os

    from mcp import Client, StdioServerParameters

    from .conftest import CHRONOMEM

    params = StdioServerParameters(
        command=CHRONOMEM,
        args=["serve", "--compat", "--db", str(tmp_path / "memory.db")],
        env={"PATH": os.environ["PATH"]},
    )
    async with Client(params) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        assert names == [
            "create_entities",
            "create_relations",
            "add_observations",
            "delete_entities",
            "delete_observations",
            "delete_relations",
            "read_graph",
            "search_nodes",
            "open_nodes",
        ]
        created = await client.call_tool(
            "create_entities",
            {"entities": [{"name": "Ada", "entityType": "person", "observations": ["codes"]}]},
        )
        assert not created.is_error
        graph = await client.call_tool("read_graph", {})
        assert graph.structured_content["entities"] == [
            {"name": "Ada", "entityType": "person", "observations": ["codes"]}
        ]
