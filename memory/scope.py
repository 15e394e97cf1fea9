"""The scope handle: every operation of DESIGN §3 for one (app, user, project).

Each method validates its arguments into the operation's model (raising
`InvalidInputError` before anything is touched), then runs the operation in one
transaction. The MCP tools and CLI commands call these same methods.
"""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel

from . import admin, import_check, profile, reads, search, transfer, writes
from .errors import ImportInterrupted, InvalidInputError, MemoryFullError
from .models import (
    CreateEntityArgs,
    DeleteEntitiesArgs,
    DeleteEntitiesResult,
    EntityRef,
    ForgetArgs,
    ForgetResult,
    HistoryArgs,
    HistoryResult,
    OpenNodesArgs,
    OpenNodesResult,
    ProfileCard,
    ProfileCardArgs,
    ReadGraphArgs,
    ReadGraphResult,
    RecallArgs,
    RecallResult,
    RecordTurnsArgs,
    RecordTurnsResult,
    RelateArgs,
    RelateResult,
    RememberArgs,
    RememberResult,
    SearchNodesArgs,
    SearchNodesResult,
    TurnIn,
)
from .queries import ScopeKey
from .store import Store
from .validation import Query, SessionId, parse_arguments

__all__ = ["MemoryScope"]

Time = str | datetime
R = TypeVar("R")
R = TypeVar("R")


class _TopicArgs(BaseModel):
    topic: Query | None = None


class _SessionArgs(BaseModel):
    session_id: SessionId


# A large import leaves the full-text index of what it added in many segments (one
# per transaction, merged only partly as they pile up), and a search looks every
# word up in each. After an import of this many rows of a kind, its index is merged
# into one segment: about 5 s for a million facts and a million turns, in short
# transactions, for searches ~15% cheaper from then on.
MERGE_AFTER_ROWS = 10_000


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

    async def _read(self, operation: Callable[..., R], model: type, **arguments: Any) -> R:
        """Validate `arguments` into `model` (nothing is touched if that fails), then run
        `operation` in one read snapshot."""
        args = parse_arguments(model, **arguments)
        return await self._store.read(
            self.key.app, self.key.user, lambda tx: operation(tx, self.key, args)
        )

    async def _write(self, operation: Callable[..., R], model: type, **arguments: Any) -> R:
        """Validate, then run `operation` in one write transaction."""
        args = parse_arguments(model, **arguments)
        return await self._store.write(
            self.key.app, self.key.user, lambda tx: operation(tx, self.key, args)
        )

    def __repr__(self) -> str:
        return f"MemoryScope(app={self.app!r}, user={self.user!r}, project={self.project!r})"

    async def remember(
        self,
        entity: str,
        facts: Sequence[str],
        entity_type: str | None = None,
        valid_from: Time | None = None,
        replaces: Sequence[str] | None = None,
        attribute: str | None = None,
    ) -> RememberResult:
        """Store facts about an entity, creating it if new."""
        return await self._write(
            writes.remember,
            RememberArgs,
            entity=entity,
            facts=facts,
            entity_type=entity_type,
            valid_from=valid_from,
            replaces=replaces,
            attribute=attribute,
        )

    async def relate(
        self,
        source: str,
        relation: str,
        target: str,
        source_type: str | None = None,
        target_type: str | None = None,
        valid_from: Time | None = None,
        exclusive: bool = False,
        replaces: Sequence[str] | None = None,
    ) -> RelateResult:
        """Store a typed, directed relation between two entities."""
        return await self._write(
            writes.relate,
            RelateArgs,
            source=source,
            relation=relation,
            target=target,
            source_type=source_type,
            target_type=target_type,
            valid_from=valid_from,
            exclusive=exclusive,
            replaces=replaces,
        )

    async def forget(
        self,
        ids: Sequence[str] | None = None,
        entities: Sequence[str] | None = None,
        valid_to: Time | None = None,
        reason: str | None = None,
    ) -> ForgetResult:
        """Close facts and relations (by id, or all of an entity's); nothing is deleted."""
        return await self._write(
            writes.forget, ForgetArgs, ids=ids, entities=entities, valid_to=valid_to, reason=reason
        )

    async def search_nodes(
        self,
        query: str,
        limit: int = 10,
        facts_per_hit: int = 5,
        entity_type: str | None = None,
        as_of: Time | None = None,
        known_at: Time | None = None,
        include_history: bool = False,
    ) -> SearchNodesResult:
        """Entities ranked by relevance to `query`, each with the facts and relations that
        best answer it, best first (at most `facts_per_hit` of each)."""
        return await self._read(
            search.search_nodes,
            SearchNodesArgs,
            query=query,
            limit=limit,
            facts_per_hit=facts_per_hit,
            entity_type=entity_type,
            as_of=as_of,
            known_at=known_at,
            include_history=include_history,
        )

    async def open_nodes(
        self,
        names: Sequence[str],
        as_of: Time | None = None,
        known_at: Time | None = None,
        include_history: bool = False,
    ) -> OpenNodesResult:
        """Entities by name with their facts, and every relation touching them."""
        return await self._read(
            reads.open_nodes,
            OpenNodesArgs,
            names=names,
            as_of=as_of,
            known_at=known_at,
            include_history=include_history,
        )

    async def read_graph(
        self,
        as_of: Time | None = None,
        known_at: Time | None = None,
        include_history: bool = False,
        limit: int = 50,
        cursor: str | None = None,
    ) -> ReadGraphResult:
        """One page of the whole graph, in a stable order."""
        return await self._read(
            reads.read_graph,
            ReadGraphArgs,
            as_of=as_of,
            known_at=known_at,
            include_history=include_history,
            limit=limit,
            cursor=cursor,
        )

    async def profile_card(
        self,
        max_entities: int = 12,
        max_facts_per_entity: int = 5,
        max_chars: int = 2000,
        query: str | None = None,
        as_of: Time | None = None,
    ) -> ProfileCard:
        """The compact "who is this user" block for the start of a session."""
        return await self._read(
            profile.profile_card,
            ProfileCardArgs,
            max_entities=max_entities,
            max_facts_per_entity=max_facts_per_entity,
            max_chars=max_chars,
            query=query,
            as_of=as_of,
        )

    async def session_context(self, topic: str | None = None) -> str:
        """The recalled-context block for a session's start: the profile card, facts
        relevant to `topic`, and the end of the most recent session, delimited as data."""
        args = parse_arguments(_TopicArgs, topic=topic)
        return await self._store.read(
            self.key.app,
            self.key.user,
            lambda tx: profile.session_context(tx, self.key, args.topic),
        )

    async def history(self, entity: str) -> HistoryResult:
        """Every fact and relation an entity ever had, with both time axes."""
        return await self._read(reads.history, HistoryArgs, entity=entity)

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

    async def recall(
        self,
        query: str,
        limit: int = 10,
        session_id: str | None = None,
        after: Time | None = None,
        before: Time | None = None,
    ) -> RecallResult:
        """Past conversation turns ranked by relevance to `query`."""
        return await self._read(
            search.recall,
            RecallArgs,
            query=query,
            limit=limit,
            session_id=session_id,
            after=after,
            before=before,
        )

    async def record_turns(
        self, session_id: str, turns: Sequence[TurnIn | dict[str, object]]
    ) -> RecordTurnsResult:
        """Append raw conversation turns to the episodic log."""
        return await self._write(
            writes.record_turns, RecordTurnsArgs, session_id=session_id, turns=turns
        )

    # ------------------------------------------------------------ entities themselves

    async def create_entity(self, name: str, entity_type: str | None = None) -> EntityRef:
        """The entity `name`, created with no facts if new (`created` says so); a given
        type replaces its old one, and a deleted entity is back."""
        return await self._write(
            writes.create_entity, CreateEntityArgs, name=name, entity_type=entity_type
        )

    async def delete_entities(
        self, names: Sequence[str], valid_to: Time | None = None, reason: str | None = None
    ) -> DeleteEntitiesResult:
        """Close every open fact and relation of the entities and record their deletion:
        reads from now on leave them out, reads at an earlier `known_at` still see
        them, and `history` says when. Writing about one again brings it back."""
        return await self._write(
            writes.delete_entities, DeleteEntitiesArgs, names=names, valid_to=valid_to,
            reason=reason,
        )  # fmt: skip

    async def iterate_graph(
        self,
        as_of: Time | None = None,
        known_at: Time | None = None,
        include_history: bool = False,
        page_size: int = 500,
    ) -> AsyncIterator[ReadGraphResult]:
        """Every page of `read_graph`, in its order; each relation comes once, on the
        page of its source. Each page is its own read: without `known_at`, a page
        read later also sees what was written in between."""
        cursor = None
        while True:
            page = await self.read_graph(
                as_of=as_of, known_at=known_at, include_history=include_history,
                limit=page_size, cursor=cursor,
            )  # fmt: skip
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
