"""A relay on the event loop between the client's stdin and stdout and the SDK's own
stdio transport, which is given two OS pipes as its fds 0 and 1.

The SDK's transport reads stdin in a worker thread and decodes it itself: a cancel
waits for that thread until the client closes stdin, bad UTF-8 becomes U+FFFD, a
lone surrogate is dropped unanswered, and at end of input what is still running is
cancelled. The relay reads the client instead: a line that is not valid UTF-8 or
escapes a lone surrogate is answered with an error naming the field (`refusal`),
never passed on; at end of input the SDK's input stays open until every request
passed on has its answer (at most `eof_grace` seconds); a cancel (SIGTERM, SIGINT)
closes the SDK's input, so its thread reads the end at once. Requests are counted
from the parsed messages in both directions. One writer sends the SDK's lines and
the relay's own answers to the client, whole lines each.

Only pipes and sockets are relayed (how MCP clients start a server); a terminal,
the null device, a regular file and Windows are served by the SDK's transport
alone. A line ends at `\\n`; a line longer than LINE_LIMIT is dropped whole and
passed on as a line that is not JSON, which the SDK reports like any other.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import stat
import sys
from collections import Counter
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp.server import MCPServer

__all__ = [
    "EOF_GRACE",
    "LINE_LIMIT",
    "NOT_JSON",
    "Owed",
    "checked",
    "client_lines",
    "refusal",
    "relayable",
    "serve_relayed",
]

# The longest request line read; the largest valid request (200 turns of 20,000
# characters, all escaped) is under half of it.
LINE_LIMIT = 64 * 2**20
NOT_JSON = b"{\n"
# Seconds: the longest wait at end of input for answers still being worked out;
# under the 2 s the SDK's Python client gives a server to exit after closing stdin.
EOF_GRACE = 1.5
READ_SIZE = 2**18

# `\uD800` to `\uDFFF` escaped in a line: perhaps a lone surrogate, which JSON's grammar
# allows but is no text (pydantic refuses the line); `refusal` looks closer.
LONE_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
INVALID_PARAMS, PARSE_ERROR = -32602, -32700


def refusal(line: bytes) -> bytes | None:
    """The JSON-RPC error line answering `line` if it is not valid UTF-8 or holds a
    lone surrogate, naming the field (the tool argument) that does; b"" for such a
    notification (no answer); None when the line is fine after all."""
    try:
        text, problem = line.decode("utf-8"), "contains an unpaired surrogate"
    except UnicodeDecodeError as bad:
        text = line.decode("utf-8", errors="surrogateescape")  # bad bytes: surrogates
        problem = f"is not valid UTF-8 (byte {line[bad.start]:#04x})"
    try:
        message = json.loads(text)
    except ValueError:
        message = None
    found = _first_surrogate(message, ()) if message is not None else None
    if found is None and problem.startswith("contains"):
        return None
    if not isinstance(message, dict):
        message = {"id": None}
    elif "id" not in message:
        return b""
    where, code = "the request", PARSE_ERROR
    if found is not None and found[:1] == ("params",):
        code = INVALID_PARAMS
        inside = found[2:] if found[1:2] == ("arguments",) else found[1:]
        where = _path(inside) if inside else "params"
    reply = {
        "jsonrpc": "2.0",
        "id": message["id"] if isinstance(message["id"], int | str) else None,
        "error": {"code": code, "message": f"{where}: {problem}; send valid UTF-8 text"},
    }
    try:
        return json.dumps(reply, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
    except UnicodeEncodeError:  # the id or a key itself: answer with ASCII escapes
        reply["id"] = None
        return json.dumps(reply, separators=(",", ":")).encode() + b"\n"


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _first_surrogate(value: Any, path: tuple[str | int, ...]) -> tuple[str | int, ...] | None:
    """Where the first text holding a surrogate is in a decoded message (a key or a
    value), or None."""
    if isinstance(value, str):
        return path if _has_surrogate(value) else None
    items: Iterable[tuple[str | int, Any]] = ()
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    for key, item in items:
        if isinstance(key, str) and _has_surrogate(key):
            return (*path, key)
        found = _first_surrogate(item, (*path, key))
        if found is not None:
            return found
    return None


def _path(parts: tuple[str | int, ...]) -> str:
    """`("facts", 0)` as `facts[0]`, as the engine names a field."""
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            shown = part.encode("utf-8", "backslashreplace").decode()
            text += f".{shown}" if text else shown
    return text


def _request_key(value: Any) -> tuple[bool, int | str] | None:
    """A JSON-RPC id as a key (1 and "1" differ), None for no valid id."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        return None
    return (isinstance(value, str), value)


@dataclass(slots=True)
class Owed:
    """The requests passed on to the SDK and not answered yet, by id. A request the
    SDK drops as malformed stays owed: hence the bound on the wait at end of input."""

    ids: Counter[tuple[bool, int | str]] = field(default_factory=Counter)
    settled: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self.settled.set()

    def client_sent(self, message: Any) -> None:
        """Count a request from the client; a cancellation takes one back (the SDK
        does not answer a cancelled request)."""
        if not isinstance(message, dict) or "method" not in message:
            return
        if "id" in message:
            key = _request_key(message["id"])
            if key is not None:
                self.ids[key] += 1
                self.settled.clear()
        elif message["method"] == "notifications/cancelled":
            params = message.get("params")
            if isinstance(params, dict):
                self._answered(params.get("requestId"))

    def server_sent(self, message: Any) -> None:
        """A response or an error (an id, no method) answers its request."""
        if isinstance(message, dict) and "id" in message and "method" not in message:
            self._answered(message["id"])

    def _answered(self, value: Any) -> None:
        key = _request_key(value)
        if key is not None and self.ids[key] > 0:
            self.ids[key] -= 1
            if self.ids[key] == 0:
                del self.ids[key]
        if not self.ids:
            self.settled.set()


def relayable() -> bool:
    """Whether stdin and stdout are pipes or sockets."""
    if sys.platform == "win32":
        return False
    try:
        modes = [os.fstat(fd).st_mode for fd in (0, 1)]
    except OSError:
        return False
    return all(stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) for mode in modes)


def _private_copy(fd: int) -> int:
    """A duplicate of `fd` above the standard descriptors, closed on exec."""
    import fcntl  # POSIX only, as is relaying

    return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)


class Descriptor:
    """A non-blocking descriptor this module owns, watched by the event loop while a
    call waits on it, closed once: closing wakes the waiter and stops the watch, and
    the number is never used again (another open may reuse it)."""

    def __init__(self, fd: int) -> None:
        self.fd: int | None = fd
        os.set_blocking(fd, False)
        self._waiting: tuple[asyncio.Future[None], bool] | None = None

    async def wait(self, writing: bool) -> None:
        """Until the descriptor can be written to (or read from), or is closed."""
        fd = self.fd
        if fd is None:
            return
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()
        self._waiting = (ready, writing)
        if writing:
            loop.add_writer(fd, _wake, ready)
        else:
            loop.add_reader(fd, _wake, ready)
        try:
            await ready
        finally:
            self._unwatch()

    def _unwatch(self) -> None:
        if self._waiting is None or self.fd is None:
            return
        ready, writing = self._waiting
        self._waiting = None
        loop = asyncio.get_running_loop()
        (loop.remove_writer if writing else loop.remove_reader)(self.fd)
        _wake(ready)

    async def send(self, data: bytes) -> None:
        """Write all of `data`, waiting while the other end is full. A closed pipe
        raises BrokenPipeError (a socket: ConnectionResetError)."""
        view = memoryview(data)
        while view:
            if self.fd is None:
                raise BrokenPipeError("the relay closed this end")
            try:
                view = view[os.write(self.fd, view) :]
            except BlockingIOError:
                await self.wait(writing=True)

    def close(self) -> None:
        if self.fd is not None:
            self._unwatch()
            fd, self.fd = self.fd, None
            os.close(fd)


def _wake(ready: asyncio.Future[None]) -> None:
    if not ready.done():
        ready.set_result(None)


class SdkOutput(Descriptor):
    """The SDK's stdout pipe, read until the SDK has stopped."""

    def __init__(self, fd: int) -> None:
        super().__init__(fd)
        self.stopped = False

    def stop(self) -> None:
        """The SDK has returned: what it wrote is in the pipe; read it to the end."""
        self.stopped = True
        self._unwatch()

    async def chunks(self) -> AsyncIterator[bytes]:
        # The SDK keeps a copy of its stdout open after it returns, so the pipe never
        # reads as ended: the end is what is left once it has stopped.
        while self.fd is not None:
            try:
                chunk = os.read(self.fd, READ_SIZE)
            except BlockingIOError:
                if self.stopped:
                    return
                await self.wait(writing=False)
                continue
            if not chunk:
                return
            yield chunk


async def client_lines(reader: asyncio.StreamReader) -> AsyncIterator[bytes]:
    """The client's lines, each ending in `\\n`; a line over the reader's limit is
    dropped to its end and stands in as NOT_JSON."""
    while True:
        try:
            line = await reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as end:  # end of input
            if not end.partial:
                return
            line = end.partial + b"\n"  # a last line without its newline
        except asyncio.LimitOverrunError:
            await _drop_line(reader)
            line = NOT_JSON
        yield line


async def _drop_line(reader: asyncio.StreamReader) -> None:
    """Discard the rest of an over-long line, up to its newline or end of input."""
    while True:
        try:
            await reader.readuntil(b"\n")
            return
        except asyncio.LimitOverrunError as long:
            await reader.readexactly(long.consumed)
        except asyncio.IncompleteReadError:
            return


def checked(line: bytes) -> tuple[Any, bytes | None]:
    """The message `line` holds (None if not JSON), and the answer refusing it (b""
    for no answer) when it is not valid UTF-8 or escapes a lone surrogate."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        return None, refusal(line)
    if LONE_SURROGATE_ESCAPE.search(line):
        answer = refusal(line)
        if answer is not None:
            return None, answer
    try:
        return json.loads(text), None
    except ValueError:
        return None, None


@dataclass(slots=True)
class Relay:
    """The two pumps; `client_gone` says the client stopped reading."""

    client_out: Descriptor
    sdk_in: Descriptor
    sdk_out: SdkOutput
    eof_grace: float
    owed: Owed = field(default_factory=Owed)
    writing: asyncio.Lock = field(default_factory=asyncio.Lock)
    client_gone: bool = False

    async def to_client(self, data: bytes) -> None:
        """Send whole lines to the client, one writer at a time; once it is gone,
        what is left is dropped and the SDK's input closed, so it ends."""
        if self.client_gone:
            return
        async with self.writing:
            try:
                await self.client_out.send(data)
            except (BrokenPipeError, ConnectionResetError):
                self.client_gone = True
                self.sdk_in.close()

    async def from_client(self, reader: asyncio.StreamReader) -> None:
        """Pass the client's lines on, answer those refused; at end of input, wait for
        the answers owed (at most `eof_grace`), then end the SDK's input."""
        try:
            async for line in client_lines(reader):
                message, answer = checked(line)
                if answer is not None:
                    if answer:
                        await self.to_client(answer)
                    continue
                self.owed.client_sent(message)
                await self.sdk_in.send(line)
            with suppress(TimeoutError):  # then the SDK cancels what still runs
                await asyncio.wait_for(self.owed.settled.wait(), self.eof_grace)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the SDK's input was closed: it is ending
        finally:
            self.sdk_in.close()

    async def from_sdk(self) -> None:
        """Send the SDK's lines on, each counted as an answer when it is one. Cancelled,
        it closes the SDK's output, so a write the SDK is blocked in fails at once."""
        pending: list[bytes] = []  # a line longer than a read, so far
        try:
            async for chunk in self.sdk_out.chunks():
                end = chunk.rfind(b"\n") + 1
                if not end:
                    pending.append(chunk)
                    continue
                lines, rest = b"".join([*pending, chunk[:end]]), chunk[end:]
                pending = [rest] if rest else []
                for line in lines.splitlines():
                    with suppress(ValueError):
                        self.owed.server_sent(json.loads(line))
                await self.to_client(lines)
        except BaseException:
            self.sdk_out.close()
            raise
        if pending:
            await self.to_client(b"".join(pending))


@asynccontextmanager
async def _rewired(eof_grace: float) -> AsyncIterator[tuple[asyncio.StreamReader, Relay]]:
    """fds 0 and 1 on the SDK's pipes while the block runs, the client's descriptors
    kept aside and put back afterwards, with their blocking modes (their open files
    may be shared with whoever gave them to us)."""
    loop = asyncio.get_running_loop()
    saved = {fd: _private_copy(fd) for fd in (0, 1)}
    blocking = {fd: os.get_blocking(copy) for fd, copy in saved.items()}
    owned: list[Descriptor] = []
    client_in = None
    transport: asyncio.ReadTransport | None = None
    try:
        client_in = os.fdopen(_private_copy(0), "rb", buffering=0)
        owned.append(client_out := Descriptor(_private_copy(1)))
        sdk_in_read, sdk_in_write = os.pipe()
        owned.append(sdk_in := Descriptor(sdk_in_write))
        os.dup2(sdk_in_read, 0)
        os.close(sdk_in_read)
        sdk_out_read, sdk_out_write = os.pipe()
        owned.append(sdk_out := SdkOutput(sdk_out_read))
        os.dup2(sdk_out_write, 1)
        os.close(sdk_out_write)
        reader = asyncio.StreamReader(limit=LINE_LIMIT, loop=loop)
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader, loop=loop), client_in
        )
        yield reader, Relay(client_out, sdk_in, sdk_out, eof_grace)
    finally:
        if transport is not None:
            transport.close()  # stops watching stdin at once
        if client_in is not None:
            client_in.close()
        for end in owned:
            end.close()
        for fd, copy in saved.items():
            os.dup2(copy, fd)
            os.set_blocking(fd, blocking[fd])
            os.close(copy)


async def serve_relayed(server: MCPServer, eof_grace: float = EOF_GRACE) -> bool:
    """`server.run_stdio_async()` behind the relay, where `relayable()`; False if the
    client stopped reading. A cancel closes the SDK's input, so it ends at once."""
    async with _rewired(eof_grace) as (reader, relay):
        reading = anyio.CancelScope()

        async def read_client() -> None:
            with reading:
                await relay.from_client(reader)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(read_client)
            tasks.start_soon(relay.from_sdk)
            try:
                await server.run_stdio_async()
            finally:
                relay.sdk_in.close()
                relay.sdk_out.stop()
                reading.cancel()  # the SDK has ended: the client's input is not read on
    return not relay.client_gone
