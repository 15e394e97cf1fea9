"""chronomem's engine: a bi-temporal knowledge graph on SQLite.

    async with GraphMemory.open("memory.db") as mem:
        alice = mem.scope(app="coach", user="alice")
        await alice.remember(entity="Alice", facts=["prefers morning sessions"])

This package knows nothing of MCP; `server/` adapts it.
"""

from .errors import ChronomemError, DatabaseFileError, InvalidInputError
from .graph_memory import GraphMemory
from .models import (
    Entity,
    EntityRef,
    ForgetResult,
    HistoryResult,
    Observation,
    OpenNodesResult,
    ReadGraphResult,
    RecordTurnsResult,
    RelateResult,
    Relation,
    RememberResult,
    TurnIn,
)
from .scope import MemoryScope

__all__ = [
    "ChronomemError",
    "DatabaseFileError",
    "Entity",
    "EntityRef",
    "ForgetResult",
    "GraphMemory",
    "HistoryResult",
    "InvalidInputError",
    "MemoryScope",
    "Observation",
    "OpenNodesResult",
    "ReadGraphResult",
    "RecordTurnsResult",
    "RelateResult",
    "Relation",
    "RememberResult",
    "TurnIn",
]
