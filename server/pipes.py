"""stdio served from the event loop, without a thread per read and write.

The SDK's `stdio_server()` reads and writes the process's stdin and stdout through
anyio's `wrap_file`: a worker thread for every line read, every write and every
flush, three hand-overs of the GIL a call. Given streams of its own it uses those
instead, so `claimed_pipes` gives it asyncio's pipe transports over the same
descriptors, which the event loop watches itself. A search that finds nothing,
timed in raw JSON-RPC: 2.1 -> 1.15 ms a round trip, the server's CPU 2.0 -> 1.05 ms
a call (2 cores).

Like the SDK, it takes the wire off fds 0 and 1 while serving (fd 0 reads the null
device, fd 1 writes to stderr), so a library that prints cannot corrupt a message,
and puts them back afterwards. Where asyncio cannot watch the descriptors (a
regular file, or Windows) it gives None and the SDK's own transport serves.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

__all__ = ["LINE_LIMIT", "PipeLines", "PipeWriter", "claimed_pipes"]

# The longest request line read; a longer one is dropped and stands in as a line
# that is not JSON, which the SDK reports like any malformed message. The largest
# valid request (200 turns of 20,000 characters, every one escaped) is below 30 MiB.
LINE_LIMIT = 64 * 2**20
NOT_JSON = "{\n"


class PipeLines:
    """The wire's incoming lines as text, as the SDK iterates over stdin: UTF-8 with
    undecodable bytes replaced, as its own transport reads them."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def __aiter__(self) -> PipeLines:
        return self

    async def __anext__(self) -> str:
        try:
            line = await self._reader.readline()
        except ValueError:  # longer than LINE_LIMIT: asyncio has dropped it
            return NOT_JSON
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", errors="replace")


class PipeWriter:
    """The wire's outgoing side, with the two calls the SDK makes on stdout."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> None:
        self._writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        # The transport's high-water mark is 0 (`claimed_pipes`): this returns once
        # the pipe has taken every byte, as the SDK's blocking flush does, so nothing
        # is left in memory when the server stops.
        await self._writer.drain()


def _private_copy(fd: int) -> int:
    """A duplicate of `fd` above the standard descriptors, closed on exec."""
    import fcntl  # POSIX only, like this module's use

    return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)


@asynccontextmanager
async def claimed_pipes() -> AsyncIterator[tuple[PipeLines, PipeWriter] | None]:
    """The wire (this process's stdin and stdout) as asyncio pipes while the block
    runs, or None where asyncio cannot serve them; see the module's docstring."""
    if sys.platform == "win32":
        yield None
        return
    loop = asyncio.get_running_loop()
    saved = {fd: _private_copy(fd) for fd in (0, 1)}
    # asyncio makes a pipe non-blocking, and the pipe's open file is shared with
    # whoever gave it to us (a terminal, say): its mode is put back afterwards.
    blocking = {fd: os.get_blocking(copy) for fd, copy in saved.items()}
    wire_in = os.fdopen(_private_copy(0), "rb", buffering=0)
    wire_out = os.fdopen(_private_copy(1), "wb", buffering=0)
    read_transport: asyncio.ReadTransport | None = None
    write_transport: asyncio.WriteTransport | None = None

    def release() -> None:
        # Every message was flushed whole, so nothing is left to send: abort stops
        # watching the pipe at once, before its descriptor is closed here.
        if read_transport is not None:
            read_transport.close()
        if write_transport is not None and not write_transport.is_closing():
            write_transport.abort()  # (a pipe whose reader has gone is closed already)
        wire_in.close()
        wire_out.close()
        for fd, copy in saved.items():
            os.dup2(copy, fd)
            os.set_blocking(fd, blocking[fd])
            os.close(copy)

    reader = asyncio.StreamReader(limit=LINE_LIMIT, loop=loop)
    try:  # stdout first: once watched, stdin is read, and a fallback would lose that
        write_transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, wire_out
        )
        read_transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader, loop=loop), wire_in
        )
    except (OSError, ValueError):  # not a pipe, socket or character device
        release()  # before the SDK's transport uses the same descriptors
        yield None
        return
    try:
        write_transport.set_write_buffer_limits(high=0)
        writer = asyncio.StreamWriter(write_transport, protocol, None, loop)  # type: ignore[arg-type]
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(2, 1)
        yield PipeLines(reader), PipeWriter(writer)
    finally:
        release()
