"""Every operation at 1k, 10k and 100k entities (10k, 100k and 1M facts), through the
Python API and through the MCP server over stdio.

    .venv/bin/python -m bench.scale [--sizes 1000,10000,100000] [--runs N] [--json FILE]

For each size a deterministic generator (seed 7) writes one user's memory in
chronomem's export format: entities of six types with 10 facts each, one in five of
them superseded (closed on both axes), two relations per entity (one in five
closed), and 10 conversation turns per entity in sessions of 20. The file is loaded
with the bulk import (`import_lines`, what `chronomem import` runs), which is timed.
Then each operation runs `--runs` times after a warm-up, first through the API, then
through `chronomem serve` over stdio with the MCP SDK's client: the table gives p50,
p95 and p99 of both, and how much the MCP round trip adds at p50. Also reported:
cold start (spawn to `initialize` answered), database size on disk, and the server
process's peak RSS (Linux `VmHWM`).

Query words follow the Zipf vocabulary of `bench.search_latency`.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio

from memory import GraphMemory, MemoryScope

from .common import StdioServer, machine, percentile, size_arguments
from .search_latency import sentence, vocabulary

SEED = 7
FACTS_PER_ENTITY = 10
RELATIONS_PER_ENTITY = 2
TURNS_PER_ENTITY = 10
TURNS_PER_SESSION = 20
CLOSED_ONE_IN = 5
TYPES = ("person", "place", "organisation", "project", "preference", "event")
RELATIONS = ("knows", "works_at", "lives_in", "part_of", "likes", "attended")
APP, USER = "bench", "scale"
START = datetime(2024, 1, 1, tzinfo=UTC)
SPAN = timedelta(days=800)  # all generated history lies in 2024-2026, before now


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="microseconds").replace("+00:00", "Z")


def entity_names(rng: random.Random, words: list[str], count: int) -> list[str]:
    """Distinct two-word names, capitalised like people and places."""
    names: list[str] = []
    seen: set[str] = set()
    while len(names) < count:
        name = f"{rng.choice(words).title()} {rng.choice(words).title()}"
        if name.casefold() not in seen:
            seen.add(name.casefold())
            names.append(name)
    return names


def generate(entities: int, seed: int = SEED) -> Iterator[dict[str, Any]]:
    """One user's memory as export records, oldest first."""
    rng = random.Random(seed)
    words = vocabulary(random.Random(seed))
    names = entity_names(rng, words, entities)
    step = SPAN / (entities * (FACTS_PER_ENTITY + RELATIONS_PER_ENTITY + 1))
    clock = START

    def tick() -> datetime:
        nonlocal clock
        clock += step
        return clock

    def closing(opened: datetime, k: int) -> dict[str, Any]:
        """Open, or (one in five) closed a while later on both axes."""
        if k % CLOSED_ONE_IN:
            return {"valid_to": None, "invalidated_at": None}
        closed = _iso(opened + step / 2)
        return {"valid_to": closed, "invalidated_at": closed, "reason": "superseded"}

    for i, name in enumerate(names):
        created = tick()
        yield {
            "type": "entity",
            "name": name,
            "entity_type": TYPES[i % len(TYPES)],
            "project": None,
            "recorded_at": _iso(created),
        }
        for j in range(FACTS_PER_ENTITY):
            at = tick()
            yield {
                "type": "observation",
                "id": f"o{i}.{j}",
                "entity": name,
                "text": sentence(rng, words, rng.randint(5, 12)),
                "attribute": None,
                "project": None,
                "valid_from": _iso(at),
                "recorded_at": _iso(at),
                "reason": None,
                **closing(at, j),
            }
        for j in range(RELATIONS_PER_ENTITY if i else 0):
            at = tick()
            yield {
                "type": "relation",
                "id": f"r{i}.{j}",
                "source": name,
                "relation": RELATIONS[rng.randrange(len(RELATIONS))],
                "target": names[rng.randrange(i)],
                "project": None,
                "valid_from": _iso(at),
                "recorded_at": _iso(at),
                "reason": None,
                **closing(at, i + j),
            }
    # Turns, spread over the same period, in sessions of TURNS_PER_SESSION.
    total = entities * TURNS_PER_ENTITY
    turn_step = SPAN / total
    for k in range(total):
        at = _iso(START + turn_step * k)
        yield {
            "type": "turn",
            "id": f"t{k}",
            "session_id": f"s{k // TURNS_PER_SESSION}",
            "role": "user" if k % 2 == 0 else "assistant",
            "text": sentence(rng, words, rng.randint(8, 40)),
            "at": at,
            "project": None,
            "recorded_at": at,
        }


def write_files(graph: Path, turns: Path, entities: int) -> dict[str, int]:
    """The graph (entities, facts, relations) and the turns, in two files, so that
    each import rate is its own; returns the count of each kind of record."""
    counts: dict[str, int] = {}
    with graph.open("w", encoding="utf-8") as g, turns.open("w", encoding="utf-8") as t:
        for record in generate(entities):
            counts[record["type"]] = counts.get(record["type"], 0) + 1
            out = t if record["type"] == "turn" else g
            out.write(json.dumps(record, separators=(",", ":")) + "\n")
    return counts


async def timed_import(scope: MemoryScope, path: Path) -> float:
    """Seconds to import `path` as `chronomem import` does (batches of 5,000 lines)."""
    started = time.perf_counter()
    with path.open(encoding="utf-8") as lines:
        await scope.import_lines(lines)
    return time.perf_counter() - started


# ---------------------------------------------------------------- the workload


def workload(entities: int, runs: int, seed: int) -> dict[str, list[dict[str, Any]]]:
    """Arguments for each call of each operation: the same for the API and MCP (the
    writes among them get their own ids and texts per seed, so no run repeats one)."""
    rng = random.Random(seed)
    words = vocabulary(random.Random(SEED))
    names = entity_names(random.Random(SEED), words, entities)  # the generator's names

    def query() -> str:
        return sentence(rng, words, rng.randint(2, 4))

    def name() -> str:
        return names[rng.randrange(entities)]

    # Distinct current facts to forget: j % 5 != 0 facts are open.
    open_facts = rng.sample(range(entities * FACTS_PER_ENTITY), min(entities, 4 * runs))
    forgettable = [f"o{n // 10}.{n % 10}" for n in open_facts if n % 10 % CLOSED_ONE_IN]
    calls = runs + WARM_UP
    return {
        "search_nodes": [{"query": query()} for _ in range(calls)],
        "open_nodes (3 names)": [{"names": [name(), name(), name()]} for _ in range(calls)],
        "remember (1 fact)": [
            {"entity": name(), "facts": [f"{query()} {seed}.{k}"]} for k in range(calls)
        ],
        "relate": [
            {"source": name(), "relation": RELATIONS[k % len(RELATIONS)], "target": name()}
            for k in range(calls)
        ],
        "forget (1 fact)": [{"ids": [fact]} for fact in forgettable[:calls]],
        "history": [{"entity": name()} for _ in range(calls)],
        "read_graph (first page)": [{"limit": 50} for _ in range(calls)],
        "profile_card": [{} for _ in range(calls)],
        "recall": [{"query": query()} for _ in range(calls)],
        "record_turns (1 turn)": [
            {"session_id": f"bench {seed}", "turns": [{"role": "user", "text": query()}]}
            for _ in range(calls)
        ],
    }


WARM_UP = 10
TOOL = {  # the MCP tool each row calls
    "search_nodes": "search_nodes",
    "open_nodes (3 names)": "open_nodes",
    "remember (1 fact)": "remember",
    "relate": "relate",
    "forget (1 fact)": "forget",
    "history": "history",
    "read_graph (first page)": "read_graph",
    "profile_card": "profile_card",
    "recall": "recall",
    "record_turns (1 turn)": "record_turns",
}


async def timed(call: Callable[[dict[str, Any]], Awaitable[object]], calls: list) -> list[float]:
    for arguments in calls[:WARM_UP]:
        await call(arguments)
    times = []
    for arguments in calls[WARM_UP:]:
        started = time.perf_counter()
        await call(arguments)
        times.append(time.perf_counter() - started)
    return times


async def through_api(scope: MemoryScope, plan: dict[str, list]) -> dict[str, list[float]]:
    async def call(row: str, arguments: dict[str, Any]) -> object:
        return await getattr(scope, TOOL[row])(**arguments)

    return {row: await timed(lambda a, r=row: call(r, a), calls) for row, calls in plan.items()}


def _serve_command(db: Path) -> list[str]:
    """`chronomem serve`, run as the console script does, from the tree being measured
    (the working directory) rather than from wherever the virtualenv points."""
    entry = "from server.cli import main; main()"
    return [sys.executable, "-c", entry, "serve", "--db", str(db), "--app", APP, "--user", USER]


async def through_stdio(db: Path, plan: dict[str, list]) -> tuple[dict[str, list[float]], int]:
    """Times per operation over stdio in raw JSON-RPC, and the server's peak RSS."""
    server = await StdioServer.start(_serve_command(db))
    try:

        async def call(row: str, arguments: dict[str, Any]) -> object:
            return await server.call_tool(TOOL[row], arguments)

        times = {
            row: await timed(lambda a, r=row: call(r, a), calls) for row, calls in plan.items()
        }
        return times, server.peak_rss()
    finally:
        await server.close()


async def through_sdk_client(db: Path, plan: dict[str, list]) -> dict[str, list[float]]:
    """Times per operation through the MCP Python SDK's client, which also checks each
    result against the tool's output schema (with `jsonschema`, in Python)."""
    from mcp import Client, StdioServerParameters  # the rest of the benchmark needs no SDK
    from mcp.client.stdio import stdio_client

    command = _serve_command(db)
    params = StdioServerParameters(
        command=command[0], args=command[1:], env={"PATH": os.environ.get("PATH", "")}
    )
    with open(os.devnull, "w") as quiet:
        async with Client(stdio_client(params, errlog=quiet)) as client:

            async def call(row: str, arguments: dict[str, Any]) -> object:
                result = await client.call_tool(TOOL[row], arguments)
                if result.is_error:
                    raise RuntimeError(f"{row}: {result.content}")
                return result

            return {
                row: await timed(lambda a, r=row: call(r, a), calls) for row, calls in plan.items()
            }


async def cold_start(db: Path, times: int = 5) -> float:
    """Median seconds from spawning `chronomem serve` to `initialize` answered."""
    spans = []
    for _ in range(times):
        started = time.perf_counter()
        server = await StdioServer.start(_serve_command(db))
        spans.append(time.perf_counter() - started)
        await server.close()
    return statistics.median(spans)


# ---------------------------------------------------------------- one size


async def measure(size: int, runs: int, folder: Path) -> dict[str, Any]:
    graph, turns = folder / f"graph-{size}.jsonl", folder / f"turns-{size}.jsonl"
    db = folder / f"memory-{size}.db"
    counts = write_files(graph, turns, size)
    async with GraphMemory.open(db) as mem:
        scope = mem.scope(app=APP, user=USER)
        graph_seconds = await timed_import(scope, graph)
        turn_seconds = await timed_import(scope, turns)
    # Opened again, so the API starts with a cold page cache, as each server does:
    # the import leaves the cache full of what it wrote.
    async with GraphMemory.open(db) as mem:
        api = await through_api(mem.scope(app=APP, user=USER), workload(size, runs, seed=1))
    size_on_disk = sum(p.stat().st_size for p in folder.glob(f"memory-{size}.db*"))
    stdio, peak_rss = await through_stdio(db, workload(size, runs, seed=2))
    sdk = await through_sdk_client(db, workload(size, runs, seed=3))
    return {
        "entities": size,
        "facts": counts.get("observation", 0),
        "relations": counts.get("relation", 0),
        "turns": counts.get("turn", 0),
        "import_graph_seconds": graph_seconds,
        "import_facts_per_second": counts["observation"] / graph_seconds,
        "import_turns_seconds": turn_seconds,
        "import_turns_per_second": counts["turn"] / turn_seconds,
        "database_bytes": size_on_disk,
        "server_peak_rss_bytes": peak_rss,
        "cold_start_seconds": await cold_start(db),
        "operations": {
            row: {
                "api": _summary(api[row]),
                "stdio": _summary(stdio[row]),
                "sdk_client": _summary(sdk[row]),
            }
            for row in api
        },
    }


def _summary(times: list[float]) -> dict[str, float]:
    return {f"p{q}_ms": percentile(times, q) * 1000 for q in (50, 95, 99)}


def report(results: list[dict[str, Any]]) -> str:
    lines = [f"Machine: {machine()}", ""]
    for r in results:
        lines += [
            f"### {r['entities']:,} entities: {r['facts']:,} facts, "
            f"{r['relations']:,} relations, {r['turns']:,} turns",
            "",
            f"Import: graph {r['import_graph_seconds']:.1f} s "
            f"({r['import_facts_per_second']:,.0f} facts/s with their entities and "
            f"relations), turns {r['import_turns_seconds']:.1f} s "
            f"({r['import_turns_per_second']:,.0f} turns/s). Database: "
            f"{r['database_bytes'] / 2**20:.0f} MiB. Server peak RSS: "
            f"{r['server_peak_rss_bytes'] / 2**20:.0f} MiB. Cold start: "
            f"{r['cold_start_seconds'] * 1000:.0f} ms.",
            "",
            "| operation | API p50 | p95 | p99 | MCP stdio p50 | p95 | p99 | MCP adds (p50) "
            "| SDK client p50 |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for row, o in r["operations"].items():
            a, m, c = o["api"], o["stdio"], o["sdk_client"]
            lines.append(
                f"| {row} | {a['p50_ms']:.2f} | {a['p95_ms']:.2f} | {a['p99_ms']:.2f} "
                f"| {m['p50_ms']:.2f} | {m['p95_ms']:.2f} | {m['p99_ms']:.2f} "
                f"| {m['p50_ms'] - a['p50_ms']:.2f} | {c['p50_ms']:.2f} |"
            )
        lines.append("")
    lines.append(
        "Times in milliseconds. MCP stdio: raw JSON-RPC over the server's stdin/stdout. "
        "SDK client: the MCP Python SDK's client, which also checks every result against "
        "the tool's output schema in Python."
    )
    return "\n".join(lines)


async def main() -> None:
    args = size_arguments(__doc__.splitlines()[0], sizes="1000,10000,100000", runs=200)
    sizes = args.sizes
    results = []
    with tempfile.TemporaryDirectory() as folder:
        for size in sizes:
            results.append(await measure(size, args.runs, Path(folder)))
            print(report(results[-1:]), flush=True)
    if args.json:
        args.json.write_text(json.dumps({"machine": machine(), "sizes": results}, indent=2))


if __name__ == "__main__":
    anyio.run(main)
