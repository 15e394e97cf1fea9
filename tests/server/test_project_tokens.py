"""A token confined to a project is confined for writes as well as reads (DESIGN §2,
"A project is an overlay"), through the running server: every way a call closes a
row, made with project A's token, leaves the global memory and project B as they were,
and A's ids appear in nothing they read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from .conftest import http_client, make_token, serving

pytestmark = pytest.mark.anyio


async def _ok(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content[0].text
    assert result.structured_content is not None
    return result.structured_content


async def _everything(client: Client) -> str:
    """What a token reads of Alice, Acme and Initech, as one JSON text."""
    parts = [
        await _ok(client, "read_graph", {"include_history": True, "limit": 500}),
        await _ok(client, "open_nodes", {"names": ["Alice", "Acme", "Initech"]}),
        await _ok(client, "history", {"entity": "Alice"}),
        await _ok(client, "profile_card", {}),
        (await client.read_resource("memory://graph")).contents[0].text,
    ]
    return json.dumps(parts, sort_keys=True)


def _ids(graph: dict[str, Any]) -> set[str]:
    facts = {o["id"] for entity in graph["entities"] for o in entity["observations"]}
    return facts | {r["id"] for r in graph["relations"]}


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_a_project_token_changes_nothing_outside_its_project(
    tmp_path: Path, transport: str
) -> None:
    tokens = tmp_path / "tokens.json"
    owner = make_token(tokens, "--app", "coach", "--user", "alice")
    in_a = make_token(tokens, "--app", "coach", "--user", "alice", "--project", "A")
    in_b = make_token(tokens, "--app", "coach", "--user", "alice", "--project", "B")
    args = ("--transport", transport, "--auth-tokens", str(tokens))
    async with serving(tmp_path, *args) as server:
        url = server.url("/mcp" if transport == "http" else "/sse")
        async with http_client(url, owner) as client:
            await _ok(
                client,
                "remember",
                {"entity": "Alice", "facts": ["basic plan"], "attribute": "plan"},
            )
            tea = await _ok(client, "remember", {"entity": "Alice", "facts": ["likes tea"]})
            soup = await _ok(client, "remember", {"entity": "Alice", "facts": ["likes soup"]})
            await _ok(
                client, "relate", {"source": "Alice", "relation": "works at", "target": "Acme"}
            )
            before = await _everything(client)
        async with http_client(url, in_b) as client:
            before_b = await _everything(client)

        async with http_client(url, in_a) as client:
            calls = [
                ("remember", {"entity": "Alice", "facts": ["pro plan"], "attribute": "plan"}),
                (
                    "remember",
                    {
                        "entity": "Alice",
                        "facts": ["likes coffee"],
                        "replaces": [tea["added"][0]["id"]],
                    },
                ),
                ("forget", {"ids": [soup["added"][0]["id"]], "reason": "not in A"}),
                (
                    "relate",
                    {
                        "source": "Alice",
                        "relation": "works at",
                        "target": "Initech",
                        "exclusive": True,
                    },
                ),
                ("forget", {"entities": ["Acme"]}),
                ("forget", {"entities": ["Alice"]}),
            ]
            for tool, arguments in calls:
                await _ok(client, tool, arguments)
            in_project = await _ok(client, "read_graph", {"include_history": True, "limit": 500})
            history = await _ok(client, "history", {"entity": "Alice"})
        assert all(not item.get("current", True) for item in history["timeline"])
        own_ids = _ids(in_project) - _ids(json.loads(before)[0])
        assert len(own_ids) == 3  # pro plan, likes coffee, works at Initech

        async with http_client(url, owner) as client:
            after = await _everything(client)
        async with http_client(url, in_b) as client:
            after_b = await _everything(client)
        assert after == before
        assert after_b == before_b
        for own_id in own_ids:
            assert own_id not in after and own_id not in after_b
