"""The SQLite connection: opening, checking, migrating, and one transaction per operation.

One aiosqlite connection serves a `GraphMemory`. Each operation is a plain function
over a `Tx` that aiosqlite's database thread runs whole, inside one transaction
(writes `BEGIN IMMEDIATE`, reads a snapshot): one trip between the event loop and
that thread per operation, however many statements it runs, and operations never
interleave, since the thread takes them one at a time.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import aiosqlite

from .errors import DatabaseFileError, MemoryFullError
from .schema import (
    ADD_FTS_STATS,
    APPLICATION_ID,
    CHANGED_NEW,
    FTS_INDEXES,
    INDEX_NEW,
    LATEST_VERSION,
    MIGRATIONS,
    QUEUE_NEW,
    ROWIDS,
    TOKENS_FUNCTION,
    WORDS_FUNCTION,
    column_tokens,
    owner_range,
)
from .search_settings import DEFAULT_SEARCH, SearchSettings
from .timestamps import Clock
from .word_index import AFTER_MIGRATION, OnProgress, use_language
from .words import index_text

__all__ = ["Caps", "Store", "Tx", "add_functions", "json_list"]

Params = Mapping[str, Any] | Sequence[Any]
T = TypeVar("T")
BUSY_TIMEOUT_MS = 10_000
MIGRATION_WAIT_S = 900
# Per (app, user) caps, against a client that floods memory; generous by default
# (ten times the largest memory bench/scale.py measures).
DEFAULT_MAX_FACTS = 10_000_000
DEFAULT_MAX_TURNS = 10_000_000
FACT_KINDS = ("observation", "relation")
CACHE_KIB = 32 * 1024
# During a bulk import, checkpoint the WAL every 10,000 pages instead of SQLite's 1,000:
# each batch rewrites the same hot pages, and each checkpoint copies them back.
BULK_CHECKPOINT_PAGES = 10_000
SQLITE_BUSY, SQLITE_LOCKED, SQLITE_CORRUPT, SQLITE_NOTADB = 5, 6, 11, 26
# What the file or the disk refuses, with what a person can do about it.
STORAGE_FAILURES = {
    3: ("permission denied", "Let this user write the file and its folder"),  # SQLITE_PERM
    8: (  # SQLITE_READONLY
        "the file or its folder is read-only",
        "Let this user write the file and its folder, or choose another file with --db",
    ),
    10: ("the disk reported an I/O error", "Check the disk the file is on"),  # SQLITE_IOERR
    13: ("the disk is full", "Free some space on that disk, then try again"),  # SQLITE_FULL
    14: (  # SQLITE_CANTOPEN
        "the file (or its -wal or -shm file) cannot be opened",
        "Check that this user may create and write files in its folder",
    ),
}
# Each transaction starts with one statement that reads the transaction time and
# finds the (app, user) owner row.
SELECT_OWNER = "(SELECT id FROM owner WHERE app = :app AND user = :user)"
# ... and the schema version: a file migrated by a newer chronomem while this process
# had it open is refused, not written the old way.
SCHEMA_VERSION = "(SELECT user_version FROM pragma_user_version)"
# ... and the file's default language, which a search's query is read in (`words`).
LANGUAGE = "(SELECT language FROM word_index WHERE id = 1)"
READ_CLOCK = (
    f"SELECT max(last, :clock), {SELECT_OWNER}, {SCHEMA_VERSION}, {LANGUAGE}"
    " FROM tx_clock WHERE id = 1"
)
ADVANCE_CLOCK = f"""
    UPDATE tx_clock SET last = max(last + 1, :clock) WHERE id = 1
    RETURNING last, {SELECT_OWNER}, {SCHEMA_VERSION}, {LANGUAGE}
"""


def json_list(values: Iterable[Any]) -> str:
    """Bind a list as one parameter, read in SQL with `json_each`."""
    return json.dumps(list(values))


@dataclass(frozen=True)
class Caps:
    """The most facts (observations and relations) and turns one (app, user) may store."""

    max_facts: int = DEFAULT_MAX_FACTS
    max_turns: int = DEFAULT_MAX_TURNS


# The largest rowid of a kind in the range :first..:last, and every rowid there.
LAST_ROWID = {
    kind: f"SELECT max({key}) FROM {kind} WHERE {key} BETWEEN :first AND :last"
    for kind, key in ROWIDS.items()
}
ROWIDS_BETWEEN = {
    kind: f"SELECT {key} FROM {kind} WHERE {key} BETWEEN :first AND :last"
    for kind, key in ROWIDS.items()
}
RAISE_CHANGED_AT = "UPDATE entity SET changed_at = max(changed_at, ?) WHERE id = ?"
ADD_STORED = """
    UPDATE owner SET facts = facts + :facts, turns = turns + :turns WHERE id = :owner
    RETURNING facts, turns
"""


class Tx:
    """The statements of one transaction, and the transaction time it writes with."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        now: int,
        owner: int | None,
        caps: Caps = Caps(),
        search: SearchSettings = DEFAULT_SEARCH,
        language: str = "en",
    ) -> None:
        self._conn = conn
        self.now = now
        self.owner = owner  # the (app, user) row, None until that user's first write
        self.language = language  # the file's default language (`words`)
        self._caps = caps
        self.search = search  # how many rows a search ranks and reads
        self._unindexed: dict[str, list[int]] = {}  # kind -> rowids added, not yet indexed
        self._unraised: dict[str, list[int]] = {}  # kind -> rowids whose entities' changed_at
        # is not yet raised (see `schema.CHANGED_NEW`)
        self._added: dict[str, int] = {}  # kind -> rows added in this transaction
        self._next: dict[str, int] = {}  # kind -> the rowid its next row takes
        # What the search knows of its query's meaning (`meaning.Meaning`), or None:
        # ranked by words alone.
        self.meaning: Any = None

    @property
    def connection(self) -> sqlite3.Connection:
        """The connection, for what reads in this transaction outside SQL (`vectors`)."""
        return self._conn

    def all(self, sql: str, params: Params = ()) -> list[sqlite3.Row]:
        return self._conn.execute(sql, params).fetchall()

    def tuples(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        """`all`, as plain tuples: for the few statements that return many rows to
        code that reads every column anyway (search's candidates)."""
        cursor = self._conn.cursor()
        cursor.row_factory = None
        return cursor.execute(sql, params).fetchall()

    def one(self, sql: str, params: Params = ()) -> sqlite3.Row | None:
        return self._conn.execute(sql, params).fetchone()

    def insert(self, sql: str, params: Params = ()) -> int:
        """Execute one INSERT; returns the new rowid."""
        return self._conn.execute(sql, params).lastrowid or 0

    def run(self, sql: str, params: Params = ()) -> int:
        """Execute one statement; returns how many rows it changed."""
        return self._conn.execute(sql, params).rowcount

    def run_many(self, sql: str, rows: Iterable[Params]) -> None:
        self._conn.executemany(sql, rows)

    def add(self, kind: str, sql: str, params: Mapping[str, Any]) -> int:
        """INSERT one entity, observation, relation or turn with the rowid `:rowid` of
        the owner's range (`schema.owner_range`); its full-text entry and its entities'
        changed_at are written before the transaction commits (see
        `schema.INDEX_NEW`, `schema.CHANGED_NEW`; an entity is inserted with its
        changed_at). Returns the new rowid, or 0 when an ON CONFLICT clause skipped it.

        Every insert into those tables goes through here or `add_numbered_rows`, or search
        would miss it."""
        rowid = self.next_rowid(kind)
        cursor = self._conn.execute(sql, {**params, "rowid": rowid})
        if cursor.rowcount != 1:
            return 0
        self._next[kind] = rowid + 1
        self._unindexed.setdefault(kind, []).append(rowid)
        self._unraised.setdefault(kind, []).append(rowid)
        self._added[kind] = self._added.get(kind, 0) + 1
        return rowid

    def add_many(self, kind: str, sql: str, rows: Iterable[Mapping[str, Any]]) -> None:
        for params in rows:
            self.add(kind, sql, params)

    def add_rows(
        self, kind: str, sql: str, rows: Sequence[tuple[Any, ...]], *, raise_changed: bool = True
    ) -> Sequence[int]:
        """INSERT many rows of one kind with one `executemany`, as `add` would one by one;
        `sql` takes the rowid first, then a row's values. Returns the rowids of the rows
        inserted, in order; an ON CONFLICT clause may have skipped others. With
        `raise_changed=False` the caller raises their entities' changed_at itself
        (`raise_changed_at`)."""
        first = self.next_rowid(kind)
        numbered = [(rowid, *row) for rowid, row in enumerate(rows, start=first)]
        return self.add_numbered_rows(kind, sql, numbered, first, raise_changed=raise_changed)

    def add_numbered_rows(
        self,
        kind: str,
        sql: str,
        rows: Sequence[Sequence[Any]],
        first: int,
        *,
        raise_changed: bool = True,
    ) -> Sequence[int]:
        """`add_rows` for rows that hold their rowid first already: `first` (what
        `next_rowid` gave), then one more each (named rows, say)."""
        if first != self.next_rowid(kind):
            raise RuntimeError(f"rows of kind {kind} numbered from {first}, not the next rowid")
        last = first + len(rows) - 1
        if rows and last > owner_range(self._owner())[1]:
            raise MemoryFullError(f"memory full: no room for more rows of kind {kind}")
        # As plain tuples: sqlite3 binds a tuple subclass (a NamedTuple) much slower.
        added = self._conn.executemany(sql, map(tuple, rows)).rowcount
        self._next[kind] = last + 1
        rowids: Sequence[int] = range(first, first + added)
        if added < len(rows):  # some were skipped: which rowids are there?
            found = self._conn.execute(ROWIDS_BETWEEN[kind], {"first": first, "last": last})
            rowids = [rowid for (rowid,) in found]
        if added:
            self._unindexed.setdefault(kind, []).extend(rowids)
            if raise_changed:
                self._unraised.setdefault(kind, []).extend(rowids)
            self._added[kind] = self._added.get(kind, 0) + added
        return rowids

    def next_rowid(self, kind: str) -> int:
        """The rowid the next row of `kind` of this owner takes: after the largest one
        in the owner's range (`schema.owner_range`)."""
        if kind not in self._next:
            first, last = owner_range(self._owner())
            (top,) = self._conn.execute(LAST_ROWID[kind], {"first": first, "last": last}).fetchone()
            self._next[kind] = first if top is None else top + 1
        rowid = self._next[kind]
        if rowid > owner_range(self._owner())[1]:
            raise MemoryFullError(f"memory full: no room for more rows of kind {kind}")
        return rowid

    def _owner(self) -> int:
        if self.owner is None:
            raise RuntimeError("rows are added only once the owner row exists")
        return self.owner

    def raise_changed_at(self, times: Mapping[int, int]) -> None:
        """Raise each entity's changed_at (by id) to at least its time in `times`: what
        `schema.CHANGED_NEW` does for the rows `add_rows(raise_changed=False)` added."""
        self._conn.executemany(RAISE_CHANGED_AT, [(at, id_) for id_, at in times.items()])

    def finish(self) -> None:
        """Before commit: count what was added against the caps, then write the
        full-text entries of the new rows, one statement a table.

        Raises:
            MemoryFullError: a cap would be passed; the caller rolls back.
        """
        facts = sum(self._added.get(kind, 0) for kind in FACT_KINDS)
        turns = self._added.get("turn", 0)
        if (facts or turns) and self.owner is not None:
            stored_facts, stored_turns = self._conn.execute(
                ADD_STORED, {"facts": facts, "turns": turns, "owner": self.owner}
            ).fetchone()
            _check_cap("facts", stored_facts, facts, self._caps.max_facts)
            _check_cap("turns", stored_turns, turns, self._caps.max_turns)
        self.index_new_rows()

    def index_new_rows(self) -> None:
        """Write the full-text entries of the rows added so far, with what they add to
        the owner's statistics (`schema.ADD_FTS_STATS`), and raise their entities'
        changed_at (see `schema.CHANGED_NEW`). `finish` does it; call it
        first before updating an indexed column of a row added in this transaction
        (the update trigger removes the old entry, which must exist)."""
        for kind, rowids in self._unindexed.items():
            if not rowids:
                continue
            listed = json_list(rowids)
            self._conn.execute(INDEX_NEW[kind], {"rowids": listed})
            self._conn.execute(ADD_FTS_STATS[kind], {"rowids": listed, "owner": self._owner()})
            self._conn.execute(QUEUE_NEW[kind], {"rowids": listed, "owner": self._owner()})
        for kind, rowids in self._unraised.items():
            for statement in CHANGED_NEW.get(kind, ()) if rowids else ():
                self._conn.execute(statement, {"rowids": json_list(rowids)})
        self._unindexed.clear()
        self._unraised.clear()


def _check_cap(kind: str, stored: int, added: int, cap: int) -> None:
    if added and stored > cap:
        raise MemoryFullError(
            f"memory full: this user already stores {stored - added:,} {kind} and may "
            f"store at most {cap:,} (max_{kind}); this call would add {added:,}. Nothing "
            "was stored. Purge what is no longer needed (chronomem purge), or raise the "
            f"cap (--max-{kind} / CHRONOMEM_MAX_{kind.upper()})."
        )


def when_not_busy(step: Callable[..., T], *args: Any, within: float = BUSY_TIMEOUT_MS / 1000) -> T:
    """Run `step`, retrying with backoff while another connection holds a lock that
    SQLite does not wait for by itself (switching to WAL, WAL recovery), for up to
    `within` seconds (the busy timeout). Runs on the database thread, which has
    nothing else to do meanwhile."""
    delay = 0.002
    deadline = time.monotonic() + within
    while True:
        try:
            return step(*args)
        except sqlite3.OperationalError as exc:
            code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
            if code not in (SQLITE_BUSY, SQLITE_LOCKED) or time.monotonic() > deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


class Store:
    def __init__(
        self,
        conn: aiosqlite.Connection,
        clock: Clock,
        path: str,
        caps: Caps = Caps(),
        search: SearchSettings = DEFAULT_SEARCH,
    ) -> None:
        self._conn = conn
        self._clock = clock
        self.path = path
        self.caps = caps
        self.search = search
        self._file: FileIdentity | None = None  # None: in memory
        self.on_write: Callable[[], None] | None = None  # after each write commits
        self.semantic: Any = None  # `meaning.Semantic` when an embedder is in use

    @classmethod
    async def open(
        cls,
        path: str,
        clock: Clock,
        caps: Caps = Caps(),
        search: SearchSettings = DEFAULT_SEARCH,
        language: str | None = None,
        on_progress: OnProgress | None = None,
    ) -> Store:
        """Open (creating if needed) and migrate the database at `path`. With
        `language`, make it the file's default language (`words`); the words are
        indexed again if it was another, with `on_progress` told how far it is, as
        it is during a migration that re-indexes them.

        Raises:
            DatabaseFileError: the file is not a usable chronomem database.
        """
        on_disk = path != ":memory:" and not path.startswith("file:")
        if on_disk:
            _make_folder(path)
        try:
            conn = await aiosqlite.connect(path, isolation_level=None)
        except sqlite3.Error as exc:
            raise _storage_failure(exc, path) or DatabaseFileError(
                f"cannot open database {path!r}: {exc}"
            ) from exc
        conn.row_factory = sqlite3.Row
        store = cls(conn, clock, path, caps, search)
        try:
            await store._in_thread(_prepare, path, language, on_progress)
            if on_disk:
                store._file = FileIdentity.of(path)
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
        return store

    async def close(self) -> None:
        """Copy the WAL into the file as far as no reader holds it back, then close;
        SQLite's close, when no other process has the file open, checkpoints the rest
        and removes the -wal and -shm files."""
        with suppress(sqlite3.Error, DatabaseFileError):  # a full disk: close anyway
            await self._in_thread(_checkpoint)
        await self._conn.close()

    async def on_connection(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run `fn(connection)` on the database thread, between two operations: for what
        no operation does (a test making the file refuse writes with a pragma).

        Raises:
            DatabaseFileError: the file or the disk refused (read-only, full, ...).
        """
        return await self._in_thread(fn)

    async def _in_thread(self, fn: Callable[..., T], *args: Any) -> T:
        """Run `fn(connection, *args)` on aiosqlite's database thread.

        aiosqlite has no public call for this; `_execute` is how its own methods
        reach the thread (stable since aiosqlite 0.17; the version is pinned).

        Raises:
            DatabaseFileError: the file or the disk refused (read-only, full, ...).
        """
        connection = self._conn._conn  # the sqlite3 connection, used only on its thread
        try:
            return await self._conn._execute(fn, connection, *args)
        except sqlite3.Error as exc:
            failure = _storage_failure(exc, self.path)
            if failure is None:
                raise
            raise failure from exc

    @asynccontextmanager
    async def bulk(self) -> AsyncIterator[None]:
        """Checkpoint less often while a bulk import runs (`BULK_CHECKPOINT_PAGES`).
        Durability is unchanged: every commit is still synced to the WAL."""
        usual = await self._in_thread(_set_checkpoint, BULK_CHECKPOINT_PAGES)
        try:
            yield
        finally:
            await self._in_thread(_set_checkpoint, usual)

    async def checkpoint_pages(self) -> int:
        """The WAL auto-checkpoint threshold in force now (`bulk` raises it)."""
        pages: int = await self._in_thread(_pragma, "wal_autocheckpoint")
        return pages

    async def compact(self) -> None:
        """Rewrite the file without free pages and empty the WAL, so deleted text is
        gone from the disk too (after a purge)."""

        def vacuum(conn: sqlite3.Connection) -> None:
            when_not_busy(conn.execute, "VACUUM")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

        await self._in_thread(vacuum)

    async def merge_index(self, kind: str) -> None:
        """Merge the full-text index of `kind` ("observation", "turn", ...) into one
        segment, in short transactions that let other writers in between.

        FTS5 writes each transaction's new entries as a segment and merges segments
        as they pile up, so a large import leaves a dozen or more of them, and every
        search looks each word up in each (docs/benchmarks.md)."""
        await self._in_thread(_merge_index, FTS_INDEXES[kind])

    async def write(
        self, app: str, user: str, operation: Callable[[Tx], T], meaning: Any = None
    ) -> T:
        """Run `operation` in one write transaction for (app, user); any exception
        rolls the whole of it back. `meaning` (a `meaning.Meaning`) is `tx.meaning`."""
        result = await self._checked(app, user, operation, True, meaning)
        if self.on_write is not None:
            self.on_write()
        return result

    async def read(
        self, app: str, user: str, operation: Callable[[Tx], T], meaning: Any = None
    ) -> T:
        """Run `operation` in one read snapshot for (app, user)."""
        return await self._checked(app, user, operation, False, meaning)

    async def housekeeping(self, fn: Callable[..., T], *args: Any, write: bool = True) -> T:
        """Run `fn(connection, *args)` in one transaction of its own, outside any
        user's memory and without taking a transaction time: the indexer's claims and
        vectors, the backlog's counts."""

        def run(conn: sqlite3.Connection) -> T:
            when_not_busy(conn.execute, "BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                result = fn(conn, *args)
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return result

        return await self._in_thread(run)

    async def _checked(
        self, app: str, user: str, operation: Callable[[Tx], T], write: bool, meaning: Any
    ) -> T:
        """Damage that opening could not see (it reads only the first page) surfaces
        when an operation reaches it: say so plainly, not as an SQLite traceback."""
        try:
            return await self._in_thread(self._transaction, app, user, operation, write, meaning)
        except sqlite3.DatabaseError as exc:
            code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
            if code not in (SQLITE_CORRUPT, SQLITE_NOTADB):
                raise
            raise DatabaseFileError(
                f"{self.path!r} is damaged ({exc}); nothing was changed. Restore it from a backup."
            ) from exc

    def _transaction(
        self,
        conn: sqlite3.Connection,
        app: str,
        user: str,
        operation: Callable[[Tx], T],
        write: bool,
        meaning: Any = None,
    ) -> T:
        when_not_busy(conn.execute, "BEGIN IMMEDIATE" if write else "BEGIN")
        try:
            # Transaction time: the clock, but never behind a time already handed out
            # by any process sharing the file. A write takes a strictly later time than
            # every earlier write, so `known_at` tells apart writes a microsecond apart.
            now, owner, version, language = conn.execute(
                ADVANCE_CLOCK if write else READ_CLOCK,
                {"clock": self._clock(), "app": app, "user": user},
            ).fetchone()
            if version > LATEST_VERSION:
                raise DatabaseFileError(
                    f"{self.path!r} was upgraded to schema version {version} by a newer "
                    f"chronomem while this process used it (it understands {LATEST_VERSION});"
                    " nothing was changed: restart it with the newer version"
                )
            tx = Tx(conn, now, owner, self.caps, self.search, language)
            tx.meaning = meaning
            result = operation(tx)
            tx.finish()
            if write and self._file is not None:
                self._file.check()
        except BaseException:
            if conn.in_transaction:  # SQLite rolls back by itself on a full disk
                conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return result


@dataclass(frozen=True)
class FileIdentity:
    """Which file the connection writes: SQLite keeps writing to its open descriptors
    when the file or its WAL is deleted or replaced, acknowledging writes that no
    later reader will see; each write transaction checks, before it commits, that
    the path still names the same file and that the WAL (present while any
    connection has the file open) is still there: two `stat` calls."""

    path: str  # absolute, as SQLite resolved it when it opened the file
    device: int
    inode: int
    wal: bool  # whether there is a WAL (not where a file system cannot hold one)

    @classmethod
    def of(cls, path: str) -> FileIdentity:
        path = os.path.abspath(path)
        found = os.stat(path)
        return cls(path, found.st_dev, found.st_ino, os.path.exists(path + "-wal"))

    def check(self) -> None:
        """Raises:
        DatabaseFileError: the file or its WAL was deleted, or another file is there."""
        try:
            found = os.stat(self.path)
        except FileNotFoundError:
            self._gone("the file is no longer there")
        if (found.st_dev, found.st_ino) != (self.device, self.inode):
            self._gone("another file is there now")
        if self.wal and not os.path.exists(self.path + "-wal"):
            self._gone("its -wal file is no longer there")

    def _gone(self, what: str) -> NoReturn:
        raise DatabaseFileError(
            f"the database file {self.path!r} was deleted or replaced while chronomem was "
            f"running ({what}); nothing was written. Restart chronomem to use the file "
            "now at that path."
        )


def _make_folder(path: str) -> None:
    """Create the folder of the database file, or say in one line why it cannot be."""
    folder = Path(path).expanduser().parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        blocking = next((p for p in (folder, *folder.parents) if p.exists()), folder)
        cause = f"{blocking} is not a folder" if not blocking.is_dir() else exc.strerror
        raise DatabaseFileError(
            f"cannot create the folder {str(folder)!r} for the database {path!r}: {cause}."
            " Choose another file with --db."
        ) from None


def _storage_failure(exc: sqlite3.Error, path: str) -> DatabaseFileError | None:
    """`exc` said in one line that names the file and the cause, when the file or the
    disk refused (read-only, full, ...); None for any other error."""
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    if code not in STORAGE_FAILURES:
        return None
    cause, advice = STORAGE_FAILURES[code]
    name = getattr(exc, "sqlite_errorname", "")
    return DatabaseFileError(
        f"cannot use the database {path!r}: {cause} ({name}: {exc}). {advice}."
    )


def _checkpoint(conn: sqlite3.Connection) -> None:
    conn.execute("PRAGMA wal_checkpoint(PASSIVE)")


def _prepare(
    conn: sqlite3.Connection, path: str, language: str | None, on_progress: OnProgress | None
) -> None:
    # Wait for other processes (e.g. one creating the file right now) before the
    # first read, not only for writes.
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    when_not_busy(_check_file, conn, path)
    when_not_busy(_configure, conn)
    # Another process may be migrating the file right now, which takes as long as an
    # import of it (minutes for a large file): wait for it rather than fail.
    when_not_busy(_migrate, conn, language, on_progress, within=MIGRATION_WAIT_S)
    if language is not None:
        when_not_busy(use_language, conn, language, on_progress, within=MIGRATION_WAIT_S)


def _pragma(conn: sqlite3.Connection, name: str) -> Any:
    row = conn.execute(f"PRAGMA {name}").fetchone()
    return row[0] if row else None


def _check_file(conn: sqlite3.Connection, path: str) -> None:
    """Refuse another program's database, or one from a newer chronomem, before writing."""
    # One statement, so one snapshot: read apart, another process creating the file
    # could commit its tables between the application id and the count.
    app_id, version, page_size, objects = conn.execute(FILE_HEADER).fetchone()
    _check_whole_pages(path, page_size)
    if app_id == 0:
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


FILE_HEADER = """
    SELECT (SELECT application_id FROM pragma_application_id),
           (SELECT user_version FROM pragma_user_version),
           (SELECT page_size FROM pragma_page_size),
           (SELECT count(*) FROM sqlite_master)
"""


def _check_whole_pages(path: str, page_size: int) -> None:
    """SQLite reads the missing end of a cut file as zeros without complaint, but never
    writes a file that is not a whole number of pages: such a file was truncated."""
    file = Path(path).expanduser()
    if path == ":memory:" or path.startswith("file:") or not file.is_file():
        return
    size = file.stat().st_size
    if size and page_size and size % page_size:
        raise DatabaseFileError(
            f"{path!r} is not a usable SQLite database (truncated: {size} bytes is not a "
            f"whole number of {page_size}-byte pages); it was left untouched"
        )


MERGE_PAGES = 1000  # pages of merge work per transaction: short, so writers get in between


def _merge_index(conn: sqlite3.Connection, table: str) -> None:
    """FTS5's incremental merge with a negative page count merges every segment into
    one (like 'optimize'), a bounded amount at a time. A call that did no work
    changes the total of changed rows by less than 2 (FTS5 documents this test)."""
    while True:
        when_not_busy(conn.execute, "BEGIN IMMEDIATE")
        try:
            before = conn.total_changes
            merge = f"INSERT INTO {table} ({table}, rank) VALUES ('merge', ?)"
            conn.execute(merge, (-MERGE_PAGES,))
            worked = conn.total_changes - before >= 2
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        if not worked:
            return


def _words(text: str | None, language: str) -> str:
    return index_text(text or "", language)


def add_functions(conn: sqlite3.Connection) -> None:
    """Register the SQL functions the schema and the engine's statements call: on
    every connection the engine opens, and on a plain one (a tool or a test) that
    reads the full-text indexes or writes rows."""
    conn.create_function(TOKENS_FUNCTION, 2, column_tokens, deterministic=True)
    conn.create_function(WORDS_FUNCTION, 2, _words, deterministic=True)
    # The word indexes' views and triggers call that function: allowed whatever the
    # SQLite library's default for functions in the schema.
    conn.execute("PRAGMA trusted_schema = ON")


def _configure(conn: sqlite3.Connection) -> None:
    add_functions(conn)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA secure_delete = ON")
    # 32 MiB of page cache instead of 2: a search joins a few thousand rows spread
    # over the file, and at a million facts the default cache misses on most of them.
    conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}")


def _set_checkpoint(conn: sqlite3.Connection, pages: int) -> int:
    """Set the WAL auto-checkpoint threshold; returns the one it replaces."""
    usual = _pragma(conn, "wal_autocheckpoint")
    conn.execute(f"PRAGMA wal_autocheckpoint = {int(pages)}")
    return usual


def _migrate(
    conn: sqlite3.Connection, language: str | None, on_progress: OnProgress | None
) -> None:
    """Apply the missing migrations in one transaction; a no-op when up to date."""
    if _pragma(conn, "user_version") == LATEST_VERSION:
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = _pragma(conn, "user_version")  # another process may have won
        if version == 0:
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        for step in range(version + 1, LATEST_VERSION + 1):
            for statement in MIGRATIONS[step]:
                conn.execute(statement)
            if step in AFTER_MIGRATION:
                AFTER_MIGRATION[step](conn, language, on_progress)
            conn.execute(f"PRAGMA user_version = {step}")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
