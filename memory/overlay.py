"""Projects as overlays on the global memory (DESIGN §2, "A project is an overlay").

A closing made inside project P of a global fact or relation is P's own: it is kept
in `observation_closing` / `relation_closing`, keyed by the row and P, and the row
itself stays open for every other reading context. A read sees each row through
`SEEN`: the row with its own closing, or, for a global row read inside P, with P's
closing where P has one. A closing made globally is written on the row and applies
everywhere, except where a project had already closed the row for itself.

An entity's type works the same way: a type given inside P for an entity that existed
before the call is P's own (`project_entity_type`), and `SEEN["entity"]` shows it
inside P.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["CLOSINGS", "GLOBAL", "SEEN", "closing_rows"]

GLOBAL = ""  # the project of global rows

CLOSINGS = {"observation": "observation_closing", "relation": "relation_closing"}
CLOSED = ("valid_to", "invalidated_at", "reason")  # what a closing sets
COLUMNS = {  # what a context reads of each row as it is
    "observation": tuple(
        "seq id owner_id project entity_id text text_key attribute attribute_key"
        " valid_from recorded_at".split()
    ),
    "relation": tuple(
        "seq id owner_id project source_id relation target_id valid_from recorded_at".split()
    ),
}


def _seen(table: str) -> str:
    """`table` as the context of `:p` sees it. SQLite flattens this into the query that
    reads it: one primary-key probe a row, skipped outright when `:p` is global."""
    own = ", ".join(f"t.{column}" for column in COLUMNS[table])
    closed = ", ".join(
        f"CASE WHEN c.seq IS NULL THEN t.{column} ELSE c.{column} END AS {column}"
        for column in CLOSED
    )
    return f"""(
        SELECT {own}, {closed} FROM {table} t
        LEFT JOIN {CLOSINGS[table]} c
          ON c.seq = t.seq AND c.project = :p AND :p <> '' AND t.project = ''
    )"""


SEEN = {table: _seen(table) for table in CLOSINGS}
SEEN["entity"] = """(
    SELECT t.id, t.owner_id, t.project, t.name, t.name_key, t.recorded_at, t.changed_at,
           CASE WHEN c.entity_id IS NULL THEN t.entity_type ELSE c.entity_type END
               AS entity_type
    FROM entity t
    LEFT JOIN project_entity_type c ON c.entity_id = t.id AND c.project = :p AND :p <> ''
)"""
SET_PROJECT_TYPE = """
    INSERT INTO project_entity_type (entity_id, project, owner_id, entity_type)
    VALUES (:id, :project, :owner, :entity_type)
    ON CONFLICT (entity_id, project) DO UPDATE SET entity_type = excluded.entity_type
"""

# A closing of P: one row per (row, project). A row is only ever closed once in a
# context (only open rows are closed), so a conflict is a retried write.
INSERT_CLOSING = {
    table: f"""
        INSERT INTO {closings} (seq, project, owner_id, valid_to, invalidated_at, reason)
        VALUES (:seq, :project, :owner, :valid_to, :now, :reason)
        ON CONFLICT (seq, project) DO NOTHING
    """
    for table, closings in CLOSINGS.items()
}
CLOSE_ROW = {
    table: f"""
        UPDATE {table} SET valid_to = :valid_to, invalidated_at = :now, reason = :reason
        WHERE seq = :seq AND valid_to IS NULL
    """
    for table in CLOSINGS
}


def closing_rows(
    rows: Iterable[Any], project: str, owner: int, valid_to: int, now: int, reason: str | None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The parameters of closing `rows` from `project`: those closed on the row itself
    (the context's own rows, and every row when closed globally), and those recorded as
    the project's own closing of a global row."""
    on_row: list[dict[str, Any]] = []
    overlaid: list[dict[str, Any]] = []
    for row in rows:
        params = {"seq": row["seq"], "valid_to": valid_to, "now": now, "reason": reason}
        if project != GLOBAL and row["project"] == GLOBAL:
            overlaid.append({**params, "project": project, "owner": owner})
        else:
            on_row.append(params)
    return on_row, overlaid
