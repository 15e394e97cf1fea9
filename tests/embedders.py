"""Stand-in embedders for the indexer's bookkeeping (never for quality claims)."""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

WORD = re.compile(r"\w+")


class WordHashEmbedder:
    """Each word hashed to one dimension: texts sharing words are alike, others not."""

    def __init__(self, name: str = "word-hash", dim: int = 64) -> None:
        self.name = name
        self.dim = dim
        self.embedded: list[str] = []  # every text it was asked for, in order
        self.threads: set[str] = set()

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.threads.add(threading.current_thread().name)
        self.embedded.extend(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in WORD.findall(text.lower()):
                digest = hashlib.sha256(word.encode()).digest()
                out[row, int.from_bytes(digest[:4], "big") % self.dim] += 1.0
            out[row, 0] += 1e-3  # never the zero vector
        return out / np.linalg.norm(out, axis=1, keepdims=True)


class GatedEmbedder(WordHashEmbedder):
    """Its first call blocks in `embed` until `release()` (the indexer's first batch:
    a write must not wait for it); later ones (a search's query) do not."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self._gate = threading.Event()

    def release(self) -> None:
        self._gate.set()

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        if self.entered.is_set():
            return super().embed(texts)
        self.entered.set()
        if not self._gate.wait(timeout=60):
            raise TimeoutError("the test never released the embedder")
        return super().embed(texts)
