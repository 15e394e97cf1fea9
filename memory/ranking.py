"""BM25 over one owner's rows of a full-text index, the statistics that owner's own.

FTS5's own `bm25()` takes each word's document frequency from every row of the table
that has it, every user's, and walks all of them to count it: in a file shared by
many users, a search paid for everyone's memory. Here each FTS5 query is bounded to
the owner's range of rowids (`schema.owner_range`), which FTS5 seeks to within each
doclist, and the score is computed from what those queries return: for each query
word, the owner's rows that have it (each counted once: a fact is one statement), the
rows' lengths from the index's own docsize table, the owner's row count and average
length. A search therefore costs what the owner's own rows cost, however many other
users share the file.

A query ranks the rows of its rarest words, adding words from the rarest up while at
most `RANKED_ROWS` rows are to be ranked; a word left out is common in this memory and
weighs little (the idea of Lucene's CommonTermsQuery). When every word is more common
than that, the newest rows that have all of them (`EVERY_WORD_WINDOW`), and the newest
of each (`NEWEST_WINDOW`), are ranked.
"""

from __future__ import annotations

import functools
import math
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .schema import owner_range
from .store import Tx, json_list

__all__ = ["INDEXES", "Index", "Ranked", "best_rows", "passing", "ranked"]

K1 = 1.2
B = 0.75
RANKED_ROWS = 1_000
NEWEST_WINDOW = 200
EVERY_WORD_WINDOW = 1_000
LENGTH_SAMPLE = 100  # the owner's newest rows whose lengths give the average length


@dataclass(frozen=True)
class Index:
    """A full-text index over one kind of row: its columns and how much each weighs."""

    fts: str
    table: str
    key: str  # the table's rowid column, which is the index's rowid
    columns: tuple[str, ...]
    weights: tuple[float, ...]


INDEXES = {
    # A word in an entity's name says far more than one in its type ("person").
    "entity": Index("entity_fts", "entity", "id", ("name", "entity_type"), (4.0, 1.0)),
    "observation": Index("observation_fts", "observation", "seq", ("text",), (1.0,)),
    "relation": Index("relation_fts", "relation", "seq", ("relation",), (1.0,)),
    "turn": Index("turn_fts", "turn", "seq", ("text",), (1.0,)),
}


@dataclass(frozen=True)
class Expression:
    """One word looked for in one column: what FTS5 matches, and where it belongs."""

    term: int  # index of the word in the query
    column: int
    match: str


def _expressions(index: Index, terms: Sequence[str]) -> list[Expression]:
    if len(index.columns) == 1:
        return [Expression(t, 0, term) for t, term in enumerate(terms)]
    return [
        Expression(t, c, f"{column} : {term}")
        for t, term in enumerate(terms)
        for c, column in enumerate(index.columns)
    ]


def _in_range(fts: str, n: int) -> str:
    return f"SELECT rowid FROM {fts} WHERE {fts} MATCH :m{n} AND rowid BETWEEN :first AND :last"


@functools.cache
def _count_sql(fts: str, n: int) -> str:
    """For each of `n` expressions: how many of the owner's rows match, counted from the
    newest down and stopping at `:cap`, and the oldest rowid counted (from which the
    count of a common word is estimated)."""
    return " UNION ALL ".join(
        f"SELECT {i} AS expression, count(*) AS found, min(rowid) AS oldest"
        f" FROM ({_in_range(fts, i)} ORDER BY rowid DESC LIMIT :cap)"
        for i in range(n)
    )


@functools.cache
def _rows_sql(fts: str, n: int, newest: bool) -> str:
    """The rows each of `n` expressions matches (with `newest`, the newest
    `:window` of each), with the rows' token counts."""
    window = " ORDER BY rowid DESC LIMIT :window" if newest else ""
    parts = " UNION ALL ".join(
        f"SELECT rowid, {i} AS expression FROM ({_in_range(fts, i)}{window})" for i in range(n)
    )
    return f"""
        SELECT m.rowid, m.expression, d.sz FROM ({parts}) AS m
        JOIN {fts}_docsize AS d ON d.id = m.rowid
    """


@functools.cache
def _all_words_sql(fts: str) -> str:
    """The newest `:window` rows that have every word (`:m0`), with their sizes."""
    return f"""
        SELECT m.rowid, d.sz FROM ({_in_range(fts, 0)} ORDER BY rowid DESC LIMIT :window) AS m
        JOIN {fts}_docsize AS d ON d.id = m.rowid
    """


@functools.cache
def _bounds_sql(index: Index) -> str:
    """The owner's first and last rowid of this kind."""
    table, key = index.table, index.key
    return f"""
        SELECT (SELECT min({key}) FROM {table} WHERE {key} BETWEEN :first AND :last),
               (SELECT max({key}) FROM {table} WHERE {key} BETWEEN :first AND :last)
    """


@functools.cache
def _sample_sql(index: Index) -> str:
    """The sizes of the owner's newest rows."""
    return f"""
        SELECT sz FROM {index.fts}_docsize WHERE id BETWEEN :first AND :last
        ORDER BY id DESC LIMIT {LENGTH_SAMPLE}
    """


def sizes(blob: bytes) -> list[int]:
    """The token count of each column, from an FTS5 docsize entry (SQLite varints)."""
    counts, value = [], 0
    for byte in blob:
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            counts.append(value)
            value = 0
    return counts


@dataclass(frozen=True)
class Stats:
    rows: int
    first: int  # the owner's first rowid of this kind
    last: int  # and last
    average: tuple[float, ...]  # average tokens per column


def _stats(tx: Tx, index: Index, first: int, last: int) -> Stats | None:
    bounds = {"first": first, "last": last}
    low, high = tx.one(_bounds_sql(index), bounds) or (None, None)
    if low is None or high is None:
        return None
    lengths = [sizes(sz) for (sz,) in tx.all(_sample_sql(index), bounds)]
    average = tuple(
        max(1.0, sum(row[c] for row in lengths if len(row) > c) / max(1, len(lengths)))
        for c in range(len(index.columns))
    )
    # Rowids are handed out one after another in the owner's range: the span is the
    # count, but for rows purged since.
    return Stats(rows=high - low + 1, first=low, last=high, average=average)


def _idf(rows: int, found: float) -> float:
    # Lucene's BM25 IDF: never negative, however common the word.
    return math.log(1 + (rows - found + 0.5) / (found + 0.5))


@dataclass(frozen=True)
class Ranked:
    """Rows as (score, rowid), best first, and whether they are the newest windows of a
    query of common words only (a sample: filters may drop most of it)."""

    rows: list[tuple[float, int]]
    sampled: bool = False


def ranked(tx: Tx, index: Index, terms: Sequence[str], owner: int, grown: int = 1) -> Ranked:
    """The owner's rows of `index` that match `terms` (FTS5-quoted words), best first;
    ties go to the newest row. At most about `RANKED_ROWS` rows, or the newest windows
    of a query made only of common words, `grown` times their usual size (-1: all)."""
    if not terms:
        return Ranked([])
    first, last = owner_range(owner)
    stats = _stats(tx, index, first, last)
    if stats is None:
        return Ranked([])
    expressions = _expressions(index, terms)
    bounds: dict[str, Any] = {"first": first, "last": last}
    params = bounds | {f"m{i}": e.match for i, e in enumerate(expressions)}
    counted = tx.all(_count_sql(index.fts, len(expressions)), params | {"cap": RANKED_ROWS + 1})
    found: dict[int, float] = {}  # expression -> rows (estimated when counting stopped)
    for row in counted:
        if row["found"] > RANKED_ROWS:  # the count stopped: estimate from the span counted
            span = stats.last - row["oldest"] + 1
            found[row["expression"]] = min(stats.rows, row["found"] * stats.rows / span)
        elif row["found"]:
            found[row["expression"]] = row["found"]
    if not found:
        return Ranked([])
    # A word's document frequency: its rows over all columns (a few overlap).
    frequency = [0.0] * len(terms)
    for i, rows in found.items():
        frequency[expressions[i].term] += rows
    idf = [_idf(stats.rows, min(stats.rows, f)) if f else 0.0 for f in frequency]

    chosen: list[int] = []
    total = 0.0
    for i in sorted(found, key=found.__getitem__):
        if total + found[i] > RANKED_ROWS:
            break
        chosen.append(i)
        total += found[i]
    scores: dict[int, float] = {}
    norms: dict[int, list[float]] = {}

    def norm(rowid: int, blob: bytes) -> list[float]:
        cached = norms.get(rowid)
        if cached is None:
            lengths = sizes(blob)
            cached = norms[rowid] = [
                weight * (K1 + 1) / (1 + K1 * (1 - B + B * lengths[c] / stats.average[c]))
                if c < len(lengths)
                else 0.0
                for c, weight in enumerate(index.weights)
            ]
        return cached

    def add(rowid: int, expression: Expression, blob: bytes) -> None:
        score = idf[expression.term] * norm(rowid, blob)[expression.column]
        scores[rowid] = scores.get(rowid, 0.0) + score

    if chosen:
        sql = _rows_sql(index.fts, len(chosen), False)
        subset = bounds | {f"m{n}": expressions[i].match for n, i in enumerate(chosen)}
        for rowid, n, blob in tx.all(sql, subset):
            add(rowid, expressions[chosen[n]], blob)
    else:
        present = sorted(found)
        sql = _rows_sql(index.fts, len(present), True)
        subset = bounds | {f"m{n}": expressions[i].match for n, i in enumerate(present)}
        seen: dict[int, set[int]] = {}
        newest = NEWEST_WINDOW * grown if grown > 0 else -1
        for rowid, n, blob in tx.all(sql, subset | {"window": newest}):
            add(rowid, expressions[present[n]], blob)
            seen.setdefault(rowid, set()).add(expressions[present[n]].term)
        words = sorted({expressions[i].term for i in present})
        if len(index.columns) == 1 and len(words) > 1:
            # Rows with every word, where the columns are not told apart.
            every = " AND ".join(terms[t] for t in words)
            window = {"m0": every, "window": EVERY_WORD_WINDOW * grown if grown > 0 else -1}
            rows = tx.all(_all_words_sql(index.fts), bounds | window)
            for rowid, blob in rows:
                missing = [t for t in words if t not in seen.get(rowid, ())]
                scores[rowid] = scores.get(rowid, 0.0) + norm(rowid, blob)[0] * sum(
                    idf[t] for t in missing
                )
    rows = sorted(((score, rowid) for rowid, score in scores.items()), key=_best_first)
    return Ranked(rows, sampled=not chosen)


def _best_first(item: tuple[float, int]) -> tuple[float, int]:
    return (-item[0], -item[1])


GROWTH = (1, 8, 64, -1)  # how a sample of newest rows grows while filters drop most of it


def best_rows(
    tx: Tx,
    index: Index,
    terms: Sequence[str],
    owner: int,
    sql: str,
    params: dict[str, Any],
    wanted: int,
) -> list[tuple[float, sqlite3.Row]]:
    """The best `wanted` rows of `index` matching `terms` that pass the filters of `sql`
    (see `passing`), best first. When they come from the newest windows of common
    words and fewer than half of those pass (another session, an earlier `known_at`),
    the windows grow, at last to every match, so that a filter never hides a match."""
    for grown in GROWTH:
        found = ranked(tx, index, terms, owner, grown)
        rows = passing(tx, found.rows, sql, params, wanted)
        if not found.sampled or len(rows) >= wanted or len(rows) * 2 >= len(found.rows):
            return rows
    return rows


def passing(
    tx: Tx, ranked_rows: Sequence[tuple[float, int]], sql: str, params: dict[str, Any], wanted: int
) -> list[tuple[float, sqlite3.Row]]:
    """The best `wanted` of `ranked_rows` that `sql` returns (it reads the rows of the
    rowids in the JSON list `:rowids` that pass its filters, each with a `rowid`
    column), best first.

    Reading a row is the larger cost (a random page of a large table each), so rows are
    read in chunks, best first, until `wanted` of them pass: the first chunk `wanted`,
    each next one the rows expected to give the missing ones at the rate that passed
    so far, and an eighth more; every remaining row when none has passed."""
    found: list[tuple[float, sqlite3.Row]] = []
    start, size = 0, wanted
    while start < len(ranked_rows) and len(found) < wanted:
        chunk = ranked_rows[start : start + size]
        rowids = json_list(rowid for _, rowid in chunk)
        rows = {row["rowid"]: row for row in tx.all(sql, {**params, "rowids": rowids})}
        found += [(score, rows[rowid]) for score, rowid in chunk if rowid in rows]
        start += len(chunk)
        missing = wanted - len(found)
        size = missing * start // len(found) + missing // 8 + 1 if found else len(ranked_rows)
    return found[:wanted]
