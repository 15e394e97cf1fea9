"""The stdio round trip of two or more source trees' `chronomem serve`, side by side.

    git archive <commit> --prefix=before/ | tar -x -C /tmp
    .venv/bin/python -m bench.stdio_rt before=/tmp/before after=. [--rounds 10] [--calls 100]

Each tree's server (`python -c "from server.cli import main; main()" serve`, run in
that tree, so it imports that tree's `server`) gets the same small memory: 20
entities of 5 facts. Then `--rounds` rounds of `--calls` searches that find nothing
and `--calls` searches that find every entity, the servers called in turn, call by
call, the order rotated at each call, so the machine's noise falls on all
alike. A call is timed in raw JSON-RPC, from its request line out to its response
line back; a server's CPU per call is read from /proc (Linux).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

from .common import INITIALIZE, StdioServer, machine, ms, percentile

QUERIES = {"search that finds nothing": "zzzqqq xxyyzz", "search_nodes": "tea garden"}


def cpu_seconds(pid: int) -> float:
    """User and system CPU of process `pid` so far (Linux; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def start(tree: str, db: Path) -> StdioServer:
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    process = await asyncio.create_subprocess_exec(
        *(sys.executable, "-c", "from server.cli import main; main()", "serve", "--db", str(db)),
        cwd=tree,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env={**environment, "CHRONOMEM_DB": ""},
    )
    server = StdioServer(process)
    await server.request("initialize", INITIALIZE)
    await server.notify("notifications/initialized")
    for i in range(20):
        facts = [f"fact {j} of person {i}: likes tea and the garden {j}" for j in range(5)]
        await server.call_tool("remember", {"entity": f"Person {i}", "facts": facts})
    return server


async def measure(trees: dict[str, str], rounds: int, calls: int) -> None:
    times: dict[tuple[str, str], list[float]] = {(n, q): [] for n in trees for q in QUERIES}
    cpu = dict.fromkeys(times, 0.0)
    with tempfile.TemporaryDirectory() as tmp:
        servers = {
            name: await start(tree, Path(tmp) / f"{name}.db") for name, tree in trees.items()
        }
        names = list(servers)
        try:
            for _ in range(rounds):
                for label, query in QUERIES.items():
                    before = {n: cpu_seconds(s.process.pid) for n, s in servers.items()}
                    for call in range(calls):
                        turn = call % len(names)
                        for name in names[turn:] + names[:turn]:
                            started = time.perf_counter()
                            await servers[name].call_tool("search_nodes", {"query": query})
                            times[name, label].append(time.perf_counter() - started)
                    for n, s in servers.items():
                        cpu[n, label] += cpu_seconds(s.process.pid) - before[n]
        finally:
            for server in servers.values():
                await server.close()
    print(machine())
    print("| server | call | p50 ms | p95 ms | server CPU ms a call | calls |")
    print("|---|---|---|---|---|---|")
    for (name, label), values in times.items():
        cost = ms(cpu[name, label] / len(values))
        print(
            f"| {name} | {label} | {ms(percentile(values, 50))} | "
            f"{ms(percentile(values, 95))} | {cost} | {len(values)} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="+", metavar="NAME=TREE")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--calls", type=int, default=100)
    args = parser.parse_args()
    if len(args.trees) < 2:
        parser.error("give two trees or more")
    trees = dict(tree.split("=", 1) for tree in args.trees)
    asyncio.run(measure(trees, args.rounds, args.calls))


if __name__ == "__main__":
    main()
