"""Vectors in the file, and each user's vectors in memory for ranking by meaning.

A vector is stored as int8 components and one float32 scale (388 bytes for 384
dimensions, a quarter of float32; the dot products it gives differ from float32's
by less than 0.01). `NearestRows` keeps, per (owner, kind), the vectors this process
has read, as one float32 matrix, and reads only what was stored since: a search
scores every vector of that user and kind with one matrix product (exact, never
approximate) and the caller filters what the context may see.

Imported only when an embedder is in use: it needs numpy, from the `semantic` extra.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from .schema import VECTOR_KINDS

__all__ = ["NearestRows", "decode", "encode"]

Matrix = npt.NDArray[np.float32]


def encode(vector: npt.NDArray[np.floating]) -> bytes:
    """`vector` (unit length) as int8 components and their float32 scale."""
    top = float(np.max(np.abs(vector))) or 1.0
    scale = top / 127.0
    quantised = np.clip(np.rint(vector / scale), -127, 127).astype(np.int8)
    return quantised.tobytes() + np.float32(scale).tobytes()


def decode(blobs: list[bytes], dim: int) -> Matrix:
    """The vectors of `blobs` (from `encode`), one row each."""
    raw = np.frombuffer(b"".join(blobs), dtype=np.uint8).reshape(len(blobs), dim + 4)
    components = raw[:, :dim].view(np.int8).astype(np.float32)
    scales = raw[:, dim:].copy().view(np.float32)
    return components * scales


NEW_VECTORS = """
    SELECT seq, row_id, vec FROM vector
    WHERE owner_id = :owner AND kind = :kind AND seq > :after ORDER BY seq
"""
STATE = "SELECT model, removed FROM vector_state WHERE id = 1"


class _Rows:
    """One owner's vectors of one kind: row ids and vectors, in buffers that double
    as they fill, so reading a few new vectors copies nothing already read."""

    def __init__(self, dim: int) -> None:
        self.count = 0
        self.last_seq = 0
        self._ids = np.empty(0, dtype=np.int64)
        self._matrix = np.empty((0, dim), dtype=np.float32)
        self._order: npt.NDArray[np.intp] | None = None

    @property
    def ids(self) -> npt.NDArray[np.int64]:
        return self._ids[: self.count]

    @property
    def matrix(self) -> Matrix:
        return self._matrix[: self.count]

    def extend(self, ids: list[int], vectors: Matrix, last_seq: int) -> None:
        end = self.count + len(ids)
        if end > len(self._ids):
            size = max(end, 2 * len(self._ids), 256)
            self._ids = np.resize(self._ids, size)
            grown = np.empty((size, self._matrix.shape[1]), dtype=np.float32)
            grown[: self.count] = self.matrix
            self._matrix = grown
        self._ids[self.count : end] = ids
        self._matrix[self.count : end] = vectors
        self.count = end
        self.last_seq = last_seq
        self._order = None

    def sorted_order(self) -> npt.NDArray[np.intp]:
        """Positions of the rows in row-id order (kept until more rows come)."""
        if self._order is None:
            self._order = np.argsort(self.ids, kind="stable")
        return self._order


@dataclass
class NearestRows:
    """Each (owner, kind)'s vectors, read from the file as they are stored."""

    dim: int
    model: str  # vectors of another model are never compared with ours
    _rows: dict[tuple[int, int], _Rows] = field(default_factory=dict)
    _removed: int = -1
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def nearest(
        self,
        conn: sqlite3.Connection,
        owner: int,
        kind: str,
        query: Matrix,
        k: int,
        also: Iterable[int] = (),
    ) -> tuple[list[tuple[int, float]], dict[int, float]]:
        """The `k` rows of `kind` of `owner` most alike `query` (a unit vector), best
        first, as (row id, cosine); and the cosine of each row of `also` that has a
        vector. Runs on the database thread, in the caller's transaction."""
        rows = self._current(conn, owner, VECTOR_KINDS[kind])
        if rows.count == 0:
            return [], {}
        scores = rows.matrix @ query
        if rows.count > k:
            top = np.argpartition(-scores, k - 1)[:k]
            top = top[np.argsort(-scores[top])]
        else:
            top = np.argsort(-scores)
        best = [(int(rows.ids[i]), float(scores[i])) for i in top]
        wanted = np.fromiter(also, dtype=np.int64)
        if len(wanted) == 0:
            return best, {}
        order = rows.sorted_order()
        sorted_ids = rows.ids[order]
        at = np.clip(np.searchsorted(sorted_ids, wanted), 0, rows.count - 1)
        found = sorted_ids[at] == wanted
        cosines = scores[order[at[found]]]
        return best, dict(zip(wanted[found].tolist(), cosines.tolist(), strict=True))

    def _current(self, conn: sqlite3.Connection, owner: int, kind: int) -> _Rows:
        with self._lock:
            model, removed = conn.execute(STATE).fetchone()
            if model != self.model:
                return _Rows(self.dim)
            if removed != self._removed:  # vectors went (purge, reindex): read them again
                self._rows.clear()
                self._removed = removed
            rows = self._rows.get((owner, kind))
            if rows is None:
                rows = self._rows[(owner, kind)] = _Rows(self.dim)
            new = conn.execute(
                NEW_VECTORS, {"owner": owner, "kind": kind, "after": rows.last_seq}
            ).fetchall()
            if new:
                rows.extend([r[1] for r in new], decode([r[2] for r in new], self.dim), new[-1][0])
            return rows
