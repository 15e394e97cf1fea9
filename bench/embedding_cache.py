"""An embedder that remembers the vectors it made, in a file under `.cache/`.

The benchmarks embed the same texts run after run (LongMemEval-S alone has 88,000
distinct turns, about 25 minutes of embedding on 2 cores); the vectors are the
model's own, made here, kept by the text's SHA-256 and the model's name.

    .venv/bin/python -m bench.embedding_cache longmemeval   # fill it ahead of a run
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from memory.embedding import Embedder, EmbedderError, choose_embedder

CACHE = Path(__file__).resolve().parents[1] / ".cache" / "embeddings"


class CachedEmbedder:
    """`embedder`, with every vector it made kept in an SQLite file by text."""

    def __init__(self, embedder: Embedder, folder: Path = CACHE) -> None:
        self.inner = embedder
        self.name = embedder.name
        self.dim = embedder.dim
        self.floors = getattr(embedder, "floors", {})
        self.windows = getattr(embedder, "windows", {})
        folder.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(folder / f"{embedder.name}.sqlite", check_same_thread=False)
        self._db.execute("CREATE TABLE IF NOT EXISTS v (key BLOB PRIMARY KEY, vec BLOB NOT NULL)")
        self.made = 0
        self._lock = threading.Lock()

    @staticmethod
    def key(text: str) -> bytes:
        return hashlib.sha256(text.encode()).digest()[:16]

    def missing(self, texts: Sequence[str]) -> list[str]:
        keys = {self.key(t): t for t in texts}
        found: set[bytes] = set()
        items = list(keys)
        for start in range(0, len(items), 500):
            part = items[start : start + 500]
            marks = ",".join("?" * len(part))
            found.update(
                k for (k,) in self._db.execute(f"SELECT key FROM v WHERE key IN ({marks})", part)
            )
        return [t for k, t in keys.items() if k not in found]

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        with self._lock:
            return self._embed(texts, self.inner.embed, "")

    def reads(self, query: str) -> bool:
        inner = getattr(self.inner, "reads", None)
        return True if inner is None else bool(inner(query))

    def embed_query(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        inner = getattr(self.inner, "embed_query", None)
        with self._lock:
            if inner is None:
                return self._embed(texts, self.inner.embed, "")
            return self._embed(texts, inner, "query: ")

    def _embed(
        self,
        texts: Sequence[str],
        embed: Callable[[Sequence[str]], npt.NDArray[np.float32]],
        mark: str,
    ) -> npt.NDArray[np.float32]:
        texts = [mark + text for text in texts]
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        todo: dict[bytes, list[int]] = {}
        for i, text in enumerate(texts):
            row = self._db.execute("SELECT vec FROM v WHERE key = ?", (self.key(text),)).fetchone()
            if row is None:
                todo.setdefault(self.key(text), []).append(i)
            else:
                out[i] = np.frombuffer(row[0], dtype=np.float32)
        if todo:
            first = [texts[rows[0]] for rows in todo.values()]
            made = embed([text[len(mark) :] for text in first])
            self.made += len(first)
            for (key, rows), vec in zip(todo.items(), made, strict=True):
                out[rows] = vec
                self._db.execute(
                    "INSERT OR REPLACE INTO v VALUES (?, ?)",
                    (key, vec.astype(np.float32).tobytes()),
                )
            self._db.commit()
        return out


EMBEDDERS = ["default", "none", "multilingual"]


def bench_embedder(choice: str) -> Embedder | None:
    """The embedder a benchmark runs with (`--embedder`, as the CLI takes it): the
    model's vectors, kept between runs."""
    try:
        embedder = choose_embedder(choice)
    except EmbedderError as exc:  # multilingual without its extra
        sys.exit(str(exc))
    if choice != "none" and embedder is None:
        sys.exit("--embedder default: the semantic extra is not installed (make install)")
    return None if embedder is None else CachedEmbedder(embedder)


def longmemeval_texts(path: Path) -> list[str]:
    from .longmemeval import chunks

    with gzip.open(path, "rt") as handle:
        items = json.load(handle)
    texts: dict[str, None] = {}
    for item in items:
        texts[item["question"]] = None
        for session in item["haystack_sessions"]:
            for turn in session:
                if turn["content"].strip():
                    for piece in chunks(turn["content"]):
                        texts[f"{turn['role']}: {piece}"] = None
    return list(texts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", choices=["longmemeval"])
    parser.parse_args()
    from .longmemeval import DEFAULT_DATA

    embedder = choose_embedder("default")
    if embedder is None:
        sys.exit("the semantic extra is not installed")
    cache = CachedEmbedder(embedder)
    todo = cache.missing(longmemeval_texts(DEFAULT_DATA))
    print(f"{len(todo):,} texts to embed", flush=True)
    started = time.perf_counter()
    step = 512
    for start in range(0, len(todo), step):
        cache.embed(todo[start : start + step])
        done = start + min(step, len(todo) - start)
        rate = done / (time.perf_counter() - started)
        print(f"{done:,}/{len(todo):,} ({rate:.0f}/s)", flush=True)


if __name__ == "__main__":
    main()
