"""The first pass of an import: every line checked, and turned into steps, before
anything is written.

Steps are tuples of plain values (line number, kind, values), spooled to a temporary
file (`ImportPlan`), so memory holds one batch whatever the size of the input, and a
malformed line is found before anything is written. The second pass
(`transfer.write_batch`) reads the batches back and writes each in one transaction.
What one line may be is `import_records`; a second process may check some of the
lines (`check_helper`).
"""

from __future__ import annotations

import marshal
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from pydantic import ValidationError

from .check_helper import CheckHelper, HelperGone, cores
from .errors import InvalidInputError
from .import_records import decode, plain_step, record_steps

__all__ = ["BATCH_SIZE", "ImportPlan", "Step", "check_import", "check_lines", "text_lines"]

Step = tuple[Any, ...]  # (line number, kind, *values); the kind names its writer
# Steps a transaction: fewer commits write each hot page (index edges, full-text
# segments) to the WAL fewer times; 5,000 rows hold the write lock ~0.2 s here.
BATCH_SIZE = 5_000


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

    def add(self, steps: list[Step], lines: int) -> None:
        """Spool the steps of the next `lines` lines."""
        self.add_marshalled(marshal.dumps(steps), lines)  # plain values: the fastest format

    def add_marshalled(self, data: bytes, lines: int) -> None:
        self._file.write(len(data).to_bytes(8, "little") + data)
        self._chunks += 1
        self.lines += lines

    def batches(self) -> Iterator[list[Step]]:
        """The steps, batch by batch, in line order."""
        self._file.seek(0)
        steps: list[Step] = []
        for _ in range(self._chunks):
            size = int.from_bytes(self._file.read(8), "little")
            steps += marshal.loads(self._file.read(size))
            while len(steps) >= self.batch_size:
                yield steps[: self.batch_size]
                del steps[: self.batch_size]
        if steps:
            yield steps


# Lines checked at a time, by this process or by the helper (`check_helper`): the
# helper is started only for an import longer than this, on a machine with two cores.
CHUNK_LINES = 10_000


def check_import(
    lines: Iterable[str], spool: BinaryIO, batch_size: int = BATCH_SIZE, *, helper: bool = True
) -> ImportPlan:
    """Check every line and plan the steps that write them, numbered by line, in `spool`
    (an empty binary file). With `helper`, an import longer than one chunk is checked in
    two processes: the helper is given the next chunk whenever it is idle, and this
    process checks the others and never waits for it: at the end, a chunk the helper
    has not answered yet is checked here.

    Raises:
        InvalidInputError: naming the first bad line and what is wrong with it.
    """
    plan = ImportPlan(spool, batch_size)
    checker: CheckHelper | None = None
    chunks: deque[Chunk] = deque()  # in line order, not yet spooled
    try:
        for start, part, unread in _chunks(lines, CHUNK_LINES):
            if checker is None and helper and start > 1 and cores() > 1:
                checker, helper = _start_helper(), False
            chunk = Chunk(start, part)
            chunks.append(chunk)
            try:
                if checker is not None and part and checker.idle():
                    checker.check(start, part)
                    chunk.sent = True
            except HelperGone:
                checker = _stop_helper(checker)
            if not chunk.sent:
                chunk.check_here()
            if unread is not None and chunk.error is None:
                chunks.append(Chunk(start + len(part), [], error=unread))
            if chunk.error is not None or unread is not None:
                break  # told once the chunks before it are spooled
            checker = _spool_checked(plan, chunks, checker, wait=False)
        checker = _spool_checked(plan, chunks, checker, wait=True)
    finally:
        if checker is not None:
            checker.close()
    return plan


@dataclass
class Chunk:
    """Lines numbered from `start`, sent to the helper or checked here."""

    start: int
    lines: list[str]
    sent: bool = False
    steps: list[Step] = field(default_factory=list)
    count: int = 0  # lines that gave steps
    error: Exception | None = None  # the first bad line's, or one reading the input

    def check_here(self) -> None:
        try:
            self.steps, self.count = check_lines(self.start, self.lines)
        except InvalidInputError as exc:
            self.error = exc
        self.sent, self.lines = False, []


def _spool_checked(
    plan: ImportPlan, chunks: deque[Chunk], checker: CheckHelper | None, wait: bool
) -> CheckHelper | None:
    """Spool the checked chunks at the front of `chunks`, in order. The chunk the helper
    has is spooled once it answers; with `wait`, it is checked here instead if the
    answer has not begun to come, and the helper is stopped. Returns the helper, or
    None once it is gone.

    Raises:
        InvalidInputError: the first bad line of the chunks spooled.
    """
    while chunks:
        chunk = chunks[0]
        if chunk.sent:
            if checker is not None and not checker.answered():
                if not wait:
                    return checker
                checker = _stop_helper(checker)
            try:
                if checker is None:
                    raise HelperGone
                _, passed, count, message, steps = checker.result()
            except HelperGone:
                checker = _stop_helper(checker)
                chunk.check_here()
                continue
            if not passed:
                raise InvalidInputError(message)
            plan.add_marshalled(steps, count)
        elif chunk.error is not None:
            raise chunk.error
        else:
            plan.add(chunk.steps, chunk.count)
        chunks.popleft()
    return checker


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


def _start_helper() -> CheckHelper | None:
    try:
        return CheckHelper()
    except HelperGone:
        return None


def _stop_helper(checker: CheckHelper | None) -> None:
    if checker is not None:
        checker.close()


def check_lines(start: int, lines: list[str]) -> tuple[list[Step], int]:
    """The steps of `lines`, numbered from `start`, and how many lines gave steps.

    Raises:
        InvalidInputError: naming the first bad line and what is wrong with it.
    """
    steps: list[Step] = []
    count = 0
    for number, line in enumerate(lines, start=start):
        if not line.strip():
            continue
        try:
            record = decode(line)
            step = plain_step(record)
            more = () if step is not None else record_steps(record)
        except (ValueError, InvalidInputError, ValidationError) as exc:  # JSONDecodeError too
            raise InvalidInputError(f"line {number}: {exc}") from None
        if step is not None:
            steps.append((number, *step))
        for other in more:
            steps.append((number, *other))
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
