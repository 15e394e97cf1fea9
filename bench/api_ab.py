"""Every operation through the Python API, for two or more source trees, alternating.

    git archive <commit> --prefix=before/ | tar -x -C /tmp
    .venv/bin/python -m bench.api_ab before=/tmp/before after=. [--rounds 8] [--calls 400]

Each round runs every tree once, in turn, each in a fresh process that imports that
tree's `memory` (it runs in the tree): a memory of 300 entities of 10 facts and a
relation each, then `--calls` timed calls of each operation after a warm-up. A
tree's figure for an operation is the median of its rounds' medians, with the
least round beside it: on a shared machine one round can be slow for all alike.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

from .common import machine

WORKLOAD = r"""
import asyncio, json, os, statistics, sys, tempfile, time
from memory import GraphMemory

async def main(calls):
    folder = tempfile.mkdtemp()
    async with GraphMemory.open(os.path.join(folder, "memory.db")) as mem:
        s = mem.scope(app="bench", user="ab")
        for i in range(300):
            facts = [f"fact {j} about thing {i} and word{j * i % 97}" for j in range(10)]
            await s.remember(entity=f"E{i}", facts=facts, entity_type="person")
            await s.relate(source=f"E{i}", relation="knows", target=f"E{(i + 1) % 300}")
        await s.record_turns(session_id="s1", turns=[{"role": "user", "text": "hello there"}])
        counter = iter(range(10**9))
        operations = {
            "search_nodes": lambda: s.search_nodes(query="thing word5"),
            "open_nodes (3 names)": lambda: s.open_nodes(names=["E1", "E2", "E3"]),
            "remember (a known fact)": lambda: s.remember(entity="E7", facts=["likes tea"]),
            "remember (1 new fact)": lambda: s.remember(
                entity="E8", facts=[f"new {next(counter)}"]
            ),
            "relate (known)": lambda: s.relate(source="E1", relation="knows", target="E2"),
            "forget (an unknown id)": lambda: s.forget(ids=["o_missing"]),
            "history": lambda: s.history(entity="E5"),
            "read_graph (first page)": lambda: s.read_graph(),
            "profile_card": lambda: s.profile_card(),
            "recall": lambda: s.recall(query="hello"),
            "record_turns (1 turn)": lambda: s.record_turns(
                session_id="s2", turns=[{"role": "user", "text": "hi"}]
            ),
        }
        result = {}
        for name, call in operations.items():
            for _ in range(20):
                await call()
            times = []
            for _ in range(calls):
                start = time.perf_counter()
                await call()
                times.append(time.perf_counter() - start)
            result[name] = statistics.median(times) * 1000
        print(json.dumps(result))

asyncio.run(main(int(sys.argv[1])))
"""


def run_tree(tree: str, calls: int) -> dict[str, float]:
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-c", WORKLOAD, str(calls)],
        cwd=tree,
        env=environment,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, float] = json.loads(done.stdout)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", nargs="+", help="NAME=PATH of each source tree")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--calls", type=int, default=400)
    args = parser.parse_args()
    trees = dict(tree.split("=", 1) for tree in args.trees)
    rounds: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    for number in range(args.rounds):
        order = list(trees)[number % len(trees) :] + list(trees)[: number % len(trees)]
        for name in order:
            rounds[name].append(run_tree(trees[name], args.calls))
    print(f"Machine: {machine()}; {args.rounds} rounds of {args.calls} calls\n")
    first = next(iter(trees))
    columns = " | ".join(f"{name} p50 (least)" for name in trees)
    print(f"| operation | {columns} | change of the medians |")
    print("|---|" + "---|" * len(trees) + "---|")
    for operation in rounds[first][0]:
        cells, medians = [], {}
        for name in trees:
            values = [result[operation] for result in rounds[name]]
            medians[name] = statistics.median(values)
            cells.append(f"{medians[name]:.3f} ({min(values):.3f})")
        last = list(trees)[-1]
        change = 100 * (medians[last] - medians[first]) / medians[first]
        print(f"| {operation} | {' | '.join(cells)} | {change:+.0f}% |")
    print("\nTimes in milliseconds: each round's median of its calls.")


if __name__ == "__main__":
    main()
