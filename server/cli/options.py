"""What the subcommands share: the scope, embedder, storage-cap and output options,
opening the database, and how an outcome becomes output and an exit status.

Exit status: 0 on success, 2 on bad input (the engine's message on stderr), 1 on
any other failure, 130 for an import stopped by Ctrl-C. Never a traceback.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import anyio
import click
from pydantic import BaseModel
from rich.console import Console
from rich.table import Table

from memory import (
    ChronomemError,
    EmbedderError,
    GraphMemory,
    IndexerSettings,
    InvalidInputError,
    MemoryScope,
)
from memory.embedding import EMBEDDER_CHOICES, Embedder, choose_embedder
from memory.errors import ImportInterrupted
from memory.word_index import WordProgress
from memory.words import LANGUAGES

from ..settings import DEFAULT_MAX_FACTS, DEFAULT_MAX_TURNS, resolve_db

__all__ = [
    "DEFAULT_CAPS",
    "Caps",
    "WordsReport",
    "cap_options",
    "chosen_embedder",
    "embedder_option",
    "emit",
    "json_option",
    "require_database",
    "run",
    "run_on_file",
    "scope_options",
    "setting",
    "time_options",
]

R = TypeVar("R")
F = TypeVar("F", bound=Callable[..., Any])

# Names the shared options take among a command's parameters: an operation's
# argument of one of these names would be shadowed (`operations` refuses it).
SHARED_PARAMETERS = frozenset(
    {"db", "app", "user", "project", "embedder", "language", "as_json", "max_facts", "max_turns"}
)


class Caps(NamedTuple):
    """The per-user storage caps a command opens the database with (GraphMemory.open)."""

    max_facts: int = DEFAULT_MAX_FACTS
    max_turns: int = DEFAULT_MAX_TURNS


DEFAULT_CAPS = Caps()


def setting(flag: str, kind: click.ParamType, default: Any, help: str) -> Callable[[F], F]:
    """An option with its default shown, which the environment may also set, as
    `CHRONOMEM_<FLAG>` (`--max-facts`: `CHRONOMEM_MAX_FACTS`)."""
    variable = "CHRONOMEM_" + flag.removeprefix("--").replace("-", "_").upper()
    option: Callable[[F], F] = click.option(
        flag, envvar=variable, type=kind, default=default, show_default=True, help=help
    )
    return option


def _apply(command: F, options: list[Callable[[F], F]]) -> F:
    for option in reversed(options):
        command = option(command)
    return command


def embedder_option(command: F) -> F:
    """--embedder (CHRONOMEM_EMBEDDER): whether searches rank by meaning too (DESIGN §8)."""
    return setting(
        "--embedder",
        click.Choice(EMBEDDER_CHOICES, case_sensitive=False),
        "default",
        "Rank by meaning too with the bundled English model (default; needs the semantic"
        " extra) or the multilingual one (multilingual; needs the multilingual extra), or"
        " by words only (none). Only serve and reindex embed; other commands rank by"
        " words and leave what they write to them.",
    )(command)


def language_option(command: F) -> F:
    """--language (CHRONOMEM_LANGUAGE): the file's default language for word forms."""
    return click.option(
        "--language",
        envvar="CHRONOMEM_LANGUAGE",
        type=click.Choice(sorted(LANGUAGES), case_sensitive=False),
        default=None,
        help="Language of the words whose language neither their script nor their text"
        " tells (ISO 639-1 code). It is the file's: given another than the file has, its"
        " words are indexed again. [default: the file's; en for a new file]",
    )(command)


class WordsReport:
    """Tells stderr how far the words are indexed again (a migration, a new default
    language): when it starts, every tenth of the way, and when it is done."""

    STEPS = 10

    def __init__(self) -> None:
        self._step = -1

    def __call__(self, progress: WordProgress) -> None:
        done, total = progress
        if total == 0:  # a new file: nothing to say
            return
        step = done * self.STEPS // total
        if self._step < 0:
            click.echo(f"chronomem: indexing the words of {total:,} rows again", err=True)
        elif step > self._step:
            click.echo(f"chronomem: words indexed: {done:,} of {total:,} rows", err=True)
        self._step = step


def chosen_embedder(choice: str, threads: int = 1) -> Embedder | None:
    """`choose_embedder`, or a one-line error and exit status 1 (a model asked for by
    name whose extra is not installed)."""
    try:
        return choose_embedder(choice, threads=threads)
    except EmbedderError as exc:
        click.echo(f"chronomem: {exc}", err=True)
        sys.exit(1)


def scope_options(command: F) -> F:
    """--db, --app, --user, --project, --embedder and --language, with their
    environment variables and defaults: what every command that opens the database
    takes."""
    return _apply(
        command,
        [
            click.option(
                "--db",
                envvar="CHRONOMEM_DB",
                help="Database file. [default: $XDG_DATA_HOME/chronomem/memory.db]",
            ),
            click.option(
                "--app",
                envvar="CHRONOMEM_APP",
                default="default",
                show_default=True,
                help="The application whose memory to use.",
            ),
            click.option(
                "--user",
                envvar="CHRONOMEM_USER",
                default="default",
                show_default=True,
                help="The user whose memory to use.",
            ),
            click.option(
                "--project",
                envvar="CHRONOMEM_PROJECT",
                default=None,
                help="Work inside this project (global memory stays visible).",
            ),
            embedder_option,
            language_option,
        ],
    )


def cap_options(command: F) -> F:
    """--max-facts and --max-turns: the storage caps, as `serve` takes them, so a write
    from the command line is held to the same limits as one from a client."""
    return _apply(
        command,
        [
            setting(
                "--max-facts",
                click.IntRange(min=1),
                DEFAULT_MAX_FACTS,
                "Most facts and relations one user may store.",
            ),
            setting(
                "--max-turns",
                click.IntRange(min=1),
                DEFAULT_MAX_TURNS,
                "Most conversation turns one user may store.",
            ),
        ],
    )


def json_option(command: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print the JSON result.")(command)


def time_options(command: F) -> F:
    """--as-of, --known-at and --history, for a command that is not an operation."""
    return _apply(
        command,
        [
            click.option("--as-of", help="What was true at this time."),
            click.option("--known-at", help="As memory stood at this time."),
            click.option(
                "--history", is_flag=True, help="Include facts that are no longer current."
            ),
        ],
    )


def run(
    scope: dict[str, Any],
    operation: Callable[[MemoryScope], Awaitable[R]],
    *,
    creates: bool = False,
    caps: Caps = DEFAULT_CAPS,
    ranks: bool = False,
) -> R:
    """Open the database, run `operation` on the scope, map errors to exit codes.
    Only a command that `creates` what it stores may start a new database file; one
    that `ranks` searches by meaning too (`run_on_file`)."""

    def on_scope(memory: GraphMemory) -> Awaitable[R]:
        handle = memory.scope(app=scope["app"], user=scope["user"], project=scope["project"])
        return operation(handle)

    return run_on_file(scope, on_scope, creates=creates, caps=caps, ranks=ranks)


def run_on_file(
    scope: dict[str, Any],
    operation: Callable[[GraphMemory], Awaitable[R]],
    *,
    creates: bool = False,
    caps: Caps = DEFAULT_CAPS,
    embeds: bool = False,
    ranks: bool = False,
) -> R:
    """Open the database, run `operation` on the whole file, map errors to exit codes.

    A command that `embeds` (reindex) opens it with `--embedder`; one that `ranks` (a
    search) too, loading the model before it searches but embedding no backlog. Any
    other opens it without: it would end before the model could help, and what it
    writes waits in the file's backlog for `serve` or `reindex` either way."""
    path = resolve_db(scope["db"])
    if not creates:
        require_database(path)
    # A one-shot command has the machine to itself: the model may take every core.
    chosen = chosen_embedder(scope["embedder"], threads=0) if embeds or ranks else None
    indexing = IndexerSettings(background=not ranks)

    async def go() -> R:
        async with GraphMemory.open(
            path,
            max_facts=caps.max_facts,
            max_turns=caps.max_turns,
            embedder=chosen or "none",
            indexing=indexing,
            language=scope["language"],
            on_progress=WordsReport(),
        ) as memory:
            if ranks and chosen is not None:
                try:
                    await memory.load_embedder()
                except EmbedderError as exc:  # words still answer
                    click.echo(f"chronomem: {exc}; searching by words only", err=True)
            return await operation(memory)

    try:
        return anyio.run(go)
    except ImportInterrupted as exc:  # Ctrl-C: the shell's status for SIGINT
        click.echo(f"chronomem: {exc}", err=True)
        sys.exit(130)
    except InvalidInputError as exc:  # MemoryFullError too
        click.echo(f"chronomem: {exc}", err=True)
        sys.exit(2)
    except (ChronomemError, EmbedderError) as exc:
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
