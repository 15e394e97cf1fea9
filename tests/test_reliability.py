"""Reliability: many processes writing one file, writers killed mid-write, and files
that are not usable chronomem databases.

Every writer here is a separate OS process (the Python API in `python -c`, or
`chronomem serve` over stdio driven by an MCP client), as in real use: SQLite's
locks, not one event loop, keep them apart. Sizes are small and fixed so the module
stays fast; deadlines only bound how long a broken run waits, and nothing is timed.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from memory import DatabaseFileError, GraphMemory
from memory.models import ObservationRecord
from memory.store import add_functions

pytestmark = pytest.mark.anyio

CHRONOMEM = str(Path(sys.executable).parent / "chronomem")
APP, USER = "reliability", "writer"
TOPICS = 10  # every writer spreads its facts over the same few entities

# One process writing `count` facts, one per `remember` call, each on one of the shared
# entities. Right after each call returns it prints the acknowledged fact as a JSON line
# and flushes, so whatever a reader of its stdout sees was acknowledged. With `wait` it
# opens the file, prints "ready" and waits for a "go" line on stdin before its first write.
WRITER = f"""
import json, sys
import anyio
from memory import GraphMemory

async def main(config):
    async with GraphMemory.open(config["db"]) as mem:
        scope = mem.scope(app={APP!r}, user={USER!r})
        if config.get("wait"):
            print("ready", flush=True)
            assert sys.stdin.readline() == "go\\n", "never told to go"
        for n in range(config["count"]):
            text = f"{{config['label']}} fact {{n}}"
            result = await scope.remember(entity=f"Topic {{n % {TOPICS}}}", facts=[text])
            sys.stdout.write(json.dumps({{"id": result.added[0].id, "text": text}}) + "\\n")
            sys.stdout.flush()

anyio.run(main, json.loads(sys.argv[1]))
"""

# For each line on stdin, one round of reads: counts the facts, searches and opens an
# entity, then prints the count. Ends when stdin does.
READER = f"""
import json, sys
import anyio
from memory import GraphMemory

async def main(config):
    async with GraphMemory.open(config["db"]) as mem:
        scope = mem.scope(app={APP!r}, user={USER!r})
        while sys.stdin.readline():
            facts = (await scope.stats()).observations_current
            await scope.search_nodes(query="fact", limit=5)
            await scope.open_nodes(names=["Topic 0"])
            print(json.dumps(facts), flush=True)

anyio.run(main, json.loads(sys.argv[1]))
"""


def clean_env() -> dict[str, str]:
    """This environment without any CHRONOMEM_* setting of the person running the tests."""
    return {k: v for k, v in os.environ.items() if not k.startswith("CHRONOMEM_")}


def acknowledged(output: str) -> dict[str, str]:
    """id -> text of each complete line a writer printed (a line cut by a kill is left out)."""
    lines = output.split("\n")[:-1]
    facts = [json.loads(line) for line in lines]
    return {fact["id"]: fact["text"] for fact in facts}


async def stored_facts(path: Path) -> list[tuple[str, str]]:
    """(id, text) of every fact in the writers' memory, in the order they were stored."""
    async with GraphMemory.open(path) as mem:
        records = await mem.scope(app=APP, user=USER).export()
    return [(r.id, r.text) for r in records if isinstance(r, ObservationRecord)]


def assert_intact(path: Path) -> None:
    """SQLite's integrity check, and FTS5's check of each full-text index against its table."""
    with sqlite3.connect(path) as conn:
        add_functions(conn)
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        indexes = conn.execute(
            "SELECT name FROM sqlite_master WHERE sql LIKE 'CREATE VIRTUAL TABLE%fts5%'"
        ).fetchall()
        assert indexes
        for (name,) in indexes:
            conn.execute(f"INSERT INTO {name} ({name}, rank) VALUES ('integrity-check', 1)")
    conn.close()


class Lines:
    """The lines a child process prints, read as they come."""

    def __init__(self, stream: anyio.abc.ByteReceiveStream) -> None:
        self._stream = BufferedByteReceiveStream(stream)

    async def next(self) -> str | None:
        """The next whole line, None at the end of the output."""
        try:
            return (await self._stream.receive_until(b"\n", 1 << 20)).decode()
        except anyio.IncompleteRead:
            return None


async def test_processes_and_servers_writing_one_file_lose_nothing_and_do_not_block_reads(
    tmp_path: Path,
) -> None:
    """4 API processes (250 facts each) and 2 `chronomem serve` stdio servers (100 each)
    write the same file at once, all released by one signal, while another process
    reads after every write acknowledged: no caller sees an error, every acknowledged
    fact is stored, and the reads go on while the writes do, each a consistent
    snapshot."""
    db = tmp_path / "memory.db"
    env = clean_env()
    go = anyio.Event()
    servers_ready = {f"mcp{i}": anyio.Event() for i in range(2)}
    acks: dict[str, dict[str, str]] = {}
    returncodes: dict[str, int | None] = {}
    # Each acknowledged write asks for a round of reads; rounds asked for while one
    # runs are taken together, so the reader never falls behind the writers.
    wrote, writes = anyio.create_memory_object_stream[None](max_buffer_size=10_000)
    seen: list[int] = []

    async def read_along(reader: anyio.abc.Process, reading: anyio.Event) -> None:
        assert reader.stdin is not None and reader.stdout is not None
        lines = Lines(reader.stdout)

        async def read_round() -> None:
            await reader.stdin.send(b"read\n")
            line = await lines.next()
            assert line is not None, "the reader stopped"
            seen.append(json.loads(line))

        await read_round()  # before any write
        reading.set()
        async with writes:
            async for _ in writes:
                while True:  # take the rounds asked for meanwhile together
                    try:
                        writes.receive_nowait()
                    except anyio.WouldBlock:
                        break
                await read_round()
        await reader.stdin.aclose()

    async def api_writer(label: str, ready: anyio.Event, wrote: Any) -> None:
        config = {"db": str(db), "label": label, "count": 250, "wait": True}
        command = [sys.executable, "-c", WRITER, json.dumps(config)]
        with (tmp_path / f"{label}.log").open("w") as log, wrote:
            async with await anyio.open_process(command, stderr=log, env=env) as process:
                assert process.stdin is not None and process.stdout is not None
                lines = Lines(process.stdout)
                assert await lines.next() == "ready"
                ready.set()
                await go.wait()
                await process.stdin.send(b"go\n")
                written: dict[str, str] = {}
                while (line := await lines.next()) is not None:
                    fact = json.loads(line)
                    written[fact["id"]] = fact["text"]
                    wrote.send_nowait(None)
                returncodes[label] = await process.wait()
        acks[label] = written

    async def mcp_writer(label: str, wrote: Any) -> None:
        params = StdioServerParameters(
            command=CHRONOMEM,
            args=["serve", "--db", str(db)],
            env={**env, "CHRONOMEM_APP": APP, "CHRONOMEM_USER": USER},
        )
        written: dict[str, str] = {}
        with (tmp_path / f"{label}.log").open("w") as log, wrote:
            async with Client(stdio_client(params, errlog=log)) as client:
                servers_ready[label].set()
                await go.wait()
                for n in range(100):
                    text = f"{label} fact {n}"
                    arguments = {"entity": f"Topic {n % TOPICS}", "facts": [text]}
                    result = await client.call_tool("remember", arguments)
                    assert not result.is_error, result.content
                    assert result.structured_content is not None
                    written[result.structured_content["added"][0]["id"]] = text
                    wrote.send_nowait(None)
        acks[label] = written

    config = {"db": str(db)}
    reader_command = [sys.executable, "-c", READER, json.dumps(config)]
    with anyio.fail_after(120), (tmp_path / "reader.log").open("w") as reader_log:
        async with await anyio.open_process(reader_command, stderr=reader_log, env=env) as reader:
            async with anyio.create_task_group() as tasks:
                reading = anyio.Event()
                tasks.start_soon(read_along, reader, reading)
                api_ready = {f"api{i}": anyio.Event() for i in range(4)}
                for label, ready in api_ready.items():
                    tasks.start_soon(api_writer, label, ready, wrote.clone())
                for label in servers_ready:
                    tasks.start_soon(mcp_writer, label, wrote.clone())
                wrote.close()
                for event in [reading, *api_ready.values(), *servers_ready.values()]:
                    await event.wait()
                go.set()  # all six writers hold the file open: now write at once
            reader_done = await reader.wait()

    # No caller saw an error: each API process finished (an exception would have ended
    # it with a traceback), each tool call succeeded, and no server logged a failure.
    for label in sorted(acks):
        log = (tmp_path / f"{label}.log").read_text()
        assert returncodes.get(label, 0) == 0 and "Traceback" not in log, log
        assert "locked" not in log, log
        assert len(acks[label]) == (250 if label.startswith("api") else 100)
    assert len(acks) == 6

    # Every acknowledged fact is stored, with its text, and nothing else is.
    everything = {fact_id: text for written in acks.values() for fact_id, text in written.items()}
    assert len(everything) == 4 * 250 + 2 * 100  # ids are unique across writers
    stored = await stored_facts(db)
    assert dict(stored) == everything
    assert_intact(db)

    # The writers really ran at once: each one's writes are interleaved with another's.
    order = [text.split(" ")[0] for _, text in stored]
    for label in acks:
        first = order.index(label)
        last = len(order) - 1 - order[::-1].index(label)
        assert set(order[first : last + 1]) != {label}, f"{label} wrote alone"

    # Reads went on during the writes, and each saw a consistent snapshot: the count
    # of facts only grows.
    assert reader_done == 0, (tmp_path / "reader.log").read_text()
    assert seen[0] == 0 and seen == sorted(seen), seen
    during = {n for n in seen if 0 < n < len(everything)}
    assert len(during) >= 3, seen


def test_a_writer_killed_at_random_moments_keeps_the_file_intact_and_every_acknowledged_write(
    tmp_path: Path,
) -> None:
    """A process writing as fast as it can is killed with SIGKILL 0.2-1.0 s after its
    first acknowledged write, 10 times on the same file. After each kill the file (as
    the kill left it, journal included) passes SQLite's and FTS5's integrity checks and
    holds every fact acknowledged so far, plus at most one unacknowledged write per kill
    (committed just before the kill, not yet printed). The next writer opens the file
    exactly as the killed one left it."""
    rng = random.Random(20260601)
    db = tmp_path / "memory.db"
    env = clean_env()
    acked: dict[str, str] = {}
    for run in range(10):
        out, err = tmp_path / f"acks-{run}.jsonl", tmp_path / f"stderr-{run}.txt"
        config = {"db": str(db), "label": f"crash{run}", "count": 10**6}
        with out.open("w") as stdout, err.open("w") as stderr:
            process = subprocess.Popen(
                [sys.executable, "-c", WRITER, json.dumps(config)],
                stdout=stdout,
                stderr=stderr,
                env=env,
            )
        try:
            # Polled (stdout is a file, so a pipe cannot hold the writer back).
            deadline = time.monotonic() + 60
            while out.stat().st_size == 0:  # until its first acknowledged write
                assert process.poll() is None, err.read_text()
                assert time.monotonic() < deadline, "the writer never wrote"
                time.sleep(0.005)
            # The moment of the kill is what the test varies: a random pause, not a
            # measurement.
            time.sleep(rng.uniform(0.2, 1.0))
        finally:
            process.kill()  # SIGKILL: no cleanup, no checkpoint, no closing
            process.wait()
        assert process.returncode == -signal.SIGKILL, err.read_text()
        new = acknowledged(out.read_text())
        assert new and not set(new) & set(acked)
        acked.update(new)

        # Check a copy of the file and its write-ahead log as the kill left them (the
        # check's own recovery and checkpoint must not tidy up for the next writer).
        copy = tmp_path / f"after-kill-{run}" / "memory.db"
        copy.parent.mkdir()
        for suffix in ("", "-wal"):
            if Path(f"{db}{suffix}").exists():
                shutil.copyfile(f"{db}{suffix}", f"{copy}{suffix}")
        assert_intact(copy)
        stored = dict(anyio.run(stored_facts, copy))
        assert {i: stored.get(i) for i in acked} == acked
        assert len(stored) - len(acked) <= run + 1

    assert len(acked) >= 10
    assert_intact(db)
    stored = dict(anyio.run(stored_facts, db))
    assert {i: stored.get(i) for i in acked} == acked


async def make_file(kind: str, path: Path) -> None:
    """A file at `path` that chronomem must refuse."""
    if kind == "random bytes":
        path.write_bytes(random.Random(7).randbytes(64 * 1024))
        return
    if kind == "another program's SQLite database":
        with sqlite3.connect(path) as conn:
            conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
            conn.execute("INSERT INTO invoices (total) VALUES (12.5)")
        conn.close()
        return
    async with GraphMemory.open(path) as mem:
        scope = mem.scope(app=APP, user=USER)
        for batch in range(4):
            await scope.remember(entity=f"E{batch}", facts=[f"fact {batch} {n}" for n in range(50)])
    assert not Path(f"{path}-wal").exists()  # closing checkpointed everything into the file
    size = path.stat().st_size
    with sqlite3.connect(path) as conn:
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        (facts_page,) = conn.execute(
            "SELECT rootpage FROM sqlite_master WHERE name = 'observation'"
        ).fetchone()
    conn.close()
    assert size >= 20 * page_size
    with path.open("r+b") as file:
        if kind == "chronomem database cut in half":
            file.truncate(size // 2)
        elif kind == "chronomem database missing the end of its last page":
            file.truncate(size - 100)
        else:
            assert kind == "chronomem database with a damaged page"
            file.seek((facts_page - 1) * page_size)
            file.write(random.Random(8).randbytes(page_size))


BAD_FILES = [
    "random bytes",
    "chronomem database cut in half",
    "chronomem database missing the end of its last page",
]


@pytest.mark.parametrize("kind", BAD_FILES)
async def test_a_corrupt_file_is_refused_and_left_untouched(tmp_path: Path, kind: str) -> None:
    """(Another program's database and a text file: see test_storage.py.)"""
    path = tmp_path / "memory.db"
    await make_file(kind, path)
    before, listing = path.read_bytes(), sorted(os.listdir(tmp_path))
    with pytest.raises(DatabaseFileError) as refused:
        async with GraphMemory.open(path):
            pass
    message = str(refused.value)
    assert str(path) in message and "left untouched" in message
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == listing  # no journal or index files left behind


async def test_damage_found_by_a_read_is_a_database_file_error(tmp_path: Path) -> None:
    """A page of facts overwritten with garbage: opening cannot see it without reading the
    whole file, but the first read that reaches it must say the file is damaged."""
    path = tmp_path / "memory.db"
    await make_file("chronomem database with a damaged page", path)
    before = path.read_bytes()
    with pytest.raises(DatabaseFileError, match="memory.db"):
        async with GraphMemory.open(path) as mem:
            await mem.scope(app=APP, user=USER).stats()
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    "kind",
    [
        "another program's SQLite database",
        *BAD_FILES,
        "chronomem database with a damaged page",
    ],
)
async def test_the_command_line_refuses_a_corrupt_file_in_one_line(
    tmp_path: Path, kind: str
) -> None:
    path = tmp_path / "memory.db"
    await make_file(kind, path)
    before, listing = path.read_bytes(), sorted(os.listdir(tmp_path))
    command = [CHRONOMEM, "stats", "--db", str(path), "--app", APP, "--user", USER]
    done = await anyio.run_process(command, check=False, env=clean_env())
    stderr = done.stderr.decode()
    assert done.returncode == 1, stderr
    assert done.stdout == b""
    assert "Traceback" not in stderr
    assert stderr.count("\n") == 1 and stderr.startswith("chronomem: "), stderr
    assert str(path) in stderr
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == listing
