"""Bytes a model is handed: tools/list, and each tool's two result fields.

    .venv/bin/python -m bench.sizes [--json FILE]

Through an in-memory MCP client on a small deterministic memory (seed 7): "Alice"
with 20 facts of about 45 characters, 14 more people with 8 facts each who know
one another, one closed fact, 40 conversation turns. Each tool is called once as
an agent would; the table gives the bytes of `structuredContent` as sent (compact
JSON, UTF-8) and of the text block, with approximate tokens (bytes / 4). tools/list
is measured as `json.dumps` of every listed tool, as sent (no spaces), and as what
a model is shown of it (name, description and input schema; clients keep the
output schemas for themselves).
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from server import Settings, build_server

from .common import machine

SEED = 7
WORDS = (
    "morning evening weekend garden coffee tea bread market river bike trail city "
    "sister brother friend office project report meeting trip train beach book "
    "novel piano lesson dinner recipe pasta soup walk dog cat school class yoga "
    "swim pool hill lake north south summer winter spring autumn music concert"
).split()
PEOPLE = [
    "Bob",
    "Carol",
    "Dan",
    "Erin",
    "Frank",
    "Grace",
    "Heidi",
    "Ivan",
    "Judy",
    "Ken",
    "Liam",
    "Mona",
    "Nora",
    "Oscar",
]


def fact(rng: random.Random, about: str, length: int = 45) -> str:
    """A sentence of about `length` characters."""
    words = [about, rng.choice(("likes", "plans", "enjoys", "mentioned", "prefers"))]
    while len(" ".join(words)) < length - 6:
        words.append(rng.choice(WORDS))
    return " ".join(words)[:length].rstrip()


def json_bytes(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


async def populate(client: Client, rng: random.Random) -> dict[str, Any]:
    async def call(name: str, **arguments: Any) -> dict[str, Any]:
        result = await client.call_tool(name, arguments)
        assert not result.is_error, result.content
        return result.structured_content

    alice = await call(
        "remember",
        entity="Alice",
        entity_type="person",
        facts=[fact(rng, "she") for _ in range(20)],
        valid_from="2026-01-05",
    )
    for person, friend in zip(PEOPLE, PEOPLE[1:] + PEOPLE[:1], strict=True):
        facts = [fact(rng, person) for _ in range(8)]
        await call("remember", entity=person, entity_type="person", facts=facts)
        await call("relate", source=person, relation="knows", target=friend)
    await call("relate", source="Bob", relation="works at", target="Acme", exclusive=True)
    await call("remember", entity="Bob", facts=["basic plan"], attribute="plan")
    await call("remember", entity="Bob", facts=["pro plan"], attribute="plan")
    for session in range(4):
        turns = [
            {"role": "user" if n % 2 == 0 else "assistant", "text": fact(rng, "I", 80)}
            for n in range(10)
        ]
        await call("record_turns", session_id=f"session {session}", turns=turns)
    return alice


async def measure() -> dict[str, Any]:
    rng = random.Random(SEED)
    with tempfile.TemporaryDirectory() as folder:
        settings = Settings(db=str(Path(folder) / "memory.db"), app="bench", user="sizes")
        async with Client(build_server(settings)) as client:
            tools = (await client.list_tools()).tools
            listed = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]
            shown = [
                {key: tool[key] for key in ("name", "description", "inputSchema")}
                for tool in listed
            ]
            tools_list = {
                "json.dumps": len(json.dumps(listed)),
                "as sent": json_bytes(listed),
                "shown to a model": json_bytes(shown),
            }
            alice = await populate(client, rng)
            ids = [o["id"] for o in alice["added"][:2]]
            calls: list[tuple[str, str, dict[str, Any]]] = [
                ("search_nodes", "10 hits, 5 facts each", {"query": "weekend garden coffee"}),
                ("open_nodes", "Alice: 20 facts", {"names": ["Alice"]}),
                ("open_nodes", "Bob: 10 facts, 3 relations", {"names": ["Bob"]}),
                ("read_graph", "first page (16 entities)", {}),
                ("history", "Bob: 11 facts, 3 relations", {"entity": "Bob"}),
                ("recall", "10 turns", {"query": "weekend trip"}),
                ("profile_card", "defaults", {}),
                (
                    "remember",
                    "3 facts",
                    {
                        "entity": "Zoe",
                        "entity_type": "person",
                        "facts": [fact(rng, "Zoe") for _ in range(3)],
                    },
                ),
                ("relate", "1 relation", {"source": "Zoe", "relation": "knows", "target": "Bob"}),
                ("forget", "2 ids", {"ids": ids, "reason": "no longer true"}),
                (
                    "record_turns",
                    "2 turns",
                    {
                        "session_id": "s",
                        "turns": [
                            {"role": "user", "text": "hello"},
                            {"role": "assistant", "text": "hi"},
                        ],
                    },
                ),
            ]
            rows = []
            for name, what, arguments in calls:
                result = await client.call_tool(name, arguments)
                assert not result.is_error, result.content
                (block,) = result.content
                rows.append(
                    {
                        "tool": name,
                        "call": what,
                        "structured": json_bytes(result.structured_content),
                        "text": len(block.text.encode()),
                    }
                )
    return {"machine": machine(), "tools_list": tools_list, "results": rows}


def table(report: dict[str, Any]) -> str:
    def tokens(n: int) -> str:
        return f"{n:,} (~{n // 4:,})"

    lines = [
        "| what | bytes (~tokens) |",
        "|---|---|",
        *(f"| tools/list, {k} | {tokens(v)} |" for k, v in report["tools_list"].items()),
        "",
        "| tool | call | structuredContent bytes (~tokens) | text block bytes (~tokens) |",
        "|---|---|---|---|",
        *(
            f"| {r['tool']} | {r['call']} | {tokens(r['structured'])} | {tokens(r['text'])} |"
            for r in report["results"]
        ),
        "",
        f"Machine: {report['machine']}",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="also write the results here as JSON")
    args = parser.parse_args()
    report = anyio.run(measure)
    print(table(report))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
