"""Retrieval quality in the languages users speak (issue 18): facts about a user and
the people, pets and places around them, asked back in four ways, per language.

    .venv/bin/python -m bench.languages [--languages fr,de,...]
                                        [--embedder default|multilingual|none] [--json FILE]

The data is `bench/data/languages/<code>.json`, written natively for this project
(see bench/data/README.md): per language about two dozen facts on 3-5 entities, and
questions of four kinds, each naming the facts it expects:
- `form`: the key word in another form than stored (number, tense, person, case; a
  Korean noun with another particle, Japanese with another conjugation; a Chinese or
  Japanese compound shorter or longer than the stored one);
- `same`: the key word in the same form as stored;
- `paraphrase`: no content word in common with the fact;
- `cross`: asked in another language than the facts' (English; French for the
  English set), naming none of the stored people, pets or places.

A fresh in-memory database per language; each entity's facts stored with one
`remember(entity=..., facts=[...], entity_type=...)`; each question through
`search_nodes(question, limit=10)` with the default `facts_per_hit`. The facts are
read in result order (hit 1's observations, then hit 2's...). Scored: hit@3, the
fraction of questions with an expected fact among the first 3 facts read.

Beside it, in the same run and over the same facts, a naive baseline: Okapi BM25
(k1=1.5, b=0.75) over single facts, tokenised on whitespace only (lower-cased, the
punctuation around a token stripped; no stemming, no stop words), ranking only the
facts that share a token with the question.
"""

from __future__ import annotations

import argparse
import json
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from memory import GraphMemory
from memory.embedding import Embedder

from .common import PlainBM25, machine
from .embedding_cache import EMBEDDERS, bench_embedder

DATA = Path(__file__).resolve().parent / "data" / "languages"
KINDS = ("form", "same", "paraphrase", "cross")
K = 3


@dataclass(slots=True)
class Entity:
    name: str
    type: str
    facts: list[tuple[str, str]]  # (id, text)


@dataclass(slots=True)
class Question:
    kind: str
    text: str
    expects: set[str]


@dataclass(slots=True)
class Language:
    code: str
    name: str
    entities: list[Entity]
    questions: list[Question]


def load(code: str, folder: Path = DATA) -> Language:
    """The language `code`'s file, checked: known kinds, expected ids that exist."""
    raw = json.loads((folder / f"{code}.json").read_text(encoding="utf-8"))
    entities = [
        Entity(e["name"], e["type"], [(f["id"], f["text"]) for f in e["facts"]])
        for e in raw["entities"]
    ]
    ids = {id_ for e in entities for id_, _ in e.facts}
    questions = [Question(q["kind"], q["text"], set(q["expects"])) for q in raw["questions"]]
    for q in questions:
        if q.kind not in KINDS or not q.expects or not q.expects <= ids:
            raise SystemExit(f"{code}.json: question {q.text!r}: bad kind or expected ids")
    return Language(code, raw["name"], entities, questions)


def whitespace_words(text: str) -> list[str]:
    """Lower-cased whitespace tokens, the punctuation around each stripped."""
    words = []
    for token in text.lower().split():
        start, end = 0, len(token)
        while start < end and unicodedata.category(token[start])[0] in "PS":
            start += 1
        while end > start and unicodedata.category(token[end - 1])[0] in "PS":
            end -= 1
        if start < end:
            words.append(token[start:end])
    return words


async def score(language: Language, embedder: Embedder | None) -> list[dict[str, Any]]:
    """A row per question: its kind, text, and hit@3 for chronomem and the baseline."""
    id_of: dict[str, str] = {}  # stored observation id -> the data's fact id
    async with GraphMemory.open(":memory:", embedder=embedder or "none") as mem:
        scope = mem.scope(app="languages", user=language.code)
        for entity in language.entities:
            remembered = await scope.remember(
                entity=entity.name,
                facts=[text for _, text in entity.facts],
                entity_type=entity.type,
            )
            if remembered.duplicates or len(remembered.added) != len(entity.facts):
                raise SystemExit(f"{language.code}.json: {entity.name}: a fact stored twice")
            for (id_, _), stored in zip(entity.facts, remembered.added, strict=True):
                id_of[stored.id] = id_
        await mem.wait_until_indexed()
        results = [await scope.search_nodes(query=q.text, limit=10) for q in language.questions]
    facts = [(id_, text) for e in language.entities for id_, text in e.facts]
    baseline = PlainBM25([text for _, text in facts], words=whitespace_words)
    rows = []
    for question, result in zip(language.questions, results, strict=True):
        read = [id_of[fact.id] for hit in result.hits for fact in hit.observations]
        plain = [facts[i][0] for i in baseline.ranked(question.text, matched_only=True)]
        rows.append(
            {
                "language": language.code,
                "kind": question.kind,
                "question": question.text,
                "expects": sorted(question.expects),
                "read": read[:K],
                "chronomem": float(bool(question.expects & set(read[:K]))),
                "baseline": float(bool(question.expects & set(plain[:K]))),
            }
        )
    return rows


def table(languages: list[Language], rows: list[dict[str, Any]], kind: str) -> str:
    lines = [
        f"| language | n | chronomem hit@{K} | baseline hit@{K} |",
        "|---|---|---|---|",
    ]
    for language in languages:
        members = [r for r in rows if r["language"] == language.code and r["kind"] == kind]
        if not members:
            continue
        ours = sum(r["chronomem"] for r in members) / len(members)
        base = sum(r["baseline"] for r in members) / len(members)
        name = f"{language.name} ({language.code})"
        lines.append(f"| {name} | {len(members)} | {ours:.2f} | {base:.2f} |")
    return "\n".join(lines)


def summary(languages: list[Language], rows: list[dict[str, Any]]) -> str:
    """chronomem's hit@3 per language (rows) and kind (columns)."""
    lines = [
        "| language | " + " | ".join(KINDS) + " |",
        "|---|" + "---|" * len(KINDS),
    ]
    for language in languages:
        cells = []
        for kind in KINDS:
            members = [r for r in rows if r["language"] == language.code and r["kind"] == kind]
            ours = sum(r["chronomem"] for r in members) / len(members) if members else None
            cells.append("" if ours is None else f"{ours:.2f}")
        lines.append(f"| {language.name} ({language.code}) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def available() -> list[str]:
    return sorted(path.stem for path in DATA.glob("*.json"))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--languages", default=None, help=f"comma-separated codes (default: all: {available()})"
    )
    parser.add_argument("--embedder", choices=EMBEDDERS, default="default", help="none: words only")
    parser.add_argument("--json", type=Path, default=None, help="also write results here")
    args = parser.parse_args()
    codes = available() if args.languages is None else args.languages.split(",")
    unknown = [code for code in codes if code not in available()]
    if unknown:
        parser.error(f"--languages: no data for {', '.join(unknown)}; known: {available()}")
    embedder = bench_embedder(args.embedder)
    languages = [load(code) for code in codes]
    rows = []
    for language in languages:
        rows += await score(language, embedder)
    facts = sum(len(e.facts) for lang in languages for e in lang.entities)
    print(
        f"Languages: {len(languages)} ({', '.join(codes)}); {facts} facts, {len(rows)} "
        f"questions; chronomem search_nodes(limit=10), embedder {args.embedder}, facts read "
        f"in result order; baseline: whitespace-tokenised plain Okapi BM25 over single facts"
    )
    print(f"Machine: {machine()}")
    for kind in KINDS:
        print()
        print(f"{kind}: hit@{K}")
        print()
        print(table(languages, rows, kind))
    print()
    print(f"chronomem hit@{K}, by kind")
    print()
    print(summary(languages, rows))
    if args.json:
        args.json.write_text(
            json.dumps({"machine": machine(), "embedder": args.embedder, "rows": rows}, indent=1)
        )


if __name__ == "__main__":
    anyio.run(main)
