from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from server import Settings, build_server

from ..polling import eventually

CHRONOMEM = str(Path(sys.executable).parent / "chronomem")


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[Client]:
    server = build_server(Settings(db=str(tmp_path / "memory.db"), app="coach", user="alice"))
    async with Client(server) as connected:
        yield connected


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def running_server(*args: str) -> Iterator[subprocess.Popen[str]]:
    """`chronomem serve ARGS` in a subprocess, stopped on exit."""
    process = subprocess.Popen(
        [CHRONOMEM, "serve", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "CHRONOMEM_DB": ""},
    )
    try:
        yield process
    finally:
        stop(process)


def stop(process: subprocess.Popen[str]) -> None:
    """Terminate a server, killing it if it has not exited within 10 s."""
    process.terminate()
    try:
        process.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()


async def wait_for_port(
    port: int,
    process: subprocess.Popen[str],
    host: str = "127.0.0.1",
    output: Callable[[], str] | None = None,
) -> None:
    """Until the server accepts connections on `port`; fails with its `output` (by
    default its stderr) if it exits first."""

    def told() -> str:
        if output is not None:
            return output()
        return process.stderr.read() if process.stderr else ""

    async def accepting() -> bool:
        assert process.poll() is None, told()
        try:
            stream = await anyio.connect_tcp(host, port)
        except OSError:
            return False
        await stream.aclose()
        return True

    await eventually(accepting, within=20)


@asynccontextmanager
async def http_client(url: str, token: str | None = None) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if url.endswith("/sse"):
        async with Client(sse_client(url, headers=headers)) as connected:
            yield connected
        return
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http)) as connected,
    ):
        yield connected


def make_token(tokens: Path, *args: str) -> str:
    """`chronomem token create --auth-tokens TOKENS ARGS`: the new token."""
    done = subprocess.run(
        [CHRONOMEM, "token", "create", "--auth-tokens", str(tokens), *args],
        capture_output=True,
        text=True,
        check=True,
    )
    token = done.stdout.strip()
    assert done.stdout == token + "\n"  # the token alone on stdout
    return token


@dataclass
class Served:
    """A `chronomem serve` process on a free loopback port, its stderr in a file."""

    port: int
    process: subprocess.Popen[str]
    log: Path

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def stderr(self) -> str:
        return self.log.read_text()


@asynccontextmanager
async def serving(tmp_path: Path, *args: str, host: str = "127.0.0.1") -> AsyncIterator[Served]:
    """`chronomem serve --port P --db tmp_path/memory.db ARGS`, ready to connect to."""
    port = free_port()
    log = tmp_path / f"server-{port}.log"
    command = [
        CHRONOMEM,
        "serve",
        "--host",
        host,
        "--port",
        str(port),
        "--db",
        str(tmp_path / "memory.db"),
        *args,
    ]
    with log.open("w") as err:
        process = subprocess.Popen(
            command,
            stdout=subprocess.DEVNULL,
            stderr=err,
            text=True,
            env={**os.environ, "CHRONOMEM_DB": ""},
        )
    try:
        await wait_for_port(port, process, host, log.read_text)
        yield Served(port, process, log)
    finally:
        stop(process)


PROTOCOL = "2025-06-18"
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": PROTOCOL}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": PROTOCOL,
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}
PING = {"jsonrpc": "2.0", "id": 2, "method": "ping"}


def bearer(token: str | None, **extra: str) -> dict[str, str]:
    """MCP request headers, with `Authorization: Bearer TOKEN` when there is one."""
    headers = {**MCP_HEADERS, **extra}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


async def initialize(http: httpx2.AsyncClient, url: str, token: str | None = None) -> str:
    """Open a streamable-HTTP session by hand; its `mcp-session-id`."""
    response = await http.post(url, json=INITIALIZE, headers=bearer(token))
    assert response.status_code == 200, response.text
    session = response.headers["mcp-session-id"]
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    done = await http.post(url, json=note, headers=bearer(token, **{"mcp-session-id": session}))
    assert done.status_code == 202, done.text
    return session


async def sse_endpoint(lines: AsyncIterator[str]) -> str:
    """The message path (`/messages/?session_id=...`) of an SSE stream's first event."""
    async for line in lines:
        if line.startswith("data:"):
            return line.removeprefix("data:").strip()
    raise AssertionError("the SSE stream ended before its endpoint event")
