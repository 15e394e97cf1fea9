"""Shared helpers for the benchmarks: machine description, percentiles, a plain BM25
ranker (the classic baseline of the retrieval benchmarks), and a raw JSON-RPC client
for a server over stdio."""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import re
import sqlite3
import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any


def machine() -> str:
    return (
        f"{os.cpu_count()} cores, Python {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version}, {platform.system()} {platform.machine()}"
    )


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) by linear interpolation; 0 for no values."""
    if not values:
        return 0.0
    if len(values) == 1:
        return float(values[0])
    return statistics.quantiles(values, n=100, method="inclusive")[max(0, min(98, int(q) - 1))]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f}"


_WORD = re.compile(r"\w+")


def observation_line(id_: str, entity: str, text: str, at: str) -> dict[str, Any]:
    """An export line of one current global fact, true and recorded at `at`."""
    return {
        "type": "observation",
        "id": id_,
        "entity": entity,
        "text": text,
        "attribute": None,
        "project": None,
        "valid_from": at,
        "recorded_at": at,
        "reason": None,
        "valid_to": None,
        "invalidated_at": None,
    }


def plain_words(text: str) -> list[str]:
    """Lower-cased `\\w+` words: no stemming, no stop words."""
    return _WORD.findall(text.lower())


class PlainBM25:
    """Classic Okapi BM25 (k1=1.5, b=0.75 by default) over `docs`, tokenised by
    `words` (`plain_words` unless told): the baseline retrieval is compared with. Each
    occurrence of a word in the query counts (a word asked twice weighs twice)."""

    def __init__(
        self,
        docs: Sequence[str],
        k1: float = 1.5,
        b: float = 0.75,
        words: Callable[[str], list[str]] = plain_words,
    ) -> None:
        self.k1, self.b, self.words = k1, b, words
        self.docs = [Counter(words(doc)) for doc in docs]
        self.lengths = [sum(doc.values()) for doc in self.docs]
        self.average = sum(self.lengths) / len(self.docs) if self.docs else 0.0
        self.frequency = Counter(word for doc in self.docs for word in doc)

    def scores(self, query: str) -> list[float]:
        """Each document's score for `query`, in document order (0: no word matches)."""
        n, k1, b, average = len(self.docs), self.k1, self.b, self.average
        terms = self.words(query)
        df = self.frequency
        idf = {t: math.log((n - df[t] + 0.5) / (df[t] + 0.5) + 1) for t in terms}
        return [
            sum(
                idf[t] * doc[t] * (k1 + 1) / (doc[t] + k1 * (1 - b + b * length / average))
                for t in terms
                if doc[t]
            )
            for doc, length in zip(self.docs, self.lengths, strict=True)
        ]

    def ranked(self, query: str, matched_only: bool = False) -> list[int]:
        """Document indexes, best first (ties in document order); with `matched_only`,
        only the documents that share a word with the query."""
        scores = self.scores(query)
        order = sorted(range(len(scores)), key=lambda i: -scores[i])
        return [i for i in order if scores[i] > 0] if matched_only else order


def size_arguments(description: str, sizes: str, runs: int) -> argparse.Namespace:
    """`--sizes` (entity counts, parsed to a list), `--runs` and `--json`, shared by
    the benchmarks that measure at several sizes. Sizes below 3 or runs below 1 are
    refused."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--sizes", default=sizes, help="entity counts, comma-separated")
    parser.add_argument("--runs", type=int, default=runs, help="timed calls per operation")
    parser.add_argument("--json", type=Path, help="also write the results here as JSON")
    args = parser.parse_args()
    try:
        args.sizes = [int(size) for size in args.sizes.split(",") if size.strip()]
    except ValueError:
        parser.error(f"--sizes: {args.sizes!r} is not a comma-separated list of numbers")
    if not args.sizes or min(args.sizes) < 3 or args.runs < 1:
        parser.error("sizes must be at least 3 entities, runs at least 1")
    return args


INITIALIZE = {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "chronomem-bench", "version": "1"},
}


class StdioServer:
    """An MCP server over stdio, spoken to in raw JSON-RPC: one request line out, one
    response line back, so a call's time is the server's and the pipe's only (no
    client library parsing or checking results)."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.next_id = 0
        self.received = 0  # bytes of the last response line

    @classmethod
    async def start(
        cls,
        command: Sequence[str],
        env: dict[str, str] | None = None,
        stderr: IO[Any] | int = asyncio.subprocess.DEVNULL,
    ) -> StdioServer:
        process = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            env=env,
            limit=2**26,  # a read_graph page is one long line
        )
        server = cls(process)
        await server.request("initialize", INITIALIZE)
        await server.notify("notifications/initialized")
        return server

    async def notify(self, method: str) -> None:
        await self._send({"jsonrpc": "2.0", "method": method})

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """The result of one request; a JSON-RPC error or a tool error raises."""
        self.next_id += 1
        await self._send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        assert self.process.stdout is not None
        while True:
            line = await self.process.stdout.readline()
            if not line:
                raise RuntimeError(f"{method}: the server closed its output")
            message = json.loads(line)
            if message.get("id") == self.next_id:
                if "error" in message or message["result"].get("isError"):
                    raise RuntimeError(f"{method} failed: {message}")
                self.received = len(line)
                return message["result"]

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return await self.request("tools/call", {"name": name, "arguments": arguments})

    async def _send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        await self.process.stdin.drain()

    def peak_rss(self) -> int:
        """Peak resident memory in bytes (Linux `VmHWM`; 0 where unknown)."""
        try:
            status = Path(f"/proc/{self.process.pid}/status").read_text()
        except OSError:
            return 0
        for line in status.splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        return 0

    async def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        await self.process.wait()
