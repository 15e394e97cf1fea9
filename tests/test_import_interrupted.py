"""An import stopped by its caller (Ctrl-C on the command line): between batches,
keeping what earlier batches wrote, and resumed by running it again."""

from __future__ import annotations

import json

import pytest

from memory import MemoryScope
from memory.errors import ImportInterrupted

pytestmark = pytest.mark.anyio

LINES = [
    json.dumps(
        {"type": "entity", "name": f"E{i}", "entityType": "thing", "observations": [f"fact {i}"]}
    )
    for i in range(10)
]


async def test_a_stop_while_checking_imports_nothing(alice: MemoryScope) -> None:
    asked = []

    def stop() -> bool:
        asked.append(1)
        return len(asked) > 3

    with pytest.raises(ImportInterrupted, match="nothing was imported"):
        await alice.import_lines(LINES, batch_size=2, stop=stop)
    assert (await alice.read_graph()).total_entities == 0


async def test_a_stop_between_batches_keeps_the_earlier_ones_and_a_rerun_resumes(
    alice: MemoryScope,
) -> None:
    batches: list[int] = []

    def stop() -> bool:
        return len(batches) == 2  # once two batches are written

    with pytest.raises(ImportInterrupted) as stopped:
        await alice.import_lines(LINES, batch_size=2, progress=batches.append, stop=stop)
    assert "lines before 5 were imported (4 entities, 4 facts" in str(stopped.value)
    assert (await alice.read_graph()).total_entities == 4
    resumed = await alice.import_lines(LINES, batch_size=2)
    assert (resumed.entities, resumed.skipped) == (6, 4)
    assert (await alice.read_graph()).total_entities == 10
