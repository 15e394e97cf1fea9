"""stdio served from the event loop, without a thread per read and write.

The SDK's `stdio_server()` reads and writes the process's stdin and stdout through
anyio's `wrap_file`: a worker thread for every line read, every write and every
flush, three hand-overs of the GIL a call. Given streams of its own it uses those
instead, so `claimed_pipes` gives it streams over the same descriptors that the
event loop serves itself. A search that finds nothing,
timed in raw JSON-RPC: 2.1 -> 1.15 ms a round trip, the server's CPU 2.0 -> 1.05 ms
a call (2 cores).

Only pipes and sockets are served so (how MCP clients start a server: Python's
with pipes, Node's with socket pairs). stdin is read by asyncio's pipe transport;
stdout is written directly, waiting for the event loop when the pipe is full (a
write transport would also watch stdout for reading, and take a socket's incoming
data or half-close for the client leaving). A terminal, the null device, a regular
file and Windows get None, and the SDK's own transport serves them. Like the SDK,
it takes the wire off fds 0 and 1 while serving (fd 0 reads the null device, fd 1
writes to stderr), so a library that prints cannot corrupt a message, and puts
them back afterwards.

Differences from the SDK's transport: a line ends at `\\n` only (the protocol's
delimiter; `\\r\\n` works, a bare `\\r` does not); a line longer than LINE_LIMIT is
dropped whole; a request that is not valid UTF-8 or escapes a lone surrogate is
answered with an error naming the field, never passed on (`refusal`); and when
the client closes stdin, the requests it sent before are answered before the server
stops (those still being worked out EOF_GRACE seconds later are cancelled, as the
SDK cancels them at once). Writing an answer waits for the client to read it, with
no time limit, as the SDK's transport does.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import stat
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager, suppress
from typing import Any

__all__ = ["EOF_GRACE", "LINE_LIMIT", "PipeLines", "PipeWriter", "claimed_pipes"]

# The longest request line read; a longer one is dropped to its end and stands in
# as a line that is not JSON, which the SDK reports like any malformed message. The
# largest valid request (200 turns of 20,000 characters, all escaped) is < 30 MiB.
LINE_LIMIT = 64 * 2**20
NOT_JSON = "{\n"
# Seconds: the longest wait at end of input for answers still being worked out;
# under the 2 s the SDK's Python client gives a server to exit after closing stdin.
EOF_GRACE = 1.5
# How the SDK writes a response (JSONRPCResponse or JSONRPCError: id first).
RESPONSE_START = '{"jsonrpc":"2.0","id":'


# `\uD800` to `\uDFFF` escaped in a line: perhaps a lone surrogate, which JSON's grammar
# allows but is no text (pydantic refuses the line); `refusal` looks closer.
LONE_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
INVALID_PARAMS, PARSE_ERROR = -32602, -32700


def refusal(line: bytes) -> str | None:
    """The JSON-RPC error line answering `line` if it is not valid UTF-8 or holds a
    lone surrogate, naming the field (the tool argument) that does; "" for such a
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
        return ""
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
        return json.dumps(reply, ensure_ascii=False, separators=(",", ":")) + "\n"
    except UnicodeEncodeError:  # the id or a key itself: answer with ASCII escapes
        reply["id"] = None
        return json.dumps(reply, separators=(",", ":")) + "\n"


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


class _Owed:
    """Requests read and responses written: at end of input, the server waits until
    every request read has its answer. A line is counted as a request if it has
    both an "id" and a "method" key, and a cancellation takes one back (the SDK
    does not answer a cancelled request). A line the SDK drops as malformed, or a
    notification with an "id" nested in its params, is owed an answer that never
    comes: hence the bound, EOF_GRACE."""

    def __init__(self) -> None:
        self.requests = 0
        self.responses = 0
        self.settled = asyncio.Event()

    def check(self) -> None:
        if self.responses >= self.requests:
            self.settled.set()
        else:
            self.settled.clear()


class PipeLines:
    """The wire's incoming lines as text, as the SDK iterates over stdin. A line that
    is not valid UTF-8, or that escapes a lone surrogate (`"\\ud800"`), never
    reaches the SDK: its own transport replaced bad bytes (so `caf\\ufffd` was
    stored) and dropped a line pydantic's JSON parser refuses without an answer.
    `reply` answers such a request with a JSON-RPC error naming the field
    (`refusal`); a notification gets no answer, as ever."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        owed: _Owed | None = None,
        reply: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        self._reader = reader
        self._owed = owed or _Owed()
        self._reply = reply

    def __aiter__(self) -> PipeLines:
        return self

    async def __anext__(self) -> str:
        while True:
            try:
                line = await self._reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as end:  # end of input
                line = end.partial  # a last line without its newline
            except asyncio.LimitOverrunError:
                await self._drop_line()
                return NOT_JSON
            if not line:
                await self._answered()
                raise StopAsyncIteration
            counted = b'"id"' in line and b'"method"' in line
            if counted:
                self._owed.requests += 1
            elif b'"notifications/cancelled"' in line:
                self._owed.requests -= 1
            self._owed.check()
            try:
                text = line.decode("utf-8")
            except UnicodeDecodeError:
                text = None
            if text is not None and not LONE_SURROGATE_ESCAPE.search(line):
                return text
            answer = refusal(line)
            if answer is None:  # a surrogate pair, or an escaped backslash: fine
                return line.decode("utf-8")
            if answer and self._reply is not None:
                if not counted:  # then its answer is owed too
                    self._owed.requests += 1
                await self._reply(answer)
            elif counted:
                self._owed.requests -= 1

    async def _drop_line(self) -> None:
        """Discard the rest of an over-long line, up to its newline or end of input."""
        while True:
            try:
                await self._reader.readuntil(b"\n")
                return
            except asyncio.LimitOverrunError as long:
                await self._reader.readexactly(long.consumed)
            except asyncio.IncompleteReadError:
                return

    async def _answered(self) -> None:
        self._owed.check()
        with suppress(TimeoutError):  # then give up: the SDK stops what still runs
            await asyncio.wait_for(self._owed.settled.wait(), EOF_GRACE)


class PipeWriter:
    """The wire's outgoing side, with the two calls the SDK makes on stdout: `write`
    keeps a message, `flush` sends it whole, as the SDK's blocking flush does, so
    nothing is left in memory when the server stops. A closed pipe raises
    BrokenPipeError (a socket: ConnectionResetError); any other error is raised as
    it is."""

    def __init__(self, fd: int, owed: _Owed | None = None) -> None:
        self._fd = fd  # non-blocking
        self._pending: list[bytes] = []
        self._owed = owed or _Owed()
        self._sending = asyncio.Lock()

    async def write(self, text: str) -> None:
        self._pending.append(text.encode("utf-8"))
        if text.startswith(RESPONSE_START):
            self._owed.responses += 1

    async def flush(self) -> None:
        async with self._sending:  # `send` may flush while the SDK's flush waits
            data, self._pending = b"".join(self._pending), []
            view = memoryview(data)
            while view:
                try:
                    view = view[os.write(self._fd, view) :]
                except BlockingIOError:  # the pipe is full: wait until the client reads
                    await _writable(self._fd)
        self._owed.check()

    async def send(self, line: str) -> None:
        """Send one whole message line of our own (`PipeLines`' refusals)."""
        await self.write(line)
        await self.flush()


async def _writable(fd: int) -> None:
    loop = asyncio.get_running_loop()
    ready = loop.create_future()
    loop.add_writer(fd, lambda: ready.done() or ready.set_result(None))
    try:
        await ready
    finally:
        loop.remove_writer(fd)


def _private_copy(fd: int) -> int:
    """A duplicate of `fd` above the standard descriptors, closed on exec."""
    import fcntl  # POSIX only, like this module's use

    return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)


def _servable() -> bool:
    """Whether stdin and stdout are pipes or sockets."""
    if sys.platform == "win32":
        return False
    try:
        modes = [os.fstat(fd).st_mode for fd in (0, 1)]
    except OSError:
        return False
    return all(stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) for mode in modes)


@asynccontextmanager
async def claimed_pipes() -> AsyncIterator[tuple[PipeLines, PipeWriter] | None]:
    """The wire (this process's stdin and stdout) served by the event loop while the
    block runs, or None where it is not served so; see the module's docstring."""
    if not _servable():
        yield None
        return
    loop = asyncio.get_running_loop()
    saved = {fd: _private_copy(fd) for fd in (0, 1)}
    # The wire is made non-blocking, and its open files may be shared with whoever
    # gave them to us: their modes are put back afterwards.
    blocking = {fd: os.get_blocking(copy) for fd, copy in saved.items()}
    wire_in = os.fdopen(_private_copy(0), "rb", buffering=0)
    wire_out = _private_copy(1)
    read_transport: asyncio.ReadTransport | None = None

    def release() -> None:
        if read_transport is not None:
            read_transport.close()  # stops watching stdin at once
        wire_in.close()
        os.close(wire_out)
        for fd, copy in saved.items():
            os.dup2(copy, fd)
            os.set_blocking(fd, blocking[fd])
            os.close(copy)

    reader = asyncio.StreamReader(limit=LINE_LIMIT, loop=loop)
    try:
        read_transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader, loop=loop), wire_in
        )
        os.set_blocking(wire_out, False)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(2, 1)
        owed = _Owed()
        writer = PipeWriter(wire_out, owed)
        yield PipeLines(reader, owed, writer.send), writer
    finally:
        release()
