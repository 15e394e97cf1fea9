"""The scope handle: every operation of DESIGN §3 for one (app, user, project).

Each method validates its arguments into the operation's model (raising
`InvalidInputError` before anything is touched), then runs the operation in one
transaction. The MCP tools and CLI commands call these same methods.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from . import reads, writes
from .models import (
    ForgetArgs,
    ForgetResult,
    HistoryArgs,
    HistoryResult,
    OpenNodesArgs,
    OpenNodesResult,
    ReadGraphArgs,
    ReadGraphResult,
    RecordTurnsArgs,
    RecordTurnsResult,
    RelateArgs,
    RelateResult,
    RememberArgs,
    RememberResult,
    TurnIn,
)
from .queries import ScopeKey
from .store import Store
from .validation import parse_arguments

__all__ = ["MemoryScope"]

Time = str | datetime


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
        args = parse_arguments(
            RememberArgs,
            entity=entity,
            facts=facts,
            entity_type=entity_type,
            valid_from=valid_from,
            replaces=replaces,
            attribute=attribute,
        )
        async with self._store.write() as tx:
            return await writes.remember(tx, self.key, args)

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
        args = parse_arguments(
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
        async with self._store.write() as tx:
            return await writes.relate(tx, self.key, args)

    async def forget(
        self,
        ids: Sequence[str] | None = None,
        entities: Sequence[str] | None = None,
        valid_to: Time | None = None,
        reason: str | None = None,
    ) -> ForgetResult:
        """Close facts and relations (by id, or all of an entity's); nothing is deleted."""
        args = parse_arguments(
            ForgetArgs, ids=ids, entities=entities, valid_to=valid_to, reason=reason
        )
        async with self._store.write() as tx:
            return await writes.forget(tx, self.key, args)

    async def open_nodes(
        self,
        names: Sequence[str],
        as_of: Time | None = None,
        known_at: Time | None = None,
        include_history: bool = False,
    ) -> OpenNodesResult:
        """Entities by name with their facts, and every relation touching them."""
        args = parse_arguments(
            OpenNodesArgs,
            names=names,
            as_of=as_of,
            known_at=known_at,
            include_history=include_history,
        )
        async with self._store.read() as tx:
            return await reads.open_nodes(tx, self.key, args)

    async def read_graph(
        self,
        as_of: Time | None = None,
        known_at: Time | None = None,
        include_history: bool = False,
        limit: int = 200,
        cursor: str | None = None,
    ) -> ReadGraphResult:
        """One page of the whole graph, in a stable order."""
        args = parse_arguments(
            ReadGraphArgs,
            as_of=as_of,
            known_at=known_at,
            include_history=include_history,
            limit=limit,
            cursor=cursor,
        )
        async with self._store.read() as tx:
            return await reads.read_graph(tx, self.key, args)

    async def history(self, entity: str) -> HistoryResult:
        """Every fact and relation an entity ever had, with both time axes."""
        args = parse_arguments(HistoryArgs, entity=entity)
        async with self._store.read() as tx:
            return await reads.history(tx, self.key, args)

    async def record_turns(
        self, session_id: str, turns: Sequence[TurnIn | dict[str, object]]
    ) -> RecordTurnsResult:
        """Append raw conversation turns to the episodic log."""
        args = parse_arguments(
            RecordTurnsArgs,
            session_id=session_id,
            turns=list(turns),
        )
        async with self._store.write() as tx:
            return await writes.record_turns(tx, self.key, args)
