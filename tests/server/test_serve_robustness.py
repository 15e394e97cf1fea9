"""`chronomem serve` as a client meets it when things go wrong around it: the
database file deleted or replaced while serving, text that is not valid UTF-8 on
stdio, a stop by SIGTERM or SIGINT, a port already taken, plain-text logs."""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from server import Settings, build_server

from .conftest import CHRONOMEM, free_port, http_client, running_server, wait_for_port

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and pipes")

INITIALIZE = {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "test", "version": "1"},
}
INITIALIZED = b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n'


def _request(number: int, method: str, params: dict[str, Any]) -> bytes:
    message = {"jsonrpc": "2.0", "id": number, "method": method, "params": params}
    return json.dumps(message).encode() + b"\n"


def _call(number: int, tool: str, **arguments: Any) -> bytes:
    return _request(number, "tools/call", {"name": tool, "arguments": arguments})


class Stdio:
    """`chronomem serve` over pipes, spoken to one request at a time."""

    def __init__(self, db: Path) -> None:
        self.process = subprocess.Popen(
            [CHRONOMEM, "serve", "--db", str(db)],
            bufsize=0,  # unbuffered, so that `select` sees every answer not yet read
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "CHRONOMEM_DB": ""},
        )
        self.send(_request(0, "initialize", INITIALIZE))
        self.send(INITIALIZED, answered=False)

    def send(self, line: bytes, answered: bool = True) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(line)
        self.process.stdin.flush()
        return self.receive() if answered else {}

    def receive(self) -> dict[str, Any]:
        """The next message from the server."""
        assert self.process.stdout is not None
        # A guard against a request never answered, not a measure of speed.
        ready, _, _ = select.select([self.process.stdout], [], [], 60)
        assert ready, "no answer"
        return json.loads(self.process.stdout.readline())

    def finish(self) -> str:
        """Close stdin, wait for the end; returns stderr."""
        _, stderr = self.process.communicate(timeout=30)
        assert self.process.returncode == 0, stderr.decode()
        return stderr.decode()


@contextmanager
def stdio(db: Path) -> Iterator[Stdio]:
    server = Stdio(db)
    try:
        yield server
    finally:
        if server.process.poll() is None:
            server.process.kill()
            server.process.communicate()


def _stored_facts(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        return [text for (text,) in conn.execute("SELECT text FROM observation ORDER BY text")]


# ---------------------------------------------------------------- the file deleted


def _delete_file(db: Path) -> None:
    db.unlink()


def _delete_wal(db: Path) -> None:
    Path(f"{db}-wal").unlink()


def _replace_file(db: Path) -> None:
    shutil.copy(db, db.with_suffix(".copy"))
    os.replace(db.with_suffix(".copy"), db)


@pytest.mark.parametrize("accident", [_delete_file, _delete_wal, _replace_file])
def test_writes_are_refused_once_the_database_file_is_deleted_or_replaced(
    tmp_path: Path, accident: Any
) -> None:
    db = tmp_path / "memory.db"
    with stdio(db) as server:
        first = server.send(_call(1, "remember", entity="Alice", facts=["likes tea"]))
        assert first["result"]["isError"] is False
        accident(db)
        refused = server.send(_call(2, "remember", entity="Alice", facts=["runs 5k"]))["result"]
        assert refused["isError"] is True
        message = refused["content"][0]["text"]
        assert str(db) in message and "deleted or replaced" in message, message
        assert "restart" in message.lower()
        # Reads still answer from what the server holds.
        assert server.send(_call(3, "search_nodes", query="tea"))["result"]["isError"] is False
        stderr = server.finish()
    assert "Traceback" not in stderr


# ---------------------------------------------------------------- bad text on stdio


BAD_TEXT = {"invalid UTF-8": b'"caf\xe9"', "lone surrogate": b'"caf\\ud800"'}


def _remember_raw(number: int, entity: bytes) -> bytes:
    """A `remember` call with `entity` as it is on the wire, bytes and escapes alike."""
    arguments = b'{"entity": %s, "facts": ["likes tea"]}' % entity
    params = b'{"name": "remember", "arguments": %s}' % arguments
    return b'{"jsonrpc": "2.0", "id": %d, "method": "tools/call", "params": %s}\n' % (
        number,
        params,
    )


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (BAD_TEXT["invalid UTF-8"], "is not valid UTF-8 (byte 0xe9)"),
        (BAD_TEXT["lone surrogate"], "contains an unpaired surrogate"),
    ],
    ids=BAD_TEXT.keys(),
)
def test_stdio_answers_text_that_is_not_utf8_with_an_error_naming_the_field(
    tmp_path: Path, raw: bytes, problem: str
) -> None:
    """Refused, never stored (the SDK's transport alone stored bad bytes as U+FFFD and
    dropped a lone surrogate unanswered); the server goes on, and a pair of
    surrogates (one character) is text."""
    db = tmp_path / "memory.db"
    with stdio(db) as server:
        answer = server.send(_remember_raw(1, raw))
        assert answer["id"] == 1
        assert answer["error"]["message"] == f"entity: {problem}; send valid UTF-8 text"
        emoji = server.send(_call(2, "remember", entity="Alice", facts=["likes \U0001f375"]))
        assert emoji["result"]["isError"] is False
        stderr = server.finish()
    assert "Traceback" not in stderr
    assert _stored_facts(db) == ["likes \U0001f375"]


# ---------------------------------------------------------------- stopping


def _facts_in_the_main_file(db: Path, tmp_path: Path) -> list[str]:
    """What the database file alone holds, without its -wal."""
    alone = tmp_path / "alone.db"
    shutil.copy(db, alone)
    return _stored_facts(alone)


def _wal_is_gone_or_empty(db: Path) -> bool:
    wal = Path(f"{db}-wal")
    return not wal.exists() or wal.stat().st_size == 0


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_to_a_stdio_server_checkpoints_and_closes(
    tmp_path: Path, stop: signal.Signals
) -> None:
    db = tmp_path / "memory.db"
    with stdio(db) as server:
        assert server.send(_call(1, "remember", entity="Alice", facts=["likes tea"]))["result"]
        assert not _wal_is_gone_or_empty(db)  # the fact is in the WAL so far
        server.process.send_signal(stop)
        server.process.wait(timeout=30)  # stdin still open: the signal alone ends it
        _, stderr = server.process.communicate()
    assert server.process.returncode in (0, -stop), stderr.decode()
    assert "Traceback" not in stderr.decode()
    assert _wal_is_gone_or_empty(db)
    assert _facts_in_the_main_file(db, tmp_path) == ["likes tea"]


@pytest.mark.anyio
@pytest.mark.parametrize("transport", ["http", "sse"])
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_a_signal_to_an_http_server_checkpoints_and_closes(
    tmp_path: Path, transport: str, stop: signal.Signals
) -> None:
    db = tmp_path / "memory.db"
    port = free_port()
    path = "/mcp" if transport == "http" else "/sse"
    args = ["--db", str(db), "--transport", transport, "--port", str(port)]
    with running_server(*args) as process:
        await wait_for_port(port, process)
        async with http_client(f"http://127.0.0.1:{port}{path}") as client:
            done = await client.call_tool("remember", {"entity": "Alice", "facts": ["likes tea"]})
            assert not done.is_error
        assert not _wal_is_gone_or_empty(db)
        process.send_signal(stop)
        _, stderr = process.communicate(timeout=30)
    assert process.returncode in (0, -stop), stderr
    assert "Traceback" not in stderr
    assert _wal_is_gone_or_empty(db)
    assert _facts_in_the_main_file(db, tmp_path) == ["likes tea"]


# ---------------------------------------------------------------- starting


def _serve_until_end_of_input(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CHRONOMEM, "serve", *args],
        input="",
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "CHRONOMEM_DB": ""},
    )


def test_serve_says_when_it_creates_a_new_database(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    first = _serve_until_end_of_input("--db", str(db))
    assert first.returncode == 0, first.stderr
    assert f"creating a new, empty database at {db}" in first.stderr
    again = _serve_until_end_of_input("--db", str(db))
    assert "new, empty database" not in again.stderr


def test_serve_refuses_a_port_in_use_before_printing_the_configuration(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        args = ["--db", str(tmp_path / "memory.db"), "--transport", "http", "--port", str(port)]
        refused = _serve_until_end_of_input(*args)
    assert refused.returncode == 1
    assert refused.stderr.count("\n") == 1, refused.stderr
    assert f"127.0.0.1:{port}" in refused.stderr and "in use" in refused.stderr
    assert not (tmp_path / "memory.db").exists()


def test_server_logs_are_plain_text_when_stderr_is_not_a_terminal(tmp_path: Path) -> None:
    """What the SDK logs (here: a tool failing on a table dropped under the server)
    comes as plain lines, not rich's panels drawn for a terminal."""
    db = tmp_path / "memory.db"
    with stdio(db) as server:
        assert server.send(_call(1, "remember", entity="Alice", facts=["likes tea"]))["result"]
        with sqlite3.connect(db) as conn:
            conn.execute("DROP TABLE tx_clock")
        failed = server.send(_call(2, "remember", entity="Alice", facts=["runs 5k"]))["result"]
        assert failed["isError"] is True
        stderr = server.finish()
    assert "Traceback (most recent call last)" in stderr
    assert not set("╭│╰─") & set(stderr), stderr


@pytest.mark.anyio
async def test_a_write_the_file_refuses_is_a_tool_error_naming_the_file_and_cause(
    tmp_path: Path,
) -> None:
    db = tmp_path / "memory.db"
    settings = Settings(db=str(db))
    async with settings.open_memory() as memory:

        def read_only(conn: sqlite3.Connection) -> None:
            conn.execute("PRAGMA query_only = ON")  # as SQLite treats a read-only file

        await memory.on_connection(read_only)
        async with Client(build_server(settings, memory)) as client:
            refused = await client.call_tool("remember", {"entity": "Alice", "facts": ["x"]})
    assert refused.is_error
    text = refused.content[0].text  # type: ignore[union-attr]  # a tool error is one text block
    assert str(db) in text and "read-only" in text and "Error executing tool" not in text
