"""Ranking by meaning for one `GraphMemory`: its embedder, indexer and vectors.

`Semantic.meaning(text)` starts embedding a search's query on a worker thread
(remembered for the next search of the same text) and gives the `Meaning` that the
search reads in its transaction (`tx.meaning`): the transaction ranks by words
meanwhile, and waits for the vector only when it needs it. Until the model
has loaded, searches rank by words alone and the model loads in the background, so
neither opening a database nor the first call waits for it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from .embedding import Embedder
from .indexer import Indexer
from .store import Tx
from .vectors import Matrix, NearestRows

__all__ = ["Meaning", "Semantic"]

QUERY_CACHE = 256
QUERY_THREADS = 2
QUERY_WAIT_S = 60.0


@dataclass(frozen=True)
class Meaning:
    """A search's query as a vector (being embedded while the search ranks by words),
    and where to find the rows alike it."""

    rows: NearestRows
    query: Future[Matrix]
    # Only for a kind of row its words find nothing of (a query in a language the
    # model does not know, whose vectors would outrank the words' matches).
    fallback: bool = False
    # Per kind of row, the cosine under which a row is not alike the query (the
    # embedder's own `floors`; fusion's defaults for the kinds it leaves out).
    floors: Mapping[str, float] = field(default_factory=dict)
    windows: Mapping[str, float] = field(default_factory=dict)

    def nearest(
        self, tx: Tx, owner: int, kind: str, k: int, also: Iterable[int] = ()
    ) -> tuple[list[tuple[int, float]], dict[int, float]] | None:
        """`NearestRows.nearest` in the transaction of `tx`, once the query's vector is
        ready; None if it could not be made (the search ranks by words alone)."""
        try:
            vector = self.query.result(timeout=QUERY_WAIT_S)
        except Exception:  # the model failed on this text: words still answer
            return None
        return self.rows.nearest(tx.connection, owner, kind, vector, k, also)


class Semantic:
    """What ranking by meaning needs while a `GraphMemory` is open."""

    def __init__(self, embedder: Embedder, indexer: Indexer) -> None:
        self.embedder = embedder
        self.indexer = indexer
        self.rows = NearestRows(embedder.dim, embedder.name)
        self.floors: Mapping[str, float] = getattr(embedder, "floors", {})
        self.windows: Mapping[str, float] = getattr(embedder, "windows", {})
        self._queries: OrderedDict[str, Future[Matrix]] = OrderedDict()
        self._loading = False
        # A search's query is embedded here while its transaction ranks by words.
        self._threads = ThreadPoolExecutor(QUERY_THREADS, "chronomem-query")

    @property
    def ready(self) -> bool:
        loaded = getattr(self.embedder, "loaded", True)
        usable = self.indexer.failure is None and self.indexer.model_mismatch is None
        return bool(loaded) and usable

    def meaning(self, text: str) -> Meaning | None:
        """The `Meaning` of `text`, its vector on its way; None while the model is not
        loaded (then its loading starts in the background) or cannot be used."""
        reads = getattr(self.embedder, "reads", None)
        # A language the model does not know: by meaning only where words find nothing.
        fallback = reads is not None and not reads(text)
        if not self.ready:
            if self.indexer.failure is None and not self._loading:
                self._loading = True
                self.indexer.load_soon()
            return None
        vector = self._queries.get(text)
        if vector is None:
            # A model trained with a question's prefix embeds queries its own way.
            embed = getattr(self.embedder, "embed_query", self.embedder.embed)
            vector = self._threads.submit(_first_row, embed, text)
            self._queries[text] = vector
            if len(self._queries) > QUERY_CACHE:
                self._queries.popitem(last=False)
        else:
            self._queries.move_to_end(text)
        return Meaning(self.rows, vector, fallback, self.floors, self.windows)

    def close(self) -> None:
        self._threads.shutdown(wait=False, cancel_futures=True)


def _first_row(embed: Callable[[list[str]], Matrix], text: str) -> Matrix:
    return embed([text])[0]
