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

The ranking is the context's own as well (DESIGN §2, "A project is an overlay"): the
statistics are those of the rows the context sees (global and its project), and when
the user has rows in other projects, every FTS5 query keeps only the context's rows
(a lookup of each match's row), so nothing stored in another project moves a score.

A query ranks the rows of its rarest words, adding words from the rarest up while at
most `SearchSettings.ranked_rows` rows are to be ranked; a word left out is common in
this memory and weighs little, and adds nothing to the score (after Lucene's
CommonTermsQuery, which would still score it on the rare words' rows). When every word
is more common than that, the newest rows that have all of them (`every_word_window`),
and the newest of each (`newest_window`), are ranked.
"""

from __future__ import annotations

import functools
import math
import sqlite3
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .schema import ROWIDS, TOKENS_FUNCTION, owner_range, token_counts
from .store import Tx, json_list

__all__ = ["INDEXES", "Index", "Ranked", "best_rows", "passing", "ranked"]

# BM25's constants, chosen on the development splits (LoCoMo turns, LongMemEval-S):
# with each row matching a word once, a lighter length norm than the usual 0.75
# ranked turns better, and facts no worse (bench/locomo.py, bench/longmemeval.py).
K1 = 1.2
B = 0.4
IDF_FLOOR = 1e-6


def lucene_idf(rows: int, found: float) -> float:
    """Lucene's BM25 IDF: a common word still weighs a little (the name of the person
    most facts are about helps find the facts about them)."""
    return math.log(1 + (rows - found + 0.5) / (found + 0.5))


def robertson_idf(rows: int, found: float) -> float:
    """FTS5's (Robertson-Sparck Jones) IDF: a word in half the rows or more weighs next
    to nothing (a floor, not a negative weight): in conversation, such words are the
    talk, not its subject."""
    return max(IDF_FLOOR, math.log((rows - found + 0.5) / (found + 0.5)))


@dataclass(frozen=True)
class Index:
    """A full-text index over one kind of row: its columns and how much each weighs."""

    kind: str
    fts: str
    columns: tuple[str, ...]
    weights: tuple[float, ...]
    idf: Callable[[int, float], float]
    # The rows a context (`:p`, global and that project) sees, of table `t`: a fact,
    # relation or turn by its project; an entity also by its facts and relations.
    in_context: str = "t.project IN ('', :p)"


ENTITY_IN_CONTEXT = """(
    t.project IN ('', :p)
    OR EXISTS (SELECT 1 FROM observation o WHERE o.entity_id = t.id AND o.project IN ('', :p))
    OR EXISTS (SELECT 1 FROM relation r WHERE r.source_id = t.id AND r.project IN ('', :p))
    OR EXISTS (SELECT 1 FROM relation r WHERE r.target_id = t.id AND r.project IN ('', :p))
)"""


# Each IDF was chosen on the development splits: the graph's by LoCoMo's facts, the
# turns' by LoCoMo's turns and LongMemEval-S (bench/locomo.py, bench/longmemeval.py).
INDEXES = {
    # A word in an entity's name says far more than one in its type ("person").
    "entity": Index(
        "entity", "entity_fts", ("name", "entity_type"), (4.0, 1.0), lucene_idf, ENTITY_IN_CONTEXT
    ),
    "observation": Index("observation", "observation_fts", ("text",), (1.0,), lucene_idf),
    "relation": Index("relation", "relation_fts", ("relation",), (1.0,), lucene_idf),
    "turn": Index("turn", "turn_fts", ("text",), (1.0,), robertson_idf),
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


def _in_range(index: Index, n: int, scoped: bool) -> str:
    """The owner's rows expression `:m{n}` matches; `scoped`: only those the context
    sees."""
    fts = index.fts
    if not scoped:
        return f"SELECT rowid FROM {fts} WHERE {fts} MATCH :m{n} AND rowid BETWEEN :first AND :last"
    return (
        f"SELECT {fts}.rowid AS rowid FROM {fts}"
        f" JOIN {index.kind} t ON t.{ROWIDS[index.kind]} = {fts}.rowid"
        f" WHERE {fts} MATCH :m{n} AND {fts}.rowid BETWEEN :first AND :last"
        f" AND {index.in_context}"
    )


@functools.cache
def count_sql(index: Index, n: int, scoped: bool) -> str:
    """For each of `n` expressions: how many of the owner's rows match, counted from the
    newest down and stopping at `:cap`, and the oldest and newest rowid counted (from
    which the count of a common word is estimated)."""
    return " UNION ALL ".join(
        f"SELECT {i}, count(*), min(rowid), max(rowid)"
        f" FROM ({_in_range(index, i, scoped)} ORDER BY rowid DESC LIMIT :cap)"
        for i in range(n)
    )


@functools.cache
def newest_sql(index: Index, n: int, scoped: bool) -> str:
    """The newest `:window` rows each of `n` expressions matches, with their sizes."""
    parts = " UNION ALL ".join(
        f"SELECT rowid, {i} AS expression FROM"
        f" ({_in_range(index, i, scoped)} ORDER BY rowid DESC LIMIT :window)"
        for i in range(n)
    )
    return f"""
        SELECT m.rowid, m.expression, d.sz FROM ({parts}) AS m
        JOIN {index.fts}_docsize AS d ON d.id = m.rowid
    """


def _norm(column: int, columns: int) -> str:
    """A column's BM25 length norm, from the row's docsize entry `d.sz` (of an index
    of `columns` columns). When every count is under 128, each is one byte of it:
    read in SQL, without a call of the Python function."""
    byte = f"coalesce(unicode(substr(d.sz, {column + 1}, 1)), 0)"
    tokens = (
        f"CASE WHEN length(d.sz) = {columns} THEN {byte} ELSE {TOKENS_FUNCTION}(d.sz, {column}) END"
    )
    return f":top{column} / (:base + :slope{column} * {tokens})"


@functools.cache
def scored_sql(index: Index, columns: tuple[int, ...], scoped: bool) -> str:
    """The owner's rows that expressions `:m0`, `:m1`, ... match (in the columns
    `columns` gives), each scored by SQLite: every expression that matches it adds its
    weight (`:w0`, ...) times its column's length norm. Best first, ties to the newest."""
    fts, width = index.fts, len(index.columns)
    parts = " UNION ALL ".join(
        f"SELECT rowid, :w{n} AS w, {column} AS c FROM ({_in_range(index, n, scoped)})"
        for n, column in enumerate(columns)
    )
    used = sorted(set(columns))
    if len(used) == 1:  # d.sz is the same for every row of a group
        score = f"sum(m.w) * {_norm(used[0], width)}"
    else:
        cases = " ".join(f"WHEN {column} THEN {_norm(column, width)}" for column in used)
        score = f"sum(m.w * CASE m.c {cases} END)"
    return f"""
        SELECT {score} AS score, m.rowid FROM ({parts}) AS m
        JOIN {fts}_docsize AS d ON d.id = m.rowid
        GROUP BY m.rowid ORDER BY score DESC, m.rowid DESC
    """


@functools.cache
def all_words_sql(index: Index, scoped: bool) -> str:
    """The newest `:window` rows that have every word (`:m0`), with their sizes."""
    newest = f"{_in_range(index, 0, scoped)} ORDER BY rowid DESC LIMIT :window"
    return f"""
        SELECT m.rowid, d.sz FROM ({newest}) AS m
        JOIN {index.fts}_docsize AS d ON d.id = m.rowid
    """


# The context's statistics (global and `:p`), and whether the user has rows elsewhere.
STATS = """
    SELECT sum(rows) AS rows, sum(tokens_0) AS tokens_0, sum(tokens_1) AS tokens_1,
           (SELECT count(*) FROM fts_stats WHERE owner_id = :owner AND kind = :kind
              AND project NOT IN ('', :p) AND rows > 0) AS elsewhere
    FROM fts_stats WHERE owner_id = :owner AND kind = :kind AND project IN ('', :p)
"""


@dataclass(frozen=True)
class Stats:
    """One owner's statistics of one index (`schema.ADD_FTS_STATS` keeps them)."""

    rows: int
    average: tuple[float, ...]  # tokens per row in each column
    scoped: bool  # the user has rows the context does not see: queries keep its own


def _stats(tx: Tx, owner: int, project: str, kind: str, columns: int) -> Stats | None:
    row = tx.one(STATS, {"owner": owner, "kind": kind, "p": project})
    if row is None or not row["rows"]:
        return None
    tokens = (row["tokens_0"], row["tokens_1"])[:columns]
    average = tuple(max(1.0, total / row["rows"]) for total in tokens)
    return Stats(row["rows"], average, bool(row["elsewhere"]))


@dataclass(frozen=True)
class Ranked:
    """Rows as (score, rowid), best first, and whether they are only part of the
    matches: a query's common words were left out, or only their newest rows taken
    (filters may then drop most of what was ranked, and the rest is still there)."""

    rows: list[tuple[float, int]]
    partial: bool = False
    sampled: bool = False  # only the newest rows of common words: no rare word at all


class _Scores:
    """BM25 of each row, summed over the expressions that matched it. A row matches a
    word once (a fact is one statement), so a column's part is the word's IDF times
    the column's weight and length norm."""

    def __init__(self, index: Index, stats: Stats) -> None:
        self.scores: dict[int, float] = {}
        self._norms: dict[int, list[float]] = {}
        # norm = weight * (K1 + 1) / (1 + K1 * (1 - B + B * length / average))
        self._columns = [
            (weight * (K1 + 1), 1 + K1 * (1 - B), K1 * B / average)
            for weight, average in zip(index.weights, stats.average, strict=True)
        ]

    def add(self, rowid: int, column: int, idf: float, sz: bytes) -> None:
        norms = self._norms.get(rowid)
        if norms is None:
            lengths = token_counts(sz)
            norms = self._norms[rowid] = [
                top / (base + slope * lengths[c]) if c < len(lengths) else 0.0
                for c, (top, base, slope) in enumerate(self._columns)
            ]
        self.scores[rowid] = self.scores.get(rowid, 0.0) + idf * norms[column]

    def best_first(self) -> list[tuple[float, int]]:
        rows = [(score, rowid) for rowid, score in self.scores.items()]
        rows.sort(reverse=True)  # ties: the larger rowid, the newer row, first
        return rows


def ranked(
    tx: Tx, index: Index, terms: Sequence[str], owner: int, project: str, grown: int = 1
) -> Ranked:
    """The rows of `index` of the owner seen from `project` ('' global) that match
    `terms` (FTS5-quoted words), best first;
    ties go to the newest row. At most about `tx.search.ranked_rows` rows of the rarest words,
    or the newest windows of a query made only of common words, `grown` times their
    usual size (-1: all). Grown, a query's common words left out add their newest
    windows too (filters dropped the rare words' rows)."""
    stats = _stats(tx, owner, project, index.kind, len(index.columns)) if terms else None
    if stats is None:
        return Ranked([])
    first, last = owner_range(owner)
    expressions = _expressions(index, terms)
    bounds: dict[str, Any] = {"first": first, "last": last, "p": project}
    params = bounds | {f"m{i}": e.match for i, e in enumerate(expressions)}
    counting = count_sql(index, len(expressions), stats.scoped)
    budget = tx.search.ranked_rows
    counted = tx.tuples(counting, params | {"cap": budget + 1})
    found: dict[int, float] = {}  # expression -> rows (estimated when counting stopped)
    for i, rows, oldest, newest in counted:
        if rows > budget:  # counting stopped: estimate from the rowids it spanned
            found[i] = min(stats.rows, rows * stats.rows / (newest - oldest + 1))
        elif rows:
            found[i] = rows
    if not found:
        return Ranked([])
    # A word's document frequency: its rows over all columns (a few may overlap).
    frequency = [0.0] * len(terms)
    for i, rows in found.items():
        frequency[expressions[i].term] += rows
    idf = [index.idf(stats.rows, min(stats.rows, f)) for f in frequency]

    chosen: list[int] = []
    total = 0.0
    for i in sorted(found, key=found.__getitem__):
        if total + found[i] > budget:
            break
        chosen.append(i)
        total += found[i]
    left_out = [i for i in sorted(found) if i not in chosen]
    if not chosen:
        newest = _newest(tx, index, stats, bounds, terms, expressions, left_out, idf, grown)
        return Ranked(newest, partial=grown != -1, sampled=grown != -1)
    chosen.sort(key=lambda i: expressions[i].column)  # one statement per column pattern
    columns = tuple(expressions[i].column for i in chosen)
    scoring = bounds | _norm_params(index, stats)
    for n, i in enumerate(chosen):
        scoring |= {f"m{n}": expressions[i].match, f"w{n}": idf[expressions[i].term]}
    rows = tx.tuples(scored_sql(index, columns, stats.scoped), scoring)
    if grown == 1 or not left_out:
        return Ranked(rows, partial=bool(left_out))
    scores = dict((rowid, score) for score, rowid in rows)
    more = _newest(tx, index, stats, bounds, terms, expressions, left_out, idf, grown)
    for score, rowid in more:
        scores[rowid] = scores.get(rowid, 0.0) + score
    merged = sorted(((score, rowid) for rowid, score in scores.items()), reverse=True)
    return Ranked(merged, partial=grown != -1)


def _norm_params(index: Index, stats: Stats) -> dict[str, float]:
    params = {"base": 1 + K1 * (1 - B)}
    for c, (weight, average) in enumerate(zip(index.weights, stats.average, strict=True)):
        params[f"top{c}"] = weight * (K1 + 1)
        params[f"slope{c}"] = K1 * B / average
    return params


def _newest(
    tx: Tx,
    index: Index,
    stats: Stats,
    bounds: dict[str, Any],
    terms: Sequence[str],
    expressions: list[Expression],
    taken: list[int],
    idf: list[float],
    grown: int,
) -> list[tuple[float, int]]:
    """The newest rows of each of the `taken` expressions (common words), and the newest
    rows with every one of their words, scored here (a row may come from several)."""
    scores = _Scores(index, stats)
    sql = newest_sql(index, len(taken), stats.scoped)
    subset = bounds | {f"m{n}": expressions[i].match for n, i in enumerate(taken)}
    newest = tx.search.newest_window * grown if grown > 0 else -1
    seen: dict[int, set[int]] = defaultdict(set)
    for rowid, n, sz in tx.tuples(sql, subset | {"window": newest}):
        expression = expressions[taken[n]]
        scores.add(rowid, expression.column, idf[expression.term], sz)
        seen[rowid].add(expression.term)
    words = sorted({expressions[i].term for i in taken})
    if len(index.columns) == 1 and len(words) > 1:
        # The newest rows with every word, beyond each word's own newest window (one
        # column only: the columns of a match are not told apart).
        every = {"m0": " AND ".join(terms[t] for t in words)}
        window = {"window": tx.search.every_word_window * grown if grown > 0 else -1}
        for rowid, sz in tx.tuples(all_words_sql(index, stats.scoped), bounds | every | window):
            for t in words:
                if t not in seen[rowid]:
                    scores.add(rowid, 0, idf[t], sz)
    return scores.best_first()


GROWTH = (1, 8, 64, -1)  # how the windows of common words grow while too few rows pass


def best_rows(
    tx: Tx,
    index: Index,
    terms: Sequence[str],
    owner: int,
    sql: str,
    params: dict[str, Any],
    wanted: int,
    enough: Callable[[list[tuple[float, sqlite3.Row]]], bool] | None = None,
) -> list[tuple[float, sqlite3.Row]]:
    """The best `wanted` rows of `index` matching `terms` that pass the filters of `sql`
    (see `passing`; `params` holds its parameters, the context's project `p` among
    them, by which the rows are ranked), best first. When the ranking was partial
    (common words left out, or only their newest rows taken) and fewer than half of
    its rows pass the filters (another project, session or time), or, for a query of
    common words only, `enough` says the rows are too few (too few entities among
    them), the common words' windows grow, at last to every match: a filter never
    hides a match."""
    rows: list[tuple[float, sqlite3.Row]] = []
    for grown in GROWTH:
        found = ranked(tx, index, terms, owner, params["p"], grown)
        rows = passing(tx, found.rows, sql, params, wanted)
        if not found.partial or len(rows) >= wanted:
            return rows
        if len(rows) * 2 >= len(found.rows) and (
            enough is None or not found.sampled or enough(rows)
        ):
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
