"""The model ships in a package: loading it, embedding, indexing and searching open no
socket and write no file outside the database's folder (DESIGN §8: no hub, no
network at any time)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Runs in a fresh interpreter: every network socket, connection or name lookup and
# every file opened for writing,
# from the first import of the engine to the last search, is recorded.
PROGRAM = r"""
import json, os, sys
sockets, written = [], []
import socket
NETWORK = (socket.AF_INET, socket.AF_INET6)
def watch(event, args):
    # asyncio's own loop makes a pair of Unix sockets: only the network counts.
    if event == "socket.__new__" and args[1] in NETWORK or event in (
        "socket.connect", "socket.getaddrinfo", "socket.gethostbyname", "urllib.Request"
    ):
        sockets.append([event, repr(args)[:200]])
    elif event == "open" and len(args) > 1 and isinstance(args[0], str):
        mode, flags = args[1], args[2] if len(args) > 2 else 0
        if (mode and any(c in mode for c in "wax+")) or (flags & (os.O_WRONLY | os.O_RDWR)):
            written.append(args[0])
sys.addaudithook(watch)

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
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE"))}
    env["HOME"] = str(tmp_path / "home")  # a hub cache would appear under it
    db = tmp_path / "data" / "memory.db"
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(db)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["found"] == ["has three sisters", "we adopted a puppy"]
    assert report["sockets"] == []
    outside = [p for p in report["written"] if not Path(p).resolve().is_relative_to(db.parent)]
    assert outside == []
    assert not (tmp_path / "home").exists()
