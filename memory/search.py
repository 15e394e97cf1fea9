"""Ranked full-text search: `search_nodes` over the graph and `recall` over turns.

Queries are plain text. They are cut into words and each word is quoted before it
reaches FTS5 `MATCH`, so hyphens, quotes, `AND`/`OR`/`NOT`, `*`, `^` and `:` are
only ever characters to look for, never operators.
"""

from __future__ import annotations

import re
import sqlite3
from collections import defaultdict

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

__all__ = ["fts_query", "ranked_entities", "recall", "search_nodes"]

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


def fts_query(text: str) -> str | None:
    """An FTS5 query matching any word of `text`, or None when it has no words.

    Stop words are dropped unless nothing else is left ("who is it?" still searches).
    """
    words = [word.casefold() for word in _WORD.findall(text)]
    kept = [word for word in words if word not in STOP_WORDS] or words
    terms = list(dict.fromkeys(kept))[:MAX_TERMS]
    if not terms:
        return None
    return " OR ".join(f'"{term}"' for term in terms)


# Search weights: a match on the name says more than one in a fact; relation types
# ("works_at") are short and common, so they count least.
NAME_WEIGHT = 2.0
FACT_WEIGHTS = (1.0, 0.5, 0.25)  # an entity's best three matching facts
RELATION_WEIGHT = 0.5
CANDIDATES = 500

SEARCH_NAMES = f"""
    SELECT 'name' AS kind, e.id AS entity_id, NULL AS other_id,
           bm25(entity_fts, 4.0, 1.0) AS rank
    FROM entity_fts JOIN entity e ON e.id = entity_fts.rowid
    WHERE entity_fts MATCH :match AND {ENTITY_VISIBLE}
    ORDER BY rank LIMIT :candidates
"""


def _search_facts_sql(include_history: bool) -> str:
    return f"""
        SELECT 'fact' AS kind, o.entity_id, NULL AS other_id, bm25(observation_fts) AS rank
        FROM observation_fts JOIN observation o ON o.seq = observation_fts.rowid
        WHERE observation_fts MATCH :match AND o.owner_id = :owner AND o.project IN (:g, :p)
          AND {visible_rows_sql("o", include_history)}
        ORDER BY rank LIMIT :candidates
    """


def _search_relations_sql(include_history: bool) -> str:
    return f"""
        SELECT 'relation' AS kind, r.source_id AS entity_id, r.target_id AS other_id,
               bm25(relation_fts) AS rank
        FROM relation_fts JOIN relation r ON r.seq = relation_fts.rowid
        WHERE relation_fts MATCH :match AND r.owner_id = :owner AND r.project IN (:g, :p)
          AND {visible_rows_sql("r", include_history)}
        ORDER BY rank LIMIT :candidates
    """


def _search_sql(include_history: bool) -> str:
    """Names, facts and relations in one statement (one trip to the database thread)."""
    parts = (
        SEARCH_NAMES,
        _search_facts_sql(include_history),
        _search_relations_sql(include_history),
    )
    return " UNION ALL ".join(f"SELECT * FROM ({part})" for part in parts)


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
) -> list[tuple[sqlite3.Row, float]]:
    """Entities relevant to `query`, best first, with scores normalised to (0, 1]."""
    match = fts_query(query)
    if match is None:
        return []
    params = scope.params(
        owner, match=match, as_of=at.as_of, known_at=at.known_at, candidates=CANDIDATES
    )
    scores: dict[int, float] = defaultdict(float)
    facts: dict[int, list[float]] = defaultdict(list)
    for row in tx.all(_search_sql(include_history), params):
        weight = -row["rank"]
        if row["kind"] == "name":
            scores[row["entity_id"]] += NAME_WEIGHT * weight
        elif row["kind"] == "fact":
            facts[row["entity_id"]].append(weight)
        else:  # a relation: its source is what it says most about
            scores[row["entity_id"]] += RELATION_WEIGHT * weight
            scores[row["other_id"]] += RELATION_WEIGHT / 2 * weight
    for entity_id, weights in facts.items():
        best = sorted(weights, reverse=True)
        scores[entity_id] += sum(w * r for w, r in zip(FACT_WEIGHTS, best, strict=False))
    if not scores:
        return []
    rows = tx.all(SELECT_ENTITIES_BY_ID, {"ids": json_list(scores)})
    if entity_type is not None:
        wanted = match_key(entity_type)
        rows = [row for row in rows if match_key(row["entity_type"]) == wanted]
    rows.sort(key=lambda row: (-scores[row["id"]], -row["changed_at"], -row["id"]))
    if not rows:
        return []
    best_score = scores[rows[0]["id"]]
    return [(row, scores[row["id"]] / best_score) for row in rows]


def search_nodes(tx: Tx, scope: ScopeKey, args: SearchNodesArgs) -> SearchNodesResult:
    at = Moment(
        tx.now if args.as_of is None else args.as_of,
        tx.now if args.known_at is None else args.known_at,
    )
    owner = find_owner(tx, scope)
    if owner is None:
        return SearchNodesResult(hits=[])
    ranked = ranked_entities(
        tx, scope, owner, args.query, at, args.include_history, args.entity_type
    )
    ranked = ranked[: args.limit]
    ids = [row["id"] for row, _ in ranked]
    facts = observations_of(tx, scope, owner, ids, at, args.include_history)
    relations = relations_of(tx, scope, owner, ids, at, args.include_history, touching=True)
    hits = [
        SearchHit(
            entity=EntityInfo(name=row["name"], entity_type=row["entity_type"]),
            score=score,
            observations=facts[row["id"]],
            relations=[r for r in relations if row["name"] in (r.source, r.target)],
        )
        for row, score in ranked
    ]
    return SearchNodesResult(hits=hits)


# Recall ranks turns by BM25, then adds to each turn a share of the scores of the best
# other matching turns of its session: a conversation that keeps coming back to the
# words asked about is more likely the one meant. (Measured on LongMemEval-S dev:
# see bench/longmemeval.py and the README.)
SESSION_SHARE = 0.25
SESSION_TURNS = 3
RECALL_CANDIDATES = 200

RECALL_CANDIDATES_SQL = """
    SELECT t.seq, t.session_id, bm25(turn_fts) AS rank
    FROM turn_fts JOIN turn t ON t.seq = turn_fts.rowid
    WHERE turn_fts MATCH :match AND t.owner_id = :owner AND t.project IN (:g, :p)
      AND (:session_id IS NULL OR t.session_id = :session_id)
      AND (:after IS NULL OR t.at >= :after)
      AND (:before IS NULL OR t.at < :before)
    ORDER BY rank
    LIMIT :candidates
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
    match = fts_query(args.query)
    if owner is None or match is None:
        return RecallResult(turns=[])
    candidates = tx.all(
        RECALL_CANDIDATES_SQL,
        scope.params(
            owner,
            match=match,
            session_id=args.session_id,
            after=args.after,
            before=args.before,
            candidates=RECALL_CANDIDATES,
        ),
    )
    if not candidates:
        return RecallResult(turns=[])
    scores = session_scores([(r["seq"], r["session_id"], -r["rank"]) for r in candidates])
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
