"""The import as a whole: every line checked (`check`), then the checked steps
written a batch per transaction (`write`), progress told after each, and the
full-text indexes the import filled merged at the end.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import partial

from ..errors import ImportInterrupted, InvalidInputError, MemoryFullError
from ..models import ImportResult
from ..queries import ScopeKey
from ..store import Store
from .check import BATCH_SIZE, CHUNK_LINES, ImportPlan, check_import
from .steps import line_of
from .write import COUNTED, INDEXED_KINDS, write_batch

__all__ = ["MERGE_AFTER_ROWS", "ImportSettings", "import_lines"]

# A large import leaves the full-text index of what it added in many segments (one
# per transaction, merged only partly as they pile up), and a search looks every
# word up in each: after this many rows of a kind, its index is merged into one.
MERGE_AFTER_ROWS = 10_000


@dataclass(frozen=True, slots=True)
class ImportSettings:
    """How an import is cut up: steps a transaction, lines checked at a time, and the
    rows of a kind after which its full-text index is merged."""

    batch_size: int = BATCH_SIZE
    chunk_lines: int = CHUNK_LINES
    merge_after_rows: int = MERGE_AFTER_ROWS


async def import_lines(
    store: Store,
    key: ScopeKey,
    lines: Iterable[str],
    settings: ImportSettings = ImportSettings(),
    progress: Callable[[int], None] | None = None,
    stop: Callable[[], bool] | None = None,
) -> ImportResult:
    """Import `lines` into the scope `key`: see `MemoryScope.import_lines`."""
    counts: dict[str, int] = {}
    with tempfile.TemporaryFile() as spool:
        checked = lines if stop is None else _until(stop, lines)
        plan = check_import(checked, spool, settings.batch_size, settings.chunk_lines)
        async with store.bulk():
            await _write_plan(store, key, plan, counts, progress, stop)
    for kind, counted in INDEXED_KINDS.items():
        if stop is not None and stop():  # all is written; merging can wait
            break
        if counts.get(counted, 0) >= settings.merge_after_rows:
            await store.merge_index(kind)
    return ImportResult(lines=plan.lines, **{k: counts.get(k, 0) for k in COUNTED})


async def _write_plan(
    store: Store,
    key: ScopeKey,
    plan: ImportPlan,
    counts: dict[str, int],
    progress: Callable[[int], None] | None,
    stop: Callable[[], bool] | None,
) -> None:
    """Write the batches of a checked import, adding to `counts` by kind; tell
    `progress` how many more lines were begun with each batch."""
    previous = start = 0  # the last and first line numbers of the batches written
    for batch in plan.batches():
        first, last = line_of(batch[0]), line_of(batch[-1])
        if stop is not None and stop():
            raise ImportInterrupted(
                f"import interrupted: {_kept_before(first, previous, start or first)}"
                f" ({_counted(counts)}); run the same import again to resume: what "
                "is already there is skipped"
            )
        start = start or first
        try:
            done = await store.write(
                key.app, key.user, partial(write_batch, scope=key, raw_steps=batch)
            )
        except InvalidInputError as exc:  # memory full, or an id of another memory
            # Each batch is its own transaction: say what earlier ones kept.
            kept = _kept_before(first, previous, start)
            where = f"lines {first}-{last}: " if isinstance(exc, MemoryFullError) else ""
            raise type(exc)(f"{where}{exc} ({kept})") from None
        for kind, count in done.items():
            counts[kind] = counts.get(kind, 0) + count
        if progress is not None:
            progress(len(set(map(line_of, batch)) - {previous}))
        previous = last


def _until(stop: Callable[[], bool], lines: Iterable[str]) -> Iterator[str]:
    """`lines`, ending the import (before anything is written) once `stop` says yes."""
    for line in lines:
        if stop():
            raise ImportInterrupted("import interrupted while checking: nothing was imported")
        yield line


def _counted(counts: dict[str, int]) -> str:
    """What the batches written added, as the command line's import reports it."""
    nouns = {
        "entities": "entities",
        "observations": "facts",
        "relations": "relations",
        "turns": "turns",
    }
    return ", ".join(f"{counts.get(kind, 0):,} {noun}" for kind, noun in nouns.items())


def _kept_before(first: int, previous: int, start: int) -> str:
    """What the batches written before a refused one (whose first line is `first`)
    kept; `previous` is their last line (0: none) and `start` their first. A line of
    many steps can straddle two batches, so part of it may have been kept."""
    if not previous:
        return "nothing was imported"
    if first != previous:
        return f"lines before {first} were imported"
    if first == start:
        return f"part of line {first} was imported"
    return f"lines before {first} and part of line {first} were imported"
