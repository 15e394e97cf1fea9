"""Concurrent load: N streamable-HTTP MCP clients against one `chronomem serve`.

    .venv/bin/python -m bench.load [--clients 16] [--seconds 60] [--client raw|sdk]
                                   [--entities 200] [--json FILE]

One server process (`chronomem serve --transport http` on 127.0.0.1, a free port, a
database file in a temp folder, no tokens: loopback only) is pre-populated through
the Python API with `--entities` entities (3 facts each, a relation to an earlier
one) and a turn log, then `--clients` clients, each with its own MCP session, call
tools back to back for `--seconds`: 70% reads (search_nodes 20%, open_nodes 20%,
profile_card 15%, recall 15%) and 30% writes (remember 15%, relate 10%,
record_turns 5%), with arguments from a seeded generator (query words follow the
Zipf vocabulary of `bench.search_latency`). Clients start together once all are
connected; session setup is not timed.

Reported: calls, throughput, p50/p99/max latency per operation and overall (as the
client sees it: request sent to response parsed), and errors: tool errors
(`isError: true`) and exceptions (HTTP, JSON-RPC or transport failures), with a
sample of their messages.

`--client raw` (the default) speaks JSON-RPC over HTTP/1.1 by hand: initialize, then one
POST per call on one keep-alive connection, the JSON (or SSE) reply parsed for its
result. It measures the server, since it costs the client little: an httpx2 client
took about 1.7 ms of CPU per call here, as much as the server's own HTTP stack, on the
same 2 cores. `--client sdk` uses the MCP SDK's `Client` with
`streamable_http_client`, as an agent would; that client validates every tool result
against the tool's output schema with jsonschema, which adds milliseconds of client
CPU per call, and on a small machine the clients then compete with the server for
cores. The output says which client was used.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
from anyio.abc import SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream

from memory import GraphMemory

from .common import machine, ms, percentile
from .search_latency import sentence, vocabulary

SEED = 7
HOST = "127.0.0.1"  # loopback only: the server runs without tokens
MAX_CLIENTS = 64
MAX_SECONDS = 600
MAX_ENTITIES = 10_000
APP, USER = "bench", "load"
ROOT = Path(__file__).resolve().parent.parent
MIX = {
    "search_nodes": 20,
    "open_nodes": 20,
    "profile_card": 15,
    "recall": 15,
    "remember": 15,
    "relate": 10,
    "record_turns": 5,
}
WRITES = {"remember", "relate", "record_turns"}
TYPES = ("person", "place", "organisation", "project", "preference", "event")
RELATIONS = ("knows", "works at", "lives in", "part of", "likes", "attended")
PROTOCOL = "2025-06-18"
CALL_TIMEOUT = 30.0
CLIENTS = {
    "raw": "raw JSON-RPC over HTTP/1.1 by hand (one keep-alive connection, one POST per "
    "call; no output-schema validation)",
    "sdk": "MCP SDK Client + streamable_http_client (validates each result against "
    "the output schema with jsonschema)",
}

# ------------------------------------------------------------------ the workload


def entity_name(i: int) -> str:
    return f"Entity {i}"


class Workload:
    """Seeded tool arguments for one client."""

    def __init__(self, client: int, entities: int, words: list[str]) -> None:
        self.rng = random.Random(SEED * 1_000 + client)
        self.client = client
        self.entities = entities
        self.words = words
        self.count = 0

    def pick(self) -> str:
        return self.rng.choices(list(MIX), weights=list(MIX.values()))[0]

    def _name(self) -> str:
        return entity_name(self.rng.randrange(self.entities))

    def _words(self, low: int, high: int) -> str:
        return sentence(self.rng, self.words, self.rng.randint(low, high))

    def arguments(self, operation: str) -> dict[str, Any]:
        self.count += 1
        rng = self.rng
        if operation == "search_nodes":
            return {"query": self._words(2, 5), "limit": 10}
        if operation == "open_nodes":
            return {"names": [self._name() for _ in range(3)]}
        if operation == "profile_card":
            return {"query": self._words(2, 3)} if rng.random() < 0.3 else {}
        if operation == "recall":
            return {"query": self._words(2, 4), "limit": 10}
        if operation == "remember":
            text = f"{self._words(5, 10)} #{self.client}.{self.count}"
            return {"entity": self._name(), "facts": [text]}
        if operation == "relate":
            return {
                "source": self._name(),
                "relation": rng.choice(RELATIONS),
                "target": self._name(),
                "exclusive": rng.random() < 0.2,
            }
        if operation == "record_turns":
            return {
                "session_id": f"load {self.client}",
                "turns": [
                    {"role": "user", "text": self._words(8, 20)},
                    {"role": "assistant", "text": self._words(8, 20)},
                ],
            }
        raise ValueError(operation)


async def populate(db: Path, entities: int, words: list[str]) -> dict[str, int]:
    rng = random.Random(SEED)
    turns = 0
    async with GraphMemory.open(db) as memory:
        scope = memory.scope(app=APP, user=USER)
        for i in range(entities):
            facts = [f"{sentence(rng, words, rng.randint(5, 12))} #{i}.{j}" for j in range(3)]
            await scope.remember(entity=entity_name(i), entity_type=TYPES[i % 6], facts=facts)
            if i:
                await scope.relate(
                    source=entity_name(i),
                    relation=rng.choice(RELATIONS),
                    target=entity_name(rng.randrange(i)),
                )
        for session in range(max(1, entities // 20)):
            batch = [
                {"role": ("user", "assistant")[k % 2], "text": sentence(rng, words, 12)}
                for k in range(20)
            ]
            await scope.record_turns(session_id=f"seed {session}", turns=batch)
            turns += len(batch)
    return {"entities": entities, "facts": 3 * entities, "relations": entities - 1, "turns": turns}


# ------------------------------------------------------------------ the server


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def serve_command(db: Path, port: int) -> list[str]:
    """`chronomem serve --transport http`, from the tree being measured."""
    entry = "from server.cli import main; main()"
    return [
        sys.executable,
        "-c",
        entry,
        "serve",
        "--transport",
        "http",
        "--host",
        HOST,
        "--port",
        str(port),
        "--db",
        str(db),
        "--app",
        APP,
        "--user",
        USER,
    ]


@asynccontextmanager
async def running_server(db: Path, log: Path) -> AsyncIterator[str]:
    """The server's URL while it runs; stopped on exit."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHRONOMEM_")}
    with log.open("w") as err:
        process = subprocess.Popen(
            serve_command(db, port), cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err
        )
    try:
        with anyio.fail_after(30):
            while True:
                if process.poll() is not None:
                    raise RuntimeError(f"the server exited:\n{log.read_text()}")
                try:
                    stream = await anyio.connect_tcp(HOST, port)
                except OSError:
                    await anyio.sleep(0.05)
                else:
                    await stream.aclose()
                    break
        yield f"http://{HOST}:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# ------------------------------------------------------------------ the clients

Call = Callable[[str, dict[str, Any]], Awaitable[tuple[bool, str]]]


class ProtocolError(Exception):
    """A JSON-RPC error, or a reply that is not one."""


MAX_HEAD = 64 * 1024  # the status line and headers of one response
# uvicorn closes a keep-alive connection idle for 5 s; one idle longer than this is
# not reused (a request written to a socket the server just closed is lost).
IDLE_REUSE = 4.0


@dataclass
class Reply:
    status: int
    headers: dict[str, str]  # names in lower case
    body: bytes


class Connection:
    """One keep-alive HTTP/1.1 connection, spoken by hand: a request out, then the
    status, headers and a Content-Length, chunked or close-delimited body back."""

    def __init__(
        self,
        url: str,
        *,
        idle_reuse: float = IDLE_REUSE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        parts = urllib.parse.urlsplit(url)
        self.host, self.port, self.path = parts.hostname or HOST, parts.port or 80, parts.path
        self._socket: SocketStream | None = None
        self._reader: BufferedByteReceiveStream | None = None
        self._idle_reuse = idle_reuse  # seconds idle after which a connection is not reused
        self._clock = clock
        self._used = 0.0  # `clock()` at the last response

    async def request(self, method: str, headers: dict[str, str], body: bytes = b"") -> Reply:
        """One request and its response, within CALL_TIMEOUT. A failure closes the
        connection (a response may be half read); the next request opens a new one."""
        try:
            with anyio.fail_after(CALL_TIMEOUT):
                return await self._exchange(method, headers, body)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.aclose()
            raise

    async def _exchange(self, method: str, headers: dict[str, str], body: bytes) -> Reply:
        if self._socket is not None and self._clock() - self._used > self._idle_reuse:
            await self.aclose()
        if self._socket is None or self._reader is None:
            self._socket = await anyio.connect_tcp(self.host, self.port)
            self._reader = BufferedByteReceiveStream(self._socket)
        lines = [
            f"{method} {self.path} HTTP/1.1",
            f"Host: {self.host}:{self.port}",
            f"Content-Length: {len(body)}",
            *(f"{name}: {value}" for name, value in headers.items()),
        ]
        await self._socket.send(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        head = await self._reader.receive_until(b"\r\n\r\n", MAX_HEAD)
        status_line, *fields = head.decode("latin-1").split("\r\n")
        status = int(status_line.split(" ", 2)[1])
        found: dict[str, str] = {}
        for field_line in fields:
            name, _, value = field_line.partition(":")
            found[name.strip().lower()] = value.strip()
        if method == "HEAD" or status in (204, 304) or status < 200:
            content = b""
        elif "content-length" in found:
            content = await self._reader.receive_exactly(int(found["content-length"]))
        elif found.get("transfer-encoding", "").lower() == "chunked":
            content = await self._chunked(self._reader)
        else:  # delimited by the server closing the connection
            content = await self._until_closed(self._reader)
            found["connection"] = "close"
        self._used = self._clock()
        if found.get("connection", "").lower() == "close":
            await self.aclose()
        return Reply(status, found, content)

    @staticmethod
    async def _chunked(reader: BufferedByteReceiveStream) -> bytes:
        parts = []
        while True:
            size = int((await reader.receive_until(b"\r\n", MAX_HEAD)).split(b";")[0], 16)
            if not size:
                while await reader.receive_until(b"\r\n", MAX_HEAD):  # trailers
                    pass
                return b"".join(parts)
            parts.append(await reader.receive_exactly(size))
            await reader.receive_exactly(2)

    @staticmethod
    async def _until_closed(reader: BufferedByteReceiveStream) -> bytes:
        parts = []
        try:
            while True:
                parts.append(await reader.receive())
        except anyio.EndOfStream:
            return b"".join(parts)

    async def aclose(self) -> None:
        if self._socket is not None:
            await self._socket.aclose()
        self._socket = self._reader = None


def _reply(response: Reply, wanted: int) -> dict[str, Any]:
    """The JSON-RPC message answering `wanted`, from a JSON or an SSE body."""
    if response.status >= 400:
        raise ProtocolError(f"HTTP {response.status}: {response.body[:200]!r}")
    text = response.body.decode()
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        messages = [
            json.loads(line[5:])
            for line in text.splitlines()
            if line.startswith("data:") and line[5:].strip()
        ]
    else:
        body = json.loads(text)
        messages = body if isinstance(body, list) else [body]
    for message in messages:
        if message.get("id") == wanted:
            if "error" in message:
                raise ProtocolError(str(message["error"]))
            return message["result"]
    raise ProtocolError(f"no reply to request {wanted} in {text[:200]!r}")


@asynccontextmanager
async def raw_client(url: str) -> AsyncIterator[Call]:
    connection = Connection(url)
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": PROTOCOL,
    }
    ids = iter(range(1, 2**62))

    async def post(message: dict[str, Any]) -> Reply:
        return await connection.request("POST", headers, json.dumps(message).encode())

    async def request(method: str, params: dict[str, Any]) -> dict[str, Any]:
        number = next(ids)
        message = {"jsonrpc": "2.0", "id": number, "method": method, "params": params}
        return _reply(await post(message), number)

    try:
        started = await post(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": PROTOCOL,
                    "capabilities": {},
                    "clientInfo": {"name": "bench.load", "version": "1"},
                },
            }
        )
        _reply(started, 0)
        if session := started.headers.get("mcp-session-id"):
            headers["Mcp-Session-Id"] = session
        note = await post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        if note.status >= 400:
            raise ProtocolError(f"notifications/initialized: HTTP {note.status}")

        async def call(name: str, arguments: dict[str, Any]) -> tuple[bool, str]:
            result = await request("tools/call", {"name": name, "arguments": arguments})
            is_error = bool(result.get("isError"))
            return is_error, result["content"][0]["text"] if is_error else ""

        try:
            yield call
        finally:
            with anyio.move_on_after(5, shield=True):
                await connection.request("DELETE", headers)
    finally:
        with anyio.CancelScope(shield=True):
            await connection.aclose()


@asynccontextmanager
async def sdk_client(url: str) -> AsyncIterator[Call]:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async with (
        httpx2.AsyncClient(timeout=CALL_TIMEOUT) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):

        async def call(name: str, arguments: dict[str, Any]) -> tuple[bool, str]:
            result = await client.call_tool(name, arguments)
            text = getattr(result.content[0], "text", "") if result.content else ""
            return bool(result.is_error), text if result.is_error else ""

        yield call


@dataclass
class Results:
    latencies: dict[str, list[float]] = field(default_factory=lambda: {op: [] for op in MIX})
    tool_errors: Counter[str] = field(default_factory=Counter)
    exceptions: Counter[str] = field(default_factory=Counter)
    messages: Counter[str] = field(default_factory=Counter)


@dataclass
class Start:
    """Every client connects, then all start together; `at` is when they did."""

    clients: int
    ready: int = 0
    event: anyio.Event = field(default_factory=anyio.Event)
    at: float = 0.0

    async def wait(self) -> None:
        self.ready += 1
        if self.ready == self.clients:
            self.at = time.perf_counter()
            self.event.set()
        await self.event.wait()


async def run_client(
    index: int,
    url: str,
    kind: str,
    workload: Workload,
    start: Start,
    seconds: float,
    results: Results,
) -> None:
    connect = raw_client if kind == "raw" else sdk_client
    async with connect(url) as call:
        await start.wait()
        deadline = start.at + seconds
        while time.perf_counter() < deadline:
            operation = workload.pick()
            arguments = workload.arguments(operation)
            began = time.perf_counter()
            try:
                is_error, message = await call(operation, arguments)
            except Exception as exc:
                results.exceptions[operation] += 1
                results.messages[f"{operation}: {type(exc).__name__}: {str(exc)[:200]}"] += 1
                continue
            results.latencies[operation].append(time.perf_counter() - began)
            if is_error:
                results.tool_errors[operation] += 1
                results.messages[f"{operation}: tool error: {message[:200]}"] += 1


# ------------------------------------------------------------------ the report


def summarise(results: Results, elapsed: float) -> dict[str, Any]:
    def row(times: list[float], tool_errors: int, exceptions: int) -> dict[str, Any]:
        calls = len(times) + exceptions
        return {
            "calls": calls,
            "calls_per_s": calls / elapsed if elapsed else 0.0,
            "p50_ms": percentile(times, 50) * 1000,
            "p99_ms": percentile(times, 99) * 1000,
            "max_ms": max(times, default=0.0) * 1000,
            "tool_errors": tool_errors,
            "exceptions": exceptions,
        }

    operations = {
        op: row(times, results.tool_errors[op], results.exceptions[op])
        for op, times in results.latencies.items()
    }
    every = [t for times in results.latencies.values() for t in times]
    overall = row(every, sum(results.tool_errors.values()), sum(results.exceptions.values()))
    return {"operations": operations, "overall": overall}


def print_report(report: dict[str, Any]) -> None:
    config, stats = report["config"], report["results"]
    overall = stats["overall"]
    print(
        f"{config['clients']} concurrent clients for {config['seconds']:g} s against one "
        f"`chronomem serve --transport http` on {HOST} (one database file); "
        f"pre-populated: {report['memory']['entities']:,} entities, "
        f"{report['memory']['facts']:,} facts, {report['memory']['relations']:,} relations, "
        f"{report['memory']['turns']:,} turns (seed {SEED})"
    )
    print(f"Client: {config['client']}: {CLIENTS[config['client']]}")
    print(f"Machine: {report['machine']}")
    print()
    print("| operation | calls | calls/s | p50 ms | p99 ms | max ms | tool errors | exceptions |")
    print("|---|---|---|---|---|---|---|---|")
    rows = [*stats["operations"].items(), ("all", overall)]
    for name, row in rows:
        kind = " (write)" if name in WRITES else ""
        print(
            f"| {name}{kind} | {row['calls']:,} | {row['calls_per_s']:.1f} "
            f"| {ms(row['p50_ms'] / 1000)} | {ms(row['p99_ms'] / 1000)} "
            f"| {ms(row['max_ms'] / 1000)} | {row['tool_errors']} | {row['exceptions']} |"
        )
    print()
    errors = overall["tool_errors"] + overall["exceptions"]
    print(
        f"Total: {overall['calls']:,} calls in {report['elapsed_s']:.1f} s, "
        f"{overall['calls_per_s']:.1f} calls/s; errors: {errors} "
        f"(tool errors {overall['tool_errors']}, exceptions {overall['exceptions']})"
    )
    for message, count in report["error_samples"]:
        print(f"  {count} x {message}")


def bounded(low: float, high: float, kind: type) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        value = kind(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be between {low:g} and {high:g}")
        return value

    return parse


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=bounded(1, MAX_CLIENTS, int), default=16)
    parser.add_argument("--seconds", type=bounded(0.1, MAX_SECONDS, float), default=60.0)
    parser.add_argument("--client", choices=sorted(CLIENTS), default="raw")
    parser.add_argument("--entities", type=bounded(1, MAX_ENTITIES, int), default=200)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()

    words = vocabulary(random.Random(SEED))
    results = Results()
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "load.db"
        memory = await populate(db, args.entities, words)
        async with running_server(db, Path(folder) / "server.log") as url:
            start = Start(args.clients)
            async with anyio.create_task_group() as group:
                for index in range(args.clients):
                    workload = Workload(index, args.entities, words)
                    group.start_soon(
                        run_client,
                        index,
                        url,
                        args.client,
                        workload,
                        start,
                        args.seconds,
                        results,
                    )
            elapsed = time.perf_counter() - start.at
    report = {
        "config": {
            "clients": args.clients,
            "seconds": args.seconds,
            "client": args.client,
            "entities": args.entities,
            "mix": MIX,
        },
        "machine": machine(),
        "memory": memory,
        "elapsed_s": elapsed,
        "results": summarise(results, elapsed),
        "error_samples": results.messages.most_common(5),
    }
    print_report(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    anyio.run(main)
