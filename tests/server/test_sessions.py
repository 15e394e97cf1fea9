"""HTTP and SSE sessions: bound to the token that opened them, capped per token, and
closed when idle. Each test runs the real server process and speaks raw HTTP, which
the SDK client cannot do with someone else's session id."""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx2
import pytest

from ..polling import eventually
from .conftest import INITIALIZE, PING, bearer, initialize, make_token, serving, sse_endpoint

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


def assert_over_the_cap(response: httpx2.Response) -> None:
    assert response.status_code == 429
    error = response.json()["error"]
    assert "too many open sessions" in error["message"] and "--max-sessions" in error["message"]


async def test_a_token_at_its_session_cap_leaves_other_tokens_their_sessions(
    tmp_path: Path,
) -> None:
    tokens, alice, bob = two_tokens(tmp_path)
    async with (
        serving(
            tmp_path, "--transport", "http", "--auth-tokens", str(tokens), "--max-sessions", "2"
        ) as served,
        httpx2.AsyncClient(timeout=30) as http,
    ):
        url = served.url("/mcp")
        first, _ = await initialize(http, url, alice), await initialize(http, url, alice)
        over = await http.post(url, json=INITIALIZE, headers=bearer(alice))
        assert_over_the_cap(over)
        assert "this token already has 2" in over.json()["error"]["message"]
        await initialize(http, url, bob)  # another token is not locked out
        ended = await http.delete(url, headers=bearer(alice, **{"mcp-session-id": first}))
        assert ended.status_code == 200
        await initialize(http, url, alice)  # a place freed by DELETE


async def test_a_token_at_its_cap_of_sse_streams_leaves_other_tokens_theirs(
    tmp_path: Path,
) -> None:
    tokens, alice, bob = two_tokens(tmp_path)
    async with (
        serving(
            tmp_path, "--transport", "sse", "--auth-tokens", str(tokens), "--max-sessions", "1"
        ) as served,
        httpx2.AsyncClient(timeout=30) as http,
        http.stream("GET", served.url("/sse"), headers=bearer(alice)) as stream,
    ):
        lines = stream.aiter_lines()  # held: dropping it would close the stream
        await sse_endpoint(lines)
        async with http.stream("GET", served.url("/sse"), headers=bearer(alice)) as over:
            await over.aread()
            assert_over_the_cap(over)
        async with http.stream("GET", served.url("/sse"), headers=bearer(bob)) as other:
            assert other.status_code == 200
            assert (await sse_endpoint(other.aiter_lines())).startswith("/messages/")


async def test_without_auth_the_session_cap_is_the_servers(tmp_path: Path) -> None:
    async with (
        serving(tmp_path, "--transport", "http", "--max-sessions", "1") as served,
        httpx2.AsyncClient(timeout=30) as http,
    ):
        url = served.url("/mcp")
        await initialize(http, url)
        over = await http.post(url, json=INITIALIZE, headers=bearer(None))
        assert_over_the_cap(over)
        assert "the server already has 1" in over.json()["error"]["message"]


async def test_an_idle_streamable_http_session_is_closed_and_frees_its_place(
    tmp_path: Path,
) -> None:
    async with (
        serving(
            tmp_path, "--transport", "http", "--max-sessions", "1", "--session-idle-timeout", "1"
        ) as served,
        httpx2.AsyncClient(timeout=30) as http,
    ):
        url = served.url("/mcp")
        idle = await initialize(http, url)
        assert_over_the_cap(await http.post(url, json=INITIALIZE, headers=bearer(None)))

        async def admitted() -> bool:  # refusals do not touch the idle session
            return (await http.post(url, json=INITIALIZE, headers=bearer(None))).status_code != 429

        await eventually(admitted, within=30, every=0.1)
        gone = await http.post(url, json=PING, headers=bearer(None, **{"mcp-session-id": idle}))
        assert gone.status_code == 404


async def test_an_idle_sse_stream_is_ended_and_its_session_forgotten(tmp_path: Path) -> None:
    async with (
        serving(tmp_path, "--transport", "sse", "--session-idle-timeout", "1") as served,
        httpx2.AsyncClient(timeout=30) as http,
    ):
        async with http.stream("GET", served.url("/sse"), headers=bearer(None)) as stream:
            lines = stream.aiter_lines()
            endpoint = served.url(await sse_endpoint(lines))
            with anyio.fail_after(30):
                async for _ in lines:  # until the server ends the stream
                    pass
        gone = await http.post(endpoint, json=PING, headers=bearer(None))
        assert gone.status_code == 404
    assert "Traceback" not in served.stderr()
