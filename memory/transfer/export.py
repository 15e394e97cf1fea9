"""Export: a scope's whole memory as records of chronomem's export format, a page at
a time, and those records as JSON Lines.

The export is deterministic (only the scope's rows, in storage order, no export
time), so export -> import -> export gives the same lines. It is read in pages, each
its own read snapshot, so memory holds one page; rows added after the first page are
left out (each kind is bounded by its last rowid then), as a single snapshot would.
A kind of record is one model (`models.ExportRecord`) and one `Section` here.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from functools import partial
from typing import Any, NamedTuple

from ..models import (
    ClosingRecord,
    EntityRecord,
    EntityTypeRecord,
    ExportRecord,
    ObservationRecord,
    RelationRecord,
    TurnRecord,
)
from ..overlay import CLOSINGS
from ..queries import ScopeKey
from ..schema import owner_range
from ..store import Store, Tx
from ..timestamps import format_time
from . import entity_records

__all__ = ["EXPORT_PAGE", "export_line", "export_lines", "export_page", "export_records"]

EXPORT_PAGE = 5_000  # records a read snapshot


def _time(value: int | None) -> str | None:
    return None if value is None else format_time(value)


def _entity(row: Any) -> EntityRecord:
    return EntityRecord(
        name=row["name"],
        entity_type=row["entity_type"],
        project=row["project"] or None,
        recorded_at=format_time(row["recorded_at"]),
    )


def _project_type(row: Any) -> EntityTypeRecord:
    return EntityTypeRecord(
        name=row["name"], entity_type=row["entity_type"], project=row["project"]
    )


def _observation(row: Any) -> ObservationRecord:
    return ObservationRecord(
        id=row["id"],
        entity=row["entity_name"],
        text=row["text"],
        attribute=row["attribute"],
        project=row["project"] or None,
        valid_from=format_time(row["valid_from"]),
        valid_to=_time(row["valid_to"]),
        recorded_at=format_time(row["recorded_at"]),
        invalidated_at=_time(row["invalidated_at"]),
        reason=row["reason"],
    )


def _relation(row: Any) -> RelationRecord:
    return RelationRecord(
        id=row["id"],
        source=row["source_name"],
        relation=row["relation"],
        target=row["target_name"],
        project=row["project"] or None,
        valid_from=format_time(row["valid_from"]),
        valid_to=_time(row["valid_to"]),
        recorded_at=format_time(row["recorded_at"]),
        invalidated_at=_time(row["invalidated_at"]),
        reason=row["reason"],
    )


def _closing(row: Any) -> ClosingRecord:
    return ClosingRecord(
        id=row["id"],
        project=row["project"],
        valid_to=format_time(row["valid_to"]),
        invalidated_at=format_time(row["invalidated_at"]),
        reason=row["reason"],
    )


def _turn(row: Any) -> TurnRecord:
    return TurnRecord(
        id=row["id"],
        session_id=row["session_id"],
        role=row["role"],
        text=row["text"],
        at=format_time(row["at"]),
        project=row["project"] or None,
        recorded_at=format_time(row["recorded_at"]),
    )


class Section(NamedTuple):
    """One kind of record, in its place in the export: its SELECT, which returns rows
    in order after the position (`:after`, `:after_project`) up to `:limit` and up to
    the `bound` kind's last rowid (`:bound`), each with its position (`page_key`,
    `page_project`); and the record a row is."""

    sql: str
    bound: str
    record: Callable[[Any], ExportRecord]


OWN_ROWS = "owner_id = :owner AND (:project IS NULL OR project = :project)"
# Entities first: an import creates them with their types before the facts name them.
SECTIONS = (
    Section(
        f"""
        SELECT *, id AS page_key, '' AS page_project FROM entity
        WHERE {OWN_ROWS} AND id > :after AND id <= :bound ORDER BY id LIMIT :limit
        """,
        "entity",
        _entity,
    ),
    # Each entity's own records (`entity_records`): before the types projects gave.
    Section(entity_records.TYPE_VERSION_SECTION_SQL, "entity", entity_records.type_version_record),
    Section(entity_records.LIFE_SECTION_SQL, "entity", entity_records.life_record),
    # The types projects gave entities for themselves (`overlay`), after the entities.
    Section(
        """
        SELECT e.name, c.project, c.entity_type, c.entity_id AS page_key,
               c.project AS page_project
        FROM project_entity_type c JOIN entity e ON e.id = c.entity_id
        WHERE c.owner_id = :owner AND (:project IS NULL OR c.project = :project)
          AND (c.entity_id, c.project) > (:after, :after_project) AND c.entity_id <= :bound
        ORDER BY c.entity_id, c.project LIMIT :limit
        """,
        "entity",
        _project_type,
    ),
    Section(
        """
        SELECT o.*, e.name AS entity_name, o.seq AS page_key, '' AS page_project
        FROM observation o JOIN entity e ON e.id = o.entity_id
        WHERE o.owner_id = :owner AND (:project IS NULL OR o.project = :project)
          AND o.seq > :after AND o.seq <= :bound
        ORDER BY o.seq LIMIT :limit
        """,
        "observation",
        _observation,
    ),
    Section(
        """
        SELECT r.*, s.name AS source_name, t.name AS target_name, r.seq AS page_key,
               '' AS page_project
        FROM relation r JOIN entity s ON s.id = r.source_id JOIN entity t ON t.id = r.target_id
        WHERE r.owner_id = :owner AND (:project IS NULL OR r.project = :project)
          AND r.seq > :after AND r.seq <= :bound
        ORDER BY r.seq LIMIT :limit
        """,
        "relation",
        _relation,
    ),
    # A project's closings of global rows (`overlay`), after the rows they close.
    *(
        Section(
            f"""
            SELECT c.*, t.id, c.seq AS page_key, c.project AS page_project
            FROM {closings} c JOIN {table} t ON t.seq = c.seq
            WHERE c.owner_id = :owner AND (:project IS NULL OR c.project = :project)
              AND (c.seq, c.project) > (:after, :after_project) AND c.seq <= :bound
            ORDER BY c.seq, c.project LIMIT :limit
            """,
            table,
            _closing,
        )
        for table, closings in CLOSINGS.items()
    ),
    Section(
        f"""
        SELECT *, seq AS page_key, '' AS page_project FROM turn
        WHERE {OWN_ROWS} AND seq > :after AND seq <= :bound ORDER BY seq LIMIT :limit
        """,
        "turn",
        _turn,
    ),
)
LAST_ROWID = {  # of an owner's rows of a kind (`schema.owner_range`)
    "entity": "SELECT max(id) FROM entity WHERE id BETWEEN :first AND :last",
    "observation": "SELECT max(seq) FROM observation WHERE seq BETWEEN :first AND :last",
    "relation": "SELECT max(seq) FROM relation WHERE seq BETWEEN :first AND :last",
    "turn": "SELECT max(seq) FROM turn WHERE seq BETWEEN :first AND :last",
}


class ExportPosition(NamedTuple):
    """Where the next page starts: a section, the position in it after which its rows
    follow, and the last rowid of each kind when the export began."""

    section: int
    after: int
    after_project: str
    bounds: dict[str, int]


def _start(tx: Tx, owner: int) -> ExportPosition:
    first, last = owner_range(owner)
    bounds = {}
    for kind, statement in LAST_ROWID.items():
        row = tx.one(statement, {"first": first, "last": last})
        bounds[kind] = -1 if row is None or row[0] is None else row[0]
    return ExportPosition(0, -1, "", bounds)


def export_page(
    tx: Tx, project: str | None, at: ExportPosition | None, limit: int = EXPORT_PAGE
) -> tuple[list[ExportRecord], ExportPosition | None]:
    """At most `limit` records of the (app, user) of `tx`, or of one project of it,
    from `at` (None: the first page); and where the next page starts (None: done)."""
    if limit < 1:
        raise ValueError("limit must be at least 1")
    if tx.owner is None:
        return [], None
    position = at or _start(tx, tx.owner)
    section, after, after_project, bounds = position
    records: list[ExportRecord] = []
    while section < len(SECTIONS) and len(records) < limit:
        sql, bound, record = SECTIONS[section]
        wanted = limit - len(records)
        params = {
            "owner": tx.owner,
            "project": project,
            "after": after,
            "after_project": after_project,
            "bound": bounds[bound],
            "limit": wanted,
        }
        rows = tx.all(sql, params)
        records += map(record, rows)
        if len(rows) < wanted:
            section, after, after_project = section + 1, -1, ""
        else:
            after, after_project = rows[-1]["page_key"], rows[-1]["page_project"]
    if section == len(SECTIONS):
        return records, None
    return records, ExportPosition(section, after, after_project, bounds)


async def export_records(
    store: Store, key: ScopeKey, page_size: int = EXPORT_PAGE
) -> AsyncIterator[ExportRecord]:
    """Every record of the scope `key`, read `page_size` records a snapshot."""
    project = key.project or None
    position: ExportPosition | None = None
    while True:
        page = partial(export_page, project=project, at=position, limit=page_size)
        records, position = await store.read(key.app, key.user, page)
        for record in records:
            yield record
        if position is None:
            return


def export_line(record: ExportRecord) -> str:
    """One record as a line of JSON, its keys in the model's order."""
    return json.dumps(record.model_dump(), ensure_ascii=False, separators=(",", ":"))


def export_lines(records: Iterable[ExportRecord]) -> Iterator[str]:
    return map(export_line, records)
