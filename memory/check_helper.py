"""A second Python process for a large import's check pass.

Checking is pure CPU (~10 us a line), and nothing may be written before every line
has passed, so on a machine with two cores a second process checks some chunks of
lines while this one checks the others. The helper runs this module's `serve` (not
`multiprocessing`, which would import the caller's `__main__` again) and speaks
marshal over its stdin and stdout, one chunk at a time. Anything wrong with the
helper only makes the caller check the chunk itself (`HelperGone`)."""

from __future__ import annotations

import contextlib
import marshal
import os
import select
import subprocess
import sys
from pathlib import Path
from typing import Any, BinaryIO

__all__ = ["CheckHelper", "HelperGone", "cores", "serve"]

SERVE = "from memory.check_helper import serve; serve()"
HEADER = 8  # bytes of length before each message
PART = 1 << 22  # bytes read at a time


class HelperGone(Exception):
    """The helper process could not be started or stopped answering."""


def cores() -> int:
    """CPUs this process may run on; 1 where pipes cannot be polled (Windows)."""
    if os.name != "posix":
        return 1
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _send(pipe: BinaryIO, message: Any) -> None:
    data = marshal.dumps(message)
    pipe.write(len(data).to_bytes(HEADER, "little") + data)
    pipe.flush()


def _receive(pipe: BinaryIO) -> Any:
    header = pipe.read(HEADER)
    if len(header) < HEADER:
        raise EOFError
    parts, left = [], int.from_bytes(header, "little")
    while left:  # by parts: a length that is not one is never allocated at once
        part = pipe.read(min(left, PART))
        if not part:
            raise EOFError
        parts.append(part)
        left -= len(part)
    return marshal.loads(b"".join(parts))


class CheckHelper:
    """The helper process, given one chunk of lines at a time: it is sent a chunk only
    when idle, and its reply is read only once it has begun to come, so neither
    process ever waits on the other's pipe (and no thread contends for the GIL)."""

    def __init__(self) -> None:
        # The helper must import this very package, wherever it was imported from.
        root = str(Path(__file__).resolve().parent.parent)
        path = os.pathsep.join([root, *filter(None, [os.environ.get("PYTHONPATH")])])
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-c", SERVE],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env={**os.environ, "PYTHONPATH": path},
            )
        except OSError as exc:  # no interpreter to start (a frozen application)
            raise HelperGone(str(exc)) from None
        # Busy until it says it is ready: a chunk sent while it is still importing
        # would fill the pipe and keep this process waiting.
        self.busy = True
        self._starting = True

    def idle(self) -> bool:
        """Whether the helper can take a chunk now."""
        if self._starting and self.answered():
            self.result()  # the helper's word that it is ready
            self._starting = False
        return not self.busy

    def check(self, start: int, lines: list[str]) -> None:
        """Send the lines numbered from `start` to be checked; `result` gives the reply."""
        assert self._process.stdin is not None and not self.busy
        try:
            _send(self._process.stdin, (start, lines))
        except OSError as exc:  # the helper has exited
            raise HelperGone(str(exc)) from None
        self.busy = True

    def answered(self) -> bool:
        """Whether the reply to the chunk sent has begun to come (or the helper ended)."""
        assert self._process.stdout is not None
        return bool(select.select([self._process.stdout], [], [], 0)[0])

    def result(self) -> tuple[int, bool, int, str, bytes]:
        """The reply to the chunk sent: (its first line number, passed, lines, error
        message, marshalled steps)."""
        assert self._process.stdout is not None
        try:
            reply = _receive(self._process.stdout)
        except (EOFError, ValueError, OSError) as exc:
            raise HelperGone(f"the helper stopped answering ({exc!r})") from None
        self.busy = False
        return reply

    def close(self) -> None:
        """End the helper (its input closes; one still checking a chunk no longer
        wanted is stopped), and reap it."""
        for pipe in (self._process.stdin, self._process.stdout):
            with contextlib.suppress(OSError):
                pipe.close()  # type: ignore[union-attr]
        if self.busy:
            self._process.kill()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


def serve() -> None:
    """The helper's loop: check each chunk it is sent, until its input ends."""
    from .errors import InvalidInputError
    from .import_check import check_lines

    requests, replies = sys.stdin.buffer, sys.stdout.buffer
    _send(replies, (0, True, 0, "", b""))  # ready
    while True:
        try:
            start, lines = _receive(requests)
        except EOFError:
            return
        try:
            steps, count = check_lines(start, lines)
            reply = (start, True, count, "", marshal.dumps(steps))
        except InvalidInputError as exc:
            reply = (start, False, 0, str(exc), b"")
        try:
            _send(replies, reply)
        except BrokenPipeError:  # the import ended without this reply
            return
