"""`NearestRows`: exact search, and the approximate search of large (owner, kind)
sets, on random vectors. These test the bookkeeping (which rows are found, which
cosines are given), not the quality of ranking."""

from __future__ import annotations

import sqlite3

import numpy as np
import numpy.typing as npt
import pytest

from memory.schema import VECTOR_TABLES
from memory.vectors import NearestRows, decode, encode

DIM = 16
OWNER = 1


def unit(rows: npt.NDArray[np.float64]) -> npt.NDArray[np.float32]:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def random_rows(count: int, seed: int) -> npt.NDArray[np.float32]:
    return unit(np.random.default_rng(seed).normal(size=(count, DIM)))


class File:
    """The tables `NearestRows` reads, in an in-memory database."""

    def __init__(self) -> None:
        self.conn = sqlite3.connect(":memory:")
        for statement in VECTOR_TABLES:
            self.conn.execute(statement)
        self.conn.execute("UPDATE vector_state SET model = 'm'")

    def add(self, first_id: int, rows: npt.NDArray[np.float32], owner: int = OWNER) -> None:
        self.conn.executemany(
            "INSERT INTO vector (kind, row_id, owner_id, vec) VALUES (1, ?, ?, ?)",
            [(first_id + i, owner, encode(v)) for i, v in enumerate(rows)],
        )

    def remove(self, row_ids: list[int]) -> None:
        self.conn.executemany("DELETE FROM vector WHERE row_id = ?", [(r,) for r in row_ids])


def exact_and_approximate() -> tuple[NearestRows, NearestRows]:
    # Probing every group of a small set: approximate must give exactly what exact does.
    return NearestRows(DIM, "m"), NearestRows(DIM, "m", approximate_from=1, probes=10**6)


def test_approximate_equals_exact_when_every_group_is_probed() -> None:
    file = File()
    file.add(0, random_rows(500, seed=1))
    exact, approximate = exact_and_approximate()
    for query in random_rows(20, seed=2):
        also = [3, 77, 499, 10_000]  # 10,000 has no vector
        best_e, cos_e = exact.nearest(file.conn, OWNER, "observation", query, 25, also)
        best_a, cos_a = approximate.nearest(file.conn, OWNER, "observation", query, 25, also)
        assert [r for r, _ in best_a] == [r for r, _ in best_e]
        assert np.allclose([c for _, c in best_a], [c for _, c in best_e], atol=1e-5)
        assert cos_a.keys() == cos_e.keys() == {3, 77, 499}
        assert all(abs(cos_a[r] - cos_e[r]) < 1e-5 for r in cos_e)


def test_cosines_are_those_of_the_stored_vectors() -> None:
    file = File()
    rows = random_rows(300, seed=3)
    file.add(0, rows)
    stored = decode([encode(v) for v in rows], DIM)
    approximate = NearestRows(DIM, "m", approximate_from=1, probes=2)
    query = random_rows(1, seed=4)[0]
    best, cosines = approximate.nearest(file.conn, OWNER, "observation", query, 10, [5, 6])
    for row_id, cosine in best:
        assert cosine == pytest.approx(float(stored[row_id] @ query), abs=1e-5)
    assert cosines[5] == pytest.approx(float(stored[5] @ query), abs=1e-5)
    assert cosines[6] == pytest.approx(float(stored[6] @ query), abs=1e-5)


def test_few_probes_still_give_k_rows_when_there_are() -> None:
    file = File()
    file.add(0, random_rows(400, seed=5))
    approximate = NearestRows(DIM, "m", approximate_from=1, probes=1)
    best, _ = approximate.nearest(file.conn, OWNER, "observation", random_rows(1, 6)[0], 150)
    assert len(best) == 150
    assert len({r for r, _ in best}) == 150


@pytest.mark.parametrize("approximate_from", [1, 10**9])
def test_new_vectors_are_found(approximate_from: int) -> None:
    file = File()
    file.add(0, random_rows(400, seed=7))
    rows = NearestRows(DIM, "m", approximate_from=approximate_from, probes=3)
    query = random_rows(1, seed=8)[0]
    rows.nearest(file.conn, OWNER, "observation", query, 5)
    file.add(1_000, np.stack([query, query]))  # the query itself: the nearest of all
    best, cosines = rows.nearest(file.conn, OWNER, "observation", query, 5, also=[1_001])
    assert {r for r, _ in best[:2]} == {1_000, 1_001}
    assert cosines[1_001] == pytest.approx(1.0, abs=0.01)


@pytest.mark.parametrize("approximate_from", [1, 10**9])
def test_removed_vectors_are_not_found(approximate_from: int) -> None:
    file = File()
    query = random_rows(1, seed=9)[0]
    file.add(0, random_rows(400, seed=10))
    file.add(1_000, np.stack([query]))
    rows = NearestRows(DIM, "m", approximate_from=approximate_from, probes=3)
    best, _ = rows.nearest(file.conn, OWNER, "observation", query, 5)
    assert best[0][0] == 1_000
    file.remove([1_000])
    best, cosines = rows.nearest(file.conn, OWNER, "observation", query, 5, also=[1_000])
    assert 1_000 not in {r for r, _ in best}
    assert cosines == {}


def test_other_owners_rows_are_never_found() -> None:
    file = File()
    query = random_rows(1, seed=11)[0]
    file.add(0, random_rows(300, seed=12))
    file.add(5_000, np.stack([query] * 50), owner=2)
    for rows in exact_and_approximate():
        best, cosines = rows.nearest(file.conn, OWNER, "observation", query, 400, also=[5_000])
        assert len(best) == 300
        assert all(r < 5_000 for r, _ in best)
        assert cosines == {}


def test_the_groups_are_found_again_as_the_rows_grow() -> None:
    """Past twice the rows the centroids were found for, they are found again (on a
    background thread); rows that came meanwhile are grouped too."""
    file = File()
    file.add(0, random_rows(200, seed=13))
    exact = NearestRows(DIM, "m")
    approximate = NearestRows(DIM, "m", approximate_from=100, probes=10**6)
    query = random_rows(1, seed=14)[0]
    approximate.nearest(file.conn, OWNER, "observation", query, 10)
    file.add(1_000, random_rows(500, seed=15))
    approximate.nearest(file.conn, OWNER, "observation", query, 10)  # starts the rebuild
    file.add(2_000, random_rows(50, seed=16))
    approximate.wait_until_built()
    best_a, _ = approximate.nearest(file.conn, OWNER, "observation", query, 700)
    best_e, _ = exact.nearest(file.conn, OWNER, "observation", query, 700)
    assert len(best_a) == 700
    assert [r for r, _ in best_a] == [r for r, _ in best_e]


@pytest.mark.parametrize("approximate_from", [1, 10**9])
def test_cosines_of_rows_asked_for_among_many(approximate_from: int) -> None:
    """Rows asked for by id are found among many rows read at once and among those
    read since."""
    file = File()
    rows = random_rows(3_000, seed=17)
    file.add(0, rows[::-1].copy())  # ids need not come in order
    nearest = NearestRows(DIM, "m", approximate_from=approximate_from, probes=2)
    query = random_rows(1, seed=18)[0]
    nearest.nearest(file.conn, OWNER, "observation", query, 5, also=[1])
    file.add(10_000, rows[:100])
    also = [0, 1_500, 2_999, 10_000, 10_099, 5_000]  # 5,000 has no vector
    _, cosines = nearest.nearest(file.conn, OWNER, "observation", query, 5, also=also)
    assert cosines.keys() == {0, 1_500, 2_999, 10_000, 10_099}
    stored = decode([encode(v) for v in rows], DIM)
    assert cosines[0] == pytest.approx(float(stored[2_999] @ query), abs=1e-5)
    assert cosines[10_099] == pytest.approx(float(stored[99] @ query), abs=1e-5)


def test_many_rows_are_scored_one_by_one_until_grouped_aside() -> None:
    file = File()
    file.add(0, random_rows(600, seed=19))
    exact = NearestRows(DIM, "m")
    approximate = NearestRows(DIM, "m", approximate_from=1, probes=1, group_aside_from=500)
    query = random_rows(1, seed=20)[0]
    best_e, _ = exact.nearest(file.conn, OWNER, "observation", query, 600)
    best_a, _ = approximate.nearest(file.conn, OWNER, "observation", query, 600)
    assert [r for r, _ in best_a] == [r for r, _ in best_e]  # every row, not one group
    approximate.wait_until_built()
    best_a, _ = approximate.nearest(file.conn, OWNER, "observation", query, 10)
    assert len(best_a) == 10  # from the groups now
    assert {r for r, _ in best_a} <= {r for r, _ in best_e}
