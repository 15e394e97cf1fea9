"""A process that indexes a file's backlog with the real model, for the tests that need
another process: `python -m tests.semantic_worker DB MODE FOLDER`.

MODE `share`: waits for FOLDER/go, indexes until nothing waits, writes the number of
texts it embedded to FOLDER/<pid>.count. MODE `crash`: embeds and stores one batch,
writes FOLDER/stored, claims the next and blocks in the model (FOLDER/blocked) until
killed.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import anyio
import numpy as np
import numpy.typing as npt

from memory import GraphMemory, IndexerSettings
from memory.embedding.minilm import MiniLM


class Counting:
    """The real model, counting the texts it embeds; in `crash` mode it blocks in
    its second call, once the first batch is stored."""

    def __init__(self, folder: Path, crash: bool) -> None:
        self.model = MiniLM(threads=1)
        self.name, self.dim = self.model.name, self.model.dim
        self.folder, self.crash = folder, crash
        self.embedded = 0
        self.calls = 0

    def load(self) -> None:
        self.model.load()

    @property
    def loaded(self) -> bool:
        return self.model.loaded

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.calls += 1
        if self.crash and self.calls > 1:
            while not (self.folder / "stored").exists():
                time.sleep(0.01)
            (self.folder / "blocked").touch()
            threading.Event().wait()  # held here, its batch claimed, until killed
        self.embedded += len(texts)
        return self.model.embed(texts)


async def main(path: str, mode: str, folder: Path) -> None:
    embedder = Counting(folder, crash=mode == "crash")
    # A crashed process's claim lapses after its lease: a short one, for the test.
    lease = 1.0 if mode == "crash" else 30.0
    settings = IndexerSettings(batch=8, idle_poll_s=0.05, lease_s=lease)
    async with GraphMemory.open(path, embedder=embedder, indexing=settings) as mem:
        if mode == "crash":
            while (await mem.index_progress()).indexed == 0:
                await anyio.sleep(0.01)
            (folder / "stored").touch()
            await anyio.sleep_forever()
        while not (folder / "go").exists():
            await anyio.sleep(0.01)
        await mem.wait_until_indexed()
    (folder / f"{os.getpid()}.count").write_text(str(embedder.embedded))


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], Path(sys.argv[3]))
