"""The server as a client config would run it: stdio, streamable HTTP and SSE, with auth."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import AsyncIterator
from importlib.util import find_spec
from pathlib import Path

import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.types import TextContent, TextResourceContents
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from server.app import build_server
from server.settings import Settings
from server.transports import backend_options, http_app, serve, uvicorn_config

from .conftest import (
    CHRONOMEM,
    free_port,
    http_client,
    make_token,
    running_server,
    wait_for_port,
)

pytestmark = pytest.mark.anyio
HOST = "127.0.0.1"


def _text(block: object) -> str:
    """The text of a result's content block or a resource's contents."""
    assert isinstance(block, TextContent | TextResourceContents), block
    return block.text


def test_token_file_holds_only_hashes(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    token = make_token(tokens, "--app", "coach", "--user", "alice", "--read-only")
    assert token.startswith("cm_") and len(token) > 40
    stored = tokens.read_text()
    assert token not in stored and token[3:] not in stored
    entry = json.loads(stored)["tokens"][0]
    assert (entry["app"], entry["user"], entry["read_only"]) == ("coach", "alice", True)
    assert oct(tokens.stat().st_mode & 0o777) == "0o600"
    second = make_token(tokens, "--app", "coach", "--user", "bob")
    assert second != token and len(json.loads(tokens.read_text())["tokens"]) == 2


async def test_stdio_as_a_client_config_runs_it(tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=CHRONOMEM,
        args=["serve", "--db", str(tmp_path / "memory.db")],
        env={"PATH": os.environ["PATH"], "CHRONOMEM_APP": "coach", "CHRONOMEM_USER": "alice"},
    )
    async with Client(params) as client:
        result = await client.call_tool("remember", {"entity": "Alice", "facts": ["likes tea"]})
        assert not result.is_error
        profile = await client.read_resource("memory://profile")
        assert "likes tea" in _text(profile.contents[0])
    from memory import GraphMemory

    async with GraphMemory.open(tmp_path / "memory.db") as mem:
        graph = await mem.scope(app="coach", user="alice").read_graph()
        assert graph.total_entities == 1
        assert (await mem.scope(app="default", user="default").read_graph()).total_entities == 0


def test_stdio_prints_nothing_but_protocol_on_stdout(tmp_path: Path) -> None:
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        },
    }
    done = subprocess.run(
        [CHRONOMEM, "serve", "--db", str(tmp_path / "m.db")],
        input=json.dumps(request) + "\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert lines and all(json.loads(line)["jsonrpc"] == "2.0" for line in lines)
    assert json.loads(lines[0])["result"]["serverInfo"]["name"] == "chronomem"
    assert str(tmp_path / "m.db") in done.stderr and "alice" not in done.stderr


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_tokens_isolate_scopes_and_read_only_cannot_write(
    tmp_path: Path, transport: str
) -> None:
    tokens = tmp_path / "tokens.json"
    alice = make_token(tokens, "--app", "coach", "--user", "alice")
    bob = make_token(tokens, "--app", "coach", "--user", "bob")
    reader = make_token(tokens, "--app", "coach", "--user", "alice", "--read-only")
    port = free_port()
    path = "/mcp" if transport == "http" else "/sse"
    url = f"http://127.0.0.1:{port}{path}"
    with running_server(
        "--transport",
        transport,
        "--port",
        str(port),
        "--auth-tokens",
        str(tokens),
        "--db",
        str(tmp_path / "memory.db"),
    ) as process:
        await wait_for_port(port, process)
        async with httpx2.AsyncClient() as raw:
            for headers in ({}, {"Authorization": "Bearer cm_wrong"}, {"Authorization": alice}):
                response = await raw.post(url, json={}, headers=headers)
                assert response.status_code == 401
                assert "Bearer" in response.headers["www-authenticate"]

        async with http_client(url, alice) as client:
            result = await client.call_tool("remember", {"entity": "Alice", "facts": ["secret"]})
            assert not result.is_error
            fact_id = result.structured_content["added"][0]["id"]
        async with http_client(url, bob) as client:
            found = await client.call_tool("search_nodes", {"query": "secret"})
            assert found.structured_content["hits"] == []
            forgot = await client.call_tool("forget", {"ids": [fact_id], "entities": ["Alice"]})
            assert forgot.structured_content["not_found"] == [fact_id, "Alice"]
            history = await client.call_tool("history", {"entity": "Alice"})
            assert history.is_error and "no entity named 'Alice'" in _text(history.content[0])
            profile = await client.read_resource("memory://profile")
            assert "secret" not in _text(profile.contents[0])
        async with http_client(url, reader) as client:
            denied = await client.call_tool("remember", {"entity": "Alice", "facts": ["x"]})
            assert denied.is_error and "read-only" in _text(denied.content[0])
            still = await client.call_tool("open_nodes", {"names": ["Alice"]})
            assert [o["text"] for o in still.structured_content["entities"][0]["observations"]] == [
                "secret"
            ]


async def test_unauthenticated_http_on_loopback_uses_the_start_scope(tmp_path: Path) -> None:
    port = free_port()
    with running_server(
        "--transport",
        "http",
        "--port",
        str(port),
        "--db",
        str(tmp_path / "memory.db"),
        "--user",
        "carol",
    ) as process:
        await wait_for_port(port, process)
        async with http_client(f"http://127.0.0.1:{port}/mcp") as client:
            await client.call_tool("remember", {"entity": "Carol", "facts": ["x"]})
    from memory import GraphMemory

    async with GraphMemory.open(tmp_path / "memory.db") as mem:
        assert (await mem.scope(app="default", user="carol").read_graph()).total_entities == 1


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.10", "::"])
def test_non_loopback_without_auth_is_refused(tmp_path: Path, host: str) -> None:
    done = subprocess.run(
        [CHRONOMEM, "serve", "--transport", "http", "--host", host, "--db", str(tmp_path / "m")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert f"refusing to listen on {host} without authentication" in done.stderr
    assert "--auth-tokens" in done.stderr
    assert not (tmp_path / "m").exists()


def test_a_bad_database_file_is_reported_before_serving(tmp_path: Path) -> None:
    bad = tmp_path / "notes.db"
    bad.write_text("my shopping list\n" * 50)
    done = subprocess.run(
        [CHRONOMEM, "serve", "--db", str(bad)], input="", capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    assert "is not a usable SQLite database" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert bad.read_text() == "my shopping list\n" * 50


async def test_http_refuses_a_request_body_over_the_limit(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with running_server(
        "--transport",
        "http",
        "--port",
        str(port),
        "--db",
        str(tmp_path / "memory.db"),
        "--max-request-bytes",
        "4096",
    ) as process:
        await wait_for_port(port, process)
        flood = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": "a" * 10_000}}
        body = json.dumps(flood).encode()

        # No Content-Length: the limit counts as the body arrives.
        async def chunks() -> AsyncIterator[bytes]:
            for start in range(0, len(body), 1000):
                yield body[start : start + 1000]

        async with httpx2.AsyncClient() as raw:
            for content in (body, chunks()):
                response = await raw.post(
                    url, content=content, headers={"Content-Type": "application/json"}
                )
                assert response.status_code == 413
        async with http_client(url) as client:  # calls within the limit are served
            result = await client.call_tool("remember", {"entity": "Alice", "facts": ["ok"]})
            assert not result.is_error


def test_network_transports_run_on_uvloop_and_httptools() -> None:
    """SSE and HTTP serve on uvloop, parsing HTTP with httptools: both dependencies."""
    assert find_spec("uvloop") is not None and find_spec("httptools") is not None
    assert backend_options("http") == backend_options("sse") == {"use_uvloop": True}
    assert backend_options("stdio") == {}  # a pipe: the default loop serves it
    settings = Settings(":memory:")
    app = http_app(build_server(settings), settings, "http", HOST)
    config = uvicorn_config(app, HOST, 8765, settings)
    assert isinstance(config.http, type) and issubclass(config.http, HttpToolsProtocol)
    assert (config.host, config.port, config.lifespan) == (HOST, 8765, "on")


async def test_serving_freezes_what_was_loaded_out_of_the_collectors_reach() -> None:
    """The objects loaded before serving are frozen, so a full collection skips them."""
    import gc

    settings = Settings(":memory:")
    server = build_server(settings)
    seen: list[int] = []

    async def serve_stdio(_: object) -> None:
        seen.append(gc.get_freeze_count())

    gc.unfreeze()
    try:
        await serve(server, settings, "stdio", HOST, 0, stdio=serve_stdio)
    finally:
        gc.unfreeze()
    assert seen and seen[0] > 10_000
