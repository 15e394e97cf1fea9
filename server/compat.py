"""Drop-in mode for the reference memory server, `@modelcontextprotocol/server-memory`.

`build_compat_server` serves the reference's nine tools under its names, with its
input and output schemas, titles, descriptions, annotations and result shapes
(checked against version 2026.8.31), so a client switches to chronomem by changing
one line of its config. The tools run on chronomem's engine, through the same
per-request scope as the normal server:

- `create_entities` skips names that already have current observations and returns
  only what it created, like the reference; an entity known only by name (for
  instance as a relation's end) is filled in rather than skipped.
- The deletes are invalidations: the facts and relations stop being current and the
  history keeps them. `delete_entities` is the engine's own: it also records that
  the entity was deleted, so every read leaves it out until it is written about
  (created, given facts or relations) again.
- `search_nodes` is chronomem's ranked search (best first, at most 50 entities), not
  the reference's substring match; each entity found comes with all its current
  observations and relations, as in the reference.
- Reads show current facts only, shaped like the reference's graph.

The engine's rules still hold, and breaking one is a tool error naming the field in
the reference's terms: names are matched case-insensitively, an entity type is 1-64
characters, a fact 1-2,000, and relation types are stored in snake_case. A relation's
ends become entities (type "general") where the reference leaves them dangling.

The reference's schemas and descriptions are data, in `compat_schemas`.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from typing import Annotated, Any, TypeVar

from mcp.server import MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, TextContent
from pydantic import AfterValidator, BaseModel, Field, TypeAdapter, ValidationError

from memory import Entity, GraphMemory, InvalidInputError, MemoryScope, Relation
from memory.names import match_key, relation_type
from memory.validation import (
    FACTS_PER_CALL,
    IDS_PER_CALL,
    FactText,
    Label,
    Name,
    Query,
    parse_arguments,
)

from .access import AppState, NotAuthorized, RequestScope, scope_of
from .app import memory_lifespan, server_version
from .compat_schemas import GRAPH_RESOURCE, TOOLS
from .prompts import check_prompt_requests
from .settings import Settings

__all__ = ["build_compat_server", "build_compat_tools"]

T = TypeVar("T")

SEARCH_LIMIT = 50  # search_nodes' largest limit
# Reasons recorded on what the deletes close.
DELETED_ENTITY = "deleted with delete_entities"
DELETED_OBSERVATION = "deleted with delete_observations"
DELETED_RELATION = "deleted with delete_relations"

# ---------------------------------------------------------------- arguments
# The reference's argument shapes, with the engine's limits on each field, so one
# validation checks both and its messages use the reference's field names.


class _Arguments(BaseModel):
    """Unknown keys are dropped, as the reference's zod objects drop them."""


class _NewEntity(_Arguments):
    name: Name
    entityType: Label
    observations: list[FactText]


class _CreateEntities(_Arguments):
    entities: list[_NewEntity]


def _checked_relation_type(text: str) -> str:
    relation_type(text, field="relationType")  # raises what cannot name a relation
    return text


class _NewRelation(_Arguments):
    source: Name = Field(alias="from")
    to: Name
    relationType: Annotated[Label, AfterValidator(_checked_relation_type)]


class _CreateRelations(_Arguments):
    relations: list[_NewRelation]


class _NewObservations(_Arguments):
    entityName: Name
    contents: list[FactText]


class _AddObservations(_Arguments):
    observations: list[_NewObservations]


class _DeleteEntities(_Arguments):
    entityNames: list[str]


class _Deletion(_Arguments):
    entityName: str
    observations: list[str]


class _DeleteObservations(_Arguments):
    deletions: list[_Deletion]


class _RelationRef(_Arguments):
    source: str = Field(alias="from")
    to: str
    relationType: str


class _DeleteRelations(_Arguments):
    relations: list[_RelationRef]


class _SearchNodes(_Arguments):
    query: Query


class _OpenNodes(_Arguments):
    names: list[str]


_NAME = TypeAdapter(Name)


def _name_or_none(text: str) -> str | None:
    """`text` as the engine takes a name, or None where it could not name an entity
    (blank, too long), so a read or delete of it finds nothing, as the reference's does."""
    try:
        return _NAME.validate_python(text)
    except ValidationError:
        return None


# ---------------------------------------------------------------- results


def _result(text_value: Any, structured: dict[str, Any]) -> CallToolResult:
    """The reference's result: the value as 2-space-indented JSON text (JSON.stringify's
    layout) beside the structured content."""
    text = json.dumps(text_value, indent=2, ensure_ascii=False)
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=structured
    )


def _done(message: str) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=message)],
        structured_content={"success": True, "message": message},
    )


def _tool_error(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


def _entity_json(name: str, entity_type: str, observations: Iterable[str]) -> dict[str, Any]:
    return {"name": name, "entityType": entity_type, "observations": list(observations)}


def _relation_json(relation: Relation) -> dict[str, str]:
    return {"from": relation.source, "to": relation.target, "relationType": relation.relation}


def _graph_json(entities: Iterable[Entity], relations: Iterable[Relation]) -> dict[str, Any]:
    """The reference's graph of `entities` and of the current ones among `relations`."""
    seen: set[str] = set()
    current = []
    for relation in relations:
        if relation.current and relation.id not in seen:
            seen.add(relation.id)
            current.append(_relation_json(relation))
    return {
        "entities": [
            _entity_json(e.name, e.entity_type, (o.text for o in e.observations if o.current))
            for e in entities
        ],
        "relations": current,
    }


# ---------------------------------------------------------------- the engine


def _chunks(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


async def _open(scope: MemoryScope, names: Sequence[str]) -> tuple[list[Entity], list[Relation]]:
    """open_nodes over any number of valid names, a page of names at a time: the
    entities with their current facts, and the current relations touching them."""
    entities: list[Entity] = []
    relations: list[Relation] = []
    for chunk in _chunks(list(dict.fromkeys(names)), IDS_PER_CALL):
        found = await scope.open_nodes(chunk)
        entities += found.entities
        relations += found.relations
    return entities, relations


async def _read_graph(scope: MemoryScope) -> dict[str, Any]:
    entities: list[Entity] = []
    relations: list[Relation] = []
    async for page in scope.iterate_graph():
        entities += page.entities
        relations += page.relations  # each under its source's page: once in all
    return _graph_json(entities, relations)


async def _forget(scope: MemoryScope, ids: Sequence[str], reason: str) -> None:
    for chunk in _chunks(list(dict.fromkeys(ids)), IDS_PER_CALL):
        await scope.forget(ids=chunk, reason=reason)


# ---------------------------------------------------------------- the nine tools


async def create_entities(entities: Any = None) -> CallToolResult:
    args = parse_arguments(_CreateEntities, entities=entities)
    scope = scope_of(write=True)
    present, _ = await _open(scope, [e.name for e in args.entities])
    filled = {match_key(e.name) for e in present if e.observations}
    created = []
    for entity in args.entities:
        key = match_key(entity.name)
        if key in filled:
            continue
        filled.add(key)
        if not entity.observations:
            made = await scope.create_entity(entity.name, entity_type=entity.entityType)
            created.append(_entity_json(made.name, made.entity_type, []))
            continue
        added: list[str] = []
        for facts in _chunks(entity.observations, FACTS_PER_CALL):
            stored = await scope.remember(entity.name, facts, entity_type=entity.entityType)
            added += [o.text for o in stored.added]
        created.append(_entity_json(stored.entity.name, stored.entity.entity_type, added))
    return _result(created, {"entities": created})


async def create_relations(relations: Any = None) -> CallToolResult:
    args = parse_arguments(_CreateRelations, relations=relations)
    scope = scope_of(write=True)
    created = []
    for relation in args.relations:
        stored = await scope.relate(relation.source, relation.relationType, relation.to)
        if not stored.existing:
            created.append(_relation_json(stored.relation))
    return _result(created, {"relations": created})


async def add_observations(observations: Any = None) -> CallToolResult:
    args = parse_arguments(_AddObservations, observations=observations)
    scope = scope_of(write=True)
    present, _ = await _open(scope, [o.entityName for o in args.observations])
    names = {match_key(e.name): e.name for e in present}
    for item in args.observations:  # like the reference, change nothing if one is missing
        if match_key(item.entityName) not in names:
            return _tool_error(f"Entity with name {item.entityName} not found")
    results = []
    for item in args.observations:
        added: list[str] = []
        for facts in _chunks(item.contents, FACTS_PER_CALL):
            stored = await scope.remember(item.entityName, facts)
            added += [o.text for o in stored.added]
        name = names[match_key(item.entityName)]
        results.append({"entityName": name, "addedObservations": added})
    return _result(results, {"results": results})


async def delete_entities(entityNames: Any = None) -> CallToolResult:
    args = parse_arguments(_DeleteEntities, entityNames=entityNames)
    scope = scope_of(write=True)
    names = [n for n in map(_name_or_none, args.entityNames) if n is not None]
    for chunk in _chunks(list(dict.fromkeys(names)), IDS_PER_CALL):
        await scope.delete_entities(chunk, reason=DELETED_ENTITY)
    return _done("Entities deleted successfully")


async def delete_observations(deletions: Any = None) -> CallToolResult:
    args = parse_arguments(_DeleteObservations, deletions=deletions)
    scope = scope_of(write=True)
    wanted: dict[str, set[str]] = defaultdict(set)
    for deletion in args.deletions:
        name = _name_or_none(deletion.entityName)
        if name is not None:
            wanted[match_key(name)].update(match_key(text) for text in deletion.observations)
    present, _ = await _open(scope, list(wanted))
    ids = [
        o.id
        for entity in present
        for o in entity.observations
        if match_key(o.text) in wanted[match_key(entity.name)]
    ]
    await _forget(scope, ids, DELETED_OBSERVATION)
    return _done("Observations deleted successfully")


async def delete_relations(relations: Any = None) -> CallToolResult:
    args = parse_arguments(_DeleteRelations, relations=relations)
    scope = scope_of(write=True)
    wanted = set()
    for relation in args.relations:
        source, target = _name_or_none(relation.source), _name_or_none(relation.to)
        try:
            kind = relation_type(relation.relationType)
        except InvalidInputError:
            continue  # names no relation the engine could hold
        if source is not None and target is not None:
            wanted.add((match_key(source), kind, match_key(target)))
    _, present = await _open(scope, [source for source, _, _ in wanted])
    ids = [
        r.id for r in present if (match_key(r.source), r.relation, match_key(r.target)) in wanted
    ]
    await _forget(scope, ids, DELETED_RELATION)
    return _done("Relations deleted successfully")


async def read_graph() -> CallToolResult:
    graph = await _read_graph(scope_of())
    return _result(graph, graph)


async def search_nodes(query: Any = None) -> CallToolResult:
    args = parse_arguments(_SearchNodes, query=query)
    scope = scope_of()
    hits = (await scope.search_nodes(args.query, limit=SEARCH_LIMIT)).hits
    # A hit carries only the facts that best answer the query; the reference answers
    # with whole entities, so the hits are opened: every current fact, and every
    # relation touching them.
    names = [hit.entity.name for hit in hits]
    entities, relations = await _open(scope, names)
    opened = {match_key(e.name): e for e in entities}
    ranked = [opened[key] for key in map(match_key, names) if key in opened]
    kept = {e.name for e in ranked}
    graph = _graph_json(ranked, (r for r in relations if {r.source, r.target} & kept))
    return _result(graph, graph)


async def open_nodes(names: Any = None) -> CallToolResult:
    args = parse_arguments(_OpenNodes, names=names)
    scope = scope_of()
    valid = [n for n in map(_name_or_none, args.names) if n is not None]
    entities, relations = await _open(scope, valid)
    graph = _graph_json(entities, relations)
    return _result(graph, graph)


# The tools, each under the reference's name.
ADAPTERS = {
    fn.__name__: fn
    for fn in (
        create_entities,
        create_relations,
        add_observations,
        delete_entities,
        delete_observations,
        delete_relations,
        read_graph,
        search_nodes,
        open_nodes,
    )
}


def _guarded(fn: Any) -> Any:
    """`fn`, with a bad argument or a refused write answered as a tool error carrying
    the message, never as a crash."""

    async def run(**arguments: Any) -> CallToolResult:
        try:
            return await fn(**arguments)
        except (InvalidInputError, NotAuthorized) as exc:
            return _tool_error(str(exc))

    return run


def build_compat_tools() -> list[Tool]:
    tools = []
    for name, spec in TOOLS.items():
        fn = ADAPTERS[name]
        tool = Tool.from_function(
            fn,
            title=spec.title,
            description=spec.description,
            annotations=spec.annotations,
            structured_output=False,
        )
        tool.fn = _guarded(fn)
        tool.parameters = spec.input_schema
        # Published as the reference publishes it; each tool builds its own result.
        tool.fn_metadata.output_schema = spec.output_schema
        tools.append(tool)
    return tools


def build_compat_server(
    settings: Settings, memory: GraphMemory | None = None
) -> MCPServer[AppState]:
    """The reference memory server's tools and resource over chronomem's `memory`, or
    over `settings.db` opened by the server's lifespan; scopes and tokens work as in
    `build_server`."""

    server: MCPServer[AppState] = MCPServer(
        name="chronomem",
        title="chronomem memory (reference memory server compatible)",
        version=server_version(),
        lifespan=memory_lifespan(settings, memory),
        log_level="WARNING",
        tools=build_compat_tools(),
        middleware=[RequestScope()],
    )

    @server.resource(
        GRAPH_RESOURCE.uri,
        name=GRAPH_RESOURCE.name,
        title=GRAPH_RESOURCE.title,
        description=GRAPH_RESOURCE.description,
        mime_type=GRAPH_RESOURCE.mime_type,
    )
    async def knowledge_graph() -> str:
        return json.dumps(await _read_graph(scope_of()), indent=2, ensure_ascii=False)

    check_prompt_requests(server)
    return server
