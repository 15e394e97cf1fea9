"""chronomem's engine: a bi-temporal knowledge graph on SQLite.

    async with GraphMemory.open("memory.db") as mem:
        alice = mem.scope(app="coach", user="alice")
        await alice.remember(entity="Alice", facts=["prefers morning sessions"])

This package knows nothing of MCP; `server/` adapts it.
"""

from .embedding import EmbedderError
from .errors import ChronomemError, DatabaseFileError, InvalidInputError, MemoryFullError
from .graph_memory import GraphMemory
from .indexer import IndexerSettings
from .models import (
    DeleteEntitiesResult,
    Entity,
    EntityInfo,
    EntityRef,
    ForgetResult,
    HistoryResult,
    Observation,
    OpenNodesResult,
    ProfileCard,
    ReadGraphResult,
    RecalledTurn,
    RecallResult,
    RecordTurnsResult,
    RelateResult,
    Relation,
    RememberResult,
    SearchHit,
    SearchNodesResult,
    TurnIn,
)
from .scope import MemoryScope

__all__ = [
    "ChronomemError",
    "DatabaseFileError",
    "DeleteEntitiesResult",
    "EmbedderError",
    "Entity",
    "EntityInfo",
    "EntityRef",
    "ForgetResult",
    "GraphMemory",
    "HistoryResult",
    "IndexerSettings",
    "InvalidInputError",
    "MemoryFullError",
    "MemoryScope",
    "Observation",
    "OpenNodesResult",
    "ProfileCard",
    "ReadGraphResult",
    "RecallResult",
    "RecalledTurn",
    "RecordTurnsResult",
    "RelateResult",
    "Relation",
    "RememberResult",
    "SearchHit",
    "SearchNodesResult",
    "TurnIn",
]
