"""Files as an older schema left them, for the migrations' tests."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from memory.schema import VECTOR_KINDS


def as_schema_7(path: Path) -> None:
    """The file as schema 7 left it: no vectors and no backlog (migration 8)."""
    with sqlite3.connect(path) as conn:
        for kind in VECTOR_KINDS:
            conn.execute(f"DROP TRIGGER {kind}_vector_delete")
        conn.execute("DROP TRIGGER entity_vector_stale")
        for table in ("vector", "vector_pending", "vector_state", "vector_removed"):
            conn.execute(f"DROP TABLE {table}")
        conn.execute("PRAGMA user_version = 7")
    conn.close()
