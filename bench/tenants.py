"""Many users in one database file: per-user `search_nodes` and `recall` latency in a
file shared with every other user, against the same user's data alone in a file of
its own.

    .venv/bin/python -m bench.tenants [--users U] [--facts N] [--turns N] [--queries Q]
                                      [--seed S] [--dir DIR] [--keep] [--json FILE]

The generator is deterministic (`--seed`, default 7). Every user has N facts (ten
to an entity: N/10 entities, each with a two-word name) and N turns (in sessions of
20, alternating user and assistant), written in chronomem's export format and loaded
with the bulk import (`import_lines`, what `chronomem import` runs), one call per
user, users in order, so owner ids follow user numbers. Texts are words drawn from
one vocabulary shared by all users: 20,000 made-up words of two to four
consonant-vowel syllables (vowels a, o and u only, so that the Porter stemmer leaves
every word as it is and no two words share a stem), with Zipf frequencies p ~ 1/rank
over ranks 10..20,010 (`bench.search_latency.zipf_index`): the most frequent word is
in about one fact in ten of every user, a word ranked in the hundreds in a few of
each user's rows, the tail in one row of some users and none of most. Facts are 5-12
words, turns 8-40.

Then for a few sample users spread over the owner ids (first, last and evenly
between; `--samples`), each sample user's data is loaded alone in a file of its own,
and three classes of queries are made from that user's own rows, for each operation
from the rows it searches (facts for `search_nodes`, turns for `recall`):
- common: two of the 20 words found in the most of the user's rows;
- middling: two of the words found in 0.5-1% of the user's rows (5-10 rows of 1,000;
  where fewer than 10 words are in that range, the 10 words ranked around the middle
  of the user's words by rows);
- rare: two of the words found in exactly one of the user's rows.
The class of a word is the user's; how many rows of the whole shared file have it is
printed beside (`global rows`): a word rare for one user is in hundreds of rows of
the others.

Each query runs once in the shared file and once in the alone file, the two
alternating call by call (which of them goes first alternates too), after a warm-up
of 3 queries on each; up to `--queries` queries per class and sample user, but no
new one once `--budget` seconds of timed calls are spent and at least 5 were timed
(at the default size, a shared-file query of common words has taken seconds: the
budget keeps the run bounded; `calls` in the table says how many were timed).
Reported: p50 and p99 of each operation x class over all sample users' calls
(`limit=10` for both), in each file, and the ratio of the p50s; then the ratio per
sample user. Then every file is optimized (`chronomem optimize`: each search index
merged into one segment; a file loaded by a thousand imports has a dozen per index,
and every word is looked up in each) and measured again. Files are made in a
temporary folder (or `--dir`) and deleted at the end unless `--keep`.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from memory import GraphMemory, MemoryScope

from .common import machine, ms, observation_line, percentile
from .scale import SPAN, START, TURNS_PER_SESSION, TYPES, _iso, entity_names
from .search_latency import VOCABULARY, sentence, vocabulary

APP = "bench"
FACTS_PER_ENTITY = 10
FIRST_RANK = 10  # Zipf ranks start here: the head of the vocabulary is common to all
SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aou"]
WARM_UP = 3
MIN_TIMED = 5  # queries timed in each cell even past the time budget
COMMON_WORDS = 20
MIDDLING = (0.005, 0.01)  # share of the user's rows a middling word is in
MIDDLING_FALLBACK = 10
CLASSES = ("common", "middling", "rare")
OPERATIONS = ("search_nodes", "recall")
CORPUS = {"search_nodes": "facts", "recall": "turns"}  # the rows each operation searches


def user_name(number: int) -> str:
    return f"user{number:05d}"


@dataclass
class UserData:
    """One user's export lines, and the words of each of its facts and turns."""

    lines: list[str]
    rows: dict[str, list[set[str]]] = field(default_factory=dict)  # corpus -> word sets


def generate_user(number: int, facts: int, turns: int, seed: int, words: list[str]) -> UserData:
    """User `number`'s memory as chronomem export lines, oldest first."""
    rng = random.Random(seed * 1_000_003 + number)
    entities = max(1, math.ceil(facts / FACTS_PER_ENTITY))
    names = entity_names(rng, words, entities)
    prefix = f"u{number}"
    created = _iso(START)
    lines = [
        json.dumps(
            {
                "type": "entity",
                "name": name,
                "entity_type": TYPES[i % len(TYPES)],
                "project": None,
                "recorded_at": created,
            },
            separators=(",", ":"),
        )
        for i, name in enumerate(names)
    ]
    fact_rows, turn_rows = [], []
    for k in range(facts):
        at = _iso(START + SPAN * k / facts)
        text = sentence(rng, words, rng.randint(5, 12), FIRST_RANK)
        fact_rows.append(set(text.split()))
        lines.append(
            json.dumps(
                observation_line(f"{prefix}o{k}", names[k % entities], text, at),
                separators=(",", ":"),
            )
        )
    for k in range(turns):
        at = _iso(START + SPAN * k / turns)
        text = sentence(rng, words, rng.randint(8, 40), FIRST_RANK)
        turn_rows.append(set(text.split()))
        lines.append(
            json.dumps(
                {
                    "type": "turn",
                    "id": f"{prefix}t{k}",
                    "session_id": f"s{k // TURNS_PER_SESSION}",
                    "role": "user" if k % 2 == 0 else "assistant",
                    "text": text,
                    "at": at,
                    "project": None,
                    "recorded_at": at,
                },
                separators=(",", ":"),
            )
        )
    return UserData(lines, {"facts": fact_rows, "turns": turn_rows})


def sample_users(users: int, samples: int) -> list[int]:
    """`samples` user numbers spread over 0..users-1, first and last included."""
    if samples <= 1 or users == 1:
        return [0]
    return sorted({round(i * (users - 1) / (samples - 1)) for i in range(samples)})


def word_classes(rows: list[set[str]]) -> dict[str, list[str]]:
    """The user's common, middling and rare words among `rows` (see the docstring)."""
    counts = Counter(word for row in rows for word in row)
    ranked = sorted(counts, key=lambda w: (-counts[w], w))
    low, high = (max(1, math.ceil(share * len(rows))) for share in MIDDLING)
    middling = [w for w in ranked if low <= counts[w] <= high]
    if len(middling) < MIDDLING_FALLBACK:
        middle = len(ranked) // 2
        middling = ranked[max(0, middle - MIDDLING_FALLBACK // 2) :][:MIDDLING_FALLBACK]
    rare = [w for w in ranked if counts[w] == 1] or ranked[-MIDDLING_FALLBACK:]
    return {"common": ranked[:COMMON_WORDS], "middling": middling, "rare": rare}


def make_queries(rng: random.Random, words: list[str], count: int) -> list[str]:
    """`count` queries of two distinct words of `words` (one when it has one)."""
    return [" ".join(rng.sample(words, min(2, len(words)))) for _ in range(count)]


# ---------------------------------------------------------------- building the files


async def import_user(mem: GraphMemory, number: int, lines: list[str]) -> None:
    await mem.scope(app=APP, user=user_name(number)).import_lines(lines)


async def build(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    """The shared file, and one alone file per sample user; what the queries need."""
    words = vocabulary(random.Random(args.seed), VOCABULARY, SYLLABLES)
    samples = sample_users(args.users, args.samples)
    global_rows = {"facts": Counter(), "turns": Counter()}
    kept: dict[int, UserData] = {}
    generating = importing = 0.0
    async with GraphMemory.open(folder / "shared.db") as mem:
        for number in range(args.users):
            started = time.perf_counter()
            data = generate_user(number, args.facts, args.turns, args.seed, words)
            for corpus, rows in data.rows.items():
                for row in rows:
                    global_rows[corpus].update(row)
            generated = time.perf_counter()
            await import_user(mem, number, data.lines)
            importing += time.perf_counter() - generated
            generating += generated - started
            if number in samples:
                kept[number] = data
            if args.progress and (number + 1) % args.progress == 0:
                print(
                    f"  {number + 1:,} users: generated in {generating:.0f} s, "
                    f"imported in {importing:.0f} s",
                    flush=True,
                )
    started = time.perf_counter()
    for number, data in kept.items():
        async with GraphMemory.open(folder / f"alone-{number}.db") as mem:
            await import_user(mem, number, data.lines)
    alone = time.perf_counter() - started
    return {
        "samples": samples,
        "data": kept,
        "global_rows": global_rows,
        "phases": {"generate": generating, "import shared": importing, "import alone": alone},
    }


# ---------------------------------------------------------------- measuring


async def alternate(
    shared: Callable[[str], Awaitable[object]],
    alone: Callable[[str], Awaitable[object]],
    queries: list[str],
    budget: float,
) -> tuple[list[float], list[float]]:
    """Seconds of each query in each file, the two alternating call by call (and which
    goes first alternating too), after a warm-up of WARM_UP queries on each; past
    `budget` seconds of timed calls, no more queries once MIN_TIMED are done."""
    for query in queries[:WARM_UP]:
        await shared(query)
        await alone(query)
    times: dict[int, list[float]] = {0: [], 1: []}
    calls = (shared, alone)
    spent = 0.0
    for i, query in enumerate(queries[WARM_UP:]):
        if i >= MIN_TIMED and spent > budget:
            break
        for which in (i % 2, 1 - i % 2):
            started = time.perf_counter()
            await calls[which](query)
            times[which].append(time.perf_counter() - started)
            spent += times[which][-1]
    return times[0], times[1]


def call_of(scope: MemoryScope, operation: str) -> Callable[[str], Awaitable[object]]:
    if operation == "search_nodes":
        return lambda query: scope.search_nodes(query=query, limit=10)
    return lambda query: scope.recall(query=query, limit=10)


async def measure(args: argparse.Namespace, folder: Path, built: dict[str, Any]) -> dict:
    """Times by (operation, class), pooled over the sample users and per user, and the
    words each class drew on."""
    rng = random.Random(args.seed + 1)
    pooled: dict[tuple[str, str], dict[str, list[float]]] = {}
    per_user: dict[int, dict[tuple[str, str], float]] = {}
    classes: dict[tuple[str, str], dict[str, Any]] = {}
    started = time.perf_counter()
    async with GraphMemory.open(folder / "shared.db") as shared_mem:
        for done, number in enumerate(built["samples"]):
            if args.progress and done:
                print(
                    f"  measured {done} sample users in {time.perf_counter() - started:.0f} s",
                    flush=True,
                )
            data = built["data"][number]
            per_user[number] = {}
            async with GraphMemory.open(folder / f"alone-{number}.db") as alone_mem:
                shared = shared_mem.scope(app=APP, user=user_name(number))
                alone = alone_mem.scope(app=APP, user=user_name(number))
                for operation in OPERATIONS:
                    corpus = CORPUS[operation]
                    by_class = word_classes(data.rows[corpus])
                    counts = Counter(w for row in data.rows[corpus] for w in row)
                    for name in CLASSES:
                        words = by_class[name]
                        queries = make_queries(rng, words, WARM_UP + args.queries)
                        s, a = await alternate(
                            call_of(shared, operation),
                            call_of(alone, operation),
                            queries,
                            args.budget,
                        )
                        times = pooled.setdefault((operation, name), {"shared": [], "alone": []})
                        times["shared"] += s
                        times["alone"] += a
                        per_user[number][(operation, name)] = percentile(s, 50) / percentile(a, 50)
                        seen = classes.setdefault((operation, name), {"user": [], "global": []})
                        seen["user"] += [counts[w] for w in words]
                        seen["global"] += [built["global_rows"][corpus][w] for w in words]
    return {"pooled": pooled, "per_user": per_user, "classes": classes}


# ---------------------------------------------------------------- report


def report(args: argparse.Namespace, built: dict[str, Any], measured: dict[str, Any]) -> str:
    return "\n".join([*heading(args, built), "", tables(built, measured)])


def heading(args: argparse.Namespace, built: dict[str, Any]) -> list[str]:
    entities = max(1, math.ceil(args.facts / FACTS_PER_ENTITY))
    return [
        f"Tenants: {args.users:,} users x ({args.facts:,} facts on {entities:,} entities + "
        f"{args.turns:,} turns) in one file = {args.users * args.facts:,} facts, "
        f"{args.users * args.turns:,} turns; seed {args.seed}; vocabulary {VOCABULARY:,} "
        f"words, Zipf ranks from {FIRST_RANK}; up to {args.queries} timed queries per class "
        f"per sample user ({args.budget:g} s budget, at least {MIN_TIMED}), after "
        f"{WARM_UP} warm-up",
        f"Sample users (owner order): {', '.join(map(user_name, built['samples']))}",
        f"Machine: {machine()}",
        "Phases: "
        + ", ".join(f"{k} {v:.1f} s" for k, v in built["phases"].items())
        + f"; shared file {built['shared_bytes'] / 2**20:,.0f} MiB",
    ]


def tables(built: dict[str, Any], measured: dict[str, Any]) -> str:
    lines = [
        "| operation | words | calls | shared p50 ms | shared p99 ms | alone p50 ms "
        "| alone p99 ms | shared/alone p50 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for (operation, name), times in measured["pooled"].items():
        s, a = times["shared"], times["alone"]
        lines.append(
            f"| {operation} | {name} | {len(s)} | {ms(percentile(s, 50))} "
            f"| {ms(percentile(s, 99))} "
            f"| {ms(percentile(a, 50))} | {ms(percentile(a, 99))} "
            f"| {percentile(s, 50) / percentile(a, 50):.2f} |"
        )
    lines += [
        "",
        "Word classes (rows: how many rows of the operation's kind have the word; the "
        "user's own, and the whole shared file's):",
        "",
        "| operation | words | words in class (mean) | user rows (min-max) "
        "| global rows (median) |",
        "|---|---|---|---|---|",
    ]
    for (operation, name), seen in measured["classes"].items():
        user, everyone = seen["user"], seen["global"]
        lines.append(
            f"| {operation} ({CORPUS[operation]}) | {name} | {len(user) // len(built['samples'])} "
            f"| {min(user)}-{max(user)} | {percentile(everyone, 50):,.0f} |"
        )
    keys = list(measured["pooled"])
    lines += [
        "",
        "shared/alone p50 per sample user:",
        "",
        "| user | " + " | ".join(f"{op} {name}" for op, name in keys) + " |",
        "|---|" + "---|" * len(keys),
    ]
    for number, ratios in measured["per_user"].items():
        cells = " | ".join(f"{ratios[key]:.2f}" for key in keys)
        lines.append(f"| {user_name(number)} | {cells} |")
    return "\n".join(lines)


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=1_000)
    parser.add_argument("--facts", type=int, default=1_000, help="facts per user")
    parser.add_argument("--turns", type=int, default=1_000, help="turns per user")
    parser.add_argument("--queries", type=int, default=50, help="timed, per class and user")
    parser.add_argument(
        "--budget",
        type=float,
        default=30.0,
        help="seconds of timed calls per class and user, past which no more queries start "
        f"(once {MIN_TIMED} are done)",
    )
    parser.add_argument("--samples", type=int, default=5, help="sample users measured")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--dir", type=Path, default=None, help="make the files here")
    parser.add_argument("--keep", action="store_true", help="keep the files")
    parser.add_argument("--progress", type=int, default=100, help="report every N users")
    parser.add_argument("--json", type=Path, default=None, help="also write results here")
    args = parser.parse_args()
    if min(args.users, args.facts, args.turns, args.queries, args.samples) < 1:
        parser.error("users, facts, turns, queries and samples must be at least 1")
    return args


async def main() -> None:
    args = arguments()
    if args.dir is not None:
        args.dir.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix="tenants-", dir=args.dir))
    else:
        folder = Path(tempfile.mkdtemp(prefix="chronomem-tenants-"))
    try:
        built = await build(args, folder)
        started = time.perf_counter()
        measured = await measure(args, folder, built)
        built["phases"]["measure"] = time.perf_counter() - started
        built["shared_bytes"] = sum(p.stat().st_size for p in folder.glob("shared.db*"))
        print(report(args, built, measured), flush=True)
        # Loaded by a thousand imports, each index of the shared file has a dozen
        # segments, and every word is looked up in each; measured again once merged.
        started = time.perf_counter()
        for path in folder.glob("*.db"):
            async with GraphMemory.open(path) as mem:
                await mem.optimize()
        built["phases"]["optimize"] = time.perf_counter() - started
        optimized = await measure(args, folder, built)
        print(
            f"\nAfter `chronomem optimize` (one segment per search index, every file; "
            f"{built['phases']['optimize']:.1f} s):\n"
        )
        print(tables(built, optimized))
        if args.json:
            result = _json(args, built, measured)
            result["optimized"] = _json(args, built, optimized)["results"]
            args.json.write_text(json.dumps(result, indent=1))
    finally:
        if args.keep:
            print(f"Files kept in {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)


def _json(args: argparse.Namespace, built: dict[str, Any], measured: dict[str, Any]) -> dict:
    def summary(times: list[float]) -> dict[str, float]:
        return {"p50_ms": percentile(times, 50) * 1000, "p99_ms": percentile(times, 99) * 1000}

    return {
        "machine": machine(),
        "parameters": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "phases_seconds": built["phases"],
        "shared_bytes": built["shared_bytes"],
        "samples": [user_name(n) for n in built["samples"]],
        "results": [
            {
                "operation": op,
                "words": name,
                "shared": summary(t["shared"]),
                "alone": summary(t["alone"]),
                "calls": len(t["shared"]),
                "per_user_p50_ratio": {
                    user_name(n): r[(op, name)] for n, r in measured["per_user"].items()
                },
            }
            for (op, name), t in measured["pooled"].items()
        ],
    }


if __name__ == "__main__":
    anyio.run(main)
