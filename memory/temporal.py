"""The two time axes (DESIGN §2): which rows a read sees, and how each row looks to it.

A row is one observation or relation. It is *recorded* at `recorded_at` and, once
closed, has `valid_to` and `invalidated_at` set together. A read at (`as_of`,
`known_at`) sees the row as the database stood at `known_at`: a closing learned
later does not exist yet.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from .models import Observation, Relation
from .timestamps import format_time

__all__ = ["Moment", "observation_view", "relation_view", "visible_rows_sql"]


@dataclass(frozen=True)
class Moment:
    """A point on both axes: `as_of` (valid time) and `known_at` (transaction time)."""

    as_of: int
    known_at: int


def visible_rows_sql(alias: str, include_history: bool) -> str:
    """SQL condition on `alias` for rows a read at `:as_of`/`:known_at` returns.

    Current rows: recorded by `known_at`, begun by `as_of`, and not closed at or before
    `as_of` by a closing recorded by `known_at`. With history: every row recorded by
    `known_at`.
    """
    recorded = f"{alias}.recorded_at <= :known_at"
    if include_history:
        return recorded
    return (
        f"{recorded} AND {alias}.valid_from <= :as_of AND ({alias}.valid_to IS NULL"
        f" OR {alias}.invalidated_at > :known_at OR {alias}.valid_to > :as_of)"
    )


def _time_fields(row: sqlite3.Row, at: Moment) -> dict[str, object]:
    closed = row["invalidated_at"] is not None and row["invalidated_at"] <= at.known_at
    valid_to = row["valid_to"] if closed else None
    return {
        "valid_from": format_time(row["valid_from"]),
        "valid_to": format_time(valid_to) if valid_to is not None else None,
        "recorded_at": format_time(row["recorded_at"]),
        "invalidated_at": format_time(row["invalidated_at"]) if closed else None,
        "current": row["valid_from"] <= at.as_of and (valid_to is None or at.as_of < valid_to),
        "reason": row["reason"] if closed else None,
    }


# Views are built with `model_validate` from a dict: pydantic-core (C code) checks one
# for less than `model_construct` (Python code) costs, and a search builds a hundred.
def observation_view(
    row: sqlite3.Row, at: Moment, model: type[Observation] = Observation
) -> Observation:
    return model.model_validate(
        {"id": row["id"], "text": row["text"], "attribute": row["attribute"]}
        | _time_fields(row, at)
    )


def relation_view(row: sqlite3.Row, at: Moment, model: type[Relation] = Relation) -> Relation:
    """`row` carries the relation plus `source_name` and `target_name`."""
    return model.model_validate(
        {
            "id": row["id"],
            "source": row["source_name"],
            "relation": row["relation"],
            "target": row["target_name"],
        }
        | _time_fields(row, at)
    )
