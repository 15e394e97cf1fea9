from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from memory import InvalidInputError, MemoryScope, TurnIn

pytestmark = pytest.mark.anyio


async def test_every_turn_is_stored_in_order_even_repeats(
    alice: MemoryScope, db_path: Path
) -> None:
    result = await alice.record_turns(
        session_id="s1",
        turns=[
            {"role": "user", "text": "hello"},
            {"role": "assistant", "text": "hello", "at": "2026-05-01T10:00:00+02:00"},
            TurnIn(role="Dr. Smith", text="hello"),
        ],
    )
    assert result.stored == 3 and len(set(result.ids)) == 3
    assert all(turn_id.startswith("t_") for turn_id in result.ids)
    with sqlite3.connect(db_path) as conn:
        rows = conn.execute(
            "SELECT id, session_id, role, text, at FROM turn ORDER BY seq"
        ).fetchall()
    assert [row[0] for row in rows] == result.ids
    assert [row[2] for row in rows] == ["user", "assistant", "Dr. Smith"]
    assert rows[1][4] == 1777622400000000  # 2026-05-01T08:00:00Z in microseconds


@pytest.mark.parametrize(
    ("turns", "message"),
    [
        ([], r"^turns: needs at least 1"),
        ([{"role": "user", "text": "   "}], r"^turns\[0\]\.text: must not be blank"),
        ([{"role": "user"}], r"^turns\[0\]\.text: is required"),
        ([{"role": "", "text": "x"}], r"^turns\[0\]\.role: must not be empty"),
        ([{"role": "u" * 65, "text": "x"}], r"^turns\[0\]\.role: 65 characters; at most 64"),
        ([{"role": "u", "text": "x" * 20_001}], r"^turns\[0\]\.text: 20,001 characters"),
        ([{"role": "u", "text": "x", "at": "soon"}], r"^turns\[0\]\.at: 'soon' is not"),
        ([{"role": "u", "text": "x", "extra": 1}], r"^turns\[0\]\.extra: is not an argument"),
        ([{"role": "u", "text": "x"}] * 201, r"^turns: 201 items; at most 200"),
    ],
)
async def test_bad_turns_are_rejected(alice: MemoryScope, turns: list, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        await alice.record_turns(session_id="s", turns=turns)


async def test_session_id_limits(alice: MemoryScope) -> None:
    with pytest.raises(InvalidInputError, match="^session_id: 201 characters"):
        await alice.record_turns(session_id="s" * 201, turns=[{"role": "u", "text": "x"}])
