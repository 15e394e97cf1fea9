"""`chronomem serve` over pipes and sockets, as MCP clients start it (the SDK's own
stdio transport behind `server.stdio_relay`): a request line of megabytes, what a
tool prints kept off the wire, the SDK alone where stdin is no pipe, requests sent
just before end of input answered (a request still running, within the grace),
one socket for both ends, a client that stops reading, a stop by SIGTERM while the
client keeps stdin open."""

from __future__ import annotations

import json
import os
import select
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


# Served in a child: a tool that prints and writes to fd 1 while it runs, a tool that
# says it started (on fd argv[2]) and waits until fd argv[3] is readable, then one
# line written to fd 1 once serving is over; what the child saw goes to stderr.
# argv[1] is the grace at end of input.
CHILD = textwrap.dedent(
    """
    import anyio, json, os, sys
    from server.app import build_server
    from server.settings import Settings
    from server.stdio_relay import relayable
    from server.transports import serve_stdio

    server = build_server(Settings(":memory:"))
    grace, started, go = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])

    @server.tool()
    def shout() -> str:
        print("stray print", flush=True)
        os.write(1, b"stray write\\n")
        return "shouted"

    @server.tool()
    async def hold() -> str:
        os.write(started, b"s")
        await anyio.wait_readable(go)
        return "released"

    async def main():
        before = {fd: os.get_blocking(fd) for fd in (0, 1)}
        relayed = relayable()
        await serve_stdio(server, eof_grace=grace)
        os.write(1, b"after\\n")  # the wire is fd 1 again
        kept = before == {fd: os.get_blocking(fd) for fd in (0, 1)}
        print(json.dumps({"blocking_kept": kept, "relayed": relayed}), file=sys.stderr)

    anyio.run(main)
    """
)


@dataclass(slots=True)
class Child:
    """The child above, with the ends of its stdin and its `hold` tool's pipes the
    test holds."""

    process: subprocess.Popen[bytes]
    stdin: int | None
    started: int
    go: int

    def write(self, data: bytes) -> None:
        assert self.stdin is not None
        with os.fdopen(os.dup(self.stdin), "wb") as stdin:
            stdin.write(data)

    def end_input(self) -> None:
        """Close the child's stdin, as a client ending the session does."""
        assert self.stdin is not None
        os.close(self.stdin)
        self.stdin = None

    def wait_started(self) -> None:
        """Until `hold` runs (a guard against it never running, not a speed)."""
        ready, _, _ = select.select([self.started], [], [], DEADLINE)
        assert ready and os.read(self.started, 1) == b"s", "hold never started"

    def release(self) -> None:
        os.write(self.go, b"g")


@contextmanager
def _child(grace: float, stdin: int | None = None) -> Iterator[Child]:
    """The child on a stdin pipe of its own, or on `stdin`."""
    started_read, started_write = os.pipe()
    go_read, go_write = os.pipe()
    ours = [started_read, started_write, go_read, go_write]
    stdin_write = None
    if stdin is None:
        stdin, stdin_write = os.pipe()
        ours.append(stdin)
    child = None
    try:
        with subprocess.Popen(
            [sys.executable, "-c", CHILD, str(grace), str(started_write), str(go_read)],
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=Path(__file__).resolve().parents[2],
            pass_fds=(started_write, go_read),
        ) as process:
            child = Child(process, stdin_write, started_read, go_write)
            try:
                yield child
            finally:
                if process.poll() is None:
                    process.kill()
                    process.wait()
    finally:
        for fd in ours:
            os.close(fd)
        if stdin_write is not None and (child is None or child.stdin is not None):
            os.close(stdin_write)  # the test did not end the input itself


def _seen(stderr: bytes) -> tuple[list[str], dict[str, Any]]:
    """What the child printed to stderr before its last line, and that line."""
    *stray, seen = stderr.decode().splitlines()
    return stray, json.loads(seen)


def test_what_a_tool_prints_goes_to_stderr_and_the_wire_is_given_back() -> None:
    with _child(grace=1.5) as child:
        process = child.process
        assert process.stdout is not None
        child.write(_request(1, "initialize", INITIALIZE) + b"\n" + INITIALIZED + b"\n")
        child.write(_request(2, "tools/call", {"name": "shout", "arguments": {}}) + b"\n")
        answers = [json.loads(process.stdout.readline()) for _ in range(2)]
        child.end_input()
        stdout, stderr = process.communicate(timeout=DEADLINE)
    assert process.returncode == 0, stderr.decode()
    assert [answer["id"] for answer in answers] == [1, 2]
    assert answers[1]["result"]["structuredContent"] == {"result": "shouted"}
    assert stdout == b"after\n"  # nothing stray on the wire
    stray, seen = _seen(stderr)
    assert stray[-2:] == ["stray print", "stray write"]
    assert seen == {"blocking_kept": True, "relayed": True}


@pytest.mark.parametrize("source", ["the null device", "a regular file"])
def test_stdin_that_is_no_pipe_is_left_to_the_sdk(tmp_path: Path, source: str) -> None:
    """A character device (the null device, a terminal) or a file: never relayed,
    never made non-blocking; the SDK reads it to its end."""
    requests = tmp_path / "requests.jsonl"
    requests.write_bytes(_request(1, "initialize", INITIALIZE) + b"\n")
    with requests.open("rb") as file:
        stdin = subprocess.DEVNULL if source == "the null device" else file.fileno()
        with _child(grace=1.5, stdin=stdin) as child:
            stdout, stderr = child.process.communicate(timeout=DEADLINE)
    assert child.process.returncode == 0, stderr.decode()
    _, seen = _seen(stderr)
    assert seen == {"blocking_kept": True, "relayed": False}
    if source == "a regular file":
        assert json.loads(stdout.splitlines()[0])["id"] == 1
    assert stdout.splitlines()[-1] == b"after"


def _hold_then_end(child: Child, *more: bytes) -> None:
    """Send `hold` (and `more`) and end the input at once, before `hold` starts."""
    calls = [_request(1, "initialize", INITIALIZE), INITIALIZED]
    calls.append(_request(2, "tools/call", {"name": "hold", "arguments": {}}))
    child.write(b"\n".join([*calls, *more]) + b"\n")
    child.end_input()


def test_a_request_still_running_at_end_of_input_is_answered() -> None:
    """The SDK's own transport cancels it at end of input ("Connection closed"), or
    never starts it; the relay keeps the SDK's input open until it is answered."""
    with _child(grace=600) as child:  # a grace past DEADLINE: the answer ends it
        _hold_then_end(child)
        child.wait_started()
        child.release()
        stdout, stderr = child.process.communicate(timeout=DEADLINE)
    assert child.process.returncode == 0, stderr.decode()
    *lines, after = stdout.splitlines()
    answers = [json.loads(line) for line in lines]
    assert [answer["id"] for answer in answers] == [1, 2]
    assert answers[1]["result"]["structuredContent"] == {"result": "released"}
    assert after == b"after"


def test_end_of_input_waits_for_a_running_request_at_most_the_grace() -> None:
    with _child(grace=0) as child:  # hold is never released
        _hold_then_end(child)
        stdout, stderr = child.process.communicate(timeout=DEADLINE)
    assert child.process.returncode == 0, stderr.decode()
    answers = [json.loads(line) for line in stdout.splitlines()[:-1]]
    assert answers[0]["id"] == 1
    assert all("result" not in answer for answer in answers[1:]), answers


def test_a_cancelled_request_is_owed_no_answer() -> None:
    """The SDK does not answer a request the client cancelled: the end of input does
    not wait for it (here the grace is past the test's deadline)."""
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}
    with _child(grace=600) as child:
        _hold_then_end(child, json.dumps(cancel).encode())
        stdout, stderr = child.process.communicate(timeout=DEADLINE)
    assert child.process.returncode == 0, stderr.decode()
    assert [json.loads(line)["id"] for line in stdout.splitlines()[:-1]] == [1]


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


def test_requests_sent_just_before_end_of_input_are_answered(tmp_path: Path) -> None:
    """`printf ... | chronomem serve`: each request read is answered before the
    server stops (the SDK's transport alone cancelled what was still running)."""
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
    answers = {answer["id"]: answer for answer in map(json.loads, stdout.splitlines())}
    assert sorted(answers) == [1, 2, 3]
    assert answers[2]["result"]["isError"] is False
    assert answers[3]["result"]["structuredContent"]["hits"][0]["entity"]["name"] == "Alice"
    assert "Traceback" not in stderr.decode()


def test_refusals_and_the_sdks_answers_come_whole_each(tmp_path: Path) -> None:
    """The relay answers bad text itself while the SDK answers the rest: one writer,
    so no line is cut into another, and each request gets its one answer."""
    requests = [_request(1, "initialize", INITIALIZE), INITIALIZED]
    for number in range(2, 402, 2):
        requests.append(
            b'{"jsonrpc": "2.0", "id": %d, "method": "ping", "params": {"x": "\xff"}}' % number
        )
        requests.append(_request(number + 1, "ping", {"pad": "x" * 5_000}))
    with _serve(tmp_path) as process:
        stdout, stderr = process.communicate(b"\n".join(requests) + b"\n", timeout=DEADLINE)
    assert process.returncode == 0, stderr.decode()
    answers = [json.loads(line) for line in stdout.splitlines()]
    assert sorted(answer["id"] for answer in answers) == list(range(1, 402))
    for answer in answers[1:]:
        refused = answer["id"] % 2 == 0
        assert ("error" in answer) is refused, answer
        if refused:
            assert answer["error"]["message"].startswith("x: is not valid UTF-8")


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

    def close(self) -> None:
        for fd in (self.stdin_read, self.stdin_write, self.stdout_read, self.stdout_write):
            os.close(fd)


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


def test_sigterm_gives_the_wire_its_blocking_mode_back(tmp_path: Path) -> None:
    """The client's end of nothing changes, but a process sharing the server's ends
    (here the test, holding the same open files) must not find them non-blocking
    once the server has ended."""
    with _served_on_pipes(tmp_path) as (process, pipes):
        assert not os.get_blocking(pipes.stdin_read)  # serving: the shared open file
        process.terminate()
        assert process.wait(timeout=DEADLINE) == -signal.SIGTERM
        assert os.get_blocking(pipes.stdin_read) and os.get_blocking(pipes.stdout_write)


def test_sigterm_stops_a_server_whose_client_keeps_stdin_open(tmp_path: Path) -> None:
    """The SDK's transport reads stdin in a worker thread, which a cancel waits for:
    the relay ends the SDK's input, so a supervisor's SIGTERM is enough."""
    with _served_on_pipes(tmp_path) as (process, _):  # the test holds stdin open
        process.terminate()
        assert process.wait(timeout=DEADLINE) == -signal.SIGTERM
