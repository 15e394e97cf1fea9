"""Ranked search: `search_nodes` over the graph and `recall` over turns.

Queries are plain text. They are cut into words as stored texts are (`words`) and
each word is quoted before it reaches FTS5 `MATCH`, so hyphens, quotes,
`AND`/`OR`/`NOT`, `*`, `^` and `:` are only ever characters to look for, never
operators. Rows are ranked by `ranking`,
over the scope's owner's rows alone.

A search answers the question (DESIGN §3): each hit carries the entity's facts that
best answer it, best first, and the relations touching it that match, each list
bounded by `facts_per_hit`, with counts of what was left out.
"""

from __future__ import annotations

import functools
import sqlite3
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from .entity_life import NOT_DELETED, types_then
from .fusion import fused
from .models import (
    EntityInfo,
    Observation,
    RecallArgs,
    RecalledTurn,
    RecallResult,
    Relation,
    SearchHit,
    SearchNodesArgs,
    SearchNodesResult,
)
from .names import match_key
from .overlay import SEEN
from .queries import ENTITY_VISIBLE, RELATION_COLUMNS, ScopeKey, find_owner
from .ranking import INDEXES, best_rows
from .store import Tx, json_list
from .temporal import Moment, observation_view, relation_view, visible_rows_sql
from .timestamps import format_time
from .words import query_terms

__all__ = ["Found", "find_entities", "query_terms", "recall", "search_nodes"]

# Search weights: a match on the name says more than one in a fact; relation types
# ("works_at") are short and common, so they count least.
NAME_WEIGHT = 2.0
FACT_WEIGHTS = (1.0, 0.5, 0.25)  # an entity's best three matching facts
RELATION_WEIGHT = 0.5

# With a type filter, every ranked row is kept (`SearchSettings.candidates` otherwise).
TYPED_CANDIDATES = 1_000_000  # every ranked row (a few thousand at most)

# Each reads the rows of the rowids in `:rowids` that the read sees, in the order
# json_each gives them (CROSS JOIN): a lookup by rowid each, never a scan.
NAME_ROWS = f"""
    SELECT e.id AS rowid FROM json_each(:rowids) AS j CROSS JOIN entity e ON e.id = j.value
    WHERE {ENTITY_VISIBLE}
"""


def _fact_rows(include_history: bool) -> str:
    return f"""
        SELECT o.seq AS rowid, o.entity_id
        FROM json_each(:rowids) AS j CROSS JOIN {SEEN["observation"]} o ON o.seq = j.value
        WHERE o.owner_id = :owner AND o.project IN (:g, :p)
          AND {visible_rows_sql("o", include_history)}
    """


def _relation_rows(include_history: bool) -> str:
    return f"""
        SELECT r.seq AS rowid, r.source_id, r.target_id
        FROM json_each(:rowids) AS j CROSS JOIN {SEEN["relation"]} r ON r.seq = j.value
        WHERE r.owner_id = :owner AND r.project IN (:g, :p)
          AND {visible_rows_sql("r", include_history)}
    """


FACT_ROWS = {history: _fact_rows(history) for history in (False, True)}
RELATION_ROWS = {history: _relation_rows(history) for history in (False, True)}
SELECT_ENTITIES_BY_ID = f"""
    SELECT e.* FROM {SEEN["entity"]} e
    WHERE e.id IN (SELECT value FROM json_each(:ids)) AND {NOT_DELETED}
"""


@dataclass
class Found:
    """An entity a search found, and what matched in it, best first."""

    id: int
    score: float = 0.0
    name: float = 0.0  # how well its name and type match
    facts: list[tuple[float, int]] = field(default_factory=list)  # (score, seq)
    relations: list[tuple[float, int]] = field(default_factory=list)  # touching it


@dataclass
class _Matches:
    """What matched, by entity id: names, facts and relations best first, and each
    entity's score."""

    scores: dict[int, float] = field(default_factory=dict)
    names: dict[int, float] = field(default_factory=dict)
    facts: dict[int, list[tuple[float, int]]] = field(default_factory=dict)
    relations: dict[int, list[tuple[float, int]]] = field(default_factory=dict)

    def found(self, entity_id: int) -> Found:
        return Found(
            entity_id,
            self.scores[entity_id],
            self.names.get(entity_id, 0.0),
            self.facts.get(entity_id, []),
            self.relations.get(entity_id, []),
        )


def _matches(
    tx: Tx,
    scope: ScopeKey,
    owner: int,
    query: str,
    at: Moment,
    include_history: bool,
    limit: int,
    typed: bool,
) -> _Matches:
    """Every entity with a matching name, type, fact or relation, scored; at least
    `limit` of them when there are. With `typed` (a type filter comes after), every
    ranked row is read, not the best `tx.search.candidates`: the type may leave out
    most."""
    matches = _Matches()
    terms = query_terms(query, tx.language)
    if not terms and tx.meaning is None:
        return matches
    params = scope.params(owner, as_of=at.as_of, known_at=at.known_at)
    wanted = TYPED_CANDIDATES if typed else tx.search.candidates

    kinds = {  # each kind of row: what reads the rows a search may see, and by what
        "entity": (NAME_ROWS, "rowid"),  # each is counted when too few entities match
        "observation": (FACT_ROWS[include_history], "entity_id"),
        "relation": (RELATION_ROWS[include_history], None),
    }

    def by_words(kind: str) -> list[tuple[float, sqlite3.Row]]:
        sql, key = kinds[kind]

        def enough(rows: list[tuple[float, sqlite3.Row]]) -> bool:
            return key is None or len({row[key] for _, row in rows}) >= limit

        return best_rows(tx, INDEXES[kind], terms, owner, sql, params, wanted, enough)

    # Every kind is ranked by words before any by meaning: the query's vector is being
    # made meanwhile (`meaning`).
    lexical = {kind: by_words(kind) for kind in kinds}
    # A query the model cannot read ranks by meaning only when words find nothing.
    by_meaning = tx.meaning is not None and not (tx.meaning.fallback and any(lexical.values()))
    ranked = {
        kind: fused(tx, kind, owner, kinds[kind][0], params, rows) if by_meaning else rows
        for kind, rows in lexical.items()
    }

    scores = matches.scores
    for score, row in ranked["entity"]:
        matches.names[row["rowid"]] = score
        scores[row["rowid"]] = NAME_WEIGHT * score
    facts = matches.facts
    for score, row in ranked["observation"]:
        facts.setdefault(row["entity_id"], []).append((score, row["rowid"]))  # best first
    for entity_id, best_facts in facts.items():
        if len(best_facts) == 1:  # most entities have one matching fact
            fact_score = best_facts[0][0]
        else:
            fact_score = sum(w * s for w, (s, _) in zip(FACT_WEIGHTS, best_facts, strict=False))
        scores[entity_id] = scores.get(entity_id, 0.0) + fact_score
    relations = matches.relations
    for score, row in ranked["relation"]:
        source, target = row["source_id"], row["target_id"]
        relations.setdefault(source, []).append((score, row["rowid"]))
        if target != source:
            relations.setdefault(target, []).append((score, row["rowid"]))
        # a relation says most about its source
        scores[source] = scores.get(source, 0.0) + RELATION_WEIGHT * score
        scores[target] = scores.get(target, 0.0) + RELATION_WEIGHT / 2 * score
    return matches


def find_entities(
    tx: Tx,
    scope: ScopeKey,
    owner: int,
    query: str,
    at: Moment,
    include_history: bool,
    entity_type: str | None = None,
    limit: int | None = None,
) -> list[tuple[sqlite3.Row, float, Found]]:
    """Entities relevant to `query`, best first, with scores normalised to (0, 1] and
    what matched in each; the best `limit` of them (and any tied with the last), or all
    when `limit` is None."""
    typed = entity_type is not None
    matches = _matches(tx, scope, owner, query, at, include_history, limit or 1, typed)
    scores = matches.scores
    if not scores:
        return []
    ids = list(scores)
    if limit is not None and entity_type is None and len(ids) > limit:
        # Only the best `limit` need their rows (ties on the score go by changed_at).
        cut = sorted(scores.values(), reverse=True)[limit - 1]
        ids = [entity_id for entity_id in ids if scores[entity_id] >= cut]
    rows = tx.all(
        SELECT_ENTITIES_BY_ID, scope.params(owner, ids=json_list(ids), known_at=at.known_at)
    )
    if entity_type is not None:
        wanted = match_key(entity_type)
        types = types_then(tx, scope.project, [row["id"] for row in rows], at)
        rows = [
            row for row in rows if match_key(types.get(row["id"], row["entity_type"])) == wanted
        ]
    rows.sort(key=lambda row: (-scores[row["id"]], -row["changed_at"], -row["id"]))
    if not rows:
        return []
    best = scores[rows[0]["id"]]
    return [(row, scores[row["id"]] / best, matches.found(row["id"])) for row in rows[:limit]]


# ---------------------------------------------------------------- the hits' contents


def _counts_sql(include_history: bool) -> tuple[str, str]:
    """How many facts, and how many relations, touch each entity of `:entities`."""
    facts = f"""
        SELECT o.entity_id, count(*) AS n FROM {SEEN["observation"]} o
        WHERE o.entity_id IN (SELECT value FROM json_each(:entities))
          AND o.project IN (:g, :p) AND {visible_rows_sql("o", include_history)}
        GROUP BY o.entity_id
    """
    touching = f"r.project IN (:g, :p) AND {visible_rows_sql('r', include_history)}"
    relations = f"""
        SELECT entity_id, count(*) AS n FROM (
            SELECT r.seq, r.source_id AS entity_id FROM {SEEN["relation"]} r
            WHERE r.source_id IN (SELECT value FROM json_each(:entities)) AND {touching}
            UNION
            SELECT r.seq, r.target_id FROM {SEEN["relation"]} r
            WHERE r.target_id IN (SELECT value FROM json_each(:entities)) AND {touching}
        ) GROUP BY entity_id
    """
    return facts, relations


COUNTS = {history: _counts_sql(history) for history in (False, True)}
# The newest current facts, and relations, of the entity `:e{i}` (one part of `_newest`).
NEWEST_FACTS = f"""
    SELECT {{i}} AS part, o.* FROM {SEEN["observation"]} o
    WHERE o.entity_id = :e{{i}} AND o.project IN (:g, :p) AND {visible_rows_sql("o", False)}
    ORDER BY o.valid_from DESC, o.recorded_at DESC, o.seq DESC LIMIT :n
"""
NEWEST_RELATIONS = f"""
    SELECT {{i}} AS part, {RELATION_COLUMNS}
    WHERE (r.source_id = :e{{i}} OR r.target_id = :e{{i}})
      AND r.project IN (:g, :p) AND {visible_rows_sql("r", False)}
    ORDER BY r.valid_from DESC, r.recorded_at DESC, r.seq DESC LIMIT :n
"""


@functools.cache
def newest_sql(part: str, count: int) -> str:
    """`part` for `count` entities, in one statement: an index range each."""
    return " UNION ALL ".join(f"SELECT * FROM ({part.format(i=i)})" for i in range(count))


def _newest(
    tx: Tx, part: str, params: dict, entity_ids: Sequence[int], n: int
) -> dict[int, list[sqlite3.Row]]:
    """The rows `part` gives for each of `entity_ids`, newest first."""
    found: dict[int, list[sqlite3.Row]] = {entity_id: [] for entity_id in entity_ids}
    if entity_ids:
        keys = {f"e{i}": entity_id for i, entity_id in enumerate(entity_ids)}
        for row in tx.all(newest_sql(part, len(entity_ids)), {**params, **keys, "n": n}):
            found[entity_ids[row["part"]]].append(row)
    return found


FACTS_BY_SEQ = f"""
    SELECT o.* FROM {SEEN["observation"]} o WHERE o.seq IN (SELECT value FROM json_each(:seqs))
"""
RELATIONS_BY_SEQ = f"SELECT {RELATION_COLUMNS} WHERE r.seq IN (SELECT value FROM json_each(:seqs))"


def _linked_sql(include_history: bool) -> str:
    """Relations between a hit (`:hits`) and an entity whose name matched (`:named`)."""
    visible = f"r.project IN (:g, :p) AND {visible_rows_sql('r', include_history)}"
    return f"""
        SELECT r.seq, r.source_id, r.target_id FROM {SEEN["relation"]} r
        WHERE r.source_id IN (SELECT value FROM json_each(:hits))
          AND r.target_id IN (SELECT value FROM json_each(:named)) AND {visible}
        UNION
        SELECT r.seq, r.source_id, r.target_id FROM {SEEN["relation"]} r
        WHERE r.target_id IN (SELECT value FROM json_each(:hits))
          AND r.source_id IN (SELECT value FROM json_each(:named)) AND {visible}
    """


LINKED = {history: _linked_sql(history) for history in (False, True)}


def _add_linked(
    tx: Tx, params: dict, found: Sequence[Found], named: dict[int, float], include_history: bool
) -> None:
    """A relation also matches when the entity at its other end matched by its name
    ("who works at Acme?" finds Alice works_at Acme for Alice): it scores that name's
    score, added to its own when its type matched too."""
    if not named:
        return
    hits = {item.id: item for item in found}
    rows = tx.all(
        LINKED[include_history],
        {**params, "hits": json_list(hits), "named": json_list(named)},
    )
    for seq, source, target in rows:
        for hit, other in ((source, target), (target, source)):
            item = hits.get(hit)
            if item is None or other not in named:
                continue
            own = {s: score for score, s in item.relations}
            own[seq] = own.get(seq, 0.0) + named[other]
            item.relations = sorted(((score, s) for s, score in own.items()), reverse=True)


def search_nodes(tx: Tx, scope: ScopeKey, args: SearchNodesArgs) -> SearchNodesResult:
    at = Moment(
        tx.now if args.as_of is None else args.as_of,
        tx.now if args.known_at is None else args.known_at,
    )
    owner = find_owner(tx, scope)
    if owner is None:
        return SearchNodesResult(hits=[])
    history, per_hit = args.include_history, args.facts_per_hit
    found = find_entities(tx, scope, owner, args.query, at, history, args.entity_type, args.limit)
    if not found:
        return SearchNodesResult(hits=[])
    params = scope.params(owner, as_of=at.as_of, known_at=at.known_at)
    items = [item for _, _, item in found]
    named = {item.id: item.name for item in items if item.name}  # among the hits
    _add_linked(tx, params, items, named, history)

    ids = json_list(item.id for item in items)
    fact_counts, relation_counts = (
        {entity_id: n for entity_id, n in tx.tuples(sql, {**params, "entities": ids})}
        for sql in COUNTS[history]
    )
    shown_facts = [seq for item in items for _, seq in item.facts[:per_hit]]
    shown_relations = [seq for item in items for _, seq in item.relations[:per_hit]]
    facts = {
        row["seq"]: row for row in tx.all(FACTS_BY_SEQ, {**params, "seqs": json_list(shown_facts)})
    }
    relations = {
        row["seq"]: row
        for row in tx.all(RELATIONS_BY_SEQ, {**params, "seqs": json_list(shown_relations)})
    }
    # Found by its name, type or a relation only: what is newest about it.
    unmatched = [item.id for item in items if not item.facts]
    newest_facts = _newest(tx, NEWEST_FACTS, params, unmatched, per_hit)
    bare = [item.id for item in items if not item.facts and not item.relations]
    newest_relations = _newest(tx, NEWEST_RELATIONS, params, bare, per_hit)

    types = types_then(tx, scope.project, [row["id"] for row, _, _ in found], at)
    hits = []
    for row, score, item in found:
        observations: list[Observation]
        links: list[Relation]
        if item.facts:
            observations = [observation_view(facts[seq], at) for _, seq in item.facts[:per_hit]]
        else:
            observations = [observation_view(fact, at) for fact in newest_facts[item.id]]
        if item.relations:
            links = [relation_view(relations[seq], at) for _, seq in item.relations[:per_hit]]
        else:
            links = [relation_view(link, at) for link in newest_relations.get(item.id, [])]
        hits.append(
            SearchHit(
                entity=EntityInfo(
                    name=row["name"], entity_type=types.get(row["id"], row["entity_type"])
                ),
                score=_rounded(score),
                observations=observations,
                relations=links,
                more_observations=max(0, fact_counts.get(item.id, 0) - len(observations)),
                more_relations=max(0, relation_counts.get(item.id, 0) - len(links)),
            )
        )
    return SearchNodesResult(hits=hits)


def _rounded(score: float) -> float:
    """Four decimals say enough of a relative score; never 0, since scores are in (0, 1]."""
    return max(round(score, 4), 0.0001)


# ---------------------------------------------------------------- recall

# Recall ranks turns by BM25, then adds to each turn a share of the scores of the best
# other matching turns of its session: a conversation that keeps coming back to the
# words asked about is more likely the one meant (chosen with bench/longmemeval.py).
SESSION_SHARE = 0.25
SESSION_TURNS = 3

RECALL_ROWS = """
    SELECT t.seq AS rowid, t.session_id
    FROM json_each(:rowids) AS j CROSS JOIN turn t ON t.seq = j.value
    WHERE t.owner_id = :owner AND t.project IN (:g, :p)
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
    terms = query_terms(args.query, tx.language)
    if owner is None or (not terms and tx.meaning is None):
        return RecallResult(turns=[])
    params = scope.params(owner, session_id=args.session_id, after=args.after, before=args.before)
    wanted = tx.search.recall_candidates
    lexical = best_rows(tx, INDEXES["turn"], terms, owner, RECALL_ROWS, params, wanted)
    candidates = fused(tx, "turn", owner, RECALL_ROWS, params, lexical)
    if not candidates:
        return RecallResult(turns=[])
    scores = session_scores([(r["rowid"], r["session_id"], score) for score, r in candidates])
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
                score=_rounded(scores[seq] / best),
            )
            for seq in top
        ]
    )
