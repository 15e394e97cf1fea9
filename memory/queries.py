"""Lookups shared by reads and writes: owners, visible entities, and the facts and
relations of a set of entities at a moment.

Every statement takes named parameters: `:owner` (the (app, user) row), `:g` and `:p`
(the projects a context sees: '' and the current project, or '' twice), and
`:as_of`/`:known_at` where time matters.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .entity_life import NOT_DELETED
from .models import Observation, Relation
from .overlay import GLOBAL, SEEN
from .store import Tx, json_list
from .temporal import Moment, observation_view, relation_view, visible_rows_sql


@dataclass(frozen=True)
class ScopeKey:
    """Whose memory an operation touches, and in which project ('' = global)."""

    app: str
    user: str
    project: str = GLOBAL

    def params(self, owner: int | None, **extra: Any) -> dict[str, Any]:
        return {"owner": owner, "g": GLOBAL, "p": self.project, **extra}


INSERT_OWNER = "INSERT INTO owner (app, user) VALUES (:app, :user)"


def find_owner(tx: Tx, scope: ScopeKey) -> int | None:
    """The (app, user) row, looked up when the transaction began; None before any write."""
    return tx.owner


def ensure_owner(tx: Tx, scope: ScopeKey) -> int:
    if tx.owner is None:
        tx.owner = tx.insert(INSERT_OWNER, {"app": scope.app, "user": scope.user})
    return tx.owner


# An entity is visible in a context when it was created there or has a fact or
# relation there, all as recorded by :known_at (DESIGN §2, Scope), and the context
# had not deleted it by then (`entity_life`).
ENTITY_KNOWN = """
    e.owner_id = :owner AND e.recorded_at <= :known_at AND (
        e.project IN (:g, :p)
        OR EXISTS (SELECT 1 FROM observation o WHERE o.entity_id = e.id
                   AND o.project IN (:g, :p) AND o.recorded_at <= :known_at)
        OR EXISTS (SELECT 1 FROM relation r WHERE r.source_id = e.id
                   AND r.project IN (:g, :p) AND r.recorded_at <= :known_at)
        OR EXISTS (SELECT 1 FROM relation r WHERE r.target_id = e.id
                   AND r.project IN (:g, :p) AND r.recorded_at <= :known_at)
    )
"""
ENTITY_VISIBLE = f"{ENTITY_KNOWN} AND {NOT_DELETED}"

SELECT_VISIBLE_ENTITIES = {
    deleted_too: f"""
        SELECT e.* FROM {SEEN["entity"]} e
        WHERE e.name_key IN (SELECT value FROM json_each(:keys))
          AND {ENTITY_KNOWN if deleted_too else ENTITY_VISIBLE}
    """
    for deleted_too in (False, True)
}


def visible_entities(
    tx: Tx,
    scope: ScopeKey,
    owner: int | None,
    keys: Sequence[str],
    known_at: int,
    deleted_too: bool = False,
) -> dict[str, sqlite3.Row]:
    """The entities with these name keys that a read at `known_at` sees, by key
    (with `deleted_too`, also those it had deleted by then)."""
    if owner is None or not keys:
        return {}
    rows = tx.all(
        SELECT_VISIBLE_ENTITIES[deleted_too],
        scope.params(owner, keys=json_list(keys), known_at=known_at),
    )
    return {row["name_key"]: row for row in rows}


def visible_entity(
    tx: Tx, scope: ScopeKey, owner: int | None, key: str, known_at: int, deleted_too: bool = False
) -> sqlite3.Row | None:
    return (visible_entities(tx, scope, owner, [key], known_at, deleted_too)).get(key)


def observations_sql(include_history: bool) -> str:
    return f"""
        SELECT o.* FROM {SEEN["observation"]} o
        WHERE o.entity_id IN (SELECT value FROM json_each(:entities))
          AND o.project IN (:g, :p) AND {visible_rows_sql("o", include_history)}
        ORDER BY o.valid_from, o.recorded_at, o.seq
    """


RELATION_COLUMNS = f"""
    r.*, s.name AS source_name, t.name AS target_name
    FROM {SEEN["relation"]} r
    JOIN entity s ON s.id = r.source_id
    JOIN entity t ON t.id = r.target_id
"""


def relations_sql(include_history: bool, touching: bool) -> str:
    sources = "SELECT value FROM json_each(:entities)"
    where = f"r.source_id IN ({sources})"
    if touching:
        where = f"({where} OR r.target_id IN ({sources}))"
    return f"""
        SELECT {RELATION_COLUMNS}
        WHERE {where} AND r.project IN (:g, :p) AND {visible_rows_sql("r", include_history)}
        ORDER BY r.valid_from, r.recorded_at, r.seq
    """


def observations_of(
    tx: Tx,
    scope: ScopeKey,
    owner: int,
    entity_ids: Sequence[int],
    at: Moment,
    include_history: bool,
    model: type[Observation] = Observation,
) -> dict[int, list[Observation]]:
    """Each entity's observations visible at `at`, oldest first, as `model`s."""
    found: dict[int, list[Observation]] = {entity_id: [] for entity_id in entity_ids}
    rows = tx.all(
        observations_sql(include_history),
        scope.params(owner, entities=json_list(entity_ids), as_of=at.as_of, known_at=at.known_at),
    )
    for row in rows:
        found[row["entity_id"]].append(observation_view(row, at, model))
    return found


def relations_of(
    tx: Tx,
    scope: ScopeKey,
    owner: int,
    entity_ids: Sequence[int],
    at: Moment,
    include_history: bool,
    *,
    touching: bool,
    model: type[Relation] = Relation,
) -> list[Relation]:
    """Relations from (or, with `touching`, also to) the entities, visible at `at`."""
    rows = tx.all(
        relations_sql(include_history, touching),
        scope.params(owner, entities=json_list(entity_ids), as_of=at.as_of, known_at=at.known_at),
    )
    return [relation_view(row, at, model) for row in rows]


SELECT_OBSERVATION_BY_ID = f"""
    SELECT o.* FROM {SEEN["observation"]} o
    WHERE o.id = :id AND o.owner_id = :owner AND o.project IN (:g, :p)
"""
SELECT_RELATION_BY_ID = f"""
    SELECT {RELATION_COLUMNS}
    WHERE r.id = :id AND r.owner_id = :owner AND r.project IN (:g, :p)
"""
