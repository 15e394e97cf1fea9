"""`chronomem inspect`, `stats`, `export`, `optimize`, `reindex`, `import` and `purge`."""

from __future__ import annotations

import json
import signal
import sys
import threading
from pathlib import Path
from typing import Any, TextIO

import click
from rich.console import Console
from rich.progress import Progress
from rich.table import Table
from rich.tree import Tree

from memory import GraphMemory, MemoryScope
from memory.indexer import Progress as Counts

from ..settings import resolve_db
from .options import (
    Caps,
    cap_options,
    emit,
    json_option,
    require_database,
    run,
    run_on_file,
    scope_options,
    time_options,
)


@click.command()
@time_options
@scope_options
@json_option
def inspect(
    as_of: str | None, known_at: str | None, history: bool, as_json: bool, **scope: Any
) -> None:
    """The graph as a tree: entities, their facts with validity, relations as arrows.

    Example: chronomem inspect --history
    """

    async def whole_graph(s: MemoryScope) -> dict[str, Any]:
        entities, relations = [], []
        async for page in s.iterate_graph(as_of=as_of, known_at=known_at, include_history=history):
            entities += page.entities
            relations += page.relations
        return {"entities": entities, "relations": relations}

    graph = run(scope, whole_graph)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "entities": [e.model_dump(mode="json") for e in graph["entities"]],
                    "relations": [r.model_dump(mode="json") for r in graph["relations"]],
                },
                ensure_ascii=False,
                indent=2,
            )
        )
        return
    styled = sys.stdout.isatty()
    tree = Tree(
        f"memory of {scope['user']} in {scope['app']}"
        + (f", project {scope['project']}" if scope["project"] else "")
    )
    for entity in graph["entities"]:
        branch = tree.add(f"{entity.name} ({entity.entity_type})")
        for o in entity.observations:
            if o.current:
                branch.add(f"{o.text}  [since {o.valid_from}]")
            else:
                label = f"{o.text}  [{o.valid_from} – {o.valid_to or '…'}]"
                branch.add(f"[strike]{label}[/strike]" if styled else f"(closed) {label}")
        for r in graph["relations"]:
            if r.source == entity.name:
                label = f"→ {r.relation} {r.target}"
                if r.current:
                    branch.add(label)
                else:
                    label += f"  [{r.valid_from} – {r.valid_to or '…'}]"
                    branch.add(f"[strike]{label}[/strike]" if styled else f"(closed) {label}")
    if not graph["entities"]:
        tree.add("(empty)")
    console = (
        Console()
        if styled
        else Console(file=sys.stdout, no_color=True, width=200, markup=False, highlight=False)
    )
    console.print(tree)


@click.command()
@scope_options
@json_option
def stats(as_json: bool, **scope: Any) -> None:
    """Counts: entities, current and closed facts and relations, turns, sessions, size,
    and the rows ranked by meaning (vectors) and waiting for their vector.

    Example: chronomem stats
    """
    result = run(scope, lambda s: s.stats())

    def human(r: Any) -> Table:
        table = Table(title=f"{scope['user']} in {scope['app']}")
        table.add_column("what")
        table.add_column("count", justify="right")
        for name, value in r.model_dump().items():
            table.add_row(name.replace("_", " "), f"{value:,}")
        return table

    emit(result, as_json, human)


@click.command()
@click.option(
    "--out", type=click.Path(dir_okay=False, path_type=Path), help="Write here, not stdout."
)
@scope_options
def export(out: Path | None, **scope: Any) -> None:
    """Every entity, fact, relation and turn as JSON Lines, with all ids and times.

    Example: chronomem export --out backup.jsonl
    """

    async def write_out(s: MemoryScope) -> int:
        """Stream the records, a page at a time. A file is written beside `out` and
        renamed over it once complete, so a failed export leaves no partial file."""
        if out is None:
            return await _write_records(s, sys.stdout)
        partial = out.with_name(f".{out.name}.partial")
        try:
            with partial.open("w", encoding="utf-8") as handle:
                count = await _write_records(s, handle)
            partial.replace(out)
        finally:
            partial.unlink(missing_ok=True)
        return count

    try:
        count = run(scope, write_out)
    except OSError as exc:  # no such folder, no permission, disk full: nothing was replaced
        click.echo(f"chronomem: cannot write {out}: {exc.strerror or exc}", err=True)
        sys.exit(1)
    if out:
        click.echo(f"exported {count:,} records to {out}", err=True)


async def _write_records(scope: MemoryScope, handle: TextIO) -> int:
    from memory.transfer import export_line

    count = 0
    async for record in scope.export_records():
        handle.write(export_line(record) + "\n")
        count += 1
    return count


@click.command()
@scope_options
def optimize(**scope: Any) -> None:
    """Merge the search indexes of the whole file (every user's) into one segment each.

    Searches then cost what they cost in a freshly written file: worth running after a
    bulk load, or now and then in a file many users share. Other processes go on
    writing meanwhile; results do not change. Example: chronomem optimize
    """
    run_on_file(scope, lambda memory: memory.optimize())
    click.echo("search indexes merged", err=True)


@click.command()
@click.option("--all", "everything", is_flag=True, help="Embed every row again (a new model).")
@scope_options
@json_option
def reindex(everything: bool, as_json: bool, **scope: Any) -> None:
    """Embed the rows of the whole file (every user's) that wait for their vector.

    `serve` embeds new rows in the background; this does it now, with a progress bar,
    say after a bulk import or for a file written with --embedder none. With --all,
    every row again, after a change of model. Example: chronomem reindex
    """
    show = sys.stderr.isatty() and not as_json
    bar = Progress(console=Console(stderr=True), transient=True) if show else None

    async def embed(memory: GraphMemory) -> tuple[Counts, str]:
        name = memory.embedder.name if memory.embedder else "none"
        if bar is None:
            return await memory.reindex(everything=everything), name
        with bar:
            task = bar.add_task(f"embedding with {name}", total=None)

            def advance(counts: Counts) -> None:
                bar.update(task, completed=counts.indexed, total=counts.indexed + counts.pending)

            return await memory.reindex(everything=everything, on_progress=advance), name

    try:
        counts, model = run_on_file(scope, embed, embeds=True)
    except KeyboardInterrupt:  # what was stored stays: the next reindex goes on from there
        click.echo("chronomem: reindex stopped; run it again to embed the rest", err=True)
        sys.exit(130)
    emit(
        counts._asdict(),
        as_json,
        lambda c: f"{c['indexed']:,} rows have their vector ({model}), {c['pending']:,} wait",
    )


@click.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@scope_options
@cap_options
@json_option
def import_(file: Path, as_json: bool, max_facts: int, max_turns: int, **scope: Any) -> None:
    """Import a chronomem export or the reference memory server's memory.jsonl.

    Every line is checked first: a malformed line names its number and nothing is kept.
    Example: chronomem import memory.jsonl
    """
    from memory.transfer import text_lines

    show = sys.stderr.isatty() and not as_json
    progress = Progress(console=Console(stderr=True), transient=True) if show else None

    interrupted = threading.Event()

    async def load(s: MemoryScope) -> Any:
        # The file is streamed (the import holds one batch at a time, not the file).
        with file.open("rb") as raw:
            lines = text_lines(raw)
            if progress is None:
                return await s.import_lines(lines, stop=interrupted.is_set)
            with file.open("rb") as counted, progress:
                task = progress.add_task("importing", total=sum(1 for n in counted if n.strip()))
                return await s.import_lines(
                    lines, progress=lambda n: progress.advance(task, n), stop=interrupted.is_set
                )

    def on_ctrl_c(signum: int, frame: Any) -> None:
        """Stop between batches, keeping what was written; a second Ctrl-C aborts at
        once (each batch is one transaction, so nothing is half-written either way)."""
        interrupted.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)

    usual = signal.signal(signal.SIGINT, on_ctrl_c)
    try:
        result = run(scope, load, creates=True, caps=Caps(max_facts, max_turns))
    finally:
        signal.signal(signal.SIGINT, usual)
    emit(
        result,
        as_json,
        lambda r: (
            f"imported {r.lines:,} lines: {r.entities:,} entities, {r.observations:,} facts, "
            f"{r.relations:,} relations, {r.turns:,} turns ({r.skipped:,} already present)"
        ),
    )


@click.command()
@click.option("--session", "session_id", help="Erase this conversation (of --user).")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@scope_options
@json_option
@click.pass_context
def purge(
    ctx: click.Context, session_id: str | None, yes: bool, as_json: bool, **scope: Any
) -> None:
    """Physically erase a user, a project or a session: no text of it stays in the file.

    --session S erases one conversation of --user; else --project P erases that
    project of --user; else --user U erases all of U's memory in --app. The only
    command that deletes. Example: chronomem purge --user alice --yes
    """
    user_given = ctx.get_parameter_source("user") is not click.core.ParameterSource.DEFAULT
    if session_id:
        what, target = "session", f"session {session_id!r} of {scope['user']!r}"
    elif scope["project"]:
        what, target = "project", f"project {scope['project']!r} of {scope['user']!r}"
    elif user_given:
        what, target = "user", f"all memory of user {scope['user']!r}"
    else:
        raise click.UsageError("say what to erase: --user U, --project P or --session S")
    require_database(resolve_db(scope["db"]))  # before asking
    if not yes and not click.confirm(f"Erase {target} in app {scope['app']!r} for good?", err=True):
        click.echo("nothing erased", err=True)
        sys.exit(1)
    result = run(scope, lambda s: s.purge(what, session_id=session_id))
    if not any(result.model_dump().values()):
        click.echo(
            f"chronomem: nothing to erase: {target} in app {scope['app']!r} holds nothing", err=True
        )
        sys.exit(2)
    emit(
        result,
        as_json,
        lambda r: (
            f"erased {target}: {r.entities:,} entities, {r.observations:,} facts, "
            f"{r.relations:,} relations, {r.turns:,} turns, {r.closings:,} closings of global facts"
        ),
    )


COMMANDS = (inspect, stats, export, optimize, reindex, import_, purge)
