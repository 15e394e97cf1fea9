"""An entity's own records on the time axes: its deletions, and the versions of its type.

Deletion. `delete_entities` closes an entity's facts and relations and records, at
the transaction time, that the entity itself was deleted in the context it was
deleted from (`entity_life`, alive = 0). Writing about it again records that it is
back (alive = 1). A context sees an entity as deleted at `known_at` when the latest
of those records that it sees by then (its own project's and the global ones) says
so. Like a closing (`overlay`), a deletion made inside project P is P's alone; one
made globally applies everywhere, until a context writes about the entity again.

Types. Each type an entity is given is kept with the time it was recorded
(`entity_type_version`): the global ones, and each project's own (`overlay`). The
columns `entity.entity_type` and `project_entity_type` hold the types of now; a read
at an earlier moment takes the type as it stood then (`types_at`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .overlay import GLOBAL
from .store import Tx, json_list
from .temporal import Moment
from .timestamps import format_time

__all__ = [
    "NOT_DELETED",
    "DeletionSpan",
    "TypeRecord",
    "deletions_of",
    "is_deleted",
    "is_now",
    "record_first_types",
    "record_life",
    "record_type",
    "type_versions",
    "types_at",
    "types_then",
]

# The latest deletion or return of entity `e` that the context of `:p` sees by
# `:known_at`; an entity with none is alive.
_LATEST_LIFE = """
    SELECT l.alive FROM entity_life l
    WHERE l.entity_id = e.id AND l.project IN (:g, :p) AND l.at <= :known_at
    ORDER BY l.at DESC LIMIT 1
"""
NOT_DELETED = f"coalesce(({_LATEST_LIFE}), 1) = 1"

RECORD_LIFE = """
    INSERT INTO entity_life (entity_id, project, owner_id, at, alive)
    VALUES (:id, :project, :owner, :now, :alive)
    ON CONFLICT (entity_id, at, project) DO UPDATE SET alive = excluded.alive
"""
SELECT_LATEST_LIFE = f"SELECT ({_LATEST_LIFE.replace('e.id', ':id')}) AS alive"
SELECT_LIVES = """
    SELECT at, alive FROM entity_life
    WHERE entity_id = :id AND project IN (:g, :p) AND at <= :known_at
    ORDER BY at
"""

RECORD_TYPE = """
    INSERT INTO entity_type_version (entity_id, project, owner_id, entity_type, recorded_at)
    VALUES (:id, :project, :owner, :entity_type, :now)
    ON CONFLICT (entity_id, project, recorded_at) DO UPDATE SET entity_type = excluded.entity_type
"""
# Each new entity's type as its first version, at its recorded_at.
RECORD_FIRST_TYPES = """
    INSERT INTO entity_type_version (entity_id, project, owner_id, entity_type, recorded_at)
    SELECT id, '', owner_id, entity_type, recorded_at FROM entity
    WHERE id IN (SELECT value FROM json_each(:ids))
    ON CONFLICT (entity_id, project, recorded_at) DO NOTHING
"""
# Every type version of the entities in :ids that the context of :p sees, oldest first
# (of two at one time, the global one first).
SELECT_TYPE_VERSIONS = """
    SELECT entity_id, project, entity_type, recorded_at FROM entity_type_version
    WHERE entity_id IN (SELECT value FROM json_each(:ids)) AND project IN (:g, :p)
    ORDER BY entity_id, recorded_at, project = '' DESC
"""


def is_deleted(tx: Tx, project: str, entity_id: int) -> bool:
    """Whether the context of `project` sees the entity as deleted now."""
    row = tx.one(
        SELECT_LATEST_LIFE, {"id": entity_id, "g": GLOBAL, "p": project, "known_at": tx.now}
    )
    return row is not None and row["alive"] == 0


def record_life(tx: Tx, project: str, entity_id: int, alive: bool, at: int | None = None) -> None:
    """Record that the entity was deleted (or is back) in the context of `project`, at
    `at` (an import's) or the transaction time."""
    tx.run(
        RECORD_LIFE,
        {
            "id": entity_id,
            "project": project,
            "owner": tx.owner,
            "now": tx.now if at is None else at,
            "alive": int(alive),
        },
    )


def record_first_types(tx: Tx, entity_ids: Sequence[int]) -> None:
    """Keep the type of each entity just inserted as its first version."""
    if entity_ids:
        tx.run(RECORD_FIRST_TYPES, {"ids": json_list(entity_ids)})


def record_type(tx: Tx, project: str, entity_id: int, entity_type: str, at: int) -> None:
    """Keep `entity_type` as the entity's type from `at` on, globally or in `project`."""
    tx.run(
        RECORD_TYPE,
        {
            "id": entity_id,
            "project": project,
            "owner": tx.owner,
            "entity_type": entity_type,
            "now": at,
        },
    )


@dataclass(slots=True)
class TypeRecord:
    entity_type: str
    recorded_at: int


def type_versions(tx: Tx, project: str, entity_ids: Sequence[int]) -> dict[int, list[TypeRecord]]:
    """Each entity's type over transaction time as the context of `project` sees it,
    oldest first, one version a change: a project's own type, once given, outranks
    the global ones (`overlay`)."""
    found: dict[int, list[TypeRecord]] = {entity_id: [] for entity_id in entity_ids}
    own: dict[int, bool] = {}
    rows = tx.all(SELECT_TYPE_VERSIONS, {"ids": json_list(entity_ids), "g": GLOBAL, "p": project})
    for row in rows:
        entity_id, in_project = row["entity_id"], row["project"] != GLOBAL
        if own.get(entity_id) and not in_project:
            continue  # the project's own type stands over later global ones
        own[entity_id] = own.get(entity_id, False) or in_project
        versions = found[entity_id]
        if versions and versions[-1].recorded_at == row["recorded_at"]:
            versions.pop()  # given at the same time (a migrated file): the project's
        if versions and versions[-1].entity_type == row["entity_type"]:
            continue
        versions.append(TypeRecord(row["entity_type"], row["recorded_at"]))
    return found


def types_at(tx: Tx, project: str, entity_ids: Sequence[int], at: Moment) -> dict[int, str]:
    """Each entity's type at `at`, where it had one then: on both axes, the type
    recorded by the earlier of `as_of` and `known_at` (a type holds from when it was
    recorded); before its first, its first. Reads of now need none of this: the
    entity rows carry today's types."""
    until = min(at.as_of, at.known_at)
    types: dict[int, str] = {}
    for entity_id, versions in type_versions(tx, project, entity_ids).items():
        stood = [v for v in versions if v.recorded_at <= until] or versions[:1]
        if stood:
            types[entity_id] = stood[-1].entity_type
    return types


def is_now(tx: Tx, at: Moment) -> bool:
    return at.as_of >= tx.now and at.known_at >= tx.now


def types_then(tx: Tx, project: str, entity_ids: Sequence[int], at: Moment) -> dict[int, str]:
    """`types_at`, or nothing where `at` is now: the entity rows say today's types."""
    return {} if is_now(tx, at) else types_at(tx, project, entity_ids, at)


@dataclass(slots=True)
class DeletionSpan:
    deleted_at: str
    restored_at: str | None


def deletions_of(tx: Tx, project: str, entity_id: int) -> list[DeletionSpan]:
    """The entity's deletions the context of `project` sees, oldest first, each with
    when it came back (None: it is deleted still)."""
    spans: list[DeletionSpan] = []
    rows = tx.all(SELECT_LIVES, {"id": entity_id, "g": GLOBAL, "p": project, "known_at": tx.now})
    for row in rows:
        open_span = bool(spans) and spans[-1].restored_at is None
        if row["alive"] == 0 and not open_span:
            spans.append(DeletionSpan(format_time(row["at"]), None))
        elif row["alive"] == 1 and open_span:
            spans[-1].restored_at = format_time(row["at"])
    return spans
