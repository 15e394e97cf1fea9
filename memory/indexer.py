"""The background indexer: embeds the rows that have no vector yet (DESIGN §8).

The backlog is the file's own table `vector_pending`, filled by every write
transaction. The indexer claims a batch for `lease_s` (so another process sharing
the file takes other rows, and a crashed process's claim lapses), reads the batch's
texts, embeds them on a worker thread, outside any transaction, and stores the
vectors in one short transaction, which also empties the batch from the backlog. A
write never waits for it: it only wakes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import random
import sqlite3
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, NamedTuple

import anyio
import anyio.to_thread

from .embedding import Embedder, EmbedderError
from .schema import ROWIDS, VECTOR_KINDS
from .store import Store, json_list

__all__ = ["DEFAULT_INDEXING", "Indexer", "IndexerSettings", "Progress", "counts"]

RETRY_S = 5.0
INDEXER_NICENESS = 10


@dataclass(frozen=True, slots=True)
class IndexerSettings:
    """How the indexer works through the backlog."""

    batch: int = 64  # rows embedded at a time
    lease_s: float = 30.0  # how long a claimed batch is this process's alone
    idle_poll_s: float = 1.0  # how often an idle indexer looks for other processes' rows
    # Woken by a write, it waits for a pause this long between writes (at most
    # `most_delay_s`): a burst's rows are embedded together, after the burst, rather
    # than a claim and a store between every two writes.
    quiet_s: float = 0.05
    most_delay_s: float = 1.0
    # False: no background indexing in this process (a one-shot command that only
    # searches); the model still ranks its queries.
    background: bool = True
    # Say once on stderr when the file's vectors are another model's (and searches
    # rank by words): a server does, where no caller waits to hear it.
    tell_other_model: bool = False


DEFAULT_INDEXING = IndexerSettings()


class Progress(NamedTuple):
    """Rows with a vector, and rows waiting for one (over the whole file)."""

    indexed: int
    pending: int


class Claimed(NamedTuple):
    kind: int
    row_id: int
    owner_id: int
    text: str


# The text each kind of row is embedded as: a fact with its entity's name, a
# relation as a sentence, a turn as `role: text`, an entity as its name and type.
TEXTS = {
    VECTOR_KINDS["entity"]: """
        SELECT e.id, e.name || ' (' || e.entity_type || ')' FROM entity e
        WHERE e.id IN (SELECT value FROM json_each(:ids))
    """,
    VECTOR_KINDS["observation"]: """
        SELECT o.seq, e.name || ': ' || o.text
        FROM observation o JOIN entity e ON e.id = o.entity_id
        WHERE o.seq IN (SELECT value FROM json_each(:ids))
    """,
    VECTOR_KINDS["relation"]: """
        SELECT r.seq, s.name || ' ' || replace(r.relation, '_', ' ') || ' ' || t.name
        FROM relation r JOIN entity s ON s.id = r.source_id JOIN entity t ON t.id = r.target_id
        WHERE r.seq IN (SELECT value FROM json_each(:ids))
    """,
    VECTOR_KINDS["turn"]: """
        SELECT t.seq, t.role || ': ' || t.text FROM turn t
        WHERE t.seq IN (SELECT value FROM json_each(:ids))
    """,
}
MODEL = "SELECT model FROM vector_state WHERE id = 1"
SET_MODEL = "UPDATE vector_state SET model = :model WHERE id = 1 AND model IS NULL"
FREE = """
    SELECT kind, row_id, owner_id FROM vector_pending WHERE claimed_until < :now
    ORDER BY claimed_until LIMIT :n
"""
CLAIM = """
    UPDATE vector_pending SET claimed_until = :until, claimed_by = :me
    WHERE kind = :kind AND row_id = :row_id
"""
STORE = """
    INSERT OR REPLACE INTO vector (kind, row_id, owner_id, vec)
    SELECT :kind, :row_id, :owner_id, :vec
    WHERE EXISTS (SELECT 1 FROM vector_pending
                  WHERE kind = :kind AND row_id = :row_id AND claimed_by = :me)
"""
DONE = "DELETE FROM vector_pending WHERE kind = :kind AND row_id = :row_id AND claimed_by = :me"
COUNTS = "SELECT (SELECT count(*) FROM vector), (SELECT count(*) FROM vector_pending)"
PENDING = "SELECT count(*) FROM vector_pending"
RELEASE = "UPDATE vector_pending SET claimed_until = 0, claimed_by = 0 WHERE claimed_by = :me"
# `reindex --all`: every row waits for a vector again, of whichever model claims first.
REQUEUE_ALL = [
    "DELETE FROM vector",
    "UPDATE vector_state SET model = NULL WHERE id = 1",
    "UPDATE vector_pending SET claimed_until = 0, claimed_by = 0",
    *(
        f"INSERT OR IGNORE INTO vector_pending (kind, row_id, owner_id)"
        f" SELECT {code}, {ROWIDS[kind]}, owner_id FROM {kind}"
        for kind, code in VECTOR_KINDS.items()
    ),
]


def _micros() -> int:
    return time.time_ns() // 1000


class Indexer:
    """Embeds the file's backlog while the `GraphMemory` is open."""

    def __init__(self, store: Store, embedder: Embedder, settings: IndexerSettings) -> None:
        self.store = store
        self.embedder = embedder
        self.settings = settings
        self.failure: EmbedderError | None = None
        self.model_mismatch: str | None = None  # the file's model, when not ours
        self._mismatch_told = False
        self._me = random.getrandbits(62) or 1
        self._wake = anyio.Event()
        self._progress = anyio.Event()
        self._load_requested = False
        self._hurried = False
        # Embedding runs on a thread of its own, at a lower priority where the system
        # allows it, so that requests served meanwhile get the CPU first.
        self._thread = ThreadPoolExecutor(1, "chronomem-indexer", initializer=_lower_priority)

    def load_soon(self) -> None:
        """Load the model in the background (a search found it not loaded)."""
        self._load_requested = True
        self.wake()

    def wake(self) -> None:
        """A write added rows: look at the backlog (after a pause between writes)."""
        self._wake.set()

    def hurry(self) -> None:
        """Someone waits for the backlog: look at it now, without a pause."""
        self._hurried = True
        self._wake.set()

    async def run(self) -> None:
        """Work through the backlog until cancelled."""
        from .vectors import encode  # numpy: only with an embedder

        while self.failure is None:
            try:
                await self._step(encode)
            except EmbedderError as exc:
                self.failure = exc
                print(f"chronomem: {exc}; searching by words only", file=sys.stderr)
            except Exception as exc:  # the file refused (disk full, read-only): later
                print(f"chronomem: the indexer will try again: {exc}", file=sys.stderr)
                await anyio.sleep(RETRY_S)
        self._signal_progress()

    async def _step(self, encode: Callable[[Any], bytes]) -> None:
        """One batch of the backlog embedded and stored, or a wait for one."""
        if self._load_requested:
            self._load_requested = False
            await self.load()
        claimed = await self.store.housekeeping(self._claim)
        untold = self.settings.tell_other_model and not self._mismatch_told
        if self.model_mismatch is not None and untold:
            self._mismatch_told = True
            print(
                f"chronomem: {self._mismatch_message()}; searching by words only", file=sys.stderr
            )
        if not claimed:
            self._hurried = False
            self._signal_progress()
            with anyio.move_on_after(self.settings.idle_poll_s):
                await self._wake.wait()
            self._wake = anyio.Event()
            await self._pause_between_writes()
            return
        # Closing the memory does not wait for a batch being embedded: its claims are
        # given back, and another run embeds it.
        texts = [row.text for row in claimed]
        vectors = await asyncio.get_running_loop().run_in_executor(
            self._thread, self.embedder.embed, texts
        )
        await self.store.housekeeping(self._store, claimed, [encode(v) for v in vectors])
        self._signal_progress()

    async def _pause_between_writes(self) -> None:
        """Wait until no write has woken it for `quiet_s`, or `most_delay_s` passed."""
        deadline = anyio.current_time() + self.settings.most_delay_s
        while not self._hurried and (left := deadline - anyio.current_time()) > 0:
            with anyio.move_on_after(min(self.settings.quiet_s, left)) as waiting:
                await self._wake.wait()
            if waiting.cancelled_caught:
                return
            self._wake = anyio.Event()

    async def release_claims(self) -> None:
        """Give back what this process claimed and did not store (on closing), so
        the next process need not wait for the lease to lapse."""
        self._thread.shutdown(wait=False, cancel_futures=True)
        await self.store.housekeeping(_release, self._me)

    def _signal_progress(self) -> None:
        self._progress.set()
        self._progress = anyio.Event()

    async def load(self) -> None:
        """Load the model now, on a worker thread (it loads on first use otherwise).

        Raises:
            EmbedderError: the model file is missing or not the pinned one.
        """
        load: Callable[[], None] | None = getattr(self.embedder, "load", None)
        if load is not None:
            try:
                await anyio.to_thread.run_sync(load)
            except EmbedderError as exc:
                self.failure = exc
                raise

    async def wait_until_indexed(
        self, on_progress: Callable[[Progress], None] | None = None
    ) -> None:
        """Return once no stored row waits for its vector (and the model is loaded);
        `on_progress` hears the counts after each batch."""
        if not self.settings.background:
            raise EmbedderError(
                "this memory was opened with IndexerSettings(background=False): nothing"
                " embeds its backlog"
            )
        await self.load()
        while True:
            if self.failure is not None:
                raise self.failure
            self.hurry()
            with anyio.move_on_after(max(0.05, self.settings.idle_poll_s)):
                await self._progress.wait()
            if self.model_mismatch is not None:
                raise EmbedderError(self._mismatch_message())
            if on_progress is not None:
                on_progress(await self.progress())
            if await self.store.housekeeping(_pending, write=False) == 0:
                return

    async def reindex(
        self, everything: bool, on_progress: Callable[[Progress], None] | None = None
    ) -> Progress:
        """Embed what waits (with `everything`, every row again, after a model change),
        and return the counts once done.

        Raises:
            EmbedderError: the model cannot be used, or the file's vectors are another
                model's and `everything` is not set.
        """
        await self.load()
        if everything:
            await self.store.housekeeping(_requeue_all)
        await self.wait_until_indexed(on_progress)
        return await self.progress()

    async def progress(self) -> Progress:
        return await counts(self.store)

    def _mismatch_message(self) -> str:
        return (
            f"the vectors in {self.store.path!r} were made by the model {self.model_mismatch!r},"
            f" not {self.embedder.name!r}: run `chronomem reindex --all`"
        )

    def _claim(self, conn: sqlite3.Connection) -> list[Claimed]:
        (model,) = conn.execute(MODEL).fetchone()
        if model is not None and model != self.embedder.name:
            self.model_mismatch = model
            return []
        self.model_mismatch = None
        now = _micros()
        free = conn.execute(FREE, {"now": now, "n": self.settings.batch}).fetchall()
        if not free:
            return []
        if model is None:
            conn.execute(SET_MODEL, {"model": self.embedder.name})
        until = now + math.ceil(self.settings.lease_s * 1_000_000)
        conn.executemany(
            CLAIM,
            [{"until": until, "me": self._me, "kind": k, "row_id": r} for k, r, _ in free],
        )
        by_kind: dict[int, list[tuple[int, int]]] = {}
        for kind, row_id, owner_id in free:
            by_kind.setdefault(kind, []).append((row_id, owner_id))
        claimed = []
        for kind, rows in by_kind.items():
            texts = dict(
                conn.execute(TEXTS[kind], {"ids": json_list(r for r, _ in rows)}).fetchall()
            )
            for row_id, owner_id in rows:
                if row_id in texts:
                    claimed.append(Claimed(kind, row_id, owner_id, texts[row_id]))
                else:  # the row went while queued: nothing to embed
                    conn.execute(DONE, {"kind": kind, "row_id": row_id, "me": self._me})
        return claimed

    def _store(self, conn: sqlite3.Connection, claimed: list[Claimed], blobs: list[bytes]) -> None:
        rows = [
            {
                "kind": c.kind,
                "row_id": c.row_id,
                "owner_id": c.owner_id,
                "vec": blob,
                "me": self._me,
            }
            for c, blob in zip(claimed, blobs, strict=True)
        ]
        conn.executemany(STORE, rows)
        conn.executemany(DONE, [{k: row[k] for k in ("kind", "row_id", "me")} for row in rows])


def _release(conn: sqlite3.Connection, me: int) -> None:
    conn.execute(RELEASE, {"me": me})


def _pending(conn: sqlite3.Connection) -> int:
    (pending,) = conn.execute(PENDING).fetchone()
    return int(pending)


def _requeue_all(conn: sqlite3.Connection) -> None:
    for statement in REQUEUE_ALL:
        conn.execute(statement)


def _lower_priority() -> None:
    setpriority = getattr(os, "setpriority", None)  # not on Windows
    if setpriority is not None:
        with contextlib.suppress(OSError):  # Linux: a thread's own niceness
            setpriority(os.PRIO_PROCESS, threading.get_native_id(), INDEXER_NICENESS)


async def counts(store: Store) -> Progress:
    """Rows with a vector and rows waiting for one, over the whole file."""

    def read(conn: sqlite3.Connection) -> Progress:
        indexed, pending = conn.execute(COUNTS).fetchone()
        return Progress(indexed, pending)

    return await store.housekeeping(read, write=False)
