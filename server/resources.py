"""Resources: the profile card, the graph, and one entity or its history by name."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError

from memory import InvalidInputError

from .access import scope_of

R = TypeVar("R")

__all__ = ["register"]

# One read_graph page, as the tool's default: the whole graph of a large memory is
# far more than any reader wants at once.
GRAPH_PAGE = 50


def register(server: MCPServer) -> None:
    @server.resource("memory://profile", name="profile", mime_type="text/plain")
    async def profile() -> str:
        """The profile card: what is known about the user, compact, for a prompt."""
        return (await scope_of().profile_card()).text

    @server.resource("memory://graph", name="graph", mime_type="application/json")
    async def graph() -> str:
        """The current graph's first page: 50 entities with their current facts and
        the relations from them, as the read_graph result (with total_entities and
        next_cursor). Page on with the read_graph tool, passing next_cursor as cursor."""
        return (await scope_of().read_graph(limit=GRAPH_PAGE)).model_dump_json()

    @server.resource("memory://entities/{name}", name="entity", mime_type="application/json")
    async def entity(name: str) -> str:
        """One entity with its current facts and relations (the open_nodes result)."""
        result = await _or_not_found(name, scope_of().open_nodes([name]))
        if result.missing:
            raise ResourceNotFoundError(f"no entity named {name!r}")
        return result.model_dump_json()

    @server.resource(
        "memory://entities/{name}/history", name="entity_history", mime_type="application/json"
    )
    async def entity_history(name: str) -> str:
        """An entity's timeline on both time axes (the history result)."""
        return (await _or_not_found(name, scope_of().history(name))).model_dump_json()


async def _or_not_found(name: str, read: Awaitable[R]) -> R:
    try:
        return await read
    except InvalidInputError:
        raise ResourceNotFoundError(f"no entity named {name!r}") from None
