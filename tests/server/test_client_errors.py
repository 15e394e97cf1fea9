"""Client mistakes cost less than the work: a bad prompts/get answers -32602 naming
the field, and a request cut off by its client is dropped quietly, both without a
traceback in the server's log, over the real transports."""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path
from typing import Any

import httpx2
import pytest

from .conftest import CHRONOMEM, INITIALIZE, PING, bearer, initialize, serving, sse_endpoint

pytestmark = pytest.mark.anyio
INVALID_PARAMS = -32602

BAD_PROMPTS: list[tuple[dict[str, Any], str]] = [
    ({"name": "nope"}, "name: no prompt named 'nope'"),
    ({"name": 5}, "name: must be a string"),
    ({}, "name: missing"),
    ({"name": "session_context", "arguments": {"topicc": "x"}}, "arguments.topicc: unknown"),
    ({"name": "memory_guidelines", "arguments": {"x": "1"}}, "arguments.x: unknown"),
    ({"name": "session_context", "arguments": {"topic": 5}}, "arguments.topic: must be a string"),
    ({"name": "session_context", "arguments": ["x"]}, "arguments: must be an object"),
    ({"name": "session_context", "arguments": {"topic": ""}}, "topic: must not be empty"),
]


def get_prompt(number: int, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": number, "method": "prompts/get", "params": params}


def assert_invalid(answer: dict[str, Any], field: str) -> None:
    assert answer["error"]["code"] == INVALID_PARAMS, answer
    assert field in answer["error"]["message"], answer


async def test_a_bad_prompts_get_over_http_names_the_field(tmp_path: Path) -> None:
    async with (
        serving(tmp_path, "--transport", "http") as served,
        httpx2.AsyncClient(timeout=30) as http,
    ):
        url = served.url("/mcp")
        headers = bearer(None, **{"mcp-session-id": await initialize(http, url)})
        for number, (params, field) in enumerate(BAD_PROMPTS, 10):
            answer = await http.post(url, json=get_prompt(number, params), headers=headers)
            assert_invalid(answer.json(), field)
        good = {"name": "session_context", "arguments": {"topic": "tea"}}
        answer = (await http.post(url, json=get_prompt(1, good), headers=headers)).json()
        assert answer["result"]["messages"], answer
    assert "Traceback" not in served.stderr()


def test_a_bad_prompts_get_over_stdio_names_the_field(tmp_path: Path) -> None:
    lines = [INITIALIZE, {"jsonrpc": "2.0", "method": "notifications/initialized"}]
    lines += [get_prompt(number, params) for number, (params, _) in enumerate(BAD_PROMPTS, 10)]
    done = subprocess.run(
        [CHRONOMEM, "serve", "--db", str(tmp_path / "memory.db")],
        input="".join(json.dumps(line) + "\n" for line in lines),
        capture_output=True,
        text=True,
        timeout=60,
    )
    answers = {a["id"]: a for a in map(json.loads, done.stdout.splitlines()) if "id" in a}
    for number, (_, field) in enumerate(BAD_PROMPTS, 10):
        assert_invalid(answers[number], field)
    assert "Traceback" not in done.stderr


def cut_off(port: int, path: str, *headers: str) -> None:
    """A POST that promises 1,000 bytes, sends a dozen and hangs up."""
    head = [
        f"POST {path} HTTP/1.1",
        f"Host: 127.0.0.1:{port}",
        "Content-Type: application/json",
        "Accept: application/json, text/event-stream",
        "Content-Length: 1000",
        *headers,
    ]
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(("\r\n".join(head) + "\r\n\r\n" + '{"jsonrpc":').encode())


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_a_post_cut_off_by_its_client_is_dropped_quietly(
    tmp_path: Path, transport: str
) -> None:
    async with (
        serving(tmp_path, "--transport", transport) as served,
        httpx2.AsyncClient(timeout=30) as http,
    ):
        if transport == "http":
            url = served.url("/mcp")
            session = await initialize(http, url)
            for _ in range(3):
                cut_off(served.port, "/mcp", f"mcp-session-id: {session}")
            headers = bearer(None, **{"mcp-session-id": session})
            for _ in range(3):  # the server goes on serving the session
                answer = await http.post(url, json=PING, headers=headers)
                assert answer.json()["result"] == {}
        else:
            async with http.stream("GET", served.url("/sse"), headers=bearer(None)) as stream:
                lines = stream.aiter_lines()  # held: dropping it would close the stream
                endpoint = await sse_endpoint(lines)
                for _ in range(3):
                    cut_off(served.port, endpoint)
                for _ in range(3):
                    answer = await http.post(served.url(endpoint), json=PING, headers=bearer(None))
                    assert answer.status_code == 202
    assert "Traceback" not in served.stderr() and "ClientDisconnect" not in served.stderr()
