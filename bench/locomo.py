"""Retrieval quality on LoCoMo (the dev file: 5 long two-person conversations, CC BY-NC
4.0): `recall` over the turns, and `search_nodes` over the sessions' observations.

    .venv/bin/python -m bench.locomo [--conversations N] [--questions N] [--json FILE]

(a) Turns. A fresh in-memory database per conversation; every turn of every session
recorded with `record_turns` (both speakers, role = the speaker's name, `at` = the
session's date, one call per session), its dia_id kept on the side; each question
through `recall(question, limit=25)`. Scored: recall_any@k, the fraction of questions
with an evidence turn in the top k, and evidence_recall@k, the fraction of a
question's evidence turns in the top k, averaged over the questions.

(b) Facts. A fresh in-memory database per conversation; every session observation
stored with `remember(entity=speaker, facts=[...], entity_type="person",
valid_from=session date)`, one call per session and speaker (at most 50 facts a
call; no session has more than 9 for one speaker); each question through
`search_nodes(question, limit=10)` with the default `facts_per_hit` (5). The facts
are read in result order: hit 1's observations in order, then hit 2's, and so on.
An evidence fact is an observation one of whose dia_ids is among the question's
evidence. Scored: fact_any@k, the fraction of questions with an evidence fact among
the first k facts read, and fact_recall@k, the fraction of a question's evidence
facts among them, averaged. Also the result's JSON size
(`len(result.model_dump_json())`). With one entity per speaker, a result has at most
2 hits and so at most 10 facts.

Both parts score, in the same run and on the same units, the classic baseline:
plain Okapi BM25 (k1=1.5, b=0.75, lower-cased words, no stemming, no stop words;
`bench.common.PlainBM25`) over single turns (a) and single facts (b), ranking only
the units that share a word with the question (as the engine returns only matches).

Categories, as the data numbers them (labels as in the usual reading of LoCoMo,
which the questions bear out): 1 multi-hop, 2 temporal, 3 open-domain, 4
single-hop, 5 adversarial. Category 5 (questions about things never said) has no
answer to retrieve: it is skipped in both parts, and the count is printed.
`--questions N` scores the first N scored questions of each conversation.

What is done with the odd parts of the data:
- A turn that shares an image carries `blip_caption` (the image's description,
  often what a question asks about); its text is stored as
  `text + " [shares an image: <caption>]"`, in both parts' turns and the baseline.
  `img_url`, `query` and `re-download` are ignored.
- Session dates ("1:56 pm on 8 May, 2023") become RFC 3339 UTC times. One
  conversation has `session_K_date_time` keys for sessions that do not exist (20-35
  of conv-26): ignored.
- Evidence ids are normalised: "D8:6; D9:17" is two ids, "D:11:26" is "D11:26".
  Ids that name no turn ("D10:19" where session 10 has 16 turns, a bare "D") are
  dropped, and printed; a question left with no evidence turn is not scored (two
  open-domain questions of conv-26 have no evidence at all).
- An observation's dia_id may be a list (the fact comes from several turns): it
  is an evidence fact if any of them is evidence. Its ids are normalised the same
  way. In (b), a question none of whose evidence turns any observation cites has
  no evidence fact and is not scored there (counted).
- A fact repeated for the same speaker is stored once by `remember` (a
  duplicate): its dia_ids are merged into the stored one's.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio

from memory import GraphMemory
from memory.embedding import Embedder
from memory.validation import FACTS_PER_CALL, TURNS_PER_CALL

from .common import PlainBM25, machine, ms, percentile
from .embedding_cache import EMBEDDERS, bench_embedder
from .longmemeval import table

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared/bench-data/locomo_dev.json.gz"
KS_TURNS = (5, 10, 25)
KS_FACTS = (5, 10)
ADVERSARIAL = 5
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
WARM_UP = 5  # questions asked once, untimed, before each database's timed calls


def session_time(text: str) -> str:
    """'1:56 pm on 8 May, 2023' -> '2023-05-08T13:56:00Z'."""
    return datetime.strptime(text, "%I:%M %p on %d %B, %Y").strftime("%Y-%m-%dT%H:%M:00Z")


_DIA_ID = re.compile(r"D:?(\d+):(\d+)")


def dia_ids(value: str | Sequence[str]) -> set[str]:
    """The dia_ids in `value` (one id, ids joined by ';', or a list of them),
    normalised to 'D<session>:<turn>'; what is not an id at all is left out."""
    parts = [value] if isinstance(value, str) else list(value)
    found = set()
    for part in parts:
        for piece in re.split(r"[;,]", part):
            match = _DIA_ID.fullmatch(piece.strip())
            if match:
                found.add(f"D{match[1]}:{match[2]}")
    return found


def turn_text(turn: dict[str, Any]) -> str:
    caption = turn.get("blip_caption")
    return f"{turn['text']} [shares an image: {caption}]" if caption else turn["text"]


class Conversation:
    """One LoCoMo item, read: its sessions (number, time, turns), its facts and its
    scored questions, with what was dropped on the way."""

    def __init__(self, item: dict[str, Any], questions: int | None) -> None:
        self.name = item["sample_id"]
        talk = item["conversation"]
        numbers = sorted(int(m[1]) for key in talk if (m := re.fullmatch(r"session_(\d+)", key)))
        self.sessions = [
            (k, session_time(talk[f"session_{k}_date_time"]), talk[f"session_{k}"]) for k in numbers
        ]
        self.turn_ids = {turn["dia_id"] for _, _, turns in self.sessions for turn in turns}
        self.dates_without_session = sorted(
            int(m[1])
            for key in talk
            if (m := re.fullmatch(r"session_(\d+)_date_time", key)) and int(m[1]) not in numbers
        )
        # (session number, time, speaker, [(text, dia_ids)])
        self.facts: list[tuple[int, str, str, list[tuple[str, set[str]]]]] = []
        dates = {k: at for k, at, _ in self.sessions}
        for key, by_speaker in item["observation"].items():
            named = re.fullmatch(r"session_(\d+)_observation", key)
            assert named is not None, key
            k = int(named[1])
            for speaker, facts in by_speaker.items():
                self.facts.append(
                    (k, dates[k], speaker, [(text, dia_ids(ids)) for text, ids in facts])
                )
        self.facts.sort(key=lambda f: f[0])
        self.adversarial = 0
        self.no_evidence = 0
        self.dropped: list[str] = []  # evidence ids naming no turn
        self.questions: list[dict[str, Any]] = []
        for qa in item["qa"]:
            if qa["category"] == ADVERSARIAL:
                self.adversarial += 1
                continue
            evidence = set()
            for raw in qa["evidence"]:
                ids = dia_ids(raw) & self.turn_ids
                evidence |= ids
                if not ids:
                    self.dropped.append(raw)
            if not evidence:
                self.no_evidence += 1
                continue
            self.questions.append(
                {"question": qa["question"], "category": qa["category"], "evidence": evidence}
            )
        self.questions = self.questions[:questions]


def category(number: int) -> str:
    return f"{number} {CATEGORIES.get(number, '?')}"


def hit_scores(
    ranked: list[str], wanted: set[str], ks: tuple[int, ...], names: tuple[str, str]
) -> dict[str, float]:
    """`names[0]@k`: any of `wanted` in the first k of `ranked`; `names[1]@k`: the
    fraction of `wanted` there."""
    scores = {}
    for k in ks:
        scores[f"{names[0]}@{k}"] = float(bool(wanted & set(ranked[:k])))
    for k in ks:
        scores[f"{names[1]}@{k}"] = len(wanted & set(ranked[:k])) / len(wanted)
    return scores


async def timed_calls(
    questions: list[dict[str, Any]], call: Callable[[str], Awaitable[Any]]
) -> list[tuple[Any, float]]:
    """Each question's result and seconds, after the first WARM_UP asked once untimed."""
    for question in questions[:WARM_UP]:
        await call(question["question"])
    done = []
    for question in questions:
        started = time.perf_counter()
        result = await call(question["question"])
        done.append((result, time.perf_counter() - started))
    return done


async def score_turns(
    conversation: Conversation, embedder: Embedder | None
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Part (a): a row per question, and the ingest figures."""
    dia_of: dict[str, str] = {}  # stored turn id -> dia_id
    texts, text_dia = [], []
    async with GraphMemory.open(":memory:", embedder=embedder or "none") as mem:
        scope = mem.scope(app="locomo", user=conversation.name)
        started = time.perf_counter()
        for k, at, session in conversation.sessions:
            turns = [{"role": t["speaker"], "text": turn_text(t), "at": at} for t in session]
            for start in range(0, len(turns), TURNS_PER_CALL):
                stored = await scope.record_turns(
                    session_id=f"session_{k}", turns=turns[start : start + TURNS_PER_CALL]
                )
                part = session[start : start + TURNS_PER_CALL]
                dia_of.update(zip(stored.ids, (t["dia_id"] for t in part), strict=True))
            texts += [t["text"] for t in turns]
            text_dia += [t["dia_id"] for t in session]
        ingest = time.perf_counter() - started
        await mem.wait_until_indexed()
        answers = await timed_calls(
            conversation.questions, lambda q: scope.recall(query=q, limit=max(KS_TURNS))
        )
    baseline = PlainBM25(texts)
    names = ("recall_any", "evidence_recall")
    rows = []
    for question, (result, seconds) in zip(conversation.questions, answers, strict=True):
        ranked = [dia_of[turn.id] for turn in result.turns]
        plain = [text_dia[i] for i in baseline.ranked(question["question"], matched_only=True)]
        rows.append(
            {
                "conversation": conversation.name,
                "question": question["question"],
                "question_type": category(question["category"]),
                "evidence": sorted(question["evidence"]),
                "scores": hit_scores(ranked, question["evidence"], KS_TURNS, names),
                "baseline": hit_scores(
                    plain[: max(KS_TURNS)], question["evidence"], KS_TURNS, names
                ),
                "seconds": seconds,
            }
        )
    return rows, {"units": len(dia_of), "seconds": ingest}


async def score_facts(
    conversation: Conversation, embedder: Embedder | None
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Part (b): a row per question that has an evidence fact, and the ingest figures."""
    dia_of: dict[str, set[str]] = {}  # stored observation id -> dia_ids
    text_of: dict[str, str] = {}  # stored observation id -> its text
    async with GraphMemory.open(":memory:", embedder=embedder or "none") as mem:
        scope = mem.scope(app="locomo", user=conversation.name)
        started = time.perf_counter()
        for _, at, speaker, facts in conversation.facts:
            for start in range(0, len(facts), FACTS_PER_CALL):
                batch = facts[start : start + FACTS_PER_CALL]
                result = await scope.remember(
                    entity=speaker,
                    facts=[text for text, _ in batch],
                    entity_type="person",
                    valid_from=at,
                )
                ids_of = {}
                for text, ids in batch:
                    ids_of.setdefault(" ".join(text.casefold().split()), set()).update(ids)
                for stored in (*result.added, *result.duplicates):
                    key = " ".join(stored.text.casefold().split())
                    dia_of.setdefault(stored.id, set()).update(ids_of.get(key, ()))
                    text_of[stored.id] = stored.text
        ingest = time.perf_counter() - started
        await mem.wait_until_indexed()
        questions = [
            q for q in conversation.questions if any(q["evidence"] & ids for ids in dia_of.values())
        ]
        answers = await timed_calls(
            questions, lambda q: scope.search_nodes(query=q, limit=max(KS_FACTS))
        )
    fact_ids = list(dia_of)
    baseline = PlainBM25([text_of[i] for i in fact_ids])
    names = ("fact_any", "fact_recall")
    rows = []
    for question, (result, seconds) in zip(questions, answers, strict=True):
        wanted = {i for i, ids in dia_of.items() if ids & question["evidence"]}
        read = [fact.id for hit in result.hits for fact in hit.observations]
        plain = [fact_ids[i] for i in baseline.ranked(question["question"], matched_only=True)]
        rows.append(
            {
                "conversation": conversation.name,
                "question": question["question"],
                "question_type": category(question["category"]),
                "evidence_facts": len(wanted),
                "scores": hit_scores(read, wanted, KS_FACTS, names),
                "baseline": hit_scores(plain[: max(KS_FACTS)], wanted, KS_FACTS, names),
                "seconds": seconds,
                "json_bytes": len(result.model_dump_json()),
                "hits": len(result.hits),
                "facts_read": len(read),
            }
        )
    skipped = len(conversation.questions) - len(questions)
    return rows, {"units": len(dia_of), "seconds": ingest, "no_evidence_fact": skipped}


def summary(parts: list[dict[str, Any]], key: str) -> float:
    return sum(p[key] for p in parts)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--conversations", type=int, default=None, help="only the first N")
    parser.add_argument("--questions", type=int, default=None, help="first N per conversation")
    parser.add_argument("--json", type=Path, default=None, help="also write results here")
    parser.add_argument("--embedder", choices=EMBEDDERS, default="default", help="none: words only")
    args = parser.parse_args()
    embedder = bench_embedder(args.embedder)

    with gzip.open(args.data, "rt") as handle:
        items = json.load(handle)[: args.conversations]
    conversations = [Conversation(item, args.questions) for item in items]
    turn_rows, fact_rows, turn_ingest, fact_ingest = [], [], [], []
    for conversation in conversations:
        rows, ingest = await score_turns(conversation, embedder)
        turn_rows += rows
        turn_ingest.append(ingest)
        rows, ingest = await score_facts(conversation, embedder)
        fact_rows += rows
        fact_ingest.append(ingest)
    print_report(conversations, turn_rows, fact_rows, turn_ingest, fact_ingest)
    if args.json:
        args.json.write_text(
            json.dumps({"machine": machine(), "turns": turn_rows, "facts": fact_rows}, indent=1)
        )


def print_report(
    conversations: list[Conversation],
    turn_rows: list[dict[str, Any]],
    fact_rows: list[dict[str, Any]],
    turn_ingest: list[dict[str, Any]],
    fact_ingest: list[dict[str, Any]],
) -> None:
    adversarial = sum(c.adversarial for c in conversations)
    no_evidence = sum(c.no_evidence for c in conversations)
    dropped = [d for c in conversations for d in c.dropped]
    no_fact = sum(i["no_evidence_fact"] for i in fact_ingest)
    print(
        f"LoCoMo dev: {len(conversations)} conversation{'s' * (len(conversations) != 1)}; "
        f"{adversarial} adversarial "
        f"(category 5) questions skipped, {no_evidence} with no evidence turn skipped"
    )
    if dropped:
        print(f"Evidence ids naming no turn, dropped: {', '.join(map(repr, dropped))}")
    for c in conversations:
        if c.dates_without_session:
            print(
                f"{c.name}: dates of sessions that do not exist, ignored: sessions "
                f"{', '.join(map(str, c.dates_without_session))}"
            )
    print(f"Machine: {machine()}")
    print()
    print(f"(a) turns: {len(turn_rows)} questions scored; chronomem recall(limit=25):")
    print()
    print(table(turn_rows))
    print()
    print("Classic baseline, plain Okapi BM25 over single turns (same run, same turns):")
    print()
    print(table(turn_rows, "baseline"))
    print()
    print(
        f"(b) facts: {len(fact_rows)} questions scored ({no_fact} more have no evidence "
        "fact: no observation cites their evidence); chronomem search_nodes(limit=10), "
        "facts read in result order:"
    )
    print()
    print(table(fact_rows))
    print()
    print("Classic baseline, plain Okapi BM25 over single facts (same run, same facts):")
    print()
    print(table(fact_rows, "baseline"))
    print()
    recall_s = [r["seconds"] for r in turn_rows]
    search_s = [r["seconds"] for r in fact_rows]
    sizes = [r["json_bytes"] for r in fact_rows]
    turns, facts = summary(turn_ingest, "units"), summary(fact_ingest, "units")
    turn_time, fact_time = summary(turn_ingest, "seconds"), summary(fact_ingest, "seconds")
    print(
        f"recall latency (limit=25, ~{turns / len(conversations):.0f} turns per conversation): "
        f"p50 {ms(percentile(recall_s, 50))} ms, p95 {ms(percentile(recall_s, 95))} ms"
    )
    print(
        f"search_nodes latency (limit=10, ~{facts / len(conversations):.0f} facts per "
        f"conversation): p50 {ms(percentile(search_s, 50))} ms, "
        f"p95 {ms(percentile(search_s, 95))} ms"
    )
    print(
        f"search_nodes result JSON: p50 {percentile(sizes, 50):,.0f} bytes, "
        f"p95 {percentile(sizes, 95):,.0f} bytes"
    )
    print(
        f"ingest: {turns:,.0f} turns in {turn_time:.2f} s ({turns / turn_time:,.0f} turns/s, "
        f"record_turns, one call per session); {facts:,.0f} facts in {fact_time:.2f} s "
        f"({facts / fact_time:,.0f} facts/s, remember, one call per session and speaker)"
    )


if __name__ == "__main__":
    anyio.run(main)
