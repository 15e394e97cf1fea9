"""HTTP and SSE sessions: bound to the token that opened them, capped per token, and
closed when idle. Each test runs the real server process and speaks raw HTTP, which
the SDK client cannot do with someone else's session id."""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest

from .conftest import PING, bearer, initialize, make_token, serving, sse_endpoint

pytestmark = pytest.mark.anyio


def two_tokens(tmp_path: Path) -> tuple[Path, str, str]:
    tokens = tmp_path / "tokens.json"
    alice = make_token(tokens, "--app", "coach", "--user", "alice")
    bob = make_token(tokens, "--app", "coach", "--user", "bob")
    return tokens, alice, bob


async def test_a_streamable_http_session_answers_only_the_token_that_opened_it(
    tmp_path: Path,
) -> None:
    tokens, alice, bob = two_tokens(tmp_path)
    async with (
        serving(tmp_path, "--transport", "http", "--auth-tokens", str(tokens)) as served,
        httpx2.AsyncClient(timeout=30) as http,
    ):
        url = served.url("/mcp")
        session = await initialize(http, url, alice)
        stolen = bearer(bob, **{"mcp-session-id": session})
        for method in ("POST", "GET", "DELETE"):
            body = PING if method == "POST" else None
            async with http.stream(method, url, json=body, headers=stolen) as response:
                assert response.status_code == 404, method
        own = bearer(alice, **{"mcp-session-id": session})
        still = await http.post(url, json=PING, headers=own)
        assert still.status_code == 200 and still.json()["result"] == {}


async def test_an_sse_session_takes_messages_only_from_the_token_that_opened_it(
    tmp_path: Path,
) -> None:
    tokens, alice, bob = two_tokens(tmp_path)
    async with (
        serving(tmp_path, "--transport", "sse", "--auth-tokens", str(tokens)) as served,
        httpx2.AsyncClient(timeout=30) as http,
        http.stream("GET", served.url("/sse"), headers=bearer(alice)) as stream,
    ):
        lines = stream.aiter_lines()  # held: dropping it would close the stream
        endpoint = served.url(await sse_endpoint(lines))
        stolen = await http.post(endpoint, json=PING, headers=bearer(bob))
        assert stolen.status_code == 404, (endpoint, stolen.text)
        own = await http.post(endpoint, json=PING, headers=bearer(alice))
        assert own.status_code == 202, (endpoint, own.text)
