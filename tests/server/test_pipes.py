"""stdio over asyncio pipes (`server.pipes`): what the SDK's transport reads from them,
the wire claimed while serving and given back, the fallbacks, and `chronomem serve`
over pipes with a request line of megabytes and a client that stops reading."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import time
from contextlib import suppress
from pathlib import Path

import pytest

from server import pipes
from server.app import build_server
from server.settings import Settings

from .conftest import CHRONOMEM

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX pipes"),
]


async def _lines(data: bytes, limit: int = pipes.LINE_LIMIT) -> list[str]:
    reader = asyncio.StreamReader(limit=limit)
    reader.feed_data(data)
    reader.feed_eof()
    return [line async for line in pipes.PipeLines(reader)]


async def test_lines_are_utf8_text_with_bad_bytes_replaced_up_to_the_end() -> None:
    lines = await _lines('{"a": "é"}\n'.encode() + b'{"b": "\xff"}\r\n' + b'{"c": 1}')
    assert lines == ['{"a": "é"}\n', '{"b": "\ufffd"}\r\n', '{"c": 1}']


async def test_a_line_over_the_limit_stands_in_as_not_json_and_reading_goes_on() -> None:
    lines = await _lines(b"x" * 100 + b"\n" + b'{"next": 1}\n', limit=50)
    assert lines == [pipes.NOT_JSON, '{"next": 1}\n']
    with pytest.raises(json.JSONDecodeError):
        json.loads(pipes.NOT_JSON)


def test_the_sdk_has_the_server_the_pipes_are_given_to() -> None:
    """`serve_stdio` falls back to the SDK's threads without it: this says so."""
    server = build_server(Settings(":memory:"))
    assert getattr(server, "_lowlevel_server", None) is not None


# Run in a child whose stdin and stdout the test gives it: prints what it saw on
# stderr as JSON, writes one line through the claimed wire.
CHILD = textwrap.dedent(
    """
    import asyncio, json, os, sys
    from server.pipes import claimed_pipes

    async def main():
        before = {fd: os.get_blocking(fd) for fd in (0, 1)}
        async with claimed_pipes() as wire:
            if wire is None:
                seen = {"claimed": False}
            else:
                lines, out = wire
                print("stray print", flush=True)  # fd 1 is stderr now
                os.write(1, b"stray write\\n")
                first = await lines.__anext__()
                await out.write("answer to " + first)
                await out.flush()
                seen = {"claimed": True, "read": first, "fd0": os.read(0, 10).decode()}
        seen["blocking_kept"] = before == {fd: os.get_blocking(fd) for fd in (0, 1)}
        os.write(1, b"after\\n")  # the wire is fd 1 again
        print(json.dumps(seen), file=sys.stderr)

    asyncio.run(main())
    """
)


def _child(stdin: int | None = None, input_bytes: bytes | None = None) -> tuple[str, dict]:
    """The child's stdout, and what it saw (stdin: a pipe with `input_bytes`)."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD],
        stdin=stdin,
        input=input_bytes,
        capture_output=True,
        timeout=30,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr.decode()
    *stray, seen = done.stderr.decode().splitlines()
    return done.stdout.decode(), {"stray": stray, **json.loads(seen)}


def test_the_wire_is_claimed_while_serving_and_given_back() -> None:
    stdout, seen = _child(input_bytes=b"hello\n")
    assert stdout == "answer to hello\nafter\n"  # nothing stray on the wire
    assert seen["stray"] == ["stray print", "stray write"]
    assert seen["claimed"] and seen["read"] == "hello\n"
    assert seen["fd0"] == ""  # fd 0 reads the null device meanwhile
    assert seen["blocking_kept"]


def test_stdin_from_a_regular_file_is_left_to_the_sdk(tmp_path: Path) -> None:
    source = tmp_path / "requests.jsonl"
    source.write_bytes(b"hello\n")
    with source.open("rb") as file:
        stdout, seen = _child(file.fileno())
    assert seen["claimed"] is False and seen["blocking_kept"]
    assert stdout == "after\n"


def _request(number: int, method: str, params: dict) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": number, "method": method, "params": params}).encode()


INITIALIZE = {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "test", "version": "1"},
}


def _serve(tmp_path: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [CHRONOMEM, "serve", "--db", str(tmp_path / "memory.db")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "CHRONOMEM_DB": ""},
    )


def test_serve_reads_a_request_of_megabytes_and_answers_each_request(tmp_path: Path) -> None:
    turns = [{"role": "user", "text": f"{i} " + "word " * 3_999} for i in range(200)]
    requests = [
        _request(1, "initialize", INITIALIZE),
        b'{"jsonrpc": "2.0", "method": "notifications/initialized"}',
        _request(2, "tools/call", {"name": "record_turns",
                                   "arguments": {"session_id": "s", "turns": turns}}),
        _request(3, "tools/call", {"name": "recall", "arguments": {"query": "199 word"}}),
    ]  # fmt: skip
    assert len(requests[2]) > 4_000_000
    answers = []
    with _serve(tmp_path) as process:
        assert process.stdin is not None and process.stdout is not None
        for request in requests:
            process.stdin.write(request + b"\n")
            process.stdin.flush()
            if b'"id"' in request:
                answers.append(json.loads(process.stdout.readline()))
        process.stdin.close()
        assert process.wait(timeout=30) == 0
    stored = answers[1]["result"]["structuredContent"]["stored"]
    assert stored == 200
    assert answers[2]["result"]["structuredContent"]["turns"][0]["text"].startswith("199 ")


def test_serve_ends_quietly_when_the_client_stops_reading(tmp_path: Path) -> None:
    with _serve(tmp_path) as process:
        assert process.stdin is not None and process.stdout is not None
        process.stdout.close()  # the client has gone: every answer meets a closed pipe
        process.stdin.write(_request(1, "initialize", INITIALIZE) + b"\n")
        process.stdin.flush()
        time.sleep(1)
        with suppress(BrokenPipeError):  # the server may have ended first
            process.stdin.close()
        assert process.wait(timeout=30) == 0
        stderr = process.stderr.read().decode() if process.stderr else ""
    assert "the client closed the connection" in stderr
    assert "Traceback" not in stderr
