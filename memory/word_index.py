"""The word indexes filled again from the rows: when a file is migrated to the
analyzer's indexes (schema 9), and when its default language changes.

Both run in one write transaction, so a crash leaves the old indexes whole, and
report their progress as rows done of rows to do.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import NamedTuple

from .schema import COUNT_FTS_STATS, FTS_INDEXES, ROWIDS, WORD_COLUMNS
from .words.languages import language_error

__all__ = ["AFTER_MIGRATION", "WordProgress", "file_language", "reindex_words", "use_language"]

CHUNK = 2_000  # rows indexed between two progress reports


class WordProgress(NamedTuple):
    """How far a re-index of the words is: rows indexed, of all rows."""

    done: int
    total: int


OnProgress = Callable[[WordProgress], None]
FILE_LANGUAGE = "SELECT language FROM word_index WHERE id = 1"


def file_language(conn: sqlite3.Connection) -> str:
    (language,) = conn.execute(FILE_LANGUAGE).fetchone()
    return str(language)


def reindex_words(
    conn: sqlite3.Connection, language: str, on_progress: OnProgress | None = None
) -> None:
    """Index every row's words again with `language` the file's default, inside the
    caller's write transaction; each user's statistics are counted again."""
    if (error := language_error(language)) is not None:
        raise ValueError(f"language: {error}")
    conn.execute("UPDATE word_index SET language = ? WHERE id = 1", (language,))
    total = sum(conn.execute(f"SELECT count(*) FROM {kind}").fetchone()[0] for kind in FTS_INDEXES)
    done = 0
    if on_progress is not None:
        on_progress(WordProgress(done, total))
    for kind, table in FTS_INDEXES.items():
        conn.execute(f"INSERT INTO {table} ({table}) VALUES ('delete-all')")
        key, cols = ROWIDS[kind], ", ".join(WORD_COLUMNS[kind])
        last = (
            f"SELECT max({key}) FROM"
            f" (SELECT {key} FROM {kind} WHERE {key} > ? ORDER BY {key} LIMIT {CHUNK})"
        )
        fill = (
            f"INSERT INTO {table} (rowid, {cols}) SELECT {key}, {cols} FROM {kind}_words"
            f" WHERE {key} > ? AND {key} <= ?"
        )
        after = -(1 << 62)
        while (upto := conn.execute(last, (after,)).fetchone()[0]) is not None:
            done += conn.execute(fill, (after, upto)).rowcount
            after = upto
            if on_progress is not None:
                on_progress(WordProgress(done, total))
    conn.execute("DELETE FROM fts_stats")
    for statement in COUNT_FTS_STATS:
        conn.execute(statement)


def use_language(
    conn: sqlite3.Connection, language: str, on_progress: OnProgress | None = None
) -> bool:
    """Make `language` the file's default, re-indexing when it was another; returns
    whether it did. Takes the write lock itself (call it outside a transaction)."""
    if file_language(conn) == language:
        return False
    conn.execute("BEGIN IMMEDIATE")
    try:
        changed = file_language(conn) != language  # another process may have done it
        if changed:
            reindex_words(conn, language, on_progress)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return changed


def _migrated_to_words(
    conn: sqlite3.Connection, language: str | None, on_progress: OnProgress | None
) -> None:
    reindex_words(conn, language or "en", on_progress)


# Python steps of a migration, run after its SQL in the same transaction.
AFTER_MIGRATION: dict[int, Callable[[sqlite3.Connection, str | None, OnProgress | None], None]] = {
    9: _migrated_to_words
}
