"""stdio served by the event loop (`server.pipes`): what the SDK's transport reads,
the answers owed at end of input, the wire claimed while serving and given back, the
fallbacks, and `chronomem serve` over pipes and sockets: a request line of megabytes,
requests sent just before end of input, one socket for both ends, a client that
stops reading."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
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


async def test_lines_are_utf8_text_up_to_the_end_and_bad_text_is_answered_not_passed() -> None:
    answers: list[str] = []

    async def reply(line: str) -> None:
        answers.append(line)

    reader = asyncio.StreamReader()
    reader.feed_data(
        '{"a": "é", "pair": "\\ud83d\\ude00", "escaped": "\\\\ud800"}\n'.encode()
        + b'{"jsonrpc": "2.0", "id": 5, "method": "m", "params": {"b": "\xff"}}\r\n'
        + b'{"jsonrpc": "2.0", "method": "n", "params": {"b": "\\udfff"}}\n'
        + b'{"c": 1}'
    )
    reader.feed_eof()
    lines = [line async for line in pipes.PipeLines(reader, reply=reply)]
    assert lines == [
        '{"a": "é", "pair": "\\ud83d\\ude00", "escaped": "\\\\ud800"}\n',
        '{"c": 1}',
    ]
    assert [json.loads(answer) for answer in answers] == [{
        "jsonrpc": "2.0", "id": 5,
        "error": {"code": -32602, "message": "b: is not valid UTF-8 (byte 0xff); send valid UTF-8 text"},
    }]  # fmt: skip


async def test_a_line_over_the_limit_stands_in_as_not_json_and_reading_goes_on() -> None:
    lines = await _lines(b"x" * 100 + b"\n" + b'{"next": 1}\n', limit=50)
    assert lines == [pipes.NOT_JSON, '{"next": 1}\n']
    with pytest.raises(json.JSONDecodeError):
        json.loads(pipes.NOT_JSON)


async def test_a_line_over_the_limit_is_dropped_whole_while_it_arrives() -> None:
    """Its tail, arriving after the limit was passed, is no message of its own."""
    reader = asyncio.StreamReader(limit=50)
    lines = pipes.PipeLines(reader)
    first = asyncio.ensure_future(lines.__anext__())
    reader.feed_data(b"[" + b" " * 120)
    await asyncio.sleep(0)
    reader.feed_data(b" " * 120)
    await asyncio.sleep(0)
    reader.feed_data(b'{"jsonrpc": "2.0", "id": 7, "method": "ping"}\n{"next": 1}\n')
    reader.feed_eof()
    assert await first == pipes.NOT_JSON
    assert [line async for line in lines] == ['{"next": 1}\n']


def _writer() -> tuple[pipes.PipeWriter, int, pipes._Owed]:
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    owed = pipes._Owed()
    return pipes.PipeWriter(write_end, owed), read_end, owed


async def test_end_of_input_waits_for_the_answers_owed() -> None:
    writer, read_end, owed = _writer()
    reader = asyncio.StreamReader()
    lines = pipes.PipeLines(reader, owed)
    reader.feed_data(b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n')
    reader.feed_data(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
    reader.feed_eof()
    assert len([await lines.__anext__(), await lines.__anext__()]) == 2
    end = asyncio.ensure_future(lines.__anext__())
    await asyncio.sleep(0.05)
    assert not end.done()  # the request read has no answer yet
    await writer.write('{"jsonrpc":"2.0","id":1,"result":{}}\n')
    await writer.flush()
    with pytest.raises(StopAsyncIteration):
        await end
    assert os.read(read_end, 100) == b'{"jsonrpc":"2.0","id":1,"result":{}}\n'


async def test_a_cancelled_request_is_owed_no_answer() -> None:
    """The SDK does not answer a request the client cancelled: no wait for it."""
    reader = asyncio.StreamReader()
    lines = pipes.PipeLines(reader)
    reader.feed_data(b'{"jsonrpc": "2.0", "id": 9, "method": "tools/call"}\n')
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}}
    reader.feed_data(json.dumps(cancel).encode() + b"\n")
    reader.feed_eof()
    started = time.monotonic()
    assert len([line async for line in lines]) == 2
    assert time.monotonic() - started < pipes.EOF_GRACE / 2


async def test_end_of_input_waits_for_answers_at_most_eof_grace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pipes, "EOF_GRACE", 0.05)
    reader = asyncio.StreamReader()
    lines = pipes.PipeLines(reader)
    reader.feed_data(b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n')
    reader.feed_eof()
    assert [line async for line in lines] == ['{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n']


async def test_a_message_is_sent_whole_past_a_full_pipe_and_a_closed_one_raises() -> None:
    writer, read_end, _ = _writer()
    os.set_blocking(read_end, False)
    message = "x" * 300_000 + "\n"  # several times what a pipe holds

    async def receive() -> bytes:
        received = b""
        while len(received) < len(message):
            await asyncio.sleep(0.001)
            with suppress(BlockingIOError):
                received += os.read(read_end, 65536)
        return received

    reading = asyncio.ensure_future(receive())
    await writer.write(message)
    await writer.flush()
    assert (await reading).decode() == message
    os.close(read_end)
    await writer.write("gone\n")
    with pytest.raises(BrokenPipeError):
        await writer.flush()


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


def test_the_null_device_for_stdin_is_left_to_the_sdk() -> None:
    """A character device (the null device, a terminal): never made non-blocking."""
    stdout, seen = _child(stdin=subprocess.DEVNULL)
    assert seen["claimed"] is False and seen["blocking_kept"]
    assert stdout == "after\n"


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


def test_requests_sent_just_before_end_of_input_are_answered(tmp_path: Path) -> None:
    """`printf ... | chronomem serve`: the SDK's own transport cancelled what was still
    running when stdin ended; the requests read are answered first now."""
    requests = [
        _request(1, "initialize", INITIALIZE),
        b'{"jsonrpc": "2.0", "method": "notifications/initialized"}',
        _request(2, "tools/call", {"name": "remember",
                                   "arguments": {"entity": "Alice", "facts": ["likes tea"]}}),
        _request(3, "tools/call", {"name": "search_nodes", "arguments": {"query": "tea"}}),
    ]  # fmt: skip
    with _serve(tmp_path) as process:
        stdout, _ = process.communicate(b"\n".join(requests) + b"\n", timeout=30)
    answers = {answer["id"]: answer for answer in map(json.loads, stdout.splitlines())}
    assert sorted(answers) == [1, 2, 3]
    assert answers[2]["result"]["isError"] is False
    assert answers[3]["result"]["structuredContent"]["hits"][0]["entity"]["name"] == "Alice"


@pytest.mark.parametrize("ends", ["one socket for both", "a socket each, stdout half-closed"])
def test_serve_over_sockets(tmp_path: Path, ends: str) -> None:
    """inetd and socat give one socket as stdin and stdout; Node gives a socket pair
    each. Incoming data or a half-close on stdout's socket is no client leaving."""
    ours, theirs = socket.socketpair()
    if ends == "one socket for both":
        stdin = stdout = theirs
        reply = ours
    else:
        reply, stdout = socket.socketpair()
        reply.shutdown(socket.SHUT_WR)
        stdin = theirs
    process = subprocess.Popen(
        [CHRONOMEM, "serve", "--db", str(tmp_path / "memory.db")],
        stdin=stdin.fileno(),
        stdout=stdout.fileno(),
        stderr=subprocess.DEVNULL,
        env={**os.environ, "CHRONOMEM_DB": ""},
    )
    theirs.close()
    stdout.close()
    answers = reply.makefile("rb")
    try:
        ours.sendall(_request(1, "initialize", INITIALIZE) + b"\n")
        assert json.loads(answers.readline())["id"] == 1
        ours.sendall(_request(2, "ping", {}) + b"\n")
        assert json.loads(answers.readline()) == {"jsonrpc": "2.0", "id": 2, "result": {}}
        ours.shutdown(socket.SHUT_WR)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
        answers.close()
        ours.close()
        reply.close()


def test_sigterm_gives_the_wire_its_blocking_mode_back(tmp_path: Path) -> None:
    """The client's end of nothing changes, but a process sharing the server's ends
    (here the test, holding the same open files) must not find them non-blocking."""
    stdin_read, stdin_write = os.pipe()
    stdout_read, stdout_write = os.pipe()
    process = subprocess.Popen(
        [CHRONOMEM, "serve", "--db", str(tmp_path / "memory.db")],
        stdin=stdin_read,
        stdout=stdout_write,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "CHRONOMEM_DB": ""},
    )
    try:
        os.write(stdin_write, _request(1, "initialize", INITIALIZE) + b"\n")
        with os.fdopen(os.dup(stdout_read), "rb") as answers:
            assert json.loads(answers.readline())["id"] == 1
        assert not os.get_blocking(stdin_read)  # serving: the shared open file
        process.terminate()
        assert process.wait(timeout=30) == -signal.SIGTERM
        assert os.get_blocking(stdin_read) and os.get_blocking(stdout_write)
    finally:
        if process.poll() is None:
            process.kill()
        for fd in (stdin_read, stdin_write, stdout_read, stdout_write):
            os.close(fd)
