"""The scope handle: every operation of DESIGN §3 for one (app, user, project).

The operations' methods are made from their declarations (`operations`): each
validates its arguments into the operation's model (raising `InvalidInputError`
before anything is touched), then runs the operation in one transaction. The MCP
tools and CLI commands run the same declarations through `MemoryScope.call`.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel, Field

from . import admin, operations, profile, transfer, writes
from .errors import InvalidInputError
from .models import (
    GRAPH_PAGE_MAX,
    CreateEntityArgs,
    DeleteEntitiesArgs,
    DeleteEntitiesResult,
    EntityRef,
    ExportRecord,
    ImportResult,
    PurgeResult,
    ReadGraphResult,
    Stats,
)
from .operations import Operation
from .queries import ScopeKey
from .store import Store
from .validation import Query, SessionId, parse_arguments

__all__ = ["MemoryScope"]

A = TypeVar("A", bound=BaseModel)
R = TypeVar("R", bound=BaseModel)


class _TopicArgs(BaseModel):
    topic: Query | None = None


class _SessionArgs(BaseModel):
    session_id: SessionId


class _PageArgs(BaseModel):
    page_size: int = Field(ge=1, le=GRAPH_PAGE_MAX, strict=True)


def _method(operation: Operation[Any, R]) -> Callable[..., Coroutine[Any, Any, R]]:
    """`operation` as a method of `MemoryScope`, with the operation's own signature."""

    async def method(self: MemoryScope, *args: Any, **kwargs: Any) -> R:
        return await self.call(operation, operation.bind(args, kwargs))

    self = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    signature = operation.signature
    method.__signature__ = signature.replace(  # type: ignore[attr-defined]  # read by inspect
        parameters=[self, *signature.parameters.values()]
    )
    method.__name__ = operation.name
    method.__qualname__ = f"MemoryScope.{operation.name}"
    method.__doc__ = operation.summary
    return method


class MemoryScope:
    """One user's memory in one app, seen from one project (or globally)."""

    def __init__(self, store: Store, key: ScopeKey) -> None:
        self._store = store
        self.key = key

    @property
    def app(self) -> str:
        return self.key.app

    @property
    def user(self) -> str:
        return self.key.user

    @property
    def project(self) -> str | None:
        return self.key.project or None

    async def call(self, operation: Operation[A, R], arguments: A | Mapping[str, Any]) -> R:
        """Run `operation` in one transaction (a write's, or a read snapshot), with
        `arguments` given as its argument model or by name; by name they are validated
        first, and nothing is touched if that fails."""
        if isinstance(arguments, Mapping):
            args = parse_arguments(operation.arguments, **arguments)
        elif isinstance(arguments, operation.arguments):
            args = arguments
        else:
            raise TypeError(f"{operation.name} takes {operation.arguments.__name__}")
        query = getattr(args, "query", None)
        meaning = None if operation.writes else await self._meaning(query)
        run = self._store.write if operation.writes else self._store.read
        return await run(
            self.key.app, self.key.user, lambda tx: operation.run(tx, self.key, args), meaning
        )

    def __repr__(self) -> str:
        return f"MemoryScope(app={self.app!r}, user={self.user!r}, project={self.project!r})"

    # The operations of DESIGN §3, as methods: `await scope.remember(entity=..., facts=...)`.
    remember = _method(operations.REMEMBER)
    relate = _method(operations.RELATE)
    forget = _method(operations.FORGET)
    search_nodes = _method(operations.SEARCH_NODES)
    open_nodes = _method(operations.OPEN_NODES)
    read_graph = _method(operations.READ_GRAPH)
    profile_card = _method(operations.PROFILE_CARD)
    history = _method(operations.HISTORY)
    record_turns = _method(operations.RECORD_TURNS)
    recall = _method(operations.RECALL)

    async def session_context(self, topic: str | None = None) -> str:
        """The recalled-context block for a session's start: the profile card, facts
        relevant to `topic`, and the end of the most recent session, delimited as data."""
        args = parse_arguments(_TopicArgs, topic=topic)
        return await self._store.read(
            self.key.app,
            self.key.user,
            lambda tx: profile.session_context(tx, self.key, args.topic),
            await self._meaning(args.topic),
        )

    async def _meaning(self, query: str | None) -> Any:
        """What a search for `query` knows of its meaning (`meaning.Meaning`), or None."""
        semantic = self._store.semantic
        if semantic is None or not query:
            return None
        return semantic.meaning(query)

    # ------------------------------------------------------------ administration

    async def export(self) -> list[ExportRecord]:
        """Every entity, observation, relation and turn of this (app, user), or of this
        scope's project only, with all ids and timestamps, in a deterministic order."""
        return [record async for record in self.export_records()]

    async def export_records(
        self, page_size: int = transfer.EXPORT_PAGE
    ) -> AsyncIterator[ExportRecord]:
        """What `export` returns, read `page_size` records at a time: memory holds one
        page. Rows added after the first page are left out."""
        async for record in transfer.export_records(self._store, self.key, page_size):
            yield record

    async def import_lines(
        self,
        lines: Iterable[str],
        batch_size: int = transfer.BATCH_SIZE,
        progress: Callable[[int], None] | None = None,
        stop: Callable[[], bool] | None = None,
        *,
        chunk_lines: int = transfer.CHUNK_LINES,
        merge_after_rows: int = transfer.MERGE_AFTER_ROWS,
    ) -> ImportResult:
        """Import chronomem's export format or the reference memory server's
        `memory.jsonl`. Every line is checked (`chunk_lines` at a time) before anything
        is written; then the lines are written `batch_size` steps to a transaction,
        and `progress` is told how many after each transaction. Memory holds one
        batch, not the whole input. `stop` is asked at each line checked and before
        each batch: once it says yes, the import ends (ImportInterrupted). The search
        index of a kind of which `merge_after_rows` rows were added is merged after.

        Raises:
            InvalidInputError: naming the first bad line; nothing was imported. An id
                that belongs to another user's memory is only found while writing:
                then the message also says which lines earlier batches kept.
            MemoryFullError: naming the lines of the batch refused and what was kept.
            ImportInterrupted: `stop` said yes; the message says which lines earlier
                batches kept. The same import run again skips those and goes on.
        """
        settings = transfer.ImportSettings(batch_size, chunk_lines, merge_after_rows)
        return await transfer.import_lines(self._store, self.key, lines, settings, progress, stop)

    async def stats(self) -> Stats:
        """Counts of this memory: entities, current and closed facts and relations,
        turns, sessions, and the database file's size."""
        project = self.project
        return await self._store.read(
            self.key.app, self.key.user, lambda tx: admin.stats(tx, project)
        )

    async def purge(self, what: str, session_id: str | None = None) -> PurgeResult:
        """Physically erase this user's memory (`what="user"`), this scope's project
        (`"project"`), or one conversation (`"session"`), leaving no text of it in the
        file. The only operation that deletes.

        Raises:
            InvalidInputError: `what` is unknown, or its project or session is missing.
        """
        if what not in ("user", "project", "session"):
            raise InvalidInputError("what: must be user, project or session")
        if what == "project" and self.project is None:
            raise InvalidInputError("project: purging a project needs the project")
        if what == "session":
            session_id = parse_arguments(_SessionArgs, session_id=session_id).session_id
        result = await self._store.write(
            self.key.app,
            self.key.user,
            lambda tx: admin.purge(tx, what, self.project, session_id),
        )
        await self._store.compact()
        return result

    # ------------------------------------------------------------ entities themselves

    async def create_entity(self, name: str, entity_type: str | None = None) -> EntityRef:
        """The entity `name`, created with no facts if new (`created` says so); a given
        type replaces its old one, and a deleted entity is back."""
        args = parse_arguments(CreateEntityArgs, name=name, entity_type=entity_type)
        return await self._store.write(
            self.key.app, self.key.user, lambda tx: writes.create_entity(tx, self.key, args)
        )

    async def delete_entities(
        self,
        names: Sequence[str],
        valid_to: str | datetime | None = None,
        reason: str | None = None,
    ) -> DeleteEntitiesResult:
        """Close every open fact and relation of the entities and record their deletion:
        reads from now on leave them out, reads at an earlier `known_at` still see
        them, and `history` says when. Writing about one again brings it back."""
        args = parse_arguments(DeleteEntitiesArgs, names=names, valid_to=valid_to, reason=reason)
        return await self._store.write(
            self.key.app, self.key.user, lambda tx: writes.delete_entities(tx, self.key, args)
        )

    async def iterate_graph(
        self,
        as_of: str | datetime | None = None,
        known_at: str | datetime | None = None,
        include_history: bool = False,
        page_size: int = GRAPH_PAGE_MAX,
    ) -> AsyncIterator[ReadGraphResult]:
        """Every page of `read_graph`, in its order; each relation comes once, on the
        page of its source. Each page is its own read: without `known_at`, a page
        read later also sees what was written in between."""
        parse_arguments(_PageArgs, page_size=page_size)
        cursor = None
        while True:
            page = await self.read_graph(
                as_of=as_of,
                known_at=known_at,
                include_history=include_history,
                limit=page_size,
                cursor=cursor,
            )
            yield page
            cursor = page.next_cursor
            if cursor is None:
                return
