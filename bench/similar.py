"""How well `remember`'s `similar` tells a restatement from a different fact.

    .venv/bin/python -m bench.similar [--embedder default|none]

On the hand-labelled pairs of tests/data/restatements.jsonl (its README says how
they are labelled): every other pair (the first, the third...) is for choosing a
method's threshold, the others are held out. Each method's threshold is the one
with the best F0.5 on the choosing half (precision counts more: a wrong `similar`
costs the agent tokens and may lead it to forget a fact that is no repeat), ties
going to the higher threshold; the table gives precision, recall, F1 and F0.5 on
the held-out half and on every pair. Methods: the word rule `remember` uses
(`memory/restatement.py`) and two variants of it; the bundled model's cosine
between the facts embedded as the indexer embeds them (`<entity>: <fact>`, int8 as
stored); and a weighted mean of the word overlap and the cosine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from memory.embedding import Embedder, choose_embedder
from memory.restatement import RESTATES_AT, fact_words, likeness, stem

from .common import machine

PAIRS = Path(__file__).resolve().parent.parent / "tests" / "data" / "restatements.jsonl"
WEIGHTS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)  # of the words, in the mean


class Pair(NamedTuple):
    entity: str
    a: str
    b: str
    restates: bool


def load_pairs(path: Path = PAIRS) -> list[Pair]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return [Pair(row["entity"], row["a"], row["b"], row["restates"]) for row in rows]


def halves(pairs: Sequence[Pair]) -> tuple[list[Pair], list[Pair]]:
    """(choosing, held out): alternate pairs, so both halves cover every topic."""
    return list(pairs[0::2]), list(pairs[1::2])


@dataclass(frozen=True, slots=True)
class Quality:
    precision: float
    recall: float

    @property
    def f1(self) -> float:
        return self.f(1.0)

    def f(self, beta: float) -> float:
        p, r = self.precision, self.recall
        return (1 + beta**2) * p * r / (beta**2 * p + r) if p + r else 0.0


def quality(scores: Sequence[float], labels: Sequence[bool], threshold: float) -> Quality:
    said = [score >= threshold for score in scores]
    hits = sum(s and label for s, label in zip(said, labels, strict=True))
    flagged, real = sum(said), sum(labels)
    return Quality(hits / flagged if flagged else 1.0, hits / real if real else 1.0)


def choose_threshold(scores: Sequence[float], labels: Sequence[bool]) -> float:
    """The threshold with the best F0.5, the higher one on a tie."""
    candidates = sorted({score for score in scores if score > 0}, reverse=True)
    return max(candidates, key=lambda t: quality(scores, labels, t).f(0.5))


def word_overlap(pair: Pair) -> float:
    """The engine's rule: overlap coefficient of the facts' words (`restatement`)."""
    return likeness(fact_words(pair.a), fact_words(pair.b)).overlap


def word_jaccard(pair: Pair) -> float:
    return likeness(fact_words(pair.a), fact_words(pair.b)).jaccard


def unstemmed_overlap(pair: Pair) -> float:
    return likeness(fact_words(pair.a, stemming=False), fact_words(pair.b, stemming=False)).overlap


def cosines(embedder: Embedder, pairs: Sequence[Pair]) -> dict[Pair, float]:
    """Each pair's cosine, the facts embedded as the indexer embeds them, int8 as stored."""
    from memory.vectors import decode, encode

    texts = sorted({f"{pair.entity}: {fact}" for pair in pairs for fact in (pair.a, pair.b)})
    vectors = embedder.embed(texts)
    stored = decode([encode(vector) for vector in vectors], embedder.dim)
    row = {text: stored[index] for index, text in enumerate(texts)}
    return {
        pair: float(row[f"{pair.entity}: {pair.a}"] @ row[f"{pair.entity}: {pair.b}"])
        for pair in pairs
    }


class Measured(NamedTuple):
    method: str
    threshold: float
    held_out: Quality
    every_pair: Quality


def measure(
    method: str, score: Callable[[Pair], float], choosing: list[Pair], held_out: list[Pair]
) -> Measured:
    threshold = choose_threshold([score(p) for p in choosing], [p.restates for p in choosing])
    every = choosing + held_out

    def at(pairs: list[Pair]) -> Quality:
        return quality([score(p) for p in pairs], [p.restates for p in pairs], threshold)

    return Measured(method, threshold, at(held_out), at(every))


def mixed(cos: dict[Pair, float], weight: float) -> Callable[[Pair], float]:
    return lambda pair: weight * word_overlap(pair) + (1 - weight) * cos[pair]


def best_mix(cos: dict[Pair, float], choosing: list[Pair], held_out: list[Pair]) -> Measured:
    """The weight of the words (and its threshold) with the best F0.5 when choosing."""
    labels = [p.restates for p in choosing]

    def chosen_f(weight: float) -> float:
        score = mixed(cos, weight)
        scores = [score(p) for p in choosing]
        return quality(scores, labels, choose_threshold(scores, labels)).f(0.5)

    weight = max(WEIGHTS, key=chosen_f)
    return measure(
        f"{weight:.1f} × words + {1 - weight:.1f} × cosine", mixed(cos, weight), choosing, held_out
    )


def word_cost_us(pairs: Sequence[Pair], repeats: int = 5) -> float:
    """Median microseconds to compare one pair by words, both facts' words worked out
    afresh (not from the cache `remember` keeps of them)."""
    timings = []
    for _ in range(repeats):
        fact_words.cache_clear()
        stem.cache_clear()
        start = time.perf_counter()
        for pair in pairs:
            likeness(fact_words(pair.a), fact_words(pair.b))
        timings.append((time.perf_counter() - start) / len(pairs))
    return statistics.median(timings) * 1e6


def embed_cost_ms(embedder: Embedder, pairs: Sequence[Pair], count: int = 20) -> float:
    """Median milliseconds to embed one fact alone, as a write would have to."""
    texts = [f"{pair.entity}: {pair.b}" for pair in pairs[:count]]
    embedder.embed(texts[:1])  # the model loads
    timings = []
    for text in texts:
        start = time.perf_counter()
        embedder.embed([text])
        timings.append(time.perf_counter() - start)
    return statistics.median(timings) * 1e3


def _row(m: Measured) -> str:
    h, e = m.held_out, m.every_pair
    return (
        f"| {m.method} | {m.threshold:.3f} | {h.precision:.3f} | {h.recall:.3f} | {h.f1:.3f} "
        f"| {h.f(0.5):.3f} | {e.precision:.3f} | {e.recall:.3f} | {e.f1:.3f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--embedder", choices=["default", "none"], default="default", help="none: words only"
    )
    args = parser.parse_args()
    pairs = load_pairs()
    choosing, held_out = halves(pairs)
    print(
        f"{len(pairs)} pairs ({sum(p.restates for p in pairs)} restatements); "
        f"threshold chosen on {len(choosing)}, held out {len(held_out)}"
    )
    rows = []
    words = measure("words: overlap (remember)", word_overlap, choosing, held_out)
    rows.append(words)
    rows.append(measure("words: Jaccard", word_jaccard, choosing, held_out))
    rows.append(measure("words: overlap, no stemming", unstemmed_overlap, choosing, held_out))
    embedder = choose_embedder(args.embedder)
    if embedder is not None:
        cos = cosines(embedder, pairs)
        rows.append(measure(f"model cosine ({embedder.name})", cos.__getitem__, choosing, held_out))
        rows.append(best_mix(cos, choosing, held_out))
    print()
    print(
        "| method | threshold | held-out P | R | F1 | F0.5 | all pairs P | R | F1 |\n"
        "|---|---|---|---|---|---|---|---|---|"
    )
    for row in rows:
        print(_row(row))
    print()
    engine = "the same" if words.threshold == RESTATES_AT else f"NOT the same ({RESTATES_AT})"
    print(f"remember's threshold RESTATES_AT = {RESTATES_AT}: {engine} as chosen here")
    cost = f"words: {word_cost_us(pairs):.1f} µs a pair"
    if embedder is not None:
        cost += f"; model: {embed_cost_ms(embedder, pairs):.2f} ms to embed one fact"
    print(f"cost (median): {cost}")
    print(f"Machine: {machine()}")


if __name__ == "__main__":
    main()
