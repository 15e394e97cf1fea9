"""A short tour of the engine on a throwaway in-memory database: `python -m memory`.

`make run` runs this until the MCP server exists.
"""

from __future__ import annotations

import anyio

from . import GraphMemory, Observation, OpenNodesResult


async def tour() -> None:
    async with GraphMemory.open(":memory:") as mem:
        alice = mem.scope(app="demo", user="alice")
        await alice.remember(
            entity="Alice", entity_type="person", facts=["prefers morning sessions"]
        )
        await alice.remember(
            entity="Alice", facts=["on the basic plan"], attribute="plan", valid_from="2026-01-10"
        )
        await alice.remember(
            entity="Alice", facts=["on the pro plan"], attribute="plan", valid_from="2026-03-02"
        )
        await alice.relate(source="Alice", relation="works at", target="Acme", exclusive=True)

        def facts(result: OpenNodesResult) -> list[str]:
            return [o.text for e in result.entities for o in e.observations]

        print("Now:          ", facts(await alice.open_nodes(["alice"])))
        print("In February:  ", facts(await alice.open_nodes(["alice"], as_of="2026-02-01")))
        graph = await alice.read_graph()
        print("Relations:    ", [f"{r.source} {r.relation} {r.target}" for r in graph.relations])
        timeline = (await alice.history("Alice")).timeline
        print("History:")
        for item in timeline:
            if isinstance(item, Observation):
                label = item.text
            else:
                label = f"{item.relation} → {item.target}"
            until = item.valid_to or "now"
            print(f"  {item.valid_from} … {until}: {label}")


if __name__ == "__main__":
    anyio.run(tour)
