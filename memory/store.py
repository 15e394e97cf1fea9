"""The SQLite connection: opening, checking, migrating, and one-at-a-time transactions.

One aiosqlite connection serves a `GraphMemory`; operations take turns on it under a
lock, each inside one transaction (writes `BEGIN IMMEDIATE`, reads a snapshot), so a
multi-statement operation never sees or leaves half of another.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite
import anyio

from .errors import DatabaseFileError
from .schema import APPLICATION_ID, LATEST_VERSION, MIGRATIONS
from .timestamps import Clock

__all__ = ["Store", "Tx", "json_list"]

Params = Mapping[str, Any] | Sequence[Any]
BUSY_TIMEOUT_MS = 10_000
# Each transaction starts with one statement that reads the transaction time and
# finds the (app, user) owner row: one trip to the database thread instead of two.
SELECT_OWNER = "(SELECT id FROM owner WHERE app = :app AND user = :user)"
READ_CLOCK = f"SELECT max(last, :clock), {SELECT_OWNER} FROM tx_clock WHERE id = 1"
ADVANCE_CLOCK = f"""
    UPDATE tx_clock SET last = max(last + 1, :clock) WHERE id = 1
    RETURNING last, {SELECT_OWNER}
"""


def json_list(values: Iterable[Any]) -> str:
    """Bind a list as one parameter, read in SQL with `json_each`."""
    return json.dumps(list(values))


class Tx:
    """The statements of one transaction, and the transaction time it writes with."""

    def __init__(self, conn: aiosqlite.Connection, now: int, owner: int | None) -> None:
        self._conn = conn
        self.now = now
        self.owner = owner  # the (app, user) row, None until that user's first write

    # Each method is one trip to the connection's thread: the trips, not SQLite,
    # dominate the cost of a small operation.
    async def all(self, sql: str, params: Params = ()) -> list[sqlite3.Row]:
        return list(await self._conn.execute_fetchall(sql, params))

    async def one(self, sql: str, params: Params = ()) -> sqlite3.Row | None:
        rows = await self._conn.execute_fetchall(sql, params)
        return next(iter(rows), None)

    async def insert(self, sql: str, params: Params = ()) -> int:
        """Execute one INSERT; returns the new rowid."""
        row = await self._conn.execute_insert(sql, params)
        return row[0] if row else 0

    async def run(self, sql: str, params: Params = ()) -> None:
        await self._conn.execute_fetchall(sql, params)

    async def run_many(self, sql: str, rows: Iterable[Params]) -> None:
        rows = list(rows)
        if rows:
            await self._conn.executemany(sql, rows)


class Store:
    def __init__(self, conn: aiosqlite.Connection, clock: Clock, path: str) -> None:
        self._conn = conn
        self._clock = clock
        self._lock = anyio.Lock()
        self.path = path

    @classmethod
    async def open(cls, path: str, clock: Clock) -> Store:
        """Open (creating if needed) and migrate the database at `path`.

        Raises:
            DatabaseFileError: the file is not a usable chronomem database.
        """
        if path != ":memory:" and not path.startswith("file:"):
            Path(path).expanduser().parent.mkdir(parents=True, exist_ok=True)
        try:
            conn = await aiosqlite.connect(path, isolation_level=None)
        except sqlite3.Error as exc:
            raise DatabaseFileError(f"cannot open database {path!r}: {exc}") from exc
        conn.row_factory = sqlite3.Row
        try:
            # Wait for other processes (e.g. one creating the file right now) before
            # the first read, not only for writes.
            await conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            await when_not_busy(_check_file, conn, path)
            await when_not_busy(_configure, conn)
            await when_not_busy(_migrate, conn)
        except sqlite3.OperationalError as exc:
            await conn.close()
            raise DatabaseFileError(f"cannot open database {path!r}: {exc}") from exc
        except sqlite3.DatabaseError as exc:
            await conn.close()
            raise DatabaseFileError(
                f"{path!r} is not a usable SQLite database ({exc}); it was left untouched"
            ) from exc
        except BaseException:
            await conn.close()
            raise
        return cls(conn, clock, path)

    async def close(self) -> None:
        async with self._lock:
            await self._conn.close()

    async def _begin(self, app: str, user: str, *, advance: bool) -> Tx:
        """Transaction time: the clock, but never behind a time already handed out by
        any process sharing the file. A write takes a strictly later time than every
        earlier write, so `known_at` tells apart writes one microsecond apart."""
        rows = await self._conn.execute_fetchall(
            ADVANCE_CLOCK if advance else READ_CLOCK,
            {"clock": self._clock(), "app": app, "user": user},
        )
        now, owner = next(iter(rows))
        return Tx(self._conn, now, owner)

    @asynccontextmanager
    async def write(self, app: str, user: str) -> AsyncIterator[Tx]:
        """One write transaction for (app, user); rolled back on any exception,
        cancellation included."""
        async with self._lock:
            await when_not_busy(self._conn.execute, "BEGIN IMMEDIATE")
            async with _rollback_on_error(self._conn):
                yield await self._begin(app, user, advance=True)

    @asynccontextmanager
    async def read(self, app: str, user: str) -> AsyncIterator[Tx]:
        """One read snapshot for (app, user): every statement sees the same state."""
        async with self._lock:
            await self._conn.execute("BEGIN")
            async with _rollback_on_error(self._conn):
                yield await self._begin(app, user, advance=False)


T = TypeVar("T")
SQLITE_BUSY, SQLITE_LOCKED = 5, 6


async def when_not_busy(step: Callable[..., Awaitable[T]], *args: Any) -> T:
    """Run `step`, retrying with backoff while another connection holds a lock that
    SQLite does not wait for by itself (switching to WAL, WAL recovery), up to the
    busy timeout."""
    delay = 0.002
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            return await step(*args)
        except sqlite3.OperationalError as exc:
            code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
            if code not in (SQLITE_BUSY, SQLITE_LOCKED) or time.monotonic() > deadline:
                raise
        await anyio.sleep(delay)
        delay = min(delay * 2, 0.1)


@asynccontextmanager
async def _rollback_on_error(conn: aiosqlite.Connection) -> AsyncIterator[None]:
    try:
        yield
    except BaseException:
        with anyio.CancelScope(shield=True):
            await conn.execute("ROLLBACK")
        raise
    else:
        await conn.execute("COMMIT")


async def _pragma(conn: aiosqlite.Connection, name: str) -> Any:
    async with conn.execute(f"PRAGMA {name}") as cursor:
        row = await cursor.fetchone()
    return row[0] if row else None


async def _check_file(conn: aiosqlite.Connection, path: str) -> None:
    """Refuse another program's database, or one from a newer chronomem, before writing."""
    app_id = await _pragma(conn, "application_id")
    version = await _pragma(conn, "user_version")
    if app_id == 0:
        async with conn.execute("SELECT count(*) FROM sqlite_master") as cursor:
            (objects,) = await cursor.fetchone()  # type: ignore[misc]
        if objects:
            raise DatabaseFileError(
                f"{path!r} is an SQLite database of another program, not a chronomem "
                "database; it was left untouched. Choose another file with --db."
            )
    elif app_id != APPLICATION_ID:
        raise DatabaseFileError(
            f"{path!r} belongs to another program (application_id {app_id:#x}); "
            "it was left untouched. Choose another file with --db."
        )
    if version > LATEST_VERSION:
        raise DatabaseFileError(
            f"{path!r} has schema version {version}, newer than this chronomem "
            f"understands ({LATEST_VERSION}); upgrade chronomem to open it."
        )


async def _configure(conn: aiosqlite.Connection) -> None:
    await conn.execute("PRAGMA journal_mode = WAL")
    await conn.execute("PRAGMA synchronous = FULL")
    await conn.execute("PRAGMA foreign_keys = ON")
    await conn.execute("PRAGMA secure_delete = ON")


async def _migrate(conn: aiosqlite.Connection) -> None:
    """Apply the missing migrations in one transaction; a no-op when up to date."""
    if await _pragma(conn, "user_version") == LATEST_VERSION:
        return
    await conn.execute("BEGIN IMMEDIATE")
    async with _rollback_on_error(conn):
        version = await _pragma(conn, "user_version")  # another process may have won
        if version == 0:
            await conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        for step in range(version + 1, LATEST_VERSION + 1):
            for statement in MIGRATIONS[step]:
                await conn.execute(statement)
            await conn.execute(f"PRAGMA user_version = {step}")
