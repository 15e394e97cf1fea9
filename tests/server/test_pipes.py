"""`chronomem serve` over pipes and sockets, as MCP clients start it (the SDK's own
stdio transport): a request line of megabytes, what a tool prints kept off the wire,
requests sent just before end of input, one socket for both ends, a client that
stops reading, a stop by SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .conftest import CHRONOMEM

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX pipes")

# A guard against a server that never ends, not a measure of speed.
DEADLINE = 30


def _request(number: int, method: str, params: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": number, "method": method, "params": params}).encode()


INITIALIZE = {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "test", "version": "1"},
}
INITIALIZED = b'{"jsonrpc": "2.0", "method": "notifications/initialized"}'


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
    record = {"name": "record_turns", "arguments": {"session_id": "s", "turns": turns}}
    recall = {"name": "recall", "arguments": {"query": "199 word"}}
    requests = [
        _request(1, "initialize", INITIALIZE),
        INITIALIZED,
        _request(2, "tools/call", record),
        _request(3, "tools/call", recall),
    ]
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
        assert process.wait(timeout=DEADLINE) == 0
    stored = answers[1]["result"]["structuredContent"]["stored"]
    assert stored == 200
    assert answers[2]["result"]["structuredContent"]["turns"][0]["text"].startswith("199 ")


# Served in a child: a tool that prints and writes to fd 1 while it runs, then one
# line written to fd 1 once serving is over; what the child saw goes to stderr.
CHILD = textwrap.dedent(
    """
    import anyio, json, os, sys
    from server.app import build_server
    from server.settings import Settings
    from server.transports import serve_stdio

    server = build_server(Settings(":memory:"))

    @server.tool()
    def shout() -> str:
        print("stray print", flush=True)
        os.write(1, b"stray write\\n")
        return "shouted"

    async def main():
        before = {fd: os.get_blocking(fd) for fd in (0, 1)}
        await serve_stdio(server)
        os.write(1, b"after\\n")  # the wire is fd 1 again
        kept = before == {fd: os.get_blocking(fd) for fd in (0, 1)}
        print(json.dumps({"blocking_kept": kept}), file=sys.stderr)

    anyio.run(main)
    """
)


def test_what_a_tool_prints_goes_to_stderr_and_the_wire_is_given_back() -> None:
    with subprocess.Popen(
        [sys.executable, "-c", CHILD],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=Path(__file__).resolve().parents[2],
    ) as process:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(_request(1, "initialize", INITIALIZE) + b"\n" + INITIALIZED + b"\n")
        process.stdin.write(_request(2, "tools/call", {"name": "shout", "arguments": {}}) + b"\n")
        process.stdin.flush()
        answers = [json.loads(process.stdout.readline()) for _ in range(2)]
        stdout, stderr = process.communicate(timeout=DEADLINE)  # closes stdin
    assert process.returncode == 0, stderr.decode()
    assert [answer["id"] for answer in answers] == [1, 2]
    assert answers[1]["result"]["structuredContent"] == {"result": "shouted"}
    assert stdout == b"after\n"  # nothing stray on the wire
    *stray, seen = stderr.decode().splitlines()
    assert stray[-2:] == ["stray print", "stray write"]
    assert json.loads(seen) == {"blocking_kept": True}


def test_serve_ends_quietly_when_the_client_stops_reading(tmp_path: Path) -> None:
    """The client has gone: every answer meets a closed pipe. Requests go on coming
    (stdin stays open) until the server ends, so it ends by the closed pipe."""
    with _serve(tmp_path) as process:
        assert process.stdin is not None and process.stdout is not None
        process.stdout.close()
        deadline = time.monotonic() + DEADLINE
        number = 0
        while process.poll() is None:
            assert time.monotonic() < deadline, "the server went on answering nobody"
            method, params = ("initialize", INITIALIZE) if number == 0 else ("ping", {})
            number += 1
            try:
                process.stdin.write(_request(number, method, params) + b"\n")
                process.stdin.flush()
            except BrokenPipeError:  # the server has ended, closing its stdin
                break
            with suppress(subprocess.TimeoutExpired):
                process.wait(timeout=0.05)  # a poll, bounded by the deadline above
        with suppress(BrokenPipeError):
            process.stdin.close()
        assert process.wait(timeout=DEADLINE) == 0
        stderr = process.stderr.read().decode() if process.stderr else ""
    assert "the client closed the connection" in stderr
    assert "Traceback" not in stderr


def test_requests_sent_just_before_end_of_input_get_at_most_one_answer(tmp_path: Path) -> None:
    """`printf ... | chronomem serve`: the SDK's transport stops at end of input. A
    request still being worked out then gets its "Connection closed" error, or none
    where the SDK's writer has closed or stays blocked past its bound (seen on a
    loaded machine); never two answers, never a traceback."""
    remember = {"name": "remember", "arguments": {"entity": "Alice", "facts": ["likes tea"]}}
    search = {"name": "search_nodes", "arguments": {"query": "tea"}}
    requests = [
        _request(1, "initialize", INITIALIZE),
        INITIALIZED,
        _request(2, "tools/call", remember),
        _request(3, "tools/call", search),
    ]
    with _serve(tmp_path) as process:
        stdout, stderr = process.communicate(b"\n".join(requests) + b"\n", timeout=DEADLINE)
    assert process.returncode == 0, stderr.decode()
    answers = [json.loads(line) for line in stdout.splitlines()]
    numbers = [answer["id"] for answer in answers]
    assert len(numbers) == len(set(numbers)) and set(numbers) <= {1, 2, 3}, answers
    for answer in answers:
        assert "result" in answer or answer["error"]["message"] == "Connection closed", answer
    assert "Traceback" not in stderr.decode()


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
        assert process.wait(timeout=DEADLINE) == 0
    finally:
        if process.poll() is None:
            process.kill()
        answers.close()
        ours.close()
        reply.close()


@dataclass(slots=True)
class Pipes:
    """The ends of the server's stdin and stdout pipes the test holds."""

    stdin_read: int
    stdin_write: int
    stdout_read: int
    stdout_write: int
    stdin_closed: bool = False

    def close_stdin(self) -> None:
        """End the server's input, as a client closing its end does."""
        os.close(self.stdin_write)
        self.stdin_closed = True

    def close(self) -> None:
        os.close(self.stdin_read)
        os.close(self.stdout_read)
        os.close(self.stdout_write)
        if not self.stdin_closed:
            os.close(self.stdin_write)


@contextmanager
def _served_on_pipes(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], Pipes]]:
    """`chronomem serve` on pipes the test holds both ends of, initialized."""
    stdin_read, stdin_write = os.pipe()
    stdout_read, stdout_write = os.pipe()
    process = subprocess.Popen(
        [CHRONOMEM, "serve", "--db", str(tmp_path / "memory.db")],
        stdin=stdin_read,
        stdout=stdout_write,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "CHRONOMEM_DB": ""},
    )
    pipes = Pipes(stdin_read, stdin_write, stdout_read, stdout_write)
    try:
        os.write(stdin_write, _request(1, "initialize", INITIALIZE) + b"\n")
        with os.fdopen(os.dup(stdout_read), "rb") as answers:
            assert json.loads(answers.readline())["id"] == 1
        yield process, pipes
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        pipes.close()


def test_sigterm_leaves_the_wire_blocking(tmp_path: Path) -> None:
    """A process sharing the server's ends (here the test, holding the same open
    files) finds them as they were, while the server serves and after SIGTERM. The
    SDK's transport reads stdin in a worker thread, so it stops at end of input."""
    with _served_on_pipes(tmp_path) as (process, pipes):
        assert os.get_blocking(pipes.stdin_read) and os.get_blocking(pipes.stdout_write)
        process.terminate()
        pipes.close_stdin()
        assert process.wait(timeout=DEADLINE) == -signal.SIGTERM
        assert os.get_blocking(pipes.stdin_read) and os.get_blocking(pipes.stdout_write)


@pytest.mark.xfail(
    strict=True,
    raises=subprocess.TimeoutExpired,
    reason="the SDK's transport reads stdin in a worker thread, which a cancel waits for",
)
def test_sigterm_stops_a_server_whose_client_keeps_stdin_open(tmp_path: Path) -> None:
    with _served_on_pipes(tmp_path) as (process, _):
        process.terminate()
        assert process.wait(timeout=10) == -signal.SIGTERM  # a guard, not a speed
