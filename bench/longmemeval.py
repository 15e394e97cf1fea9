"""Retrieval quality of `recall` on LongMemEval-S (dev split, 200 questions, MIT licence).

For each question: a fresh in-memory database; every turn of every haystack session
stored with `record_turns` (both roles, `at` = the session's date); then
`recall(question, limit=50)`. Sessions are ranked by their first turn in the result.
Abstention questions (ids ending `_abs`) are skipped, as in the official evaluation.

    .venv/bin/python -m bench.longmemeval [--questions N] [--json FILE]

Beside it, in the same run and on the same turns, the classic baseline the target
is set against: plain Okapi BM25 (k1=1.5, b=0.75, lower-cased words, no stemming, no
stop words) over single turns (`--no-baseline` skips it).

Turns longer than the 20,000-character limit are stored as consecutive chunks of the
same session (and count as one turn for turn-level recall); blank turns are skipped.
"""

from __future__ import annotations

import argparse
import gzip
import json
import time
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio

from memory import GraphMemory
from memory.embedding import Embedder
from memory.validation import TURN_TEXT_MAX, TURNS_PER_CALL

from .common import PlainBM25, machine, ms, percentile
from .embedding_cache import EMBEDDERS, bench_embedder

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared/bench-data/longmemeval_s_dev.json.gz"
KS_SESSION = (1, 5, 10)
KS_ALL = (5, 10)
KS_TURN = (5, 10)


def session_time(text: str) -> str:
    """'2023/05/20 (Sat) 07:47' -> '2023-05-20T07:47:00Z'."""
    return datetime.strptime(text.split(" (")[0] + text[-6:], "%Y/%m/%d %H:%M").strftime(
        "%Y-%m-%dT%H:%M:00Z"
    )


def chunks(text: str) -> list[str]:
    return [text[i : i + TURN_TEXT_MAX] for i in range(0, len(text), TURN_TEXT_MAX)]


def plain_bm25_sessions(item: dict[str, Any]) -> list[str]:
    """Sessions ranked by their best turn under plain Okapi BM25 over single turns."""
    docs, sessions = [], []
    for session_id, session in zip(
        item["haystack_session_ids"], item["haystack_sessions"], strict=True
    ):
        for turn in session:
            docs.append(turn["content"])
            sessions.append(session_id)
    ranked: list[str] = []
    for index in PlainBM25(docs).ranked(item["question"]):
        if sessions[index] not in ranked:
            ranked.append(sessions[index])
    return ranked


def session_scores(ranked: list[str], answers: set[str]) -> dict[str, float]:
    scores = {}
    for k in KS_SESSION:
        scores[f"recall_any@{k}"] = float(bool(answers & set(ranked[:k])))
    for k in KS_ALL:
        scores[f"recall_all@{k}"] = float(answers <= set(ranked[:k]))
    return scores


async def score_question(item: dict[str, Any], embedder: Embedder | None) -> dict[str, Any]:
    async with GraphMemory.open(":memory:", embedder=embedder or "none") as mem:
        scope = mem.scope(app="longmemeval", user="user")
        turn_of: dict[str, tuple[str, bool]] = {}  # stored id -> (session, has_answer)
        started = time.perf_counter()
        for session_id, date, session in zip(
            item["haystack_session_ids"],
            item["haystack_dates"],
            item["haystack_sessions"],
            strict=True,
        ):
            at = session_time(date)
            turns, labels = [], []
            for turn in session:
                if not turn["content"].strip():
                    continue
                for piece in chunks(turn["content"]):
                    turns.append({"role": turn["role"], "text": piece, "at": at})
                    labels.append(bool(turn.get("has_answer")))
            for start in range(0, len(turns), TURNS_PER_CALL):
                stored = await scope.record_turns(
                    session_id=session_id, turns=turns[start : start + TURNS_PER_CALL]
                )
                for turn_id, label in zip(
                    stored.ids, labels[start : start + TURNS_PER_CALL], strict=True
                ):
                    turn_of[turn_id] = (session_id, label)
        ingest = time.perf_counter() - started
        started = time.perf_counter()
        await mem.wait_until_indexed()
        indexing = time.perf_counter() - started
        started = time.perf_counter()
        result = await scope.recall(query=item["question"], limit=50)
        latency = time.perf_counter() - started

    sessions: list[str] = []
    for turn in result.turns:
        if turn.session_id not in sessions:
            sessions.append(turn.session_id)
    answers = set(item["answer_session_ids"])
    answer_turns = [turn_of[t.id][1] for t in result.turns]
    scores = session_scores(sessions, answers)
    has_turn_labels = any(label for _, label in turn_of.values())
    for k in KS_TURN:
        scores[f"turn_any@{k}"] = float(any(answer_turns[:k])) if has_turn_labels else None
    return {
        "question_id": item["question_id"],
        "question_type": item["question_type"],
        "scores": scores,
        "turns": len(turn_of),
        "ingest_s": ingest,
        "index_s": indexing,
        "recall_s": latency,
    }


def table(rows: list[dict[str, Any]], key: str = "scores") -> str:
    metrics = list(rows[0][key])
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[row["question_type"]].append(row)
    groups = dict(sorted(groups.items()))
    groups["overall"] = rows
    head = "| question type | n | " + " | ".join(metrics) + " |"
    lines = [head, "|" + "---|" * (len(metrics) + 2)]
    for name, members in groups.items():
        cells = []
        for metric in metrics:
            values = [m[key][metric] for m in members if m[key][metric] is not None]
            cells.append(f"{sum(values) / len(values):.3f}" if values else "–")
        lines.append(f"| {name} | {len(members)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--questions", type=int, default=None, help="score only the first N")
    parser.add_argument("--json", type=Path, default=None, help="also write results here")
    parser.add_argument("--no-baseline", action="store_true", help="skip plain BM25")
    parser.add_argument("--embedder", choices=EMBEDDERS, default="default", help="none: words only")
    args = parser.parse_args()
    embedder = bench_embedder(args.embedder)

    with gzip.open(args.data, "rt") as handle:
        items = json.load(handle)
    skipped = [i for i in items if i["question_id"].endswith("_abs")]
    items = [i for i in items if not i["question_id"].endswith("_abs")][: args.questions]
    rows = []
    for item in items:
        row = await score_question(item, embedder)
        if not args.no_baseline:
            ranked = plain_bm25_sessions(item)
            row["baseline"] = session_scores(ranked, set(item["answer_session_ids"]))
        rows.append(row)

    recall_times = [r["recall_s"] for r in rows]
    ingest_rates = [r["turns"] / r["ingest_s"] for r in rows]
    print(f"LongMemEval-S dev: {len(rows)} questions scored, {len(skipped)} abstention skipped")
    print(f"Machine: {machine()}")
    print()
    print(f"chronomem recall (embedder: {embedder.name if embedder else 'none, words only'}):")
    print()
    print(table(rows))
    print()
    if not args.no_baseline:
        print("Classic baseline, plain Okapi BM25 over single turns (same run, same turns):")
        print()
        print(table(rows, "baseline"))
        print()
    print(
        f"recall latency (limit=50, ~{sum(r['turns'] for r in rows) // len(rows)} turns "
        f"per question): p50 {ms(percentile(recall_times, 50))} ms, "
        f"p95 {ms(percentile(recall_times, 95))} ms"
    )
    print(
        f"ingest: median {percentile(ingest_rates, 50):,.0f} turns/s "
        "(record_turns, one call per session)"
    )
    if args.json:
        args.json.write_text(json.dumps({"machine": machine(), "questions": rows}, indent=1))


if __name__ == "__main__":
    anyio.run(main)
