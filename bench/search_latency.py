"""Latency of `search_nodes`, `recall`, `profile_card` and `open_nodes` on one user
with 10,000 facts (1,000 entities x 10) and 10,000 turns, through the Python API.

    .venv/bin/python -m bench.search_latency [--entities N] [--turns N] [--queries N]
                                            [--in-project F]

The generator is deterministic (seed 7). Words are drawn from a synthetic vocabulary
of 20,000 content words with Zipf frequencies (p ~ 1/rank), ranks starting at 100:
the first hundred ranks of real text are function words, which search drops as stop
words, so content words are what facts, turns and queries share. Queries are 2-6
such words. A second row per search operation ("common words") uses only the 20
most frequent words: the worst case, where a query matches a large share of memory.
Reports p50/p95/p99 after a warm-up, on a database file in a temp folder.

With `--in-project F`, that share of the entities' facts and of the turns is written
inside a project ("p") instead, and the table is measured from the global memory and
from the project: a search then keeps only its context's rows (`memory.ranking`).
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import anyio

from memory import GraphMemory, MemoryScope

from .common import machine, ms, percentile

SEED = 7
SYLLABLES = "ka lo mi ne ru ta shi po ve an el is om ur ba de fi go hu ja".split()


VOCABULARY = 20_000
FIRST_RANK = 100  # ranks below are function words


def vocabulary(
    rng: random.Random, size: int = VOCABULARY, syllables: Sequence[str] = SYLLABLES
) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))))
    return sorted(words)


def zipf_index(rng: random.Random, first_rank: int = FIRST_RANK, size: int = VOCABULARY) -> int:
    """Index into a vocabulary of `size` words with p ~ 1/rank over ranks `first_rank`..
    (inverse CDF)."""
    span = (first_rank + size) / first_rank
    return min(int(first_rank * span ** rng.random()) - first_rank, size - 1)


def sentence(
    rng: random.Random, words: list[str], length: int, first_rank: int = FIRST_RANK
) -> str:
    """`length` words drawn from `words` by `zipf_index`."""
    size = len(words)
    return " ".join(words[zipf_index(rng, first_rank, size)] for _ in range(length))


def _inside(index: int, share: float) -> bool:
    """Whether the `index`-th entity or call is written inside the project: every
    1/share-th, so the random draws are the same whatever the share."""
    return share > 0 and index % max(1, round(1 / share)) == 0


async def populate(
    scope: MemoryScope,
    rng: random.Random,
    entities: int,
    turns: int,
    project: MemoryScope | None = None,
    share: float = 0.0,
) -> None:
    words = vocabulary(rng)
    for i in range(entities):
        facts = [sentence(rng, words, rng.randint(5, 12)) + f" #{i}.{j}" for j in range(10)]
        writer = project if project is not None and _inside(i, share) else scope
        await writer.remember(entity=f"entity {i}", entity_type="thing", facts=facts)
        if i:
            await scope.relate(
                source=f"entity {i}", relation="related to", target=f"entity {rng.randrange(i)}"
            )
    per_call = 50
    for start in range(0, turns, per_call):
        writer = project if project is not None and _inside(start // per_call, share) else scope
        await writer.record_turns(
            session_id=f"session {start // 100}",
            turns=[
                {
                    "role": "user" if k % 2 == 0 else "assistant",
                    "text": sentence(rng, words, rng.randint(8, 40)),
                }
                for k in range(min(per_call, turns - start))
            ],
        )


async def timed(call: Callable[[], Awaitable[object]], runs: int) -> list[float]:
    for _ in range(10):  # warm-up
        await call()
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        await call()
        times.append(time.perf_counter() - started)
    return times


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entities", type=int, default=1_000)
    parser.add_argument("--turns", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--in-project", type=float, default=0.0, metavar="F")
    args = parser.parse_args()

    rng = random.Random(SEED)
    with tempfile.TemporaryDirectory() as folder:
        async with GraphMemory.open(Path(folder) / "bench.db") as mem:
            scope = mem.scope(app="bench", user="u")
            project = mem.scope(app="bench", user="u", project="p")
            started = time.perf_counter()
            await populate(scope, rng, args.entities, args.turns, project, args.in_project)
            build = time.perf_counter() - started
            words = vocabulary(random.Random(SEED))
            queries = [sentence(rng, words, rng.randint(2, 6)) for _ in range(args.queries)]
            common = [
                " ".join(rng.sample(words[:20], rng.randint(2, 6))) for _ in range(args.queries)
            ]
            names = [
                [f"entity {rng.randrange(args.entities)}" for _ in range(3)]
                for _ in range(args.queries)
            ]
            it = iter(range(10**9))

            def cycle(items: list) -> Callable[[], object]:
                return lambda: items[next(it) % len(items)]

            q, c, n = cycle(queries), cycle(common), cycle(names)
            contexts = {"": scope, " (in the project)": project} if args.in_project else {"": scope}
            results = {}
            for label, s in contexts.items():
                results |= {
                    f"search_nodes{label}": await timed(
                        lambda s=s: s.search_nodes(query=q()), args.queries
                    ),
                    f"search_nodes, common words{label}": await timed(
                        lambda s=s: s.search_nodes(query=c()), args.queries
                    ),
                    f"recall{label}": await timed(lambda s=s: s.recall(query=q()), args.queries),
                    f"recall, common words{label}": await timed(
                        lambda s=s: s.recall(query=c()), args.queries
                    ),
                    f"profile_card{label}": await timed(lambda s=s: s.profile_card(), args.queries),
                    f"open_nodes (3 names){label}": await timed(
                        lambda s=s: s.open_nodes(names=n()), args.queries
                    ),
                }
    print(
        f"One user: {args.entities:,} entities, {args.entities * 10:,} facts, "
        f"{args.turns:,} turns (seed {SEED}); built in {build:.1f} s"
        + (f"; {args.in_project:.0%} of them in a project" if args.in_project else "")
    )
    print(f"Machine: {machine()}")
    print()
    print("| operation | p50 ms | p95 ms | p99 ms |")
    print("|---|---|---|---|")
    for name, times in results.items():
        print(
            f"| {name} | {ms(percentile(times, 50))} | {ms(percentile(times, 95))} "
            f"| {ms(percentile(times, 99))} |"
        )


if __name__ == "__main__":
    anyio.run(main)
