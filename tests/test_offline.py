"""The model ships in a package: loading it, embedding, indexing and searching open no
socket and leave no file outside the database's folder (DESIGN §8: no hub, no
network at any time). The language identifier, which the model asks whether it can
read a query of a few keywords, unpacks its own model through an anonymous temporary
file: the one write allowed elsewhere, gone once it has loaded."""

from __future__ import annotations

from pathlib import Path

from .offline_probe import run_recorded, written_outside

# Runs after the recording hook, from the first import of the engine to the last search.
PROGRAM = r"""
import anyio
from memory import GraphMemory

async def main(db):
    async with GraphMemory.open(db, embedder="default") as mem:
        scope = mem.scope(app="a", user="u")
        await scope.remember("Alice", ["has three sisters"])
        await scope.record_turns("s", [{"role": "user", "text": "we adopted a puppy"}])
        await mem.wait_until_indexed()
        hits = await scope.search_nodes("siblings")
        turns = await scope.recall("pets")
        return hits.hits[0].observations[0].text, turns.turns[0].text

found = anyio.run(main, sys.argv[1])
print(json.dumps({"found": found, "sockets": sockets, "written": written}))
"""


def test_the_model_loads_and_ranks_with_no_network_and_no_download(tmp_path: Path) -> None:
    db = tmp_path / "data" / "memory.db"
    home = tmp_path / "home"
    temporary = tmp_path / "tmp"
    report = run_recorded(PROGRAM, str(db), home=home, temporary=temporary)
    assert report["found"] == ["has three sisters", "we adopted a puppy"]
    assert report["sockets"] == []
    assert written_outside(report, db.parent, temporary) == []
    assert list(temporary.iterdir()) == []
    assert not home.exists()
