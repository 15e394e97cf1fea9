"""An entity's own records (`entity_life`) in the export format, and back.

Two kinds of line, after the entity lines and before the `entity_type` lines:

    {"type": "entity_type_version", "name": "Acme", "entity_type": "client",
     "project": "A", "recorded_at": "..."}
    {"type": "entity_life", "name": "Bob", "project": null, "at": "...", "deleted": true}

A version that a line of its entity implies is left out: an entity's type of now at
its recorded_at (an entity line gives it), and a project's type of now at the
entity's recorded_at where the project has no other version (an `entity_type` line
gives it; a file migrated to schema 7 has those). Importing those lines writes them
(`implied_versions`, `implied_project_version`), so export -> import -> export gives
the same lines, and an export made before schema 7 imports with today's types as the
first versions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

from .entity_life import RECORD_LIFE, RECORD_TYPE
from .errors import InvalidInputError
from .names import match_key
from .overlay import GLOBAL
from .store import Tx, json_list
from .timestamps import format_time, parse_time
from .validation import LABEL_MAX, NAME_MAX, plain_text

__all__ = [
    "KINDS",
    "WRITERS",
    "export_entity_records",
    "implied_project_version",
    "implied_versions",
    "record_step",
]

KINDS = ("entity_type_version", "entity_life")

# Every version but those implied (above).
EXPORT_TYPE_VERSIONS = """
    SELECT e.name, v.project, v.entity_type, v.recorded_at
    FROM entity_type_version v JOIN entity e ON e.id = v.entity_id
    LEFT JOIN project_entity_type c ON c.entity_id = v.entity_id AND c.project = v.project
    WHERE v.owner_id = :owner
      AND (:project IS NULL OR v.project = :project OR (v.project = '' AND e.project = :project))
      AND NOT (v.recorded_at = e.recorded_at AND (
          (v.project = '' AND v.entity_type = e.entity_type)
          OR (v.project <> '' AND v.entity_type = c.entity_type
              AND NOT EXISTS (SELECT 1 FROM entity_type_version o
                              WHERE o.entity_id = v.entity_id AND o.project = v.project
                                AND o.recorded_at <> v.recorded_at))))
    ORDER BY v.entity_id, v.recorded_at, v.project
"""
EXPORT_LIVES = """
    SELECT e.name, l.project, l.at, l.alive
    FROM entity_life l JOIN entity e ON e.id = l.entity_id
    WHERE l.owner_id = :owner
      AND (:project IS NULL OR l.project = :project OR (l.project = '' AND e.project = :project))
    ORDER BY l.entity_id, l.at, l.project
"""


def export_entity_records(tx: Tx, project: str | None) -> list[dict[str, Any]]:
    """The type versions and the deletions (and returns) of the (app, user) of `tx`, or of
    one project of it."""
    params = {"owner": tx.owner, "project": project}
    records: list[dict[str, Any]] = [
        {
            "type": "entity_type_version",
            "name": row["name"],
            "entity_type": row["entity_type"],
            "project": row["project"] or None,
            "recorded_at": format_time(row["recorded_at"]),
        }
        for row in tx.all(EXPORT_TYPE_VERSIONS, params)
    ]
    records += [
        {
            "type": "entity_life",
            "name": row["name"],
            "project": row["project"] or None,
            "at": format_time(row["at"]),
            "deleted": not row["alive"],
        }
        for row in tx.all(EXPORT_LIVES, params)
    ]
    return records


# ---------------------------------------------------------------- import: checking


def _name(record: dict[str, Any]) -> str:
    name = record.get("name")
    if not plain_text(name, NAME_MAX):
        raise ValueError(f"field 'name' must be an entity name of at most {NAME_MAX} characters")
    assert isinstance(name, str)
    return name


def _time(record: dict[str, Any], field: str) -> int:
    value = record.get(field)
    if not isinstance(value, str):
        raise ValueError(f"field {field!r} is missing or not a str")
    return parse_time(value, field)


def record_step(record: dict[str, Any], project: str | None) -> tuple[Any, ...]:
    """The step of one checked line of either kind."""
    name = _name(record)
    if record["type"] == "entity_type_version":
        entity_type = record.get("entity_type")
        if not plain_text(entity_type, LABEL_MAX):
            raise ValueError(
                f"field 'entity_type' must be a label of at most {LABEL_MAX} characters"
            )
        return ("entity_type_version", name, entity_type, _time(record, "recorded_at"), project)
    deleted = record.get("deleted")
    if not isinstance(deleted, bool):
        raise ValueError("field 'deleted' is missing or not a bool")
    return ("entity_life", name, _time(record, "at"), deleted, project)


# ---------------------------------------------------------------- import: writing


class Batch(Protocol):
    """What the writers need of an import's batch (`transfer.Batch`)."""

    tx: Tx
    latest: int


FIND_ENTITY = "SELECT id FROM entity WHERE owner_id = :owner AND name_key = :key"


def _entity_id(tx: Tx, name: str, what: str) -> int:
    row = tx.one(FIND_ENTITY, {"owner": tx.owner, "key": match_key(name)})
    if row is None:
        raise InvalidInputError(f"name: no entity named {name!r} in this memory for this {what}")
    return int(row["id"])


def _write_type_version(
    batch: Batch, name: str, entity_type: str, recorded_at: int, project: str | None
) -> None:
    tx = batch.tx
    entity_id = _entity_id(tx, name, "type version")
    tx.run(
        RECORD_TYPE,
        {"id": entity_id, "project": project or GLOBAL, "owner": tx.owner,
         "entity_type": entity_type, "now": recorded_at},
    )  # fmt: skip
    batch.latest = max(batch.latest, recorded_at)


def _write_life(batch: Batch, name: str, at: int, deleted: bool, project: str | None) -> None:
    tx = batch.tx
    entity_id = _entity_id(tx, name, "deletion")
    tx.run(
        RECORD_LIFE,
        {"id": entity_id, "project": project or GLOBAL, "owner": tx.owner, "now": at,
         "alive": int(not deleted)},
    )  # fmt: skip
    batch.latest = max(batch.latest, at)


WRITERS: dict[str, Callable[..., None]] = {
    "entity_type_version": _write_type_version,
    "entity_life": _write_life,
}

# The version an entity line implies, for the entities it created: kept where a line
# of the file gives that time another type.
INSERT_IMPLIED = """
    INSERT INTO entity_type_version (entity_id, project, owner_id, entity_type, recorded_at)
    SELECT id, '', owner_id, entity_type, recorded_at FROM entity
    WHERE id IN (SELECT value FROM json_each(:ids))
    ON CONFLICT (entity_id, project, recorded_at) DO NOTHING
"""
# The version an `entity_type` line implies, where the project has none of its own.
INSERT_IMPLIED_PROJECT = """
    INSERT INTO entity_type_version (entity_id, project, owner_id, entity_type, recorded_at)
    SELECT e.id, :project, e.owner_id, :entity_type, e.recorded_at FROM entity e
    WHERE e.id = :id AND NOT EXISTS (SELECT 1 FROM entity_type_version v
                                     WHERE v.entity_id = e.id AND v.project = :project)
    ON CONFLICT (entity_id, project, recorded_at) DO NOTHING
"""


def implied_versions(tx: Tx, entity_ids: Iterable[int]) -> None:
    """Record the first type version of entities an import just created."""
    tx.run(INSERT_IMPLIED, {"ids": json_list(entity_ids)})


def implied_project_version(tx: Tx, entity_id: int, project: str, entity_type: str) -> None:
    tx.run(
        INSERT_IMPLIED_PROJECT, {"id": entity_id, "project": project, "entity_type": entity_type}
    )
