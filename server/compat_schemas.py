"""The reference memory server's tools as it publishes them (version 2026.8.31): each
tool's title, description, input and output JSON schemas and annotations, and its
resource. Data only; `compat` serves them.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from mcp.types import ToolAnnotations

__all__ = ["GRAPH_RESOURCE", "TOOLS", "ResourceSpec", "ToolSpec"]

DRAFT_07 = "http://json-schema.org/draft-07/schema#"


def _string(description: str | None = None) -> dict[str, Any]:
    return {"type": "string", **({"description": description} if description else {})}


def _strings(description: str | None = None) -> dict[str, Any]:
    return {
        "type": "array",
        "items": {"type": "string"},
        **({"description": description} if description else {}),
    }


def _object(properties: dict[str, Any], *, output: bool) -> dict[str, Any]:
    """A zod object as the reference's SDK renders it: outputs are closed."""
    shape = {"type": "object", "properties": properties, "required": list(properties)}
    return {**shape, "additionalProperties": False} if output else shape


def _entity(*, output: bool) -> dict[str, Any]:
    return _object(
        {
            "name": _string("The name of the entity"),
            "entityType": _string("The type of the entity"),
            "observations": _strings("An array of observation contents associated with the entity"),
        },
        output=output,
    )


def _relation(*, output: bool) -> dict[str, Any]:
    return _object(
        {
            "from": _string("The name of the entity where the relation starts"),
            "to": _string("The name of the entity where the relation ends"),
            "relationType": _string("The type of the relation"),
        },
        output=output,
    )


def _array(items: dict[str, Any], description: str | None = None) -> dict[str, Any]:
    return {
        "type": "array",
        "items": items,
        **({"description": description} if description else {}),
    }


def _input(properties: dict[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if properties:
        schema["required"] = list(properties)
    return {**schema, "$schema": DRAFT_07}


def _output(properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "$schema": DRAFT_07,
        "additionalProperties": False,
    }


GRAPH_OUTPUT = _output(
    {
        "entities": _array(_entity(output=True)),
        "relations": _array(_relation(output=True)),
    }
)
DONE_OUTPUT = _output({"success": {"type": "boolean"}, "message": {"type": "string"}})

CHANGE = ToolAnnotations(
    readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=False
)
DELETE = ToolAnnotations(
    readOnlyHint=False, destructiveHint=True, idempotentHint=True, openWorldHint=False
)
READ = ToolAnnotations(
    readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False
)


class ToolSpec(NamedTuple):
    title: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    annotations: ToolAnnotations


class ResourceSpec(NamedTuple):
    uri: str
    name: str
    title: str
    description: str
    mime_type: str


GRAPH_RESOURCE = ResourceSpec(
    uri="memory://knowledge-graph",
    name="knowledge-graph",
    title="Knowledge Graph",
    description="The full knowledge graph with all entities and relations",
    mime_type="application/json",
)

ENTITIES_INPUT = _input({"entities": _array(_entity(output=False))})
RELATIONS_INPUT = _input({"relations": _array(_relation(output=False))})

# The nine tools, in the reference's order, by name.
TOOLS: dict[str, ToolSpec] = {
    "create_entities": ToolSpec(
        "Create Entities",
        "Create multiple new entities in the knowledge graph",
        ENTITIES_INPUT,
        _output({"entities": _array(_entity(output=True))}),
        CHANGE,
    ),
    "create_relations": ToolSpec(
        "Create Relations",
        "Create multiple new relations between entities in the knowledge graph. "
        "Relations should be in active voice",
        RELATIONS_INPUT,
        _output({"relations": _array(_relation(output=True))}),
        CHANGE,
    ),
    "add_observations": ToolSpec(
        "Add Observations",
        "Add new observations to existing entities in the knowledge graph",
        _input(
            {
                "observations": _array(
                    _object(
                        {
                            "entityName": _string(
                                "The name of the entity to add the observations to"
                            ),
                            "contents": _strings("An array of observation contents to add"),
                        },
                        output=False,
                    )
                )
            }
        ),
        _output(
            {
                "results": _array(
                    _object({"entityName": _string(), "addedObservations": _strings()}, output=True)
                )
            }
        ),
        CHANGE,
    ),
    "delete_entities": ToolSpec(
        "Delete Entities",
        "Delete multiple entities and their associated relations from the knowledge graph",
        _input({"entityNames": _strings("An array of entity names to delete")}),
        DONE_OUTPUT,
        DELETE,
    ),
    "delete_observations": ToolSpec(
        "Delete Observations",
        "Delete specific observations from entities in the knowledge graph",
        _input(
            {
                "deletions": _array(
                    _object(
                        {
                            "entityName": _string(
                                "The name of the entity containing the observations"
                            ),
                            "observations": _strings("An array of observations to delete"),
                        },
                        output=False,
                    )
                )
            }
        ),
        DONE_OUTPUT,
        DELETE,
    ),
    "delete_relations": ToolSpec(
        "Delete Relations",
        "Delete multiple relations from the knowledge graph",
        _input({"relations": _array(_relation(output=False), "An array of relations to delete")}),
        DONE_OUTPUT,
        DELETE,
    ),
    "read_graph": ToolSpec(
        "Read Graph",
        "Read the entire knowledge graph",
        _input({}),
        GRAPH_OUTPUT,
        READ,
    ),
    "search_nodes": ToolSpec(
        "Search Nodes",
        "Search for nodes in the knowledge graph based on a query",
        _input(
            {
                "query": _string(
                    "The search query to match against entity names, types, and observation content"
                )
            }
        ),
        GRAPH_OUTPUT,
        READ,
    ),
    "open_nodes": ToolSpec(
        "Open Nodes",
        "Open specific nodes in the knowledge graph by their names",
        _input({"names": _strings("An array of entity names to retrieve")}),
        GRAPH_OUTPUT,
        READ,
    ),
}
