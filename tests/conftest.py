from __future__ import annotations

import ipaddress
import os
import socket
import sqlite3
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from memory import GraphMemory, MemoryScope
from memory.search_settings import DEFAULT_SEARCH, SearchSettings
from memory.timestamps import parse_time

T0 = "2026-06-01T00:00:00Z"

# Words only, unless a test asks for an embedder (tests/semantic/): the behaviour of
# every other test is the lexical one, and servers the tests start inherit this.
os.environ["CHRONOMEM_EMBEDDER"] = "none"
# The suite runs offline (DESIGN §8): no hub, and no connection off this machine.
os.environ["HF_HUB_OFFLINE"] = "1"


def _loopback(host: str) -> bool:
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _offline(event: str, args: tuple[object, ...]) -> None:
    if event == "socket.connect":
        sock, address = args
        family = getattr(sock, "family", None)
        network = family in (socket.AF_INET, socket.AF_INET6) and isinstance(address, tuple)
        if network and not _loopback(str(address[0])):
            raise OSError(f"the test suite runs offline: connecting to {address} refused")


sys.addaudithook(_offline)


class FakeClock:
    """A clock that moves only when told, or by `step` microseconds on every reading."""

    def __init__(self, start: str = T0, step: int = 0) -> None:
        self.now = parse_time(start)
        self.step = step
        self.last = self.now

    def __call__(self) -> int:
        self.last = self.now
        self.now += self.step
        return self.last

    def advance(self, seconds: float = 1.0) -> None:
        self.now += int(seconds * 1_000_000)

    def set(self, moment: str) -> None:
        self.now = parse_time(moment)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "memory.db"


@pytest.fixture
def search_settings() -> SearchSettings:
    """The search bounds `mem` opens with; a test parametrizes it to shrink them."""
    return DEFAULT_SEARCH


@pytest.fixture
async def mem(
    db_path: Path, clock: FakeClock, search_settings: SearchSettings
) -> AsyncIterator[GraphMemory]:
    async with GraphMemory.open(db_path, clock=clock, search=search_settings) as memory:
        yield memory


# One user's memory seen globally and from two projects (the overlay tests).
@pytest.fixture
def world(mem: GraphMemory) -> MemoryScope:
    return mem.scope(app="a", user="u")


@pytest.fixture
def project_a(mem: GraphMemory) -> MemoryScope:
    return mem.scope(app="a", user="u", project="A")


@pytest.fixture
def project_b(mem: GraphMemory) -> MemoryScope:
    return mem.scope(app="a", user="u", project="B")


@pytest.fixture
def alice(mem: GraphMemory) -> MemoryScope:
    return mem.scope(app="coach", user="alice")


def dump(path: Path, *, clock: bool = True) -> dict[str, list[tuple[object, ...]]]:
    """Every row of every table, to prove that a rejected call changed nothing.

    `clock=False` leaves out the transaction-time high-water mark, which every
    accepted write advances even when it changes no memory.
    """
    conn = sqlite3.connect(path)
    try:
        tables = [
            name
            for (name,) in conn.execute(
                # An FTS5 table reads its rows through the analyzer's view; its shadow
                # tables hold what it indexed.
                "SELECT name FROM sqlite_master WHERE type = 'table'"
                " AND sql NOT LIKE 'CREATE VIRTUAL TABLE%' ORDER BY name"
            )
            if clock or name != "tx_clock"
        ]
        return {t: conn.execute(f"SELECT * FROM {t}").fetchall() for t in tables}
    finally:
        conn.close()
