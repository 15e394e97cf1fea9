"""A second Python process for a large import's check pass.

Checking is pure CPU (~10 us a line), and nothing may be written before every line
has passed, so on a machine with two cores a second process checks every other
chunk of lines while this one checks the rest: the check pass takes about half the
time. The helper runs this module's `serve` (not `multiprocessing`, which would
import the caller's `__main__` again) and speaks marshal over its stdin and stdout,
each side reading the other's messages on a thread, so that neither waits on a
full pipe. Anything wrong with the helper only makes the
caller check the chunk itself (`HelperGone`).
"""

from __future__ import annotations

import contextlib
import marshal
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, BinaryIO

__all__ = ["CheckHelper", "HelperGone", "cores", "serve"]

SERVE = "from memory.check_helper import serve; serve()"
HEADER = 8  # bytes of length before each message


class HelperGone(Exception):
    """The helper process could not be started or stopped answering."""


def cores() -> int:
    """CPUs this process may run on."""
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
    size = int.from_bytes(header, "little")
    data = pipe.read(size)
    if len(data) < size:
        raise EOFError
    return marshal.loads(data)


class CheckHelper:
    """The helper process, checking the chunks of lines it is sent, in order. A thread
    on each side reads the pipe into memory, so a side that sends never waits for the
    other to finish what it is doing."""

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
        self.waiting = 0  # chunks sent, not yet answered
        self._replies: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._reader = threading.Thread(
            target=_read_all, args=(self._process.stdout, self._replies), daemon=True
        )
        self._reader.start()

    def check(self, start: int, lines: list[str]) -> None:
        """Send the lines numbered from `start` to be checked; `result` gives the reply."""
        assert self._process.stdin is not None
        try:
            _send(self._process.stdin, (start, lines))
        except OSError as exc:  # the helper has exited
            raise HelperGone(str(exc)) from None
        self.waiting += 1

    def answered(self) -> bool:
        """Whether the reply to the oldest chunk not yet taken has come."""
        return not self._replies.empty()

    def result(self) -> tuple[bool, int, str, bytes]:
        """The reply to the oldest chunk not yet taken: (passed, lines, error message,
        marshalled steps)."""
        reply = self._replies.get()
        if reply is None:
            raise HelperGone("the helper stopped answering")
        self.waiting -= 1
        return reply

    def close(self) -> None:
        """Let the helper end (its input closes, and a reply it is still writing finds
        no reader), and reap it."""
        for pipe in (self._process.stdin, self._process.stdout):
            with contextlib.suppress(OSError):
                pipe.close()  # type: ignore[union-attr]
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


def _read_all(pipe: BinaryIO, into: queue.SimpleQueue[Any]) -> None:
    """Put each message read from `pipe` into `into`, then None when it ends."""
    try:
        while True:
            into.put(_receive(pipe))
    except (EOFError, ValueError, OSError):
        into.put(None)


def serve() -> None:
    """The helper's loop: check each chunk it is sent, until its input ends."""
    from .errors import InvalidInputError
    from .transfer import check_lines

    requests: queue.SimpleQueue[Any] = queue.SimpleQueue()
    threading.Thread(target=_read_all, args=(sys.stdin.buffer, requests), daemon=True).start()
    replies = sys.stdout.buffer
    while (request := requests.get()) is not None:
        start, lines = request
        try:
            steps, count = check_lines(start, lines)
            reply = (True, count, "", marshal.dumps(steps))
        except InvalidInputError as exc:
            reply = (False, 0, str(exc), b"")
        try:
            _send(replies, reply)
        except BrokenPipeError:  # the import ended without this reply
            return
