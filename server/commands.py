"""The `chronomem` subcommands for every memory operation, plus inspect, stats,
export, import and purge. Each opens the database, calls one engine method, and
prints a human-readable answer, or the operation's JSON result with `--json`.

Exit status: 0 on success, 2 on bad input (the engine's message on stderr), 1 on
any other failure. Never a traceback.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import click
from pydantic import BaseModel
from rich.console import Console
from rich.table import Table

from memory import (
    ChronomemError,
    GraphMemory,
    InvalidInputError,
    MemoryScope,
    Observation,
    Relation,
)
from memory.errors import ImportInterrupted

from .cli import main, scope_options
from .settings import resolve_db

R = TypeVar("R")


def json_option(command: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--json", "as_json", is_flag=True, help="Print the JSON result.")(command)


def run(
    scope: dict[str, Any],
    operation: Callable[[MemoryScope], Awaitable[R]],
    *,
    creates: bool = False,
) -> R:
    """Open the database, run `operation` on the scope, map errors to exit codes.
    Only a command that `creates` what it stores may start a new database file."""

    def on_scope(memory: GraphMemory) -> Awaitable[R]:
        handle = memory.scope(app=scope["app"], user=scope["user"], project=scope["project"])
        return operation(handle)

    return run_on_file(scope, on_scope, creates=creates)


def run_on_file(
    scope: dict[str, Any],
    operation: Callable[[GraphMemory], Awaitable[R]],
    *,
    creates: bool = False,
) -> R:
    """Open the database, run `operation` on the whole file, map errors to exit codes."""
    path = resolve_db(scope["db"])
    if not creates:
        require_database(path)

    async def go() -> R:
        async with GraphMemory.open(path) as memory:
            return await operation(memory)

    try:
        return anyio.run(go)
    except ImportInterrupted as exc:  # Ctrl-C: the shell's status for SIGINT
        click.echo(f"chronomem: {exc}", err=True)
        sys.exit(130)
    except InvalidInputError as exc:
        click.echo(f"chronomem: {exc}", err=True)
        sys.exit(2)
    except ChronomemError as exc:
        click.echo(f"chronomem: {exc}", err=True)
        sys.exit(1)


def require_database(path: str) -> None:
    """A command that only reads (or changes what is there) never creates the file: a
    typo in --db would otherwise answer from a new, empty memory as if it were yours."""
    if path == ":memory:" or path.startswith("file:") or Path(path).expanduser().exists():
        return
    click.echo(
        f"chronomem: no database at {path}; check --db or CHRONOMEM_DB (this command creates none)",
        err=True,
    )
    sys.exit(2)


def emit(result: Any, as_json: bool, human: Callable[[Any], Any]) -> None:
    """The JSON result, or the human view: rich on a terminal, plain text when piped."""
    if as_json:
        data = result.model_dump(mode="json") if isinstance(result, BaseModel) else result
        click.echo(json.dumps(data, ensure_ascii=False, indent=2))
        return
    view = human(result)
    if isinstance(view, str):
        click.echo(view)
    elif sys.stdout.isatty():
        Console().print(view)
    else:  # piped: plain columns, no colour, no box drawing
        if isinstance(view, Table):
            view.box = None
        Console(file=sys.stdout, no_color=True, width=200, highlight=False).print(view)


def _fact(o: Observation) -> str:
    until = f" until {o.valid_to}" if o.valid_to else ""
    slot = f" [{o.attribute}]" if o.attribute else ""
    return f"{o.text}{slot}  (since {o.valid_from}{until}; {o.id})"


# ---------------------------------------------------------------- writes


@main.command()
@click.argument("entity")
@click.argument("facts", nargs=-1, required=True)
@click.option("--type", "entity_type", help="Entity type, e.g. person.")
@click.option("--attribute", help="Single-valued slot these facts fill, e.g. plan.")
@click.option("--valid-from", help="When the facts became true (RFC 3339 or YYYY-MM-DD).")
@click.option("--replaces", multiple=True, help="Id of a fact these replace (repeatable).")
@scope_options
@json_option
def remember(entity, facts, entity_type, attribute, valid_from, replaces, as_json, **scope):  # type: ignore[no-untyped-def]
    """Store facts about an entity. Example: chronomem remember Alice "likes tea" --type person"""
    result = run(scope, lambda s: s.remember(
        entity=entity, facts=list(facts), entity_type=entity_type, valid_from=valid_from,
        replaces=list(replaces) or None, attribute=attribute,
    ), creates=True)  # fmt: skip
    emit(result, as_json, lambda r: "\n".join(
        [f"{r.entity.name} ({r.entity.entity_type}){' created' if r.entity.created else ''}"]
        + [f"  + {_fact(o)}" for o in r.added]
        + [f"  = {_fact(o)} (already known)" for o in r.duplicates]
        + [f"  - {_fact(o)}" for o in r.superseded]
    ))  # fmt: skip


@main.command()
@click.argument("source")
@click.argument("relation")
@click.argument("target")
@click.option("--exclusive", is_flag=True, help="Close other relations of this type from SOURCE.")
@click.option("--valid-from", help="When it became true.")
@click.option("--source-type", help="Type of SOURCE.")
@click.option("--target-type", help="Type of TARGET.")
@click.option("--replaces", multiple=True, help="Id of a relation this replaces (repeatable).")
@scope_options
@json_option
def relate(source, relation, target, exclusive, valid_from, source_type, target_type, replaces,  # type: ignore[no-untyped-def]
           as_json, **scope):  # fmt: skip
    """Link two entities. Example: chronomem relate Alice "works at" Acme --exclusive"""
    result = run(scope, lambda s: s.relate(
        source=source, relation=relation, target=target, source_type=source_type,
        target_type=target_type, valid_from=valid_from, exclusive=exclusive,
        replaces=list(replaces) or None,
    ), creates=True)  # fmt: skip
    emit(result, as_json, lambda r: "\n".join(
        [f"{r.relation.source} {r.relation.relation} → {r.relation.target}  ({r.relation.id}"
         f"{', already known' if r.existing else ''})"]
        + [f"  - closed {x.source} {x.relation} → {x.target} ({x.id})" for x in r.superseded]
    ))  # fmt: skip


@main.command()
@click.argument("ids", nargs=-1)
@click.option("--entity", "entities", multiple=True, help="Forget everything about this entity.")
@click.option("--valid-to", help="When it stopped being true (default: now).")
@click.option("--reason", help="Why, kept in the history.")
@scope_options
@json_option
def forget(ids, entities, valid_to, reason, as_json, **scope):  # type: ignore[no-untyped-def]
    """Mark facts or relations as no longer true; nothing is deleted.

    Example: chronomem forget o_123 --reason "moved"
    """
    result = run(scope, lambda s: s.forget(
        ids=list(ids) or None, entities=list(entities) or None, valid_to=valid_to, reason=reason
    ))  # fmt: skip
    emit(result, as_json, lambda r: "\n".join(
        [f"invalidated: {', '.join(r.invalidated) or '-'}"]
        + ([f"already invalid: {', '.join(r.already_invalid)}"] if r.already_invalid else [])
        + ([f"not found: {', '.join(r.not_found)}"] if r.not_found else [])
    ))  # fmt: skip


@main.command("record-turns")
@click.argument("session_id")
@click.option("--turn", "turns", nargs=2, multiple=True, required=True,
              metavar="ROLE TEXT", help="One turn (repeatable): --turn user 'hello'.")  # fmt: skip
@click.option("--at", help="When the turns were said (default: now).")
@scope_options
@json_option
def record_turns(session_id, turns, at, as_json, **scope):  # type: ignore[no-untyped-def]
    """Append conversation turns. Example: chronomem record-turns s1 --turn user "hi" """
    given = [{"role": role, "text": text, **({"at": at} if at else {})} for role, text in turns]
    result = run(scope, lambda s: s.record_turns(session_id=session_id, turns=given), creates=True)
    emit(result, as_json, lambda r: f"stored {r.stored} turn(s): {', '.join(r.ids)}")


# ---------------------------------------------------------------- reads


def time_options(command: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed([
        click.option("--as-of", help="What was true at this time."),
        click.option("--known-at", help="As memory stood at this time."),
        click.option("--history", is_flag=True, help="Include facts that are no longer current."),
    ]):  # fmt: skip
        command = option(command)
    return command


def _entity_lines(entities: list, relations: list) -> list[str]:
    lines = []
    for entity in entities:
        lines.append(f"{entity.name} ({entity.entity_type})")
        lines += [f"  - {_fact(o)}" for o in entity.observations]
        lines += [
            f"  {_link(r, entity.name)}" for r in relations if entity.name in (r.source, r.target)
        ]
    return lines


def _link(r: Relation, name: str) -> str:
    """A relation of the entity `name`, seen from it."""
    return f"→ {r.relation} {r.target}" if r.source == name else f"← {r.relation} {r.source}"


@main.command()
@click.argument("query")
@click.option("--limit", type=int, default=10, show_default=True)
@click.option("--facts-per-hit", type=int, default=5, show_default=True,
              help="At most this many facts, and as many relations, per entity.")  # fmt: skip
@click.option("--type", "entity_type", help="Only entities of this type.")
@time_options
@scope_options
@json_option
def search(query, limit, facts_per_hit, entity_type, as_of, known_at, history, as_json, **scope):  # type: ignore[no-untyped-def]
    """Find entities by relevance. Example: chronomem search "where does she work?" """
    result = run(scope, lambda s: s.search_nodes(
        query=query, limit=limit, facts_per_hit=facts_per_hit, entity_type=entity_type,
        as_of=as_of, known_at=known_at, include_history=history,
    ))  # fmt: skip

    def human(r: Any) -> str:
        if not r.hits:
            return "no matches"
        lines = []
        for hit in r.hits:
            lines.append(f"{hit.score:.2f}  {hit.entity.name} ({hit.entity.entity_type})")
            lines += [f"      - {_fact(o)}" for o in hit.observations]
            lines += [f"      {_link(x, hit.entity.name)}" for x in hit.relations]
            more = [
                f"{count} more {noun}{'' if count == 1 else 's'}"
                for count, noun in (
                    (hit.more_observations, "fact"),
                    (hit.more_relations, "relation"),
                )
                if count
            ]
            if more:
                lines.append(f"      … and {' and '.join(more)}")
        return "\n".join(lines)

    emit(result, as_json, human)


@main.command("open")
@click.argument("names", nargs=-1, required=True)
@time_options
@scope_options
@json_option
def open_(names, as_of, known_at, history, as_json, **scope):  # type: ignore[no-untyped-def]
    """Show entities by name, with facts and relations. Example: chronomem open Alice"""
    result = run(scope, lambda s: s.open_nodes(
        names=list(names), as_of=as_of, known_at=known_at, include_history=history
    ))  # fmt: skip
    emit(result, as_json, lambda r: "\n".join(
        _entity_lines(r.entities, r.relations) + [f"not found: {n}" for n in r.missing]
    ))  # fmt: skip


@main.command("read-graph")
@click.option("--limit", type=int, default=50, show_default=True, help="Entities per page.")
@click.option("--cursor", help="next_cursor of the previous page.")
@time_options
@scope_options
@json_option
def read_graph(limit, cursor, as_of, known_at, history, as_json, **scope):  # type: ignore[no-untyped-def]
    """One page of the whole graph. Example: chronomem read-graph --json"""
    result = run(scope, lambda s: s.read_graph(
        as_of=as_of, known_at=known_at, include_history=history, limit=limit, cursor=cursor
    ))  # fmt: skip

    def human(r: Any) -> str:
        more = f"; next page: --cursor {r.next_cursor}" if r.next_cursor else ""
        summary = f"({len(r.entities)} of {r.total_entities} entities{more})"
        return "\n".join([*_entity_lines(r.entities, r.relations), summary])

    emit(result, as_json, human)


@main.command()
@click.option("--max-entities", type=int, default=12, show_default=True)
@click.option("--max-facts", "max_facts_per_entity", type=int, default=5, show_default=True)
@click.option("--max-chars", type=int, default=2000, show_default=True)
@click.option("--query", help="Put the entities most relevant to this first.")
@click.option("--as-of", help="As things were at this time.")
@scope_options
@json_option
def profile(max_entities, max_facts_per_entity, max_chars, query, as_of, as_json, **scope):  # type: ignore[no-untyped-def]
    """The profile card an agent sees at the start of a session. Example: chronomem profile"""
    result = run(scope, lambda s: s.profile_card(
        max_entities=max_entities, max_facts_per_entity=max_facts_per_entity,
        max_chars=max_chars, query=query, as_of=as_of,
    ))  # fmt: skip
    emit(result, as_json, lambda r: r.text)


@main.command()
@click.argument("entity")
@scope_options
@json_option
def history(entity, as_json, **scope):  # type: ignore[no-untyped-def]
    """An entity's timeline on both time axes. Example: chronomem history Alice"""
    result = run(scope, lambda s: s.history(entity=entity))

    def human(r: Any) -> Table:
        table = Table(title=f"{r.entity}: history", show_lines=False)
        for column in ("valid from", "valid to", "recorded", "invalidated", "what", "id"):
            table.add_column(column)
        for item in r.timeline:
            what = item.text if item.kind == "observation" else f"{item.relation} → {item.target}"
            if item.kind == "relation" and item.target == r.entity:
                what = f"{item.source} {item.relation} → (this)"
            table.add_row(item.valid_from, item.valid_to or "now", item.recorded_at,
                          item.invalidated_at or "-", what, item.id)  # fmt: skip
        return table

    emit(result, as_json, human)


@main.command()
@click.argument("query")
@click.option("--limit", type=int, default=10, show_default=True)
@click.option("--session", "session_id", help="Only this conversation.")
@click.option("--after", help="Only turns at or after this time.")
@click.option("--before", help="Only turns before this time.")
@scope_options
@json_option
def recall(query, limit, session_id, after, before, as_json, **scope):  # type: ignore[no-untyped-def]
    """Search past conversation turns. Example: chronomem recall "beagle" """
    result = run(scope, lambda s: s.recall(
        query=query, limit=limit, session_id=session_id, after=after, before=before
    ))  # fmt: skip
    emit(result, as_json, lambda r: "\n".join(
        f"{t.score:.2f}  [{t.session_id} {t.at}] {t.role}: {t.text}" for t in r.turns
    ) or "no matches")  # fmt: skip
