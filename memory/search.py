"""Ranked full-text search: `search_nodes` over the graph and `recall` over turns.

Queries are plain text. They are cut into words and each word is quoted before it
reaches FTS5 `MATCH`, so hyphens, quotes, `AND`/`OR`/`NOT`, `*`, `^` and `:` are
only ever characters to look for, never operators.
"""

from __future__ import annotations

import functools
import re
import sqlite3
from collections import defaultdict
from dataclasses import dataclass

from .models import (
    EntityInfo,
    RecallArgs,
    RecalledTurn,
    RecallResult,
    SearchHit,
    SearchNodesArgs,
    SearchNodesResult,
)
from .names import match_key
from .queries import ENTITY_VISIBLE, ScopeKey, find_owner, observations_of, relations_of
from .store import Tx, json_list
from .temporal import Moment, visible_rows_sql
from .timestamps import format_time

__all__ = ["query_terms", "ranked_entities", "recall", "search_nodes"]

_WORD = re.compile(r"\w+")
MAX_TERMS = 64
# Words that say how a question is asked rather than what it is about.
STOP_WORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for
    from further had has have having he her here hers herself him himself his how i if in
    into is it its itself just me more most my myself no nor not now of off on once only or
    other our ours ourselves out over own same she should so some such than that the their
    theirs them themselves then there these they this those through to too under until up
    very was we were what when where which while who whom why will with would you your
    yours yourself yourselves s t d ll m re ve don didn doesn isn wasn weren won wouldn
    """.split()
)


def query_terms(text: str) -> list[str]:
    """The words of `text`, each quoted for FTS5 `MATCH`, at most `MAX_TERMS`.

    Stop words are dropped unless nothing else is left ("who is it?" still searches).
    """
    words = [word.casefold() for word in _WORD.findall(text)]
    kept = [word for word in words if word not in STOP_WORDS] or words
    return [f'"{term}"' for term in list(dict.fromkeys(kept))[:MAX_TERMS]]


# Ranking costs time for every row a query matches, so ranking every row with a
# common word would make a query's cost grow with the size of memory. A query ranks
# the rows of its rarest words, adding words from rarest up while the rows to rank
# stay within RANKED_ROWS; a more common word left out has a low IDF anyway (Lucene's
# CommonTermsQuery works the same way). When even the rarest word has more rows, the
# query ranks the rows that have all its words, plus the newest NEWEST_WINDOW rows
# that have any. Memories of a few thousand facts are ranked over every word.
RANKED_ROWS = 1_000
NEWEST_WINDOW = 200


@functools.cache
def count_rows_sql(table: str, terms: int) -> str:
    """One statement counting the rows of each of `terms` words (`?1`, `?2`, ...) in
    `table`, each count stopping at the last parameter: one call, not one per word."""
    count = "(SELECT count(*) FROM (SELECT 1 FROM {t} WHERE {t} MATCH ?{n} LIMIT ?{cap}))"
    cap = terms + 1
    return "SELECT " + ", ".join(count.format(t=table, n=n, cap=cap) for n in range(1, terms + 1))


@dataclass(frozen=True)
class Match:
    """One FTS5 query to run: its expression, and whether it ranks only the newest rows."""

    expression: str
    newest: bool = False
    bounded: bool = False  # matches at most RANKED_ROWS rows: rank them all at once
    rows: int = 0  # of a bounded query: at most this many rows match


def plan_matches(tx: Tx, table: str, terms: list[str]) -> list[Match]:
    """The queries that rank `terms` on `table` in bounded time (see RANKED_ROWS)."""
    # counting stops past RANKED_ROWS: only "more" matters
    found = tx.one(count_rows_sql(table, len(terms)), (*terms, RANKED_ROWS + 1))
    counts = dict(zip(terms, found, strict=True))
    present = sorted((term for term in terms if counts[term]), key=counts.__getitem__)
    if not present:
        return []
    chosen, rows = [], 0
    for term in present:
        if rows + counts[term] > RANKED_ROWS:
            break
        chosen.append(term)
        rows += counts[term]
    if chosen:
        return [Match(" OR ".join(chosen), bounded=True, rows=rows)]
    if len(present) == 1:
        return [Match(present[0], newest=True)]
    return [Match(" AND ".join(present)), Match(" OR ".join(present), newest=True)]


# Each query ranks in two steps: the FTS index alone ranks its matches and keeps the
# best `:window` rowids (the CTE), and only those are joined to their table for the
# scope and time filters. Joining every match costs a row lookup each, most of it
# for rows that would not make the cut. The join is a LEFT JOIN with the filters in
# its ON clause, so every row of the window comes back, with NULLs where the filters
# drop it: that says both which rows pass and whether the index had more. While
# fewer than `:candidates` rows pass the filters (another user's, closed or
# filtered-out rows), the window grows, and at last takes every match, so a filter
# never hides a match that the full ranking would have found. (The newest-rows
# window of a query of common words is a sample anyway: it grows only while fewer
# than half its rows pass.)
def _windows(first: int) -> tuple[int, ...]:
    return (first, first * 8, first * 64, -1)  # -1: no limit


def _order(match: Match) -> str:
    # Ties go to the newest row, as the entities' final order does.
    return "ORDER BY rowid DESC" if match.newest else "ORDER BY rank, rowid DESC"


@dataclass(frozen=True)
class Whole:
    """How a bounded query is ranked once, whole: `rank` ranks every match in the
    FTS index alone, best first, and `rows` reads the rows of the `:rowids` among
    them that pass the scope and time filters."""

    rank: str
    rows: str


# A bounded query is ranked whole anyway (ordering a window needs every match's
# rank). When it has more rows than `:candidates`, with a `Whole` its ranks come to
# Python once, and only the best rows are read from their table, in chunks, until
# `:candidates` of them pass the filters: a row read is the larger cost (a random
# page of a large table each), and a window grown by re-ranking would rank every
# match again. With fewer rows, all of them are ranked and read in one statement
# (`sql` with no window), since the first chunk would hold them all. Search's three
# indexes use it; recall keeps its windows.
def _bounded_rows(
    tx: Tx, whole: Whole, sql: str, match: Match, params: dict
) -> list[tuple[float, sqlite3.Row]]:
    """The best rows of `match` that pass the filters, best first, at most
    `:candidates`."""
    wanted = params["candidates"]
    if match.rows <= wanted:
        statement = sql.format(order=_order(match))
        rows = tx.all(statement, {**params, "match": match.expression, "window": -1})
        return sorted(
            ((row["rank"], row) for row in rows if row["rowid"] is not None),
            key=lambda item: item[0],
        )[:wanted]
    ranked = tx.all(whole.rank, {"match": match.expression})
    found: list[tuple[float, sqlite3.Row]] = []
    start, size = 0, wanted
    while start < len(ranked) and len(found) < wanted:
        chunk = ranked[start : start + size]
        rowids = json_list(rowid for rowid, _ in chunk)
        rows = {row["rowid"]: row for row in tx.all(whole.rows, {**params, "rowids": rowids})}
        found += [(rank, rows[rowid]) for rowid, rank in chunk if rowid in rows]
        start += len(chunk)
        # Next, the rows expected to give the missing ones at the rate that passed so
        # far, and an eighth more; every remaining row when none has passed.
        missing = wanted - len(found)
        size = missing * start // len(found) + missing // 8 + 1 if found else len(ranked)
    return found[:wanted]


def _ranked_rows(
    tx: Tx, table: str, terms: list[str], sql: str, params: dict, whole: Whole | None = None
) -> list[tuple[float, sqlite3.Row]]:
    """(rank, row) of the rows of `sql` (which ranks `table` by `:match`, ordered by
    `{order}` and cut to `:window`) for each planned query, once each, best first, at
    most `:candidates`. The first window is `:candidates` (the newest window for a
    query of common words only, which grows while the filters drop more than half of
    it). With `whole`, a bounded query is ranked once instead (`_bounded_rows`)."""
    rows: dict[int, tuple[float, sqlite3.Row]] = {}
    for match in plan_matches(tx, table, terms):
        if whole is not None and match.bounded:  # the plan's only query
            return _bounded_rows(tx, whole, sql, match, params)
        statement = sql.format(order=_order(match))
        first = min(NEWEST_WINDOW, params["candidates"]) if match.newest else params["candidates"]
        for window in _windows(first):
            window_rows = tx.all(statement, {**params, "match": match.expression, "window": window})
            found = [row for row in window_rows if row["rowid"] is not None]
            enough = len(found) * 2 >= window if match.newest else len(found) >= first
            if enough or window < 0 or len(window_rows) < window:
                break  # enough rows passed the filters, or the index has no more matches
        for row in found:
            rows.setdefault(row["rowid"], (row["rank"], row))
    return sorted(rows.values(), key=lambda item: item[0])[: params["candidates"]]


def _ranked(fts: str, rank: str) -> str:
    """The CTE of an FTS index's best `:window` matches, named `ranked`."""
    return f"""
        WITH ranked AS MATERIALIZED (
            SELECT rowid, {rank} AS rank FROM {fts} WHERE {fts} MATCH :match
            {{order}} LIMIT :window
        )
    """


def _rank_all(fts: str, rank: str) -> str:
    """Every match of an FTS index with its rank, best first, in the windows' order."""
    return f"""
        SELECT rowid, {rank} AS rank FROM {fts} WHERE {fts} MATCH :match
        ORDER BY rank, rowid DESC
    """


# Search weights: a match on the name says more than one in a fact; relation types
# ("works_at") are short and common, so they count least.
NAME_WEIGHT = 2.0
FACT_WEIGHTS = (1.0, 0.5, 0.25)  # an entity's best three matching facts
RELATION_WEIGHT = 0.5

# Ranked rows kept per table. An entity's score adds up its best facts, so one with
# several middling facts can outrank the entities of the best few hundred rows: a
# cut at 200 rows lost such an entity from a 10-hit search (found in review), so
# every search keeps 500, and `limit` 50 with its best facts needs no more.
CANDIDATES = 500

NAMES_RANK = "bm25(entity_fts, 4.0, 1.0)"
SEARCH_NAMES = f"""
    {_ranked("entity_fts", NAMES_RANK)}
    SELECT e.id AS rowid, e.id AS entity_id, ranked.rank
    FROM ranked LEFT JOIN entity e ON e.id = ranked.rowid AND {ENTITY_VISIBLE}
"""
# The rows of `:rowids` are read in the order json_each gives them (CROSS JOIN): a
# lookup by rowid each, never a scan of the user's rows.
NAMES_WHOLE = Whole(
    rank=_rank_all("entity_fts", NAMES_RANK),
    rows=f"""
        SELECT e.id AS rowid, e.id AS entity_id
        FROM json_each(:rowids) AS j CROSS JOIN entity e ON e.id = j.value
        WHERE {ENTITY_VISIBLE}
    """,
)


def _search_facts_sql(include_history: bool) -> str:
    return f"""
        {_ranked("observation_fts", "bm25(observation_fts)")}
        SELECT o.seq AS rowid, o.entity_id, ranked.rank
        FROM ranked LEFT JOIN observation o ON o.seq = ranked.rowid
          AND o.owner_id = :owner AND o.project IN (:g, :p)
          AND {visible_rows_sql("o", include_history)}
    """


@functools.cache
def facts_whole(include_history: bool) -> Whole:
    return Whole(
        rank=_rank_all("observation_fts", "bm25(observation_fts)"),
        rows=f"""
            SELECT o.seq AS rowid, o.entity_id
            FROM json_each(:rowids) AS j CROSS JOIN observation o ON o.seq = j.value
            WHERE o.owner_id = :owner AND o.project IN (:g, :p)
              AND {visible_rows_sql("o", include_history)}
        """,
    )


def _search_relations_sql(include_history: bool) -> str:
    return f"""
        {_ranked("relation_fts", "bm25(relation_fts)")}
        SELECT r.seq AS rowid, r.source_id AS entity_id, r.target_id AS other_id,
               ranked.rank
        FROM ranked LEFT JOIN relation r ON r.seq = ranked.rowid
          AND r.owner_id = :owner AND r.project IN (:g, :p)
          AND {visible_rows_sql("r", include_history)}
    """


@functools.cache
def relations_whole(include_history: bool) -> Whole:
    return Whole(
        rank=_rank_all("relation_fts", "bm25(relation_fts)"),
        rows=f"""
            SELECT r.seq AS rowid, r.source_id AS entity_id, r.target_id AS other_id
            FROM json_each(:rowids) AS j CROSS JOIN relation r ON r.seq = j.value
            WHERE r.owner_id = :owner AND r.project IN (:g, :p)
              AND {visible_rows_sql("r", include_history)}
        """,
    )


SELECT_ENTITIES_BY_ID = """
    SELECT * FROM entity WHERE id IN (SELECT value FROM json_each(:ids))
"""


def ranked_entities(
    tx: Tx,
    scope: ScopeKey,
    owner: int,
    query: str,
    at: Moment,
    include_history: bool,
    entity_type: str | None = None,
    limit: int | None = None,
) -> list[tuple[sqlite3.Row, float]]:
    """Entities relevant to `query`, best first, with scores normalised to (0, 1]; the
    best `limit` of them (and any tied with the last), or all when `limit` is None."""
    terms = query_terms(query)
    if not terms:
        return []
    params = scope.params(owner, as_of=at.as_of, known_at=at.known_at, candidates=CANDIDATES)
    scores: dict[int, float] = defaultdict(float)
    for rank, row in _ranked_rows(tx, "entity_fts", terms, SEARCH_NAMES, params, NAMES_WHOLE):
        scores[row["entity_id"]] += NAME_WEIGHT * -rank
    facts: dict[int, list[float]] = defaultdict(list)
    sql, whole = _search_facts_sql(include_history), facts_whole(include_history)
    for rank, row in _ranked_rows(tx, "observation_fts", terms, sql, params, whole):
        facts[row["entity_id"]].append(-rank)  # best first
    for entity_id, best in facts.items():
        # Most entities have one matching fact: the same sum, without the generator.
        if len(best) == 1:
            scores[entity_id] += FACT_WEIGHTS[0] * best[0]
        else:
            scores[entity_id] += sum(w * r for w, r in zip(FACT_WEIGHTS, best, strict=False))
    sql, whole = _search_relations_sql(include_history), relations_whole(include_history)
    for rank, row in _ranked_rows(tx, "relation_fts", terms, sql, params, whole):
        # a relation says most about its source
        scores[row["entity_id"]] += RELATION_WEIGHT * -rank
        scores[row["other_id"]] += RELATION_WEIGHT / 2 * -rank
    if not scores:
        return []
    ids = list(scores)
    if limit is not None and entity_type is None and len(ids) > limit:
        # Only the best `limit` need their rows (ties on the score go by changed_at).
        cut = sorted(scores.values(), reverse=True)[limit - 1]
        ids = [entity_id for entity_id in ids if scores[entity_id] >= cut]
    rows = tx.all(SELECT_ENTITIES_BY_ID, {"ids": json_list(ids)})
    if entity_type is not None:
        wanted = match_key(entity_type)
        rows = [row for row in rows if match_key(row["entity_type"]) == wanted]
    rows.sort(key=lambda row: (-scores[row["id"]], -row["changed_at"], -row["id"]))
    if not rows:
        return []
    best_score = scores[rows[0]["id"]]
    return [(row, scores[row["id"]] / best_score) for row in rows[:limit]]


def search_nodes(tx: Tx, scope: ScopeKey, args: SearchNodesArgs) -> SearchNodesResult:
    at = Moment(
        tx.now if args.as_of is None else args.as_of,
        tx.now if args.known_at is None else args.known_at,
    )
    owner = find_owner(tx, scope)
    if owner is None:
        return SearchNodesResult(hits=[])
    ranked = ranked_entities(
        tx, scope, owner, args.query, at, args.include_history, args.entity_type, args.limit
    )
    ids = [row["id"] for row, _ in ranked]
    facts = observations_of(tx, scope, owner, ids, at, args.include_history)
    relations = relations_of(tx, scope, owner, ids, at, args.include_history, touching=True)
    hits = []
    for row, score in ranked:
        touching = [r for r in relations if row["name"] in (r.source, r.target)]
        hits.append(
            SearchHit(
                entity=EntityInfo(name=row["name"], entity_type=row["entity_type"]),
                score=score,
                observations=facts[row["id"]][: args.facts_per_hit],
                relations=touching[: args.facts_per_hit],
                more_observations=max(0, len(facts[row["id"]]) - args.facts_per_hit),
                more_relations=max(0, len(touching) - args.facts_per_hit),
            )
        )
    return SearchNodesResult(hits=hits)


# Recall ranks turns by BM25, then adds to each turn a share of the scores of the best
# other matching turns of its session: a conversation that keeps coming back to the
# words asked about is more likely the one meant. (Measured on LongMemEval-S dev:
# see bench/longmemeval.py and the README.)
SESSION_SHARE = 0.25
SESSION_TURNS = 3
RECALL_CANDIDATES = 200

RECALL_CANDIDATES_SQL = f"""
    {_ranked("turn_fts", "bm25(turn_fts)")}
    SELECT t.seq AS rowid, t.session_id, ranked.rank
    FROM ranked LEFT JOIN turn t ON t.seq = ranked.rowid
      AND t.owner_id = :owner AND t.project IN (:g, :p)
      AND (:session_id IS NULL OR t.session_id = :session_id)
      AND (:after IS NULL OR t.at >= :after)
      AND (:before IS NULL OR t.at < :before)
"""
SELECT_TURNS = "SELECT * FROM turn WHERE seq IN (SELECT value FROM json_each(:seqs))"


def session_scores(candidates: list[tuple[int, str, float]]) -> dict[int, float]:
    """Each candidate turn's score: its own BM25 plus `SESSION_SHARE` of the best
    `SESSION_TURNS` other candidates of its session. Input: (seq, session, bm25 > 0)."""
    by_session: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for seq, session_id, score in candidates:
        by_session[session_id].append((score, seq))
    for turns in by_session.values():
        turns.sort(reverse=True)
    scores = {}
    for seq, session_id, score in candidates:
        others = [s for s, other in by_session[session_id] if other != seq][:SESSION_TURNS]
        scores[seq] = score + SESSION_SHARE * sum(others)
    return scores


def recall(tx: Tx, scope: ScopeKey, args: RecallArgs) -> RecallResult:
    owner = find_owner(tx, scope)
    terms = query_terms(args.query)
    if owner is None or not terms:
        return RecallResult(turns=[])
    params = scope.params(
        owner,
        session_id=args.session_id,
        after=args.after,
        before=args.before,
        candidates=RECALL_CANDIDATES,
    )
    candidates = _ranked_rows(tx, "turn_fts", terms, RECALL_CANDIDATES_SQL, params)
    if not candidates:
        return RecallResult(turns=[])
    scores = session_scores([(r["rowid"], r["session_id"], -rank) for rank, r in candidates])
    top = sorted(scores, key=lambda seq: (-scores[seq], -seq))[: args.limit]
    rows = {r["seq"]: r for r in tx.all(SELECT_TURNS, {"seqs": json_list(top)})}
    best = scores[top[0]]
    return RecallResult(
        turns=[
            RecalledTurn(
                id=rows[seq]["id"],
                session_id=rows[seq]["session_id"],
                role=rows[seq]["role"],
                text=rows[seq]["text"],
                at=format_time(rows[seq]["at"]),
                score=scores[seq] / best,
            )
            for seq in top
        ]
    )
