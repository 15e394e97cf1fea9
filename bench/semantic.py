"""Ranking by meaning: what it costs the writes, how fast the indexer embeds, what a
hybrid search costs at 10,000 and 1,000,000 facts and among many users, how much
memory a server with the model takes, and what approximate search loses.

    .venv/bin/python -m bench.semantic writes   [--rounds 6] [--calls 200] [--threads N]
    .venv/bin/python -m bench.semantic indexer  [--facts 2000] [--turns 1000]
    .venv/bin/python -m bench.semantic search   [--facts 10000] [--queries 200] [--threads N]
    .venv/bin/python -m bench.semantic search   --facts 1000000 --synthetic [--settle 60]
    .venv/bin/python -m bench.semantic tenants  [--users 200] [--facts 1000]
    .venv/bin/python -m bench.semantic recall   [--rows 50000] [--vectors FILE] [--probes 24]

Texts are real: facts are LoCoMo's observations ("Caroline attended an LGBTQ support
group recently ..."), then sentences of LongMemEval-S's user turns; turns are
LongMemEval-S's and LoCoMo's conversation turns; queries are the two datasets'
questions, each asked once (so each search embeds its query, as a new question does).

- writes: `remember` (1 new fact) and `record_turns` (1 turn) p50/p95 with
  `embedder="none"` and with the model, in fresh processes alternating round by
  round (as `bench.api_ab`): first while the indexer works through a backlog of 3,000
  facts written just before, then once it is idle. A figure is the median of the
  rounds' medians.
- indexer: N facts and N turns stored without an embedder, then opened with the
  model (loaded before the clock starts) in a process of its own: seconds to
  `wait_until_indexed()`, rows/s, and that process's peak RSS.
- search: N facts (ten to an entity); with the model the indexer embeds them (the
  vectors are kept in `.cache/embeddings/` for the next run), or with `--synthetic`
  their vectors are written straight into the file: those of 5,000 real facts, each
  standing for every 5,000th fact, perturbed by Gaussian noise (cosine ~0.9 to the
  original). Then `search_nodes` (limit 10) with and without the model, alternating
  query by query, and by meaning again with the query's vector remembered, in a
  fresh process whose RSS is reported (at 100,000 facts or more after `--settle`
  seconds of searches, while the rows are grouped for approximate search); and the
  same file served by `chronomem serve` with the model loaded: its RSS.
- tenants: U users of F facts each in one file (vectors written as with
  `--synthetic`), and a few sample users each alone in a file of their own: the
  sample users' hybrid `search_nodes`, shared file against alone, alternating.
- recall: approximate search against exact on real vectors (`--vectors`: a
  `bench.embedding_cache` file to read them from; else `--rows` texts are embedded):
  recall@10 and @200 (what a search takes by meaning), and the time of each.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import random
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from memory import GraphMemory
from memory.embedding import Embedder, choose_embedder
from memory.schema import VECTOR_KINDS, VECTOR_TABLES
from memory.vectors import NearestRows, encode

from .common import StdioServer, machine, ms, observation_line, percentile

DATA = Path(__file__).resolve().parents[2] / "shared/bench-data"
APP, USER = "bench", "semantic"
FACTS_PER_ENTITY = 10
BASE_VECTORS = 5_000  # real facts whose vectors stand for the synthetic ones
NOISE = 0.025  # per component: a perturbed vector's cosine to its original is ~0.9
FIRST = "Ada Ben Cara Dan Eva Finn Gia Hugo Ines Jon Kira Leo Mia Nils Olga Pia".split()
LAST = "Abbott Baker Chen Diaz Evans Fischer Garcia Hayes Ito Jensen Kowalski Lopez".split()


# ---------------------------------------------------------------- real texts


def _load(name: str) -> Any:
    with gzip.open(DATA / name, "rt") as handle:
        return json.load(handle)


_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def real_facts(count: int) -> list[str]:
    """`count` distinct short statements: LoCoMo's observations, then sentences of
    20-160 characters from LongMemEval-S's user turns."""
    facts: dict[str, None] = {}
    for item in _load("locomo_dev.json.gz"):
        for session in item["observation"].values():
            for lines in session.values():
                facts.update((text, None) for text, _ in lines)
    if len(facts) < count:
        for item in _load("longmemeval_s_dev.json.gz"):
            for session in item["haystack_sessions"]:
                for turn in session:
                    if turn["role"] != "user":
                        continue
                    for sentence in _SENTENCE.split(turn["content"]):
                        if 20 <= len(sentence) <= 160 and "\n" not in sentence:
                            facts[sentence] = None
            if len(facts) >= count:
                break
    found = list(facts)
    if len(found) < count:
        sys.exit(f"only {len(found):,} distinct facts in the data, {count:,} asked")
    random.Random(7).shuffle(found)
    return found[:count]


def real_turns(count: int) -> list[dict[str, str]]:
    """`count` conversation turns (role, text), LoCoMo's then LongMemEval-S's, cut at
    2,000 characters."""
    turns: list[dict[str, str]] = []
    for item in _load("locomo_dev.json.gz"):
        conversation = item["conversation"]
        first = conversation["speaker_a"]
        for key, session in conversation.items():
            if key.startswith("session_") and isinstance(session, list):
                for turn in session:
                    role = "user" if turn["speaker"] == first else "assistant"
                    turns.append({"role": role, "text": turn["text"]})
    for item in _load("longmemeval_s_dev.json.gz"):
        if len(turns) >= count:
            break
        for session in item["haystack_sessions"]:
            for turn in session:
                if turn["content"].strip():
                    turns.append({"role": turn["role"], "text": turn["content"][:2000]})
    return (turns * (count // max(1, len(turns)) + 1))[:count]


def real_queries(count: int) -> list[str]:
    """`count` distinct questions of LongMemEval-S and LoCoMo, shuffled."""
    questions: dict[str, None] = {}
    for item in _load("longmemeval_s_dev.json.gz"):
        questions[item["question"]] = None
    for item in _load("locomo_dev.json.gz"):
        questions.update((qa["question"], None) for qa in item["qa"])
    found = list(questions)
    random.Random(11).shuffle(found)
    return (found * (count // len(found) + 1))[:count]


def entity_name(number: int) -> str:
    first, last = FIRST[number % len(FIRST)], LAST[number // len(FIRST) % len(LAST)]
    return f"{first} {last} {number // (len(FIRST) * len(LAST))}"


def export_lines(facts: list[str], prefix: str = "") -> Iterator[str]:
    """`facts` as chronomem export lines, ten to an entity."""
    at = "2025-01-01T00:00:00.000000Z"
    entities = (len(facts) + FACTS_PER_ENTITY - 1) // FACTS_PER_ENTITY
    for number in range(entities):
        line = {"type": "entity", "name": entity_name(number), "entity_type": "person"}
        yield json.dumps({**line, "project": None, "recorded_at": at})
    for k, text in enumerate(facts):
        yield json.dumps(
            observation_line(f"{prefix}o{k}", entity_name(k // FACTS_PER_ENTITY), text, at)
        )


def threads_label(threads: int | None) -> str:
    if threads is None:
        return "one thread (the default)"
    return "every core" if threads == 0 else f"{threads} thread(s)"


def model(threads: int | None = None) -> Embedder:
    """The bundled model; with `threads`, run on that many threads (0: every core)."""
    embedder = choose_embedder("default")
    if embedder is None:
        sys.exit("the semantic extra is not installed (make install)")
    if threads is not None:
        from memory.embedding.minilm import MiniLM

        return MiniLM(threads=threads)
    return embedder


def cached_model() -> Embedder:
    from .embedding_cache import bench_embedder

    embedder = bench_embedder("default")
    assert embedder is not None
    return embedder


def memory_now() -> dict[str, int]:
    """This process's resident memory now and at its peak, in bytes (Linux)."""
    found = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(("VmRSS:", "VmHWM:")):
            found[line[:5]] = int(line.split()[1]) * 1024
    return {"rss": found.get("VmRSS", 0), "peak": found.get("VmHWM", 0)}


def summary(times: list[float]) -> str:
    return f"{ms(percentile(times, 50))} | {ms(percentile(times, 95))}"


# ---------------------------------------------------------------- writes


async def writes_round(
    embedder_choice: str, calls: int, threads: int | None
) -> dict[str, dict[str, float]]:
    """One process's p50/p95 (ms) of each write, during a backlog and idle."""
    embedder: Embedder | str = model(threads) if embedder_choice == "default" else "none"
    if not isinstance(embedder, str):
        embedder.embed(["loaded"])  # a server has loaded it by the time writes come
    facts = real_facts(3_000 + 2 * calls + 100)
    turns = real_turns(2 * calls + 100)
    folder = tempfile.mkdtemp()
    result: dict[str, dict[str, float]] = {}
    async with GraphMemory.open(os.path.join(folder, "m.db"), embedder=embedder) as mem:
        s = mem.scope(app=APP, user=USER)
        backlog = iter(facts[:3_000])
        for i in range(300):
            await s.remember(entity=entity_name(i), facts=[next(backlog) for _ in range(10)])
        new_facts, new_turns = iter(facts[3_000:]), iter(turns)
        counter = iter(range(10**9))
        operations: dict[str, Callable[[], Awaitable[object]]] = {
            "remember (1 new fact)": lambda: s.remember(
                entity=entity_name(next(counter) % 300), facts=[next(new_facts)]
            ),
            "record_turns (1 turn)": lambda: s.record_turns(
                session_id="s1", turns=[next(new_turns)]
            ),
        }
        for phase in ("backlog", "idle"):
            if phase == "idle" and mem.embedder is not None:
                await mem.wait_until_indexed()
            pending = (await mem.index_progress()).pending if mem.embedder else 0
            for call in operations.values():
                for _ in range(10):
                    await call()
            times: dict[str, list[float]] = {name: [] for name in operations}
            for _ in range(calls // 2):
                for name, call in operations.items():  # interleaved: both see the backlog
                    started = time.perf_counter()
                    await call()
                    times[name].append(time.perf_counter() - started)
            left = (await mem.index_progress()).pending if mem.embedder else 0
            for name, values in times.items():
                result[f"{phase}: {name}"] = {
                    "p50": percentile(values, 50) * 1000,
                    "p95": percentile(values, 95) * 1000,
                    "pending_before": pending,
                    "pending_after": left,
                }
    return result


def writes(args: argparse.Namespace) -> None:
    choices = ("none", "default")
    rounds: dict[str, list[dict[str, dict[str, float]]]] = {c: [] for c in choices}
    for number in range(args.rounds):
        for choice in choices[number % 2 :] + choices[: number % 2]:
            done = subprocess.run(
                [sys.executable, "-m", "bench.semantic", "writes-round", choice, str(args.calls)]
                + ([] if args.threads is None else ["--threads", str(args.threads)]),
                capture_output=True,
                text=True,
                check=True,
            )
            rounds[choice].append(json.loads(done.stdout))
        print(f"  round {number + 1} of {args.rounds} done", file=sys.stderr, flush=True)
    threads = threads_label(args.threads)
    print(
        f"Machine: {machine()}; {args.rounds} rounds of {args.calls} calls per operation; "
        f"the model on {threads}\n"
    )
    print("| phase: operation | none p50 | none p95 | model p50 | model p95 | p50 change |")
    print("|---|---|---|---|---|---|")
    for key in rounds["none"][0]:
        cells = []
        p50s = {}
        for choice in choices:
            p50s[choice] = statistics.median(r[key]["p50"] for r in rounds[choice])
            p95 = statistics.median(r[key]["p95"] for r in rounds[choice])
            cells += [f"{p50s[choice]:.3f}", f"{p95:.3f}"]
        change = 100 * (p50s["default"] - p50s["none"]) / p50s["none"]
        print(f"| {key} | {' | '.join(cells)} | {change:+.1f}% |")
    backlog = [r[k] for r in rounds["default"] for k in r if k.startswith("backlog")]
    before = [b["pending_before"] for b in backlog]
    after = [b["pending_after"] for b in backlog]
    print(
        "\nTimes in ms, medians over the rounds. Backlog phase with the model: "
        f"{min(before):,}-{max(before):,} rows waiting when the timed calls began, "
        f"{min(after):,}-{max(after):,} when they ended."
    )


# ---------------------------------------------------------------- indexer


async def indexer_worker(path: str) -> dict[str, float]:
    """Seconds for the indexer to work through `path`'s backlog, the rows it made,
    and this process's resident memory (model loaded before the clock starts)."""
    embedder = model()
    embedder.embed(["loaded"])
    loaded = memory_now()["peak"]
    started = time.perf_counter()
    async with GraphMemory.open(path, embedder=embedder) as mem:
        await mem.wait_until_indexed()
        seconds = time.perf_counter() - started
        rows = (await mem.index_progress()).indexed
    return {"seconds": seconds, "rows": rows, "loaded": loaded, **memory_now()}


async def indexer(args: argparse.Namespace) -> None:
    print(f"Machine: {machine()}; model {model().name}\n")
    print(
        "| rows | stored | seconds to wait_until_indexed | rows/s "
        "| peak RSS, model loaded | peak RSS, after indexing |"
    )
    print("|---|---|---|---|---|---|")
    folder = Path(tempfile.mkdtemp())
    for kind, count in (("facts", args.facts), ("turns", args.turns)):
        path = folder / f"{kind}.db"
        async with GraphMemory.open(path, embedder="none") as mem:
            s = mem.scope(app=APP, user=USER)
            if kind == "facts":
                await s.import_lines(list(export_lines(real_facts(count))))
            else:
                turns = real_turns(count)
                for start in range(0, count, 20):
                    await s.record_turns(session_id=f"s{start}", turns=turns[start : start + 20])
        done = subprocess.run(
            [sys.executable, "-m", "bench.semantic", "indexer-worker", str(path)],
            capture_output=True,
            text=True,
            check=True,
        )
        r = json.loads(done.stdout)
        what = "facts and their entities' names" if kind == "facts" else "turns"
        print(
            f"| {kind} | {r['rows']:,} {what} | {r['seconds']:.1f} "
            f"| {r['rows'] / r['seconds']:,.0f} | {r['loaded'] / 2**20:,.0f} MiB "
            f"| {r['peak'] / 2**20:,.0f} MiB |"
        )
        for file in folder.glob(f"{kind}.db*"):
            file.unlink()
    folder.rmdir()
    characters = statistics.mean(len(t["text"]) for t in real_turns(args.turns))
    median = statistics.median(map(len, real_facts(args.facts)))
    print(
        f"\nFacts are short statements (median {median:.0f} characters), turns "
        f"{characters:.0f} characters on average; the model on one thread (the default);"
        " batches of 64 rows (`IndexerSettings.batch`). RSS: of the indexing process alone."
    )


# ---------------------------------------------------------------- vectors written directly


def write_vectors(path: Path, base: dict[str, npt.NDArray[np.float32]], name: str) -> int:
    """Give every row waiting for a vector one made from `base` (by the fact's text
    for facts, any for the rest), straight into the file; the backlog is emptied."""
    fallback = np.stack(list(base.values()))
    db = sqlite3.connect(path)
    texts = dict(db.execute("SELECT seq, text FROM observation"))
    pending = db.execute(
        "SELECT kind, row_id, owner_id FROM vector_pending ORDER BY kind, row_id"
    ).fetchall()
    rng = np.random.default_rng(3)
    written = 0
    for start in range(0, len(pending), 50_000):
        part = pending[start : start + 50_000]
        rows = np.stack(
            [
                base[texts[row_id]]
                if kind == VECTOR_KINDS["observation"] and texts.get(row_id) in base
                else fallback[rng.integers(len(fallback))]
                for kind, row_id, _ in part
            ]
        )
        rows += rng.normal(0, NOISE, rows.shape).astype(np.float32)
        rows /= np.linalg.norm(rows, axis=1, keepdims=True)
        db.executemany(
            "INSERT INTO vector (kind, row_id, owner_id, vec) VALUES (?, ?, ?, ?)",
            [(k, r, o, encode(v)) for (k, r, o), v in zip(part, rows, strict=True)],
        )
        written += len(part)
    db.execute("DELETE FROM vector_pending")
    db.execute("UPDATE vector_state SET model = ? WHERE id = 1", (name,))
    db.commit()
    db.close()
    return written


def base_vectors(count: int) -> dict[str, npt.NDArray[np.float32]]:
    texts = real_facts(count)
    embedder = cached_model()
    vectors = np.concatenate(
        [embedder.embed(texts[i : i + 256]) for i in range(0, len(texts), 256)]
    )
    return dict(zip(texts, vectors, strict=True))


# ---------------------------------------------------------------- search


SEARCH_WORKER_WARM_UP = 5


async def search_worker(
    path: str, queries: list[str], settle: float, threads: int | None
) -> dict[str, Any]:
    """p50/p95 of search_nodes by words only and hybrid, alternating query by query,
    on one file, and hybrid again with each query's vector already made. Before
    that, `settle` seconds of hybrid searches (times kept apart): a large set's rows
    are grouped for approximate search on a background thread meanwhile."""
    embedder = model(threads)
    before = memory_now()
    times: dict[str, list[float]] = {"words": [], "hybrid": [], "hybrid, query known": []}
    async with (
        GraphMemory.open(path, embedder="none") as words_mem,
        GraphMemory.open(path, embedder=embedder) as hybrid_mem,
    ):
        calls = {
            "words": words_mem.scope(app=APP, user=USER),
            "hybrid": hybrid_mem.scope(app=APP, user=USER),
        }
        await hybrid_mem.wait_until_indexed()  # loads the model
        started = time.perf_counter()
        await calls["hybrid"].search_nodes(query=queries[0], limit=10)
        first = time.perf_counter() - started
        settling: list[float] = []
        until = time.perf_counter() + settle
        while time.perf_counter() < until:
            begun = time.perf_counter()
            await calls["hybrid"].search_nodes(query=queries[len(settling) % 50], limit=10)
            settling.append(time.perf_counter() - begun)
        for query in queries[1:SEARCH_WORKER_WARM_UP]:
            for scope in calls.values():
                await scope.search_nodes(query=query, limit=10)
        for i, query in enumerate(queries[SEARCH_WORKER_WARM_UP:]):
            # The same question by words, then by meaning (its vector made), then again
            # (its vector remembered); which of the first two goes first alternates.
            order = ["words", "hybrid"] if i % 2 else ["hybrid", "words"]
            for name in [*order, "hybrid, query known"]:
                scope = calls["hybrid" if name == "hybrid, query known" else name]
                started = time.perf_counter()
                await scope.search_nodes(query=query, limit=10)
                times[name].append(time.perf_counter() - started)
    return {
        "times": times,
        "first": first,
        "settling": settling,
        "memory": memory_now(),
        "before": before,
    }


async def served_rss(path: Path, queries: list[str], seconds: float) -> int:
    """Peak RSS of `chronomem serve` on `path` after `seconds` of searches (the
    first load the model in the background, as they rank by words)."""
    entry = "from server.cli import main; main()"
    command = [sys.executable, "-c", entry, "serve", "--db", str(path), "--app", APP]
    server = await StdioServer.start(
        [*command, "--user", USER], env={**os.environ, "CHRONOMEM_EMBEDDER": "default"}
    )
    try:
        deadline = time.monotonic() + seconds
        for query in queries:
            await server.call_tool("search_nodes", {"query": query, "limit": 10})
            if time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
        return server.peak_rss()
    finally:
        await server.close()


async def search(args: argparse.Namespace) -> None:
    if args.settle is None:
        args.settle = 60.0 if args.facts >= 100_000 else 0.0
    folder = Path(tempfile.mkdtemp(dir=args.dir))
    path = folder / "search.db"
    started = time.perf_counter()
    how = ""
    if args.synthetic:
        distinct = min(BASE_VECTORS, args.facts)
        texts = real_facts(distinct)
        facts = [texts[i % len(texts)] for i in range(args.facts)]
        async with GraphMemory.open(path, embedder="none") as mem:
            lines = list(export_lines(facts))
            await mem.scope(app=APP, user=USER).import_lines(lines)
            del lines
        imported = time.perf_counter() - started
        base = base_vectors(distinct)
        written = write_vectors(path, base, model().name)
        how = (
            f"{args.facts:,} facts (ten to an entity) of {distinct:,} distinct real texts; "
            f"vectors written into the file ({written:,}, facts and names): the model's for "
            f"those texts, each perturbed (noise sigma {NOISE} per component). Import "
            f"{imported:.0f} s, vectors {time.perf_counter() - started - imported:.0f} s."
        )
    else:
        async with GraphMemory.open(path, embedder=cached_model()) as mem:
            await mem.scope(app=APP, user=USER).import_lines(
                list(export_lines(real_facts(args.facts)))
            )
            await mem.wait_until_indexed()
        how = (
            f"{args.facts:,} distinct real facts (ten to an entity), embedded by the "
            f"indexer ({time.perf_counter() - started:.0f} s with the vectors kept from "
            "earlier runs)."
        )
    queries = real_queries(SEARCH_WORKER_WARM_UP + args.queries)
    done = subprocess.run(
        [sys.executable, "-m", "bench.semantic", "search-worker", str(path), str(args.settle)]
        + ([] if args.threads is None else ["--threads", str(args.threads)]),
        input=json.dumps(queries),
        capture_output=True,
        text=True,
        check=True,
    )
    measured = json.loads(done.stdout)
    rss = await served_rss(path, real_queries(400)[200:], max(20.0, args.settle))
    size = sum(p.stat().st_size for p in folder.glob("search.db*"))
    print(f"Machine: {machine()}")
    print(how)
    threads = threads_label(args.threads)
    print(
        f"File {size / 2**20:,.0f} MiB; {args.queries} distinct questions, limit 10; the "
        f"model on {threads} in the search process.\n"
    )
    print("| search_nodes | p50 ms | p95 ms |")
    print("|---|---|---|")
    for name, times in measured["times"].items():
        print(f"| {name} | {summary(times)} |")
    memory = measured["memory"]
    settling = measured["settling"]
    if settling:
        print(
            f"\nBefore timing: {args.settle:g} s of hybrid searches, {len(settling)} of them, "
            f"p50 {ms(percentile(settling, 50))} ms (rows scored one by one until grouped)."
        )
    print(
        f"\nFirst hybrid search after opening (reads the vectors): {measured['first'] * 1000:,.0f}"
        f" ms. Search process after the searches (model loaded; the file opened twice, with"
        f" and without it): RSS {memory['rss'] / 2**20:,.0f} MiB, peak "
        f"{memory['peak'] / 2**20:,.0f} MiB. `chronomem serve` on this file with the model, "
        f"after searches by meaning: peak RSS {rss / 2**20:,.0f} MiB."
    )
    if not args.keep:
        for file in folder.iterdir():
            file.unlink()
        folder.rmdir()
    else:
        print(f"File kept: {path}")


# ---------------------------------------------------------------- tenants


async def tenants(args: argparse.Namespace) -> None:
    folder = Path(tempfile.mkdtemp(dir=args.dir))
    distinct = min(BASE_VECTORS, args.users * args.facts)
    texts = real_facts(distinct)
    base = base_vectors(distinct)
    rng = random.Random(5)
    samples = sorted({0, args.users // 2, args.users - 1})
    started = time.perf_counter()

    def user_facts(number: int) -> list[str]:
        pick = random.Random(number)
        return [texts[pick.randrange(len(texts))] for _ in range(args.facts)]

    async with GraphMemory.open(folder / "shared.db", embedder="none") as mem:
        for number in range(args.users):
            lines = list(export_lines(user_facts(number), prefix=f"u{number}"))
            await mem.scope(app=APP, user=f"user{number:05d}").import_lines(lines)
    for number in samples:
        async with GraphMemory.open(folder / f"alone-{number}.db", embedder="none") as mem:
            lines = list(export_lines(user_facts(number), prefix=f"u{number}"))
            await mem.scope(app=APP, user=f"user{number:05d}").import_lines(lines)
    for path in folder.glob("*.db"):
        write_vectors(path, base, model().name)
    built = time.perf_counter() - started
    embedder = model()
    queries = real_queries(args.queries * len(samples) + 10)
    rng.shuffle(queries)
    times: dict[str, list[float]] = {"shared": [], "alone": []}
    async with GraphMemory.open(folder / "shared.db", embedder=embedder) as shared_mem:
        await shared_mem.wait_until_indexed()
        for n, number in enumerate(samples):
            async with GraphMemory.open(folder / f"alone-{number}.db", embedder=embedder) as alone:
                scopes = {
                    "shared": shared_mem.scope(app=APP, user=f"user{number:05d}"),
                    "alone": alone.scope(app=APP, user=f"user{number:05d}"),
                }
                mine = queries[n * args.queries : (n + 1) * args.queries]
                for query in mine[:3]:
                    for scope in scopes.values():
                        await scope.search_nodes(query=query, limit=10)
                for i, query in enumerate(mine[3:]):
                    for name in ("shared", "alone") if i % 2 else ("alone", "shared"):
                        begun = time.perf_counter()
                        await scopes[name].search_nodes(query=query, limit=10)
                        times[name].append(time.perf_counter() - begun)
    print(f"Machine: {machine()}")
    print(
        f"{args.users:,} users x {args.facts:,} facts (ten to an entity) in one file, "
        f"{args.users * args.facts:,} facts; sample users {samples} each also alone in a "
        f"file; vectors written as with --synthetic; built in {built:.0f} s.\n"
    )
    print("| hybrid search_nodes | calls | p50 ms | p95 ms |")
    print("|---|---|---|---|")
    for name, values in times.items():
        print(f"| {name} | {len(values)} | {summary(values)} |")
    ratio = percentile(times["shared"], 50) / percentile(times["alone"], 50)
    print(f"\nshared/alone p50: {ratio:.2f}")
    for file in folder.iterdir():
        file.unlink()
    folder.rmdir()


# ---------------------------------------------------------------- recall


def stored_vectors(path: Path, count: int) -> npt.NDArray[np.float32]:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = db.execute("SELECT vec FROM v LIMIT ?", (count,)).fetchall()
    db.close()
    return np.stack([np.frombuffer(vec, dtype=np.float32) for (vec,) in rows])


def recall(args: argparse.Namespace) -> None:
    if args.vectors:
        vectors = stored_vectors(args.vectors, args.rows + args.queries)
        source = f"{len(vectors):,} of the model's vectors of LongMemEval-S texts"
    else:
        embedder = cached_model()
        texts = real_facts(args.rows + args.queries)
        vectors = np.concatenate(
            [embedder.embed(texts[i : i + 256]) for i in range(0, len(texts), 256)]
        )
        source = f"{len(vectors):,} real facts embedded by the model"
    if len(vectors) < args.rows + args.queries:
        sys.exit(f"only {len(vectors):,} vectors")
    rows, queries = vectors[: args.rows], vectors[args.rows : args.rows + args.queries]
    db = sqlite3.connect(":memory:")
    for statement in VECTOR_TABLES:
        db.execute(statement)
    db.execute("UPDATE vector_state SET model = 'm'")
    db.executemany(
        "INSERT INTO vector (kind, row_id, owner_id, vec) VALUES (1, ?, 1, ?)",
        [(i, encode(v)) for i, v in enumerate(rows)],
    )
    exact = NearestRows(rows.shape[1], "m", approximate_from=10**12)
    approximate = NearestRows(rows.shape[1], "m", approximate_from=1, probes=args.probes)
    started = time.perf_counter()
    approximate.nearest(db, 1, "observation", queries[0], 10)
    approximate.wait_until_built()
    built = time.perf_counter() - started
    exact.nearest(db, 1, "observation", queries[0], 10)
    print(
        f"Machine: {machine()}; {source}: {args.rows:,} rows, {args.queries} queries "
        f"(other vectors of the same source); {args.probes} groups probed"
    )
    print(f"Approximate index built in {built:.1f} s\n")
    print("| k | recall@k | exact p50 ms | approximate p50 ms |")
    print("|---|---|---|---|")
    for k in (10, 200):
        found: list[float] = []
        times: dict[str, list[float]] = {"exact": [], "approximate": []}
        for query in queries:
            results = {}
            for name, rows_of in (("exact", exact), ("approximate", approximate)):
                begun = time.perf_counter()
                best, _ = rows_of.nearest(db, 1, "observation", query, k)
                times[name].append(time.perf_counter() - begun)
                results[name] = {row for row, _ in best}
            found.append(len(results["exact"] & results["approximate"]) / k)
        print(
            f"| {k} | {statistics.mean(found):.3f} | {ms(percentile(times['exact'], 50))} "
            f"| {ms(percentile(times['approximate'], 50))} |"
        )


# ---------------------------------------------------------------- command line


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parts = parser.add_subparsers(dest="part", required=True)
    p = parts.add_parser("writes", help="write latency, none against the model")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--threads", type=int, default=None, help="the model's threads")
    p = parts.add_parser("writes-round")  # one process of `writes`
    p.add_argument("embedder", choices=["none", "default"])
    p.add_argument("calls", type=int)
    p.add_argument("--threads", type=int, default=None)
    p = parts.add_parser("indexer", help="background indexer throughput")
    p.add_argument("--facts", type=int, default=2_000)
    p.add_argument("--turns", type=int, default=1_000)
    p = parts.add_parser("indexer-worker")  # the indexing process of `indexer`
    p.add_argument("path")
    p = parts.add_parser("search", help="hybrid search_nodes latency and RSS")
    p.add_argument("--facts", type=int, default=10_000)
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--synthetic", action="store_true", help="write the vectors directly")
    p.add_argument("--settle", type=float, default=None, help="seconds of searches before timing")
    p.add_argument("--threads", type=int, default=None, help="the search process's model threads")
    p.add_argument("--dir", type=Path, default=None, help="make the file here")
    p.add_argument("--keep", action="store_true")
    p = parts.add_parser("search-worker")  # the measuring process of `search`
    p.add_argument("path")
    p.add_argument("settle", type=float)
    p.add_argument("--threads", type=int, default=None)
    p = parts.add_parser("tenants", help="one user's hybrid search among many")
    p.add_argument("--users", type=int, default=200)
    p.add_argument("--facts", type=int, default=1_000)
    p.add_argument("--queries", type=int, default=60, help="per sample user")
    p.add_argument("--dir", type=Path, default=None)
    p = parts.add_parser("recall", help="approximate search against exact")
    p.add_argument("--rows", type=int, default=50_000)
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--vectors", type=Path, default=None, help="a bench.embedding_cache file")
    p.add_argument("--probes", type=int, default=NearestRows.probes, help="groups scored")
    return parser.parse_args()


def main() -> None:
    args = arguments()
    if args.part == "writes":
        writes(args)
    elif args.part == "writes-round":
        print(json.dumps(asyncio.run(writes_round(args.embedder, args.calls, args.threads))))
    elif args.part == "indexer-worker":
        print(json.dumps(asyncio.run(indexer_worker(args.path))))
    elif args.part == "indexer":
        asyncio.run(indexer(args))
    elif args.part == "search":
        asyncio.run(search(args))
    elif args.part == "search-worker":
        queries = json.loads(sys.stdin.read())
        measured = asyncio.run(search_worker(args.path, queries, args.settle, args.threads))
        print(json.dumps(measured))
    elif args.part == "tenants":
        asyncio.run(tenants(args))
    else:
        recall(args)


if __name__ == "__main__":
    main()
