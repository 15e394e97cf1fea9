"""The scope handle: every operation of DESIGN §3 for one (app, user, project).

Each method validates its arguments into the operation's model (raising
`InvalidInputError` before anything is touched), then runs the operation in one
transaction. The MCP tools and CLI commands call these same methods.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel

from . import admin, profile, reads, search, transfer, writes
from .errors import InvalidInputError
from .models import (
    ExportRecord,
    ForgetArgs,
    ForgetResult,
    HistoryArgs,
    HistoryResult,
    ImportResult,
    OpenNodesArgs,
    OpenNodesResult,
    ProfileCard,
    ProfileCardArgs,
    PurgeResult,
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
    Stats,
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
