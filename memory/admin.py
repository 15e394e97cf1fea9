"""Administration: counts for `stats`, and physical erasure for `purge`.

Purge is the one operation that deletes. It removes the rows, rebuilds the
full-text indexes (FTS5 keeps deleted terms in old segments until they are
merged), and the caller then vacuums, so no text of the purged scope is left in
the file: not in the tables, not in the indexes, not in free pages (secure_delete).
"""

from __future__ import annotations

from typing import NamedTuple

from .models import PurgeResult, Stats
from .overlay import SEEN
from .schema import COUNT_STORED, FTS_INDEXES, RECOUNT_FTS_STATS
from .store import Tx

__all__ = ["PurgeResult", "Stats", "purge", "stats"]


# Facts and relations as the project sees them (`overlay`), or as stored over all.
STATS = f"""
    SELECT
      (SELECT count(*) FROM entity WHERE owner_id = :owner
         AND (:project IS NULL OR project IN ('', :project))),
      (SELECT count(*) FROM {SEEN["observation"]} o WHERE o.owner_id = :owner
         AND o.valid_to IS NULL AND (:project IS NULL OR o.project IN ('', :project))),
      (SELECT count(*) FROM {SEEN["observation"]} o WHERE o.owner_id = :owner
         AND o.valid_to IS NOT NULL AND (:project IS NULL OR o.project IN ('', :project))),
      (SELECT count(*) FROM {SEEN["relation"]} r WHERE r.owner_id = :owner
         AND r.valid_to IS NULL AND (:project IS NULL OR r.project IN ('', :project))),
      (SELECT count(*) FROM {SEEN["relation"]} r WHERE r.owner_id = :owner
         AND r.valid_to IS NOT NULL AND (:project IS NULL OR r.project IN ('', :project))),
      (SELECT count(*) FROM turn WHERE owner_id = :owner
         AND (:project IS NULL OR project IN ('', :project))),
      (SELECT count(DISTINCT session_id) FROM turn WHERE owner_id = :owner
         AND (:project IS NULL OR project IN ('', :project))),
      (SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()),
      (SELECT count(*) FROM vector WHERE owner_id = :owner),
      (SELECT count(*) FROM vector_pending WHERE owner_id = :owner)
"""


def stats(tx: Tx, project: str | None) -> Stats:
    """Counts for the (app, user) of `tx` (seen from `project`, or over all of it)."""
    row = tx.one(STATS, {"owner": tx.owner, "project": project, "p": project or ""})
    assert row is not None
    names = list(Stats.model_fields)
    return Stats(**dict(zip(names, (value or 0 for value in row), strict=True)))


class Erase(NamedTuple):
    """One statement of a purge; `counted` names the `PurgeResult` field its rows add to."""

    counted: str
    sql: str


# What the user or project owns, in the order it goes: what refers to rows first.
OWNED = [
    ("closings", "observation_closing"),
    ("closings", "relation_closing"),
    ("", "entity_change"),
    ("", "project_entity_type"),
    ("", "entity_life"),
    ("", "entity_type_version"),
    ("turns", "turn"),
    ("relations", "relation"),
    ("observations", "observation"),
]
IN_PROJECT = " AND project = :project"
# Entities created in the project go, unless other memory still refers to them;
# those become global, since that other memory is global or another project's.
UNREFERENCED = """
    owner_id = :owner AND project = :project
    AND NOT EXISTS (SELECT 1 FROM observation o WHERE o.entity_id = entity.id)
    AND NOT EXISTS (SELECT 1 FROM relation r
                    WHERE r.source_id = entity.id OR r.target_id = entity.id)
"""
UNREFERENCED_IDS = f"SELECT id FROM entity WHERE {UNREFERENCED}"
# Their deletions and types in other contexts go with them.
ABOUT_ENTITIES = ["entity_life", "entity_type_version", "project_entity_type", "entity_change"]

PURGE = {
    "user": [
        *(
            Erase(counted, f"DELETE FROM {table} WHERE owner_id = :owner")
            for counted, table in OWNED
        ),
        Erase("entities", "DELETE FROM entity WHERE owner_id = :owner"),
        Erase("", "DELETE FROM fts_stats WHERE owner_id = :owner"),
        Erase("", "DELETE FROM owner WHERE id = :owner"),
    ],
    "project": [
        *(
            Erase(counted, f"DELETE FROM {table} WHERE owner_id = :owner{IN_PROJECT}")
            for counted, table in OWNED
        ),
        *(
            Erase("", f"DELETE FROM {table} WHERE entity_id IN ({UNREFERENCED_IDS})")
            for table in ABOUT_ENTITIES
        ),
        Erase("entities", f"DELETE FROM entity WHERE {UNREFERENCED}"),
        Erase("", f"UPDATE entity SET project = '' WHERE owner_id = :owner{IN_PROJECT}"),
    ],
    "session": [
        Erase("turns", "DELETE FROM turn WHERE owner_id = :owner AND session_id = :session_id"),
    ],
}
REBUILD = [f"INSERT INTO {fts} ({fts}) VALUES ('rebuild')" for fts in FTS_INDEXES.values()]


def purge(tx: Tx, what: str, project: str | None, session_id: str | None) -> PurgeResult:
    """Delete every row of one user, one project or one session of the (app, user) of `tx`."""
    counts = dict.fromkeys(PurgeResult.model_fields, 0)
    if tx.owner is not None:
        params = {"owner": tx.owner, "project": project, "session_id": session_id}
        for kind, statement in PURGE[what]:
            changed = tx.run(statement, params)
            if kind:
                counts[kind] += changed
        for statement in REBUILD:
            tx.run(statement)
        tx.run(COUNT_STORED)
        if what != "user":
            for statement in RECOUNT_FTS_STATS:
                tx.run(statement, {"owner": tx.owner})
    return PurgeResult(**counts)
