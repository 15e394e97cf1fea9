"""Vectors in the file, and each user's vectors in memory for ranking by meaning.

A vector is stored as int8 components and one float32 scale (388 bytes for 384
dimensions, a quarter of float32; the dot products it gives differ from float32's
by less than 0.01). `NearestRows` keeps, per (owner, kind), the vectors this process
has read, as one float32 matrix, and reads only what was stored since: a search
scores every vector of that user and kind with one matrix product, and the caller
filters what the context may see.

From `approximate_from` vectors of one (owner, kind) on, search is approximate (an
inverted file, `_Lists`): the vectors are kept as their int8 components (a quarter of
the memory), grouped around about sqrt(n) centroids found by k-means on a sample,
and a search scores only the rows of the `probes` groups whose centroids are most
alike the query. A new vector joins its nearest group at once; the centroids are
found again, on a background thread, each time the rows have doubled (and the first
time too, for `group_aside_from` rows or more: every row is scored until then). The
cosines returned are those of the stored vectors either way.

Imported only when an embedder is in use: it needs numpy, from the `semantic` extra.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

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
COUNT = "SELECT count(*) FROM vector WHERE owner_id = :owner AND kind = :kind"
STATE = """
    SELECT model, coalesce((SELECT removed FROM vector_removed WHERE owner_id = :owner), 0)
    FROM vector_state WHERE id = 1
"""
PAGE = 10_000  # vectors read from the file at a time
BLOCK = 4_096  # rows multiplied at a time (their copy stays in the CPU's cache)
SAMPLE_PER_LIST = 32  # rows of the k-means sample per centroid
ITERATIONS = 6  # of k-means


def _quantised(blobs: list[bytes], dim: int) -> tuple[npt.NDArray[np.int8], Matrix]:
    """The int8 components and scales of `blobs` (from `encode`), undecoded."""
    raw = np.frombuffer(b"".join(blobs), dtype=np.uint8).reshape(len(blobs), dim + 4)
    return raw[:, :dim].view(np.int8).copy(), raw[:, dim:].copy().view(np.float32).ravel()


def _encoded(matrix: Matrix) -> tuple[npt.NDArray[np.int8], Matrix]:
    """`encode` of each row of `matrix` (rows decoded from blobs give their blobs back)."""
    top = np.max(np.abs(matrix), axis=1)
    top[top == 0] = 1.0
    scales = (top / 127.0).astype(np.float32)
    codes = np.clip(np.rint(matrix / scales[:, None]), -127, 127).astype(np.int8)
    return codes, scales


def _products(codes: npt.NDArray[np.int8], positions: npt.NDArray[np.intp], by: Matrix) -> Matrix:
    """codes[positions] (as float32) @ by, a block of rows at a time."""
    out = np.empty((len(positions), *by.shape[1:]), dtype=np.float32)
    for start in range(0, len(positions), BLOCK):
        part = positions[start : start + BLOCK]
        out[start : start + len(part)] = codes[part].astype(np.float32) @ by
    return out


def _dots(codes: npt.NDArray[np.int8], positions: npt.NDArray[np.intp], query: Matrix) -> Matrix:
    """codes[positions] @ query: einsum reads the int8 rows as they are, where BLAS
    wants a float32 copy (and its threads wait for each other on a busy machine)."""
    out = np.empty(len(positions), dtype=np.float32)
    wide = codes.shape[1] % 8 == 0  # rows gathered 8 bytes at a time, not 1
    rows = codes.view(np.uint64) if wide else codes
    for start in range(0, len(positions), BLOCK):
        part = rows[positions[start : start + BLOCK]]
        block = part.view(np.int8) if wide else part
        out[start : start + len(part)] = np.einsum("ij,j->i", block, query)
    return out


def _nearest_centroid(
    codes: npt.NDArray[np.int8], start: int, stop: int, centroids: Matrix
) -> npt.NDArray[np.intp]:
    """Each row of codes[start:stop]'s nearest centroid (a row's scale changes none)."""
    return np.argmax(_products(codes, np.arange(start, stop), centroids.T), axis=1)


class _Lists:
    """The inverted file: each row's position in the group of its nearest centroid."""

    def __init__(self, centroids: Matrix, groups: npt.NDArray[np.intp], trained_on: int) -> None:
        self.centroids = centroids
        self.trained_on = trained_on  # rows there were when the centroids were found
        order = np.argsort(groups, kind="stable").astype(np.int32)
        bounds = np.searchsorted(groups[order], np.arange(len(centroids) + 1))
        self.members = [order[bounds[i] : bounds[i + 1]] for i in range(len(centroids))]
        self.covered = len(groups)  # rows at positions below are in a group

    @classmethod
    def build(cls, codes: npt.NDArray[np.int8], count: int, seed: int) -> _Lists:
        """Centroids by spherical k-means on a sample of codes[:count], and the rows
        grouped by them."""
        rng = np.random.default_rng(seed)
        size = max(1, round(np.sqrt(count)))
        taken = min(count, SAMPLE_PER_LIST * size)
        sample = codes[np.sort(rng.choice(count, taken, replace=False))].astype(np.float32)
        sample /= np.maximum(np.linalg.norm(sample, axis=1, keepdims=True), 1e-12)
        centroids = sample[rng.choice(taken, size, replace=False)].copy()
        for _ in range(ITERATIONS):
            nearest = np.argmax(sample @ centroids.T, axis=1)
            sums = np.zeros_like(centroids)
            np.add.at(sums, nearest, sample)
            empty = np.bincount(nearest, minlength=size) == 0
            sums[empty] = sample[rng.choice(taken, int(empty.sum()))]
            centroids = sums / np.maximum(np.linalg.norm(sums, axis=1, keepdims=True), 1e-12)
        groups = np.concatenate(
            [
                _nearest_centroid(codes, start, min(count, start + BLOCK), centroids)
                for start in range(0, count, BLOCK)
            ]
        )
        return cls(centroids.astype(np.float32), groups, count)

    def add(self, codes: npt.NDArray[np.int8], count: int) -> None:
        """Put the rows from `covered` to `count` in the groups of their centroids."""
        for start in range(self.covered, count, BLOCK):
            stop = min(count, start + BLOCK)
            nearest = _nearest_centroid(codes, start, stop, self.centroids)
            positions = np.arange(start, stop, dtype=np.int32)
            for group in np.unique(nearest).tolist():
                joined = positions[nearest == group]
                self.members[group] = np.concatenate([self.members[group], joined])
        self.covered = max(self.covered, count)

    def candidates(self, query: Matrix, probes: int, k: int) -> npt.NDArray[np.int32]:
        """The rows of the `probes` groups nearest `query`, and of more until there
        are `k` rows (or no more groups)."""
        order = np.argsort(-(self.centroids @ query))
        taken: list[npt.NDArray[np.int32]] = []
        total = 0
        for group in order.tolist():
            if len(taken) >= probes and total >= k:
                break
            taken.append(self.members[group])
            total += len(self.members[group])
        return np.concatenate(taken)


class _Rows:
    """One owner's vectors of one kind, in buffers that double as they fill, so
    reading a few new vectors copies nothing already read: as float32 rows while
    there are fewer than `approximate_from`, as int8 components and scales, grouped
    by `_Lists`, from then on."""

    def __init__(self, dim: int, approximate_from: int, group_aside_from: int, seed: int) -> None:
        self.count = 0
        self.last_seq = 0
        self.approximate_from = approximate_from
        self.group_aside_from = group_aside_from
        self._seed = seed
        self._ids = np.empty(0, dtype=np.int64)
        self._matrix: Matrix | None = np.empty((0, dim), dtype=np.float32)
        self._codes = np.empty((0, dim), dtype=np.int8)
        self._scales = np.empty(0, dtype=np.float32)
        self.lists: _Lists | None = None
        self._rebuilt: _Lists | None = None  # found on the background thread
        self._rebuilding: threading.Thread | None = None
        # The first rows' positions in id order, and their ids; later rows are searched
        # one by one until there are many.
        self._order = np.empty(0, dtype=np.intp)
        self._sorted_ids = np.empty(0, dtype=np.int64)

    @property
    def ids(self) -> npt.NDArray[np.int64]:
        return self._ids[: self.count]

    @property
    def approximate(self) -> bool:
        return self._matrix is None

    def reserve(self, total: int, room: int = 0) -> None:
        """Room for `total` rows (or `room`, if more), in the form they will be kept in
        once there: the first reading of many rows copies none of them twice."""
        if self._matrix is not None and total >= self.approximate_from:
            self._codes, self._scales = _encoded(self._matrix[: self.count])
            self._matrix = None
        size = max(total, room)
        if size > len(self._ids):
            self._ids = _grown(self._ids, self.count, size)
            if self._matrix is not None:
                self._matrix = _grown(self._matrix, self.count, size)
            else:
                self._codes = _grown(self._codes, self.count, size)
                self._scales = _grown(self._scales, self.count, size)

    def extend(self, ids: list[int], blobs: list[bytes], last_seq: int) -> None:
        end = self.count + len(ids)
        self.reserve(end, room=max(2 * len(self._ids), 256) if end > len(self._ids) else 0)
        dim = self._codes.shape[1]
        self._ids[self.count : end] = ids
        if self._matrix is not None:
            self._matrix[self.count : end] = decode(blobs, dim)
        else:
            self._codes[self.count : end], self._scales[self.count : end] = _quantised(blobs, dim)
        self.count = end
        self.last_seq = last_seq

    def index(self) -> None:
        """Group the rows read since the last search (after all were read: the first
        grouping of many rows is found for all of them)."""
        if self._matrix is not None:
            return
        if self._rebuilt is not None:
            self.lists, self._rebuilt, self._rebuilding = self._rebuilt, None, None
        if self.lists is None:
            if self._rebuilding is None and self.count < self.group_aside_from:
                self.lists = _Lists.build(self._codes, self.count, self._seed)
            elif self._rebuilding is None:  # every row is scored until it is done
                self._rebuild()
        if self.lists is not None:
            self.lists.add(self._codes, self.count)
            if self.count >= 2 * self.lists.trained_on and self._rebuilding is None:
                self._rebuild()

    def _rebuild(self) -> None:
        """Find the groups again, on a background thread, for the rows there are now."""
        codes, count = self._codes, self.count  # rows below `count` never change

        def rebuild() -> None:
            self._rebuilt = _Lists.build(codes, count, self._seed)

        self._rebuilding = threading.Thread(target=rebuild, daemon=True)
        self._rebuilding.start()

    def wait_until_built(self) -> None:
        thread = self._rebuilding
        if thread is not None:
            thread.join()

    def scores(self, query: Matrix, probes: int, k: int) -> tuple[npt.NDArray[np.intp], Matrix]:
        """Positions of the rows scored (every row, or the approximate candidates) and
        their cosines with `query`."""
        if self._matrix is not None:
            return np.arange(self.count), self._matrix[: self.count] @ query
        if self.lists is None:
            positions = np.arange(self.count)
        else:
            positions = self.lists.candidates(query, probes, k).astype(np.intp)
        return positions, self.cosines(positions, query)

    def cosines(self, positions: npt.NDArray[np.intp], query: Matrix) -> Matrix:
        if self._matrix is not None:
            return self._matrix[positions] @ query
        return _dots(self._codes, positions, query) * self._scales[positions]

    def positions_of(
        self, wanted: npt.NDArray[np.int64]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.intp]]:
        """The ids of `wanted` that have a vector, and their positions."""
        ordered = len(self._order)
        if self.count - ordered > max(1_024, self.count // 16):
            self._order = np.argsort(self.ids, kind="stable")
            self._sorted_ids = self.ids[self._order]
            ordered = self.count
        sorted_ids = self._sorted_ids
        found_ids: list[npt.NDArray[np.int64]] = []
        found_at: list[npt.NDArray[np.intp]] = []
        if ordered:
            at = np.clip(np.searchsorted(sorted_ids, wanted), 0, ordered - 1)
            hit = sorted_ids[at] == wanted
            found_ids.append(wanted[hit])
            found_at.append(self._order[at[hit]])
        tail = self._ids[ordered : self.count]
        if len(tail):
            hit = np.nonzero(np.isin(tail, wanted))[0]
            found_ids.append(tail[hit])
            found_at.append(hit + ordered)
        if not found_ids:
            return wanted[:0], np.empty(0, dtype=np.intp)
        return np.concatenate(found_ids), np.concatenate(found_at)


def _grown(array: npt.NDArray[Any], count: int, size: int) -> npt.NDArray[Any]:
    grown = np.empty((size, *array.shape[1:]), dtype=array.dtype)
    grown[:count] = array[:count]
    return grown


@dataclass
class NearestRows:
    """Each (owner, kind)'s vectors, read from the file as they are stored.

    `approximate_from`: from this many vectors of one (owner, kind) on, search is
    approximate; `probes`: groups of rows scored per search then;
    `group_aside_from`: from this many rows on, the first grouping is found on a
    background thread (every row is scored until it is done), not in the search that
    first reads them."""

    dim: int
    model: str  # vectors of another model are never compared with ours
    approximate_from: int = 50_000
    probes: int = 24
    group_aside_from: int = 100_000
    seed: int = 0
    _rows: dict[tuple[int, int], _Rows] = field(default_factory=dict)
    _removed: dict[int, int] = field(default_factory=dict)  # by owner, when last read
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
        with self._lock:
            rows = self._current(conn, owner, VECTOR_KINDS[kind])
            if rows.count == 0:
                return [], {}
            positions, scores = rows.scores(query, self.probes, k)
            if len(scores) > k:
                top = np.argpartition(-scores, k - 1)[:k]
                top = top[np.argsort(-scores[top])]
            else:
                top = np.argsort(-scores)
            ids = rows.ids
            best = [(int(ids[positions[i]]), float(scores[i])) for i in top]
            wanted = np.fromiter(also, dtype=np.int64)
            if len(wanted) == 0:
                return best, {}
            found, at = rows.positions_of(wanted)
            cosines = rows.cosines(at, query)
            return best, dict(zip(found.tolist(), cosines.tolist(), strict=True))

    def wait_until_built(self) -> None:
        """Return once no grouping of rows is being found in the background."""
        for rows in list(self._rows.values()):
            rows.wait_until_built()

    def _current(self, conn: sqlite3.Connection, owner: int, kind: int) -> _Rows:
        model, removed = conn.execute(STATE, {"owner": owner}).fetchone()
        if model != self.model:
            return _Rows(self.dim, self.approximate_from, self.group_aside_from, self.seed)
        if removed != self._removed.get(owner, 0):  # some went (purge, a new type): again
            for key in [key for key in self._rows if key[0] == owner]:
                del self._rows[key]
            self._removed[owner] = removed
        rows = self._rows.get((owner, kind))
        if rows is None:
            rows = self._rows[(owner, kind)] = _Rows(
                self.dim, self.approximate_from, self.group_aside_from, self.seed
            )
        if rows.count == 0:  # the first reading: room for every row at once
            rows.reserve(conn.execute(COUNT, {"owner": owner, "kind": kind}).fetchone()[0])
        cursor = conn.execute(NEW_VECTORS, {"owner": owner, "kind": kind, "after": rows.last_seq})
        while new := cursor.fetchmany(PAGE):
            rows.extend([r[1] for r in new], [r[2] for r in new], new[-1][0])
        rows.index()
        return rows
