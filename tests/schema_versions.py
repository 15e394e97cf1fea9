"""Files as an older schema left them, for the migrations' tests."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from memory.schema import FTS_INDEXES, ROWIDS, VECTOR_KINDS, WORD_COLUMNS, porter_fts


def as_schema_8(path: Path) -> None:
    """The file as schema 8 left it: full-text indexes of FTS5's own Porter tokenizer
    over the rows themselves, no analyzer (migration 9)."""
    with sqlite3.connect(path) as conn:
        for kind, table in FTS_INDEXES.items():
            conn.execute(f"DROP TRIGGER {table}_delete")
            conn.execute(f"DROP TRIGGER {table}_update")
            conn.execute(f"DROP TABLE {table}")
            conn.execute(f"DROP VIEW {kind}_words")
            for statement in porter_fts(table, kind, ROWIDS[kind], WORD_COLUMNS[kind]):
                conn.execute(statement)
            conn.execute(f"DROP TRIGGER {table}_insert")  # dropped by migration 3
        conn.execute("DROP TABLE word_index")
        conn.execute("PRAGMA user_version = 8")
    conn.close()


def as_schema_7(path: Path) -> None:
    """The file as schema 7 left it: no vectors and no backlog (migration 8)."""
    as_schema_8(path)
    with sqlite3.connect(path) as conn:
        for kind in VECTOR_KINDS:
            conn.execute(f"DROP TRIGGER {kind}_vector_delete")
        conn.execute("DROP TRIGGER entity_vector_stale")
        for table in ("vector", "vector_pending", "vector_state", "vector_removed"):
            conn.execute(f"DROP TABLE {table}")
        conn.execute("PRAGMA user_version = 7")
    conn.close()
