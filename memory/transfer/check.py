"""The first pass of an import: every line checked, and turned into steps, before
anything is written.

Steps (`steps`) are spooled to a temporary file as plain values (`ImportPlan`), so
memory holds one batch whatever the size of the input, and a malformed line is found
before anything is written. The second pass (`write.write_batch`) reads the batches
back and writes each in one transaction. What one line may be is `records`.
"""

from __future__ import annotations

import marshal
from collections.abc import Iterable, Iterator
from typing import BinaryIO

from pydantic import ValidationError

from ..errors import InvalidInputError
from .records import decode, plain_step, record_steps
from .steps import RawStep

__all__ = [
    "BATCH_SIZE",
    "CHUNK_LINES",
    "ImportPlan",
    "check_import",
    "check_lines",
    "text_lines",
]

# Steps a transaction: fewer commits write each hot page (the id indexes' leaves,
# full-text segments) to the WAL fewer times, while the write lock is held short
# enough for another writer sharing the file to wait within its busy timeout.
BATCH_SIZE = 20_000
# Lines checked, and their steps spooled, at a time.
CHUNK_LINES = 10_000


class ImportPlan:
    """The checked steps of an import, in batches of `batch_size`, kept in `spool` (a
    temporary file) rather than in memory: a million facts are ~1.5 GB as Python objects."""

    def __init__(self, spool: BinaryIO, batch_size: int) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.batch_size = batch_size
        self.lines = 0  # lines that gave steps (all but blank ones)
        self._chunks = 0
        self._file = spool

    def add(self, steps: list[RawStep], lines: int) -> None:
        """Spool the steps of the next `lines` lines."""
        data = marshal.dumps(steps)  # plain values: the fastest format
        self._file.write(len(data).to_bytes(8, "little") + data)
        self._chunks += 1
        self.lines += lines

    def batches(self) -> Iterator[list[RawStep]]:
        """The steps, batch by batch, in line order."""
        self._file.seek(0)
        steps: list[RawStep] = []
        for _ in range(self._chunks):
            size = int.from_bytes(self._file.read(8), "little")
            steps += marshal.loads(self._file.read(size))
            while len(steps) >= self.batch_size:
                yield steps[: self.batch_size]
                del steps[: self.batch_size]
        if steps:
            yield steps


def check_import(
    lines: Iterable[str],
    spool: BinaryIO,
    batch_size: int = BATCH_SIZE,
    chunk_lines: int = CHUNK_LINES,
) -> ImportPlan:
    """Check every line and plan the steps that write them, numbered by line, in `spool`
    (an empty binary file), `chunk_lines` lines at a time.

    Raises:
        InvalidInputError: naming the first bad line and what is wrong with it.
    """
    plan = ImportPlan(spool, batch_size)
    if chunk_lines < 1:
        raise ValueError("chunk_lines must be at least 1")
    for start, chunk, unreadable in _chunks(lines, chunk_lines):
        plan.add(*check_lines(start, chunk))
        if unreadable is not None:  # told after the lines read before it are checked
            raise unreadable
    return plan


def _chunks(lines: Iterable[str], size: int) -> Iterator[tuple[int, list[str], Exception | None]]:
    """The lines in lists of `size`, each with the number of its first line. An error
    reading the input (a line that is not UTF-8) comes with the lines read before it,
    to be told only if none of them is bad, as when lines were checked as read."""
    chunk: list[str] = []
    start = number = 0
    iterator = iter(lines)
    while True:
        try:
            line = next(iterator)
        except StopIteration:
            break
        except (InvalidInputError, ValueError, OSError) as exc:
            yield start or number + 1, chunk, exc
            return
        number += 1
        start = start or number
        chunk.append(line)
        if len(chunk) == size:
            yield start, chunk, None
            start, chunk = 0, []
    if chunk:
        yield start, chunk, None


def check_lines(start: int, lines: list[str]) -> tuple[list[RawStep], int]:
    """The steps of `lines`, numbered from `start`, and how many lines gave steps.

    Raises:
        InvalidInputError: naming the first bad line and what is wrong with it.
    """
    steps: list[RawStep] = []
    count = 0
    for number, line in enumerate(lines, start=start):
        if not line.strip():
            continue
        try:
            record = decode(line)
            step = plain_step(record, number)
            more = () if step is not None else record_steps(record, number)
        except (ValueError, InvalidInputError, ValidationError) as exc:  # JSONDecodeError too
            raise InvalidInputError(f"line {number}: {exc}") from None
        except RecursionError:  # `json` decodes nesting by recursion
            raise InvalidInputError(f"line {number}: nested too deeply") from None
        if step is not None:
            steps.append(step)
        else:
            steps += map(tuple, more)  # spooled as plain values, as plain steps are
        count += 1
    return steps, count


def text_lines(raw_lines: Iterable[bytes]) -> Iterator[str]:
    """The lines of a file opened in binary mode, as text: UTF-8, an optional byte
    order mark first (as Windows editors write), and a line that is not UTF-8 named
    by its number, which a file decoded as a whole could not say.

    Raises:
        InvalidInputError: naming the first line that is not UTF-8 text.
    """
    for number, raw in enumerate(raw_lines, start=1):
        try:
            yield raw.decode("utf-8-sig" if number == 1 else "utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidInputError(
                f"line {number}: not UTF-8 text (byte {exc.start + 1} of the line)"
            ) from None
