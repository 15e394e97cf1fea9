"""Resources: the profile card, the graph, and one entity or its history by name."""

from __future__ import annotations

import json

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError

from memory import InvalidInputError

from .access import scope_of

__all__ = ["register"]

GRAPH_PAGE = 500


def register(server: MCPServer) -> None:
    @server.resource("memory://profile", name="profile", mime_type="text/plain")
    async def profile() -> str:
        """The profile card: what is known about the user, compact, for a prompt."""
        return (await scope_of().profile_card()).text

    @server.resource("memory://graph", name="graph", mime_type="application/json")
    async def graph() -> str:
        """The current graph: every entity with its current facts, and the relations."""
        scope = scope_of()
        entities, relations, cursor = [], [], None
        while True:
            page = await scope.read_graph(limit=GRAPH_PAGE, cursor=cursor)
            entities += [e.model_dump(mode="json") for e in page.entities]
            relations += [r.model_dump(mode="json") for r in page.relations]
            cursor = page.next_cursor
            if cursor is None:
                break
        return json.dumps({"entities": entities, "relations": relations})

    @server.resource("memory://entities/{name}", name="entity", mime_type="application/json")
    async def entity(name: str) -> str:
        """One entity with its current facts and relations (the open_nodes result)."""
        result = await _or_not_found(name, scope_of().open_nodes, [name])
        if result.missing:
            raise ResourceNotFoundError(f"no entity named {name!r}")
        return result.model_dump_json()

    @server.resource(
        "memory://entities/{name}/history", name="entity_history", mime_type="application/json"
    )
    async def entity_history(name: str) -> str:
        """An entity's timeline on both time axes (the history result)."""
        return (await _or_not_found(name, scope_of().history, name)).model_dump_json()


async def _or_not_found(name: str, read, argument):  # type: ignore[no-untyped-def]
    try:
        return await read(argument)
    except InvalidInputError:
        raise ResourceNotFoundError(f"no entity named {name!r}") from None
