"""Limits that hold before any token is checked: the size of a request head, the
time to send it, and the connections open at once. Raw sockets, since no HTTP
client sends a request this broken."""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx2
import pytest
from anyio.abc import SocketStream

from ..polling import eventually
from .conftest import initialize, make_token, serving

pytestmark = pytest.mark.anyio


async def answer_to(sock: SocketStream) -> bytes:
    """Everything the server sends until it closes the connection."""
    received = b""
    with anyio.fail_after(20):
        try:
            while True:
                received += await sock.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError, ConnectionResetError):
            return received


async def test_a_huge_header_is_answered_431_before_it_is_read_whole(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    alice = make_token(tokens, "--app", "coach", "--user", "alice")
    async with serving(
        tmp_path, "--transport", "http", "--auth-tokens", str(tokens), "--max-header-bytes", "16384"
    ) as served:
        sock = await anyio.connect_tcp("127.0.0.1", served.port)
        async with sock:
            head = f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\nX-Flood: "
            try:
                await sock.send(head.encode())
                for _ in range(4 * 16):  # up to 4 MiB of one header, never finished
                    await sock.send(b"a" * 65536)
            except (anyio.BrokenResourceError, ConnectionResetError, BrokenPipeError):
                pass  # the server answered and closed while this was still sending
            assert (await answer_to(sock)).startswith(b"HTTP/1.1 431 ")
        sock = await anyio.connect_tcp("127.0.0.1", served.port)
        async with sock:  # over the limit by a little, in one piece
            await sock.send(f"{head}{'a' * 17_000}\r\n\r\n".encode())
            answer = await answer_to(sock)
            assert answer.startswith(b"HTTP/1.1 431 ") and b"--max-header-bytes" in answer
        async with httpx2.AsyncClient(timeout=30) as http:  # valid clients are served
            await initialize(http, served.url("/mcp"), alice)


async def test_a_connection_that_never_finishes_its_request_head_is_closed(
    tmp_path: Path,
) -> None:
    async with serving(tmp_path, "--transport", "http", "--header-timeout", "1") as served:
        silent = await anyio.connect_tcp("127.0.0.1", served.port)
        slow = await anyio.connect_tcp("127.0.0.1", served.port)
        async with silent, slow:
            await slow.send(f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\n".encode())
            assert (await answer_to(slow)).startswith(b"HTTP/1.1 408 ")
            assert await answer_to(silent) == b""  # closed without a word
        async with httpx2.AsyncClient(timeout=30) as http:
            await initialize(http, served.url("/mcp"))


async def test_connections_past_the_cap_are_refused_with_503(tmp_path: Path) -> None:
    async with serving(
        tmp_path, "--transport", "http", "--max-connections", "4", "--keep-alive-timeout", "60"
    ) as served:
        request = f"GET /nothing HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\n\r\n".encode()
        held = [await anyio.connect_tcp("127.0.0.1", served.port) for _ in range(4)]
        for sock in held:  # each answered and kept open
            await sock.send(request)
            with anyio.fail_after(20):
                assert (await sock.receive()).startswith(b"HTTP/1.1 404 ")
        extra = await anyio.connect_tcp("127.0.0.1", served.port)
        async with extra:
            answer = await answer_to(extra)
            assert answer.startswith(b"HTTP/1.1 503 ") and b"--max-connections" in answer
        for sock in held:
            await sock.aclose()
        async with httpx2.AsyncClient(timeout=30) as http:  # room again once they close

            async def admitted() -> bool:
                try:
                    await initialize(http, served.url("/mcp"))
                except (AssertionError, httpx2.HTTPError):
                    return False
                return True

            await eventually(admitted, within=20, every=0.1)
