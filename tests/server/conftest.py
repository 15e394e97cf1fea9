from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from server import Settings, build_server

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
        process.terminate()
        try:
            process.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()


async def wait_for_port(port: int, process: subprocess.Popen[str]) -> None:
    with anyio.fail_after(20):
        while True:
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            try:
                stream = await anyio.connect_tcp("127.0.0.1", port)
            except OSError:
                await anyio.sleep(0.05)
            else:
                await stream.aclose()
                return


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
