"""Words and meaning fused: each row's BM25 and cosine, normalised and weighted.

A search ranks a kind of row (names, facts, relations, turns) by its words
(`ranking`); with an embedder in use it also takes the rows whose vectors are most
alike the query's, and scores every row of either list by

    (1 - w) * bm25 / best bm25  +  w * (cosine - floor) / (best cosine - floor)

over the rows the context may see: a weighted sum of scores normalised to [0, 1], not
reciprocal-rank fusion (which ranked conversational data worse, DESIGN §8). A row
whose cosine is under its kind's floor (`FLOOR_BY_KIND`) is not alike the query at
all: found by meaning alone it is left out, so a question about nothing stored still
finds nothing. A model whose cosines lie in a range of their own says its floors
(the embedder's `floors`). The weights and floors were chosen on the development splits only
(bench/longmemeval.py, bench/locomo.py; docs/benchmarks.md has the grid).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from typing import Any

from .store import Tx, json_list

__all__ = ["FLOOR_BY_KIND", "MEANING_WEIGHT", "fused"]

MEANING_WEIGHT = {"entity": 0.5, "observation": 0.5, "relation": 0.5, "turn": 0.5}
# Turns are long and their cosines low: a lower floor keeps more of them.
FLOOR_BY_KIND = {"entity": 0.2, "observation": 0.2, "relation": 0.2, "turn": 0.1}
# Rows taken by meaning, per kind, before the context's own are kept.
CANDIDATES = 200


def fused(
    tx: Tx,
    kind: str,
    owner: int,
    sql: str,
    params: Mapping[str, Any],
    lexical: list[tuple[float, sqlite3.Row]],
) -> list[tuple[float, sqlite3.Row]]:
    """`lexical` (score, row) with the rows alike the query, scored by both, best
    first. `sql` reads the rows of `:rowids` that the search may see, as the lexical
    search did; lexical scores only without an embedder."""
    meaning = tx.meaning
    if meaning is None or (meaning.fallback and lexical):
        return lexical
    floor = meaning.floors.get(kind, FLOOR_BY_KIND[kind])
    found = meaning.nearest(tx, owner, kind, CANDIDATES, also=[row["rowid"] for _, row in lexical])
    if found is None:
        return lexical
    best, cosines = found
    window = meaning.windows.get(kind)
    if window is not None and best:  # only rows nearly as alike as the most alike
        floor = max(floor, best[0][1] - window)
    words = {row["rowid"]: (score, row) for score, row in lexical}
    alike = [rowid for rowid, cosine in best if cosine > floor and rowid not in words]
    rows = {row["rowid"]: row for row in tx.all(sql, {**params, "rowids": json_list(alike)})}
    cosines.update((rowid, cosine) for rowid, cosine in best if rowid in rows)
    top_words = max((score for score, _ in lexical), default=0.0) or 1.0
    top_cosine = max((cosines.get(rowid, floor) for rowid in (*words, *rows)), default=floor)
    span = max(top_cosine - floor, 1e-9)
    weight = MEANING_WEIGHT[kind]
    scored = []
    for rowid, row in (*((r, row) for r, (_, row) in words.items()), *rows.items()):
        lexical_part = words[rowid][0] / top_words if rowid in words else 0.0
        meaning_part = max(0.0, cosines.get(rowid, floor) - floor) / span
        scored.append(((1 - weight) * lexical_part + weight * meaning_part, row))
    scored.sort(key=lambda pair: (-pair[0], -pair[1]["rowid"]))
    return scored
