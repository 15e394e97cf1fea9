"""Ranking by meaning for one `GraphMemory`: its embedder, indexer and vectors.

`Semantic.meaning(text)` embeds a search's query before its transaction starts (on
a worker thread, remembered for the next search of the same text) and gives the
`Meaning` that the search reads in its transaction (`tx.meaning`). Until the model
has loaded, searches rank by words alone and the model loads in the background, so
neither opening a database nor the first call waits for it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

import anyio
import anyio.to_thread

from .embedding import Embedder
from .indexer import Indexer
from .store import Tx
from .vectors import Matrix, NearestRows

__all__ = ["Meaning", "Semantic"]

QUERY_CACHE = 256


@dataclass(frozen=True)
class Meaning:
    """A search's query as a vector, and where to find the rows alike it."""

    rows: NearestRows
    query: Matrix

    def nearest(
        self, tx: Tx, owner: int, kind: str, k: int, also: Iterable[int] = ()
    ) -> tuple[list[tuple[int, float]], dict[int, float]]:
        """`NearestRows.nearest` in the transaction of `tx`."""
        return self.rows.nearest(tx.connection, owner, kind, self.query, k, also)


class Semantic:
    """What ranking by meaning needs while a `GraphMemory` is open."""

    def __init__(self, embedder: Embedder, indexer: Indexer) -> None:
        self.embedder = embedder
        self.indexer = indexer
        self.rows = NearestRows(embedder.dim, embedder.name)
        self._queries: OrderedDict[str, Matrix] = OrderedDict()
        self._loading = False

    @property
    def ready(self) -> bool:
        loaded = getattr(self.embedder, "loaded", True)
        usable = self.indexer.failure is None and self.indexer.model_mismatch is None
        return bool(loaded) and usable

    async def meaning(self, text: str) -> Meaning | None:
        """The `Meaning` of `text`, or None while the model is not loaded (then its
        loading starts in the background) or cannot be used."""
        if not self.ready:
            if self.indexer.failure is None and not self._loading:
                self._loading = True
                self.indexer.load_soon()
            return None
        vector = self._queries.get(text)
        if vector is None:
            # A model trained with a question's prefix embeds queries its own way.
            embed = getattr(self.embedder, "embed_query", self.embedder.embed)
            vector = (await anyio.to_thread.run_sync(embed, [text]))[0]
            self._queries[text] = vector
            if len(self._queries) > QUERY_CACHE:
                self._queries.popitem(last=False)
        else:
            self._queries.move_to_end(text)
        return Meaning(self.rows, vector)
