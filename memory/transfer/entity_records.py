"""An entity's own records (`entity_life`) in the export format, and back.

Two kinds of line, after the entity lines and before the `entity_type` lines:

    {"type": "entity_type_version", "name": "Acme", "entity_type": "client",
     "project": "A", "recorded_at": "..."}
    {"type": "entity_life", "name": "Bob", "project": null, "at": "...", "deleted": true}

A version that a line of its entity implies is left out: an entity's type of now at
its recorded_at (an entity line gives it), and a project's type of now at the
entity's recorded_at where the project has no other version (an `entity_type` line
gives it; a file migrated to schema 7 has those). Importing those lines writes them
(`writes.insert_entities`, `implied_project_version`), so export -> import -> export gives
the same lines, and an export made before schema 7 imports with today's types as the
first versions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from ..entity_life import record_life, record_type
from ..errors import InvalidInputError
from ..models import EntityLifeRecord, EntityTypeVersionRecord
from ..names import match_key
from ..overlay import GLOBAL
from ..store import Tx
from ..timestamps import format_time, parse_time
from ..validation import LABEL_MAX, NAME_MAX, plain_text
from .steps import LifeStep, Step, TypeVersionStep

__all__ = [
    "KINDS",
    "LIFE_SECTION_SQL",
    "TYPE_VERSION_SECTION_SQL",
    "WRITERS",
    "implied_project_version",
    "life_record",
    "record_step",
    "type_version_record",
]

KINDS = ("entity_type_version", "entity_life")

# Each pages as `transfer.export.Section`s do, by (entity, position in it): the
# position is the time (zero-padded, so text order is time order) and the project.
_PAGE = "printf('%020d', {at}) || {project}"
# Every version but those implied (above).
TYPE_VERSION_SECTION_SQL = f"""
    SELECT e.name, v.project, v.entity_type, v.recorded_at, v.entity_id AS page_key,
           {_PAGE.format(at="v.recorded_at", project="v.project")} AS page_project
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
      AND (v.entity_id, {_PAGE.format(at="v.recorded_at", project="v.project")})
          > (:after, :after_project)
      AND v.entity_id <= :bound
    ORDER BY v.entity_id, v.recorded_at, v.project LIMIT :limit
"""
LIFE_SECTION_SQL = f"""
    SELECT e.name, l.project, l.at, l.alive, l.entity_id AS page_key,
           {_PAGE.format(at="l.at", project="l.project")} AS page_project
    FROM entity_life l JOIN entity e ON e.id = l.entity_id
    WHERE l.owner_id = :owner
      AND (:project IS NULL OR l.project = :project OR (l.project = '' AND e.project = :project))
      AND (l.entity_id, {_PAGE.format(at="l.at", project="l.project")}) > (:after, :after_project)
      AND l.entity_id <= :bound
    ORDER BY l.entity_id, l.at, l.project LIMIT :limit
"""


def type_version_record(row: Any) -> EntityTypeVersionRecord:
    return EntityTypeVersionRecord(
        name=row["name"],
        entity_type=row["entity_type"],
        project=row["project"] or None,
        recorded_at=format_time(row["recorded_at"]),
    )


def life_record(row: Any) -> EntityLifeRecord:
    return EntityLifeRecord(
        name=row["name"],
        project=row["project"] or None,
        at=format_time(row["at"]),
        deleted=not row["alive"],
    )


# ---------------------------------------------------------------- import: checking


def _name(record: dict[str, Any]) -> str:
    name = record.get("name")
    if not isinstance(name, str) or not plain_text(name, NAME_MAX):
        raise ValueError(f"field 'name' must be an entity name of at most {NAME_MAX} characters")
    return name


def _time(record: dict[str, Any], field: str) -> int:
    value = record.get(field)
    if not isinstance(value, str):
        raise ValueError(f"field {field!r} is missing or not a str")
    return parse_time(value, field)


def record_step(record: dict[str, Any], project: str | None, line: int) -> Step:
    """The step of one checked line of either kind."""
    name = _name(record)
    if record["type"] == "entity_type_version":
        entity_type = record.get("entity_type")
        if not isinstance(entity_type, str) or not plain_text(entity_type, LABEL_MAX):
            raise ValueError(
                f"field 'entity_type' must be a label of at most {LABEL_MAX} characters"
            )
        recorded_at = _time(record, "recorded_at")
        return TypeVersionStep(line, "entity_type_version", name, entity_type, recorded_at, project)
    deleted = record.get("deleted")
    if not isinstance(deleted, bool):
        raise ValueError("field 'deleted' is missing or not a bool")
    return LifeStep(line, "entity_life", name, _time(record, "at"), deleted, project)


# ---------------------------------------------------------------- import: writing


class Batch(Protocol):
    """What the writers need of an import's batch (`write.Batch`)."""

    tx: Tx
    latest: int


FIND_ENTITY = "SELECT id FROM entity WHERE owner_id = :owner AND name_key = :key"


def _entity_id(tx: Tx, name: str, what: str) -> int:
    row = tx.one(FIND_ENTITY, {"owner": tx.owner, "key": match_key(name)})
    if row is None:
        raise InvalidInputError(f"name: no entity named {name!r} in this memory for this {what}")
    return int(row["id"])


def _write_type_version(batch: Batch, step: TypeVersionStep) -> None:
    entity_id = _entity_id(batch.tx, step.name, "type version")
    record_type(batch.tx, step.project or GLOBAL, entity_id, step.entity_type, step.recorded_at)
    batch.latest = max(batch.latest, step.recorded_at)


def _write_life(batch: Batch, step: LifeStep) -> None:
    entity_id = _entity_id(batch.tx, step.name, "deletion")
    record_life(batch.tx, step.project or GLOBAL, entity_id, not step.deleted, step.at)
    batch.latest = max(batch.latest, step.at)


WRITERS: dict[type[Step], Callable[[Any, Any], None]] = {
    TypeVersionStep: _write_type_version,
    LifeStep: _write_life,
}

# The version an `entity_type` line implies, where the project has none of its own.
# (The one an entity line implies is every new entity's first: `writes.insert_entities`.)
INSERT_IMPLIED_PROJECT = """
    INSERT INTO entity_type_version (entity_id, project, owner_id, entity_type, recorded_at)
    SELECT e.id, :project, e.owner_id, :entity_type, e.recorded_at FROM entity e
    WHERE e.id = :id AND NOT EXISTS (SELECT 1 FROM entity_type_version v
                                     WHERE v.entity_id = e.id AND v.project = :project)
    ON CONFLICT (entity_id, project, recorded_at) DO NOTHING
"""


def implied_project_version(tx: Tx, entity_id: int, project: str, entity_type: str) -> None:
    params = {"id": entity_id, "project": project, "entity_type": entity_type}
    tx.run(INSERT_IMPLIED_PROJECT, params)
