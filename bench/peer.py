"""chronomem against the reference MCP memory server, both over stdio, the same calls.

    .venv/bin/python -m bench.peer [--sizes 1000,5000,20000] [--runs N] [--json FILE]

The reference is @modelcontextprotocol/server-memory (Node.js, version pinned below),
installed with npm into the ignored folder .cache/peer of the repository on first
use. For each size, one deterministic graph (seed 7) is written in the reference's
memory.jsonl format; the reference serves that file (MEMORY_FILE_PATH) and chronomem
loads it with `chronomem import`, as a user switching over would. The import time is
reported too.

The graph: entities with two-word names, a type and 6-14 facts of 5-12 words drawn
with Zipf frequencies from the synthetic vocabulary of bench.search_latency, and
about 1.5 relations per entity to earlier entities (snake_case types such as
works_with, which chronomem stores unchanged).

Both servers run at once and get the same calls, alternating call by call (and
which goes first), timed at the client, so each time is a full round trip. After a
warm-up, per operation:
- search_nodes: 2-3 consecutive words of a random stored fact. Every query finds
  at least its source in both servers: the reference matches the whole query as a
  substring (and returns every match), chronomem ranks word matches (10 best).
- open_nodes: 3 random names.
- one write: add_observations of one new fact on a random entity for the
  reference, remember of the same fact on the same entity for chronomem.

The calls are made twice. First in raw newline-delimited JSON-RPC (initialize,
notifications/initialized, then each tools/call until its response arrives): the
server's work and the pipe's, what any client waits for on the wire; the ratio of
the medians (reference over chronomem) is judged against the targets, reported and
never asserted: every operation at least 10x faster at 5,000 entities, 30x at
20,000. Then through the official MCP Python SDK's client, reported separately: it
also checks every result against the tool's output schema with jsonschema in
Python, at a cost that grows with the result, and chronomem's results are larger
(ten hits, each with every fact's id and four timestamps, as text and as structured
content), so that table measures the client library as much as either server; its
check is timed on its own too.

The report also gives the least round trip, a search that finds nothing (a result of
a few bytes): the protocol's and the transport's own share of every call, which
bounds the ratio any read can reach.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any, NamedTuple, TextIO

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from .common import StdioServer, machine, percentile, size_arguments
from .search_latency import SEED, sentence, vocabulary

PACKAGE = "@modelcontextprotocol/server-memory"
PACKAGE_VERSION = "2026.8.31"
ROOT = Path(__file__).resolve().parent.parent
FOLDER = ROOT / ".cache" / "peer"
INSTALLED = FOLDER / "node_modules" / PACKAGE / "package.json"

ENTITY_TYPES = ["person"] * 4 + ["project"] * 2 + ["organization", "place", "event", "tool"]
RELATION_TYPES = [
    "works_with",
    "reports_to",
    "knows",
    "depends_on",
    "part_of",
    "located_in",
    "mentions",
]
WARMUP = 3
NO_MATCH = "qqzx vvkj"  # not in the vocabulary: both servers find nothing
TARGETS = {5_000: 10.0, 20_000: 30.0}  # entities -> smallest ratio wanted, every operation

# operation -> (reference tool, chronomem tool); arguments are built per call below
OPERATIONS = {
    "search_nodes": ("search_nodes", "search_nodes"),
    "open_nodes (3 names)": ("open_nodes", "open_nodes"),
    "write one fact": ("add_observations", "remember"),
}


# ---------------------------------------------------------------- the two servers


def install_reference() -> Path:
    """The reference server's entry point, installed into .cache/peer if not there yet.

    A package.json of its own makes npm install into that folder, not into the
    repository or a parent that happens to have one.
    """
    if not INSTALLED.exists() or json.loads(INSTALLED.read_text())["version"] != PACKAGE_VERSION:
        if shutil.which("npm") is None or shutil.which("node") is None:
            sys.exit("bench.peer needs node and npm to run the reference server")
        FOLDER.mkdir(parents=True, exist_ok=True)
        (FOLDER / "package.json").write_text('{"private": true}\n')
        print(f"installing {PACKAGE}@{PACKAGE_VERSION} into {FOLDER} ...", file=sys.stderr)
        subprocess.run(
            [
                "npm",
                "install",
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
                f"{PACKAGE}@{PACKAGE_VERSION}",
            ],
            cwd=FOLDER,
            check=True,
            timeout=600,
            stdout=sys.stderr,  # stdout is the report
        )
    bin_entry = json.loads(INSTALLED.read_text())["bin"]
    entry = bin_entry if isinstance(bin_entry, str) else next(iter(bin_entry.values()))
    return INSTALLED.parent / entry


def chronomem_command() -> str:
    """The `chronomem` script of the running interpreter's environment, else the PATH's."""
    beside = Path(sys.executable).parent / "chronomem"
    found = str(beside) if beside.exists() else shutil.which("chronomem")
    if found is None:
        sys.exit("bench.peer needs the chronomem command: run `make install`")
    return found


def node_version() -> str:
    done = subprocess.run(["node", "--version"], capture_output=True, text=True, check=True)
    return done.stdout.strip()


# ---------------------------------------------------------------- the graph and the workload


def generate_graph(entities: int) -> list[dict[str, Any]]:
    """One graph as the reference's memory.jsonl records: entities first, then relations."""
    rng = random.Random(SEED)
    words = vocabulary(rng)
    names: list[str] = []
    seen: set[str] = set()
    while len(names) < entities:
        name = f"{words[rng.randrange(len(words))].title()} {words[rng.randrange(len(words))]}"
        if name.casefold() not in seen:  # chronomem matches names ignoring case
            seen.add(name.casefold())
            names.append(name)
    records: list[dict[str, Any]] = []
    for name in names:
        facts: list[str] = []
        for _ in range(rng.randint(6, 14)):
            fact = sentence(rng, words, rng.randint(5, 12))
            if fact not in facts:
                facts.append(fact)
        records.append(
            {
                "type": "entity",
                "name": name,
                "entityType": rng.choice(ENTITY_TYPES),
                "observations": facts,
            }
        )
    triples: set[tuple[str, str, str]] = set()
    for i in range(1, entities):
        for _ in range(rng.choice((1, 1, 2, 2))):  # 1.5 per entity on average
            triples.add((names[i], rng.choice(RELATION_TYPES), names[rng.randrange(i)]))
    records += [
        {"type": "relation", "from": source, "to": target, "relationType": relation}
        for source, relation, target in sorted(triples)
    ]
    return records


def workload(records: list[dict[str, Any]], count: int) -> dict[str, list[tuple[Any, ...]]]:
    """`count` calls per operation, the same for both servers: queries, name triples, writes."""
    rng = random.Random(SEED + 1)
    words = vocabulary(random.Random(SEED))
    entities = [r for r in records if r["type"] == "entity"]
    queries = []
    for _ in range(count):
        fact = rng.choice(rng.choice(entities)["observations"]).split()
        length = min(len(fact), rng.randint(2, 3))
        start = rng.randrange(len(fact) - length + 1)
        queries.append((" ".join(fact[start : start + length]),))
    names = [tuple(rng.choice(entities)["name"] for _ in range(3)) for _ in range(count)]
    writes = [
        (rng.choice(entities)["name"], f"{sentence(rng, words, rng.randint(5, 12))} (note {i})")
        for i in range(count)
    ]
    return {"search_nodes": queries, "open_nodes (3 names)": names, "write one fact": writes}


def arguments(server: str, operation: str, call: tuple[Any, ...]) -> dict[str, Any]:
    """One call's arguments in the tool's own terms: the reference's, or chronomem's."""
    if operation == "search_nodes":
        return {"query": call[0]}
    if operation == "open_nodes (3 names)":
        return {"names": list(call)}
    entity, fact = call
    if server == "reference":
        return {"observations": [{"entityName": entity, "contents": [fact]}]}
    return {"entity": entity, "facts": [fact]}


def hits(server: str, structured: dict[str, Any] | None) -> int:
    """How many entities a search returned."""
    structured = structured or {}
    return len(structured.get("entities" if server == "reference" else "hits", []))


# ---------------------------------------------------------------- measuring


class Timings:
    """Per operation: each call's round trip, the part of it spent in the client's
    output-schema check (SDK client only), and the response's size."""

    def __init__(self) -> None:
        self.total: dict[str, list[float]] = {}
        self.check: dict[str, list[float]] = {}
        self.size: dict[str, list[int]] = {}
        self.hits: list[int] = []
        self.floor: list[float] = []  # round trips of a search that finds nothing

    def add(self, operation: str, total: float, check: float, size: int) -> None:
        self.total.setdefault(operation, []).append(total)
        self.check.setdefault(operation, []).append(check)
        self.size.setdefault(operation, []).append(size)


@dataclass(frozen=True)
class Launch:
    """How to start one server over stdio."""

    command: list[str]
    env: dict[str, str]


class Reply(NamedTuple):
    structured: dict[str, Any] | None
    size: int  # bytes of the response
    check: float  # seconds of it spent in the client's output-schema check


Caller = Callable[[str, dict[str, Any]], Awaitable[Reply]]


async def alternate(
    callers: dict[str, Caller], calls: dict[str, list[tuple[Any, ...]]]
) -> dict[str, Timings]:
    """Time every call at the client, alternating the servers call by call (and which
    of them goes first), so both see the same machine; the first WARMUP calls of each
    operation load the servers' code paths and are not kept."""
    timings = {server: Timings() for server in callers}
    order = list(callers)
    for operation, tools in OPERATIONS.items():
        for i, call in enumerate(calls[operation]):
            for server in order if i % 2 else order[::-1]:
                tool = tools[0] if server == "reference" else tools[1]
                started = time.perf_counter()
                reply = await callers[server](tool, arguments(server, operation, call))
                elapsed = time.perf_counter() - started
                if i < WARMUP:
                    continue
                timings[server].add(operation, elapsed, reply.check, reply.size)
                if operation == "search_nodes":
                    timings[server].hits.append(hits(server, reply.structured))
    for i in range(len(calls["search_nodes"])):
        for server in order if i % 2 else order[::-1]:
            started = time.perf_counter()
            reply = await callers[server]("search_nodes", {"query": NO_MATCH})
            if i >= WARMUP:
                timings[server].floor.append(time.perf_counter() - started)
            if hits(server, reply.structured):
                raise RuntimeError(f"{server} found something for {NO_MATCH!r}")
    return timings


async def measure_raw(
    launches: dict[str, Launch], calls: dict[str, list[tuple[Any, ...]]], errlog: TextIO
) -> dict[str, Timings]:
    """Both servers spoken to in raw JSON-RPC (bench.common.StdioServer): each time is
    the server's work and the pipe's, what a client waits for on the wire."""
    servers: dict[str, StdioServer] = {}
    try:
        for name, launch in launches.items():
            servers[name] = await StdioServer.start(launch.command, launch.env, errlog)

        def caller(server: StdioServer) -> Caller:
            async def call(tool: str, args: dict[str, Any]) -> Reply:
                result = await server.call_tool(tool, args)
                return Reply(result.get("structuredContent"), server.received, 0.0)

            return call

        return await alternate({name: caller(s) for name, s in servers.items()}, calls)
    finally:
        for server in servers.values():
            await server.close()


async def measure_sdk(
    launches: dict[str, Launch], calls: dict[str, list[tuple[Any, ...]]], errlog: TextIO
) -> dict[str, Timings]:
    """Both servers through the official MCP Python SDK's client, its output-schema
    check timed on its own by wrapping the session's public `validate_tool_result`,
    which `call_tool` awaits."""
    async with AsyncExitStack() as stack:
        callers: dict[str, Caller] = {}
        for name, launch in launches.items():
            params = StdioServerParameters(
                command=launch.command[0], args=launch.command[1:], env=launch.env
            )
            client = await stack.enter_async_context(
                Client(stdio_client(params, errlog=errlog), cache=None)
            )
            callers[name] = _sdk_caller(name, client)
        return await alternate(callers, calls)


def _sdk_caller(name: str, client: Client) -> Caller:
    session = client.session
    check = session.validate_tool_result
    checks: list[float] = []

    async def timed_check(tool: str, result: Any) -> None:
        started = time.perf_counter()
        try:
            await check(tool, result)
        finally:
            checks.append(time.perf_counter() - started)

    # The SDK's own check of each result, timed: it has no hook for that.
    session.validate_tool_result = timed_check  # type: ignore[method-assign]

    async def call(tool: str, args: dict[str, Any]) -> Reply:
        checks.clear()
        result = await client.call_tool(tool, args)
        if result.is_error:
            text = " ".join(getattr(c, "text", "") for c in result.content)
            raise RuntimeError(f"{name} {tool}({args}) failed: {text}")
        size = len(result.model_dump_json(by_alias=True, exclude_none=True))
        return Reply(result.structured_content, size, sum(checks))

    return call


def import_into_chronomem(chronomem: str, db: Path, jsonl: Path) -> tuple[float, dict[str, Any]]:
    """`chronomem import` of the reference file, as a user would run it; seconds and counts."""
    started = time.perf_counter()
    done = subprocess.run(
        [
            chronomem,
            "import",
            str(jsonl),
            "--db",
            str(db),
            "--app",
            "bench",
            "--user",
            "peer",
            "--json",
        ],
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"chronomem import failed:\n{done.stderr}")
    return seconds, json.loads(done.stdout)


def summary(timings: Timings, operation: str) -> dict[str, float]:
    """Percentiles in ms and the mean result in kB; where the client checked results
    against the tool's output schema, that check's p50 and the p50 without it."""
    total, check = timings.total[operation], timings.check[operation]
    numbers = {
        "p50_ms": percentile(total, 50) * 1000,
        "p95_ms": percentile(total, 95) * 1000,
        "response_kb_mean": statistics.fmean(timings.size[operation]) / 1000,
    }
    if any(check):
        rest = [t - c for t, c in zip(total, check, strict=True)]
        numbers["client_check_p50_ms"] = percentile(check, 50) * 1000
        numbers["without_check_p50_ms"] = percentile(rest, 50) * 1000
    return numbers


def ratio(theirs: float, ours: float) -> float:
    return theirs / ours if ours else 0.0


async def run_size(
    entities: int, runs: int, entry: Path, chronomem: str, folder: Path
) -> dict[str, Any]:
    def say(what: str) -> None:
        print(f"[{entities:,} entities] {what}", file=sys.stderr, flush=True)

    say("generating the graph")
    records = generate_graph(entities)
    jsonl = (folder / f"memory-{entities}.jsonl").resolve()  # the reference wants it absolute
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    file_bytes = jsonl.stat().st_size
    db = folder / f"chronomem-{entities}.db"
    say(f"chronomem import of {jsonl.name} ({file_bytes / 1e6:.1f} MB)")
    import_seconds, imported = import_into_chronomem(chronomem, db, jsonl)
    calls = workload(records, WARMUP + runs)
    launches = {
        "reference": Launch(
            [shutil.which("node") or "node", str(entry)],
            {**os.environ, "MEMORY_FILE_PATH": str(jsonl)},
        ),
        "chronomem": Launch(
            [chronomem, "serve", "--db", str(db), "--app", "bench", "--user", "peer"],
            dict(os.environ),
        ),
    }
    with (folder / "servers.log").open("a", encoding="utf-8") as errlog:
        say(f"both servers in raw JSON-RPC: {runs} timed calls per operation each")
        raw = await measure_raw(launches, calls, errlog)
        say(f"both servers through the SDK's client: {runs} timed calls per operation each")
        sdk = await measure_sdk(launches, calls, errlog)
    operations = {}
    for operation in OPERATIONS:
        a, b = summary(raw["reference"], operation), summary(raw["chronomem"], operation)
        c, d = summary(sdk["reference"], operation), summary(sdk["chronomem"], operation)
        operations[operation] = {
            "reference": a,
            "chronomem": b,
            "ratio": ratio(a["p50_ms"], b["p50_ms"]),
            "sdk_client": {
                "reference": c,
                "chronomem": d,
                "ratio": ratio(c["p50_ms"], d["p50_ms"]),
                "ratio_without_check": ratio(c["without_check_p50_ms"], d["without_check_p50_ms"]),
            },
        }
    return {
        "entities": entities,
        "observations": sum(len(r["observations"]) for r in records if r["type"] == "entity"),
        "relations": sum(1 for r in records if r["type"] == "relation"),
        "file_bytes": file_bytes,
        "import_seconds": import_seconds,
        "imported": imported,
        "no_match_search_p50_ms": {
            server: percentile(timings.floor, 50) * 1000 for server, timings in raw.items()
        },
        "search_hits_mean": {
            server: statistics.fmean(timings.hits) for server, timings in raw.items()
        },
        "operations": operations,
    }


# ---------------------------------------------------------------- report


def table(results: list[dict[str, Any]], columns: list[str], row: Any) -> None:
    print("| entities | operation | " + " | ".join(columns) + " |")
    print("|---" * (len(columns) + 2) + "|")
    for r in results:
        for operation, o in r["operations"].items():
            print(f"| {r['entities']:,} | {operation} | " + " | ".join(row(o)) + " |")


def report(results: list[dict[str, Any]], versions: dict[str, str], runs: int) -> None:
    print(
        f"chronomem {versions['chronomem']} against {PACKAGE} {versions['reference']} "
        f"(Node {versions['node']}), both over stdio; clients: raw JSON-RPC, and MCP Python SDK "
        f"{versions['mcp']}"
    )
    print(f"Machine: {machine()}")
    print(
        f"Seed {SEED}; {runs} timed calls per operation and server after {WARMUP} warm-up calls,"
        " alternating between the two servers call by call"
    )
    print()
    for r in results:
        print(
            f"{r['entities']:,} entities, {r['observations']:,} facts, {r['relations']:,} "
            f"relations ({r['file_bytes'] / 1e6:.1f} MB memory.jsonl): chronomem import "
            f"{r['import_seconds']:.1f} s; search hits per query (mean): reference "
            f"{r['search_hits_mean']['reference']:.1f}, chronomem "
            f"{r['search_hits_mean']['chronomem']:.1f}"
        )
    print(
        "\nServer round trip: raw JSON-RPC over stdio, what a client waits for on the wire"
        "\n(ratio: reference p50 / chronomem p50):\n"
    )
    table(
        results,
        [
            "reference ms (p50)",
            "chronomem ms (p50)",
            "ratio",
            "reference ms (p95)",
            "chronomem ms (p95)",
            "reference result kB",
            "chronomem result kB",
        ],
        lambda o: [
            f"{o['reference']['p50_ms']:.2f}",
            f"{o['chronomem']['p50_ms']:.2f}",
            f"{o['ratio']:.1f}x",
            f"{o['reference']['p95_ms']:.2f}",
            f"{o['chronomem']['p95_ms']:.2f}",
            f"{o['reference']['response_kb_mean']:.1f}",
            f"{o['chronomem']['response_kb_mean']:.1f}",
        ],
    )
    print(
        "\nThe least round trip, a search that finds nothing (p50 ms), and so the highest"
        "\nratio a read could reach (the reference's p50 over chronomem's least):\n"
    )
    print("| entities | reference | chronomem | ceiling: search_nodes | ceiling: open_nodes |")
    print("|---|---|---|---|---|")
    for r in results:
        least = r["no_match_search_p50_ms"]
        ceilings = [
            f"{ratio(o['reference']['p50_ms'], least['chronomem']):.1f}x"
            for operation, o in r["operations"].items()
            if operation != "write one fact"
        ]
        print(
            f"| {r['entities']:,} | {least['reference']:.2f} | {least['chronomem']:.2f} | "
            + " | ".join(ceilings)
            + " |"
        )
    print(
        "\nThe same calls through the MCP Python SDK's client, which also checks every result"
        "\nagainst the tool's output schema with jsonschema in Python (this measures the"
        "\nclient library too; its check grows with the result):\n"
    )
    table(
        results,
        ["reference ms (p50)", "chronomem ms (p50)", "ratio", "ratio less the client's check"],
        lambda o: [
            f"{o['sdk_client']['reference']['p50_ms']:.2f}",
            f"{o['sdk_client']['chronomem']['p50_ms']:.2f}",
            f"{o['sdk_client']['ratio']:.1f}x",
            f"{o['sdk_client']['ratio_without_check']:.1f}x",
        ],
    )
    for r in results:
        wanted = TARGETS.get(r["entities"])
        if wanted is not None:
            worst = min(o["ratio"] for o in r["operations"].values())
            verdict = "met" if worst >= wanted else "not met"
            print(
                f"\nTarget at {r['entities']:,} entities, every operation at least "
                f"{wanted:.0f}x faster in server round trip (reported, not asserted): "
                f"{verdict}, smallest ratio "
                f"{worst:.1f}x"
            )


async def main() -> None:
    args = size_arguments(__doc__.splitlines()[0], sizes="1000,5000,20000", runs=50)
    sizes = args.sizes

    entry = install_reference()
    chronomem = chronomem_command()
    versions = {
        "reference": json.loads(INSTALLED.read_text())["version"],
        "chronomem": version("chronomem"),
        "mcp": version("mcp"),
        "node": node_version(),
    }
    with tempfile.TemporaryDirectory() as folder:
        results = [
            await run_size(size, args.runs, entry, chronomem, Path(folder)) for size in sizes
        ]
    report(results, versions, args.runs)
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "machine": machine(),
                    "versions": versions,
                    "seed": SEED,
                    "runs": args.runs,
                    "warmup": WARMUP,
                    "sizes": results,
                },
                indent=2,
            )
            + "\n"
        )


if __name__ == "__main__":
    anyio.run(main)
