"""The scope handle: every operation of DESIGN §3 for one (app, user, project).

The operations' methods are made from their declarations (`operations`): each
validates its arguments into the operation's model (raising `InvalidInputError`
before anything is touched), then runs the operation in one transaction. The MCP
tools and CLI commands run the same declarations through `MemoryScope.call`.
"""

from __future__ import annotations

import inspect
import tempfile
from collections.abc import (
    AsyncIterator,
    Callable,
    Coroutine,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel, Field

from . import admin, import_check, operations, profile, transfer, writes
from .errors import ImportInterrupted, InvalidInputError, MemoryFullError
from .models import (
    GRAPH_PAGE_MAX,
    CreateEntityArgs,
    DeleteEntitiesArgs,
    DeleteEntitiesResult,
    EntityRef,
    ReadGraphResult,
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


# A large import leaves the full-text index of what it added in many segments (one
# per transaction, merged only partly as they pile up), and a search looks every
# word up in each. After an import of this many rows of a kind, its index is merged
# into one segment: about 5 s for a million facts and a million turns, in short
# transactions, for searches ~15% cheaper from then on.
MERGE_AFTER_ROWS = 10_000


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
        run = self._store.write if operation.writes else self._store.read
        return await run(self.key.app, self.key.user, lambda tx: operation.run(tx, self.key, args))

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
        )

    # ------------------------------------------------------------ administration

    async def export(self) -> list[dict[str, Any]]:
        """Every entity, observation, relation and turn of this (app, user), or of this
        scope's project only, with all ids and timestamps, in a deterministic order."""
        project = self.project
        return await self._store.read(
            self.key.app, self.key.user, lambda tx: transfer.export_records(tx, project)
        )

    async def import_lines(
        self,
        lines: Iterable[str],
        batch_size: int = import_check.BATCH_SIZE,
        progress: Callable[[int], None] | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> transfer.ImportResult:
        """Import chronomem's export format or the reference memory server's
        `memory.jsonl`. Every line is checked before anything is written; then the
        lines are written `batch_size` steps to a transaction, and `progress` is told
        how many after each transaction. Memory holds one batch, not the whole input.
        `stop` is asked at each line checked and before each batch: once it says
        yes, the import ends (ImportInterrupted).

        Raises:
            InvalidInputError: naming the first bad line; nothing was imported. An id
                that belongs to another user's memory is only found while writing:
                then the message also says which lines earlier batches kept.
            MemoryFullError: naming the lines of the batch refused and what was kept.
            ImportInterrupted: `stop` said yes; the message says which lines earlier
                batches kept. The same import run again skips those and goes on.
        """
        counts: dict[str, int] = {}
        with tempfile.TemporaryFile() as spool:
            checked = lines if stop is None else _until(stop, lines)
            plan = import_check.check_import(checked, spool, batch_size)
            async with self._store.bulk():
                await self._write_plan(plan, counts, progress, stop)
        for kind, counted in transfer.INDEXED_KINDS.items():
            if stop is not None and stop():  # all is written; merging can wait
                break
            if counts.get(counted, 0) >= MERGE_AFTER_ROWS:
                await self._store.merge_index(kind)
        return transfer.ImportResult(
            lines=plan.lines, **{k: counts.get(k, 0) for k in transfer.COUNTED}
        )

    async def _write_plan(
        self,
        plan: import_check.ImportPlan,
        counts: dict[str, int],
        progress: Callable[[int], None] | None,
        stop: Callable[[], bool] | None = None,
    ) -> None:
        """Write the batches of a checked import, adding to `counts` by kind; tell
        `progress` how many more lines were begun with each batch."""
        previous = start = 0  # the last and first line numbers of the batches written
        for batch in plan.batches():
            first, last = batch[0][0], batch[-1][0]
            if stop is not None and stop():
                raise ImportInterrupted(
                    f"import interrupted: {_kept_before(first, previous, start or first)}"
                    f" ({_counted(counts)}); run the same import again to resume: what "
                    "is already there is skipped"
                )
            start = start or first
            try:
                done = await self._store.write(
                    self.key.app, self.key.user,
                    lambda tx, batch=batch: transfer.write_batch(tx, self.key, batch),
                )  # fmt: skip
            except InvalidInputError as exc:  # memory full, or an id of another memory
                # Each batch is its own transaction: say what earlier ones kept.
                kept = _kept_before(first, previous, start)
                where = f"lines {first}-{last}: " if isinstance(exc, MemoryFullError) else ""
                raise type(exc)(f"{where}{exc} ({kept})") from None
            for kind, count in done.items():
                counts[kind] = counts.get(kind, 0) + count
            if progress is not None:
                progress(len({step[0] for step in batch} - {previous}))
            previous = last

    async def stats(self) -> admin.Stats:
        """Counts of this memory: entities, current and closed facts and relations,
        turns, sessions, and the database file's size."""
        project = self.project
        return await self._store.read(
            self.key.app, self.key.user, lambda tx: admin.stats(tx, project)
        )

    async def purge(self, what: str, session_id: str | None = None) -> admin.PurgeResult:
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
            self.key.app, self.key.user,
            lambda tx: admin.purge(tx, what, self.project, session_id),
        )  # fmt: skip
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


def _until(stop: Callable[[], bool], lines: Iterable[str]) -> Iterator[str]:
    """`lines`, ending the import (before anything is written) once `stop` says yes."""
    for line in lines:
        if stop():
            raise ImportInterrupted("import interrupted while checking: nothing was imported")
        yield line


def _counted(counts: dict[str, int]) -> str:
    """What the batches written added, as the command line's import reports it."""
    nouns = {"entities": "entities", "observations": "facts", "relations": "relations",
             "turns": "turns"}  # fmt: skip
    return ", ".join(f"{counts.get(kind, 0):,} {noun}" for kind, noun in nouns.items())


def _kept_before(first: int, previous: int, start: int) -> str:
    """What the batches written before a refused one (whose first line is `first`)
    kept; `previous` is their last line (0: none) and `start` their first. A line of
    many steps can straddle two batches, so part of it may have been kept."""
    if not previous:
        return "nothing was imported"
    if first != previous:
        return f"lines before {first} were imported"
    if first == start:
        return f"part of line {first} was imported"
    return f"lines before {first} and part of line {first} were imported"
