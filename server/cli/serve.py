"""`chronomem serve` and `chronomem token create`."""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import anyio
import click

from memory import DatabaseFileError
from memory.embedding import Embedder

from ..auth import Grant, TokenFileError, create_token, read_tokens
from ..settings import (
    DEFAULT_HEADER_TIMEOUT,
    DEFAULT_HOST,
    DEFAULT_KEEP_ALIVE_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_HEADER_BYTES,
    DEFAULT_MAX_REQUEST_BYTES,
    DEFAULT_MAX_SESSIONS,
    DEFAULT_PORT,
    DEFAULT_SESSION_IDLE_TIMEOUT,
    HTTP_PATH,
    SSE_PATH,
    TRANSPORTS,
    Settings,
    is_loopback,
    resolve_db,
)
from .options import WordsReport, cap_options, chosen_embedder, scope_options, setting

__all__ = ["client_config", "ranking", "serve", "token"]


def http_limit_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The sessions and connections the HTTP transports allow (docs/security.md)."""
    seconds = click.FloatRange(min=0, min_open=True)
    options = [
        setting(
            "--max-sessions",
            click.IntRange(min=1),
            DEFAULT_MAX_SESSIONS,
            "Most MCP sessions one token may hold open (without auth: in all).",
        ),
        setting(
            "--session-idle-timeout",
            seconds,
            DEFAULT_SESSION_IDLE_TIMEOUT,
            "Seconds a session may sit idle before it is closed.",
        ),
        setting(
            "--max-connections",
            click.IntRange(min=1),
            DEFAULT_MAX_CONNECTIONS,
            "Most HTTP connections open at once.",
        ),
        setting(
            "--max-header-bytes",
            click.IntRange(min=1024),
            DEFAULT_MAX_HEADER_BYTES,
            "Largest request line and headers (431 past it).",
        ),
        setting(
            "--header-timeout",
            seconds,
            DEFAULT_HEADER_TIMEOUT,
            "Seconds a client has to send a whole request head.",
        ),
        setting(
            "--keep-alive-timeout",
            click.IntRange(min=1),
            DEFAULT_KEEP_ALIVE_TIMEOUT,
            "Seconds a connection may idle between requests.",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def client_config(transport: str, host: str, port: int, settings: Settings) -> dict[str, Any]:
    """The mcpServers entry a client needs to reach this server."""
    if transport == "stdio":
        env = {"CHRONOMEM_APP": settings.app, "CHRONOMEM_USER": settings.user}
        if settings.project:
            env["CHRONOMEM_PROJECT"] = settings.project
        entry: dict[str, Any] = {
            "command": "chronomem",
            "args": ["serve", "--db", settings.db],
            "env": env,
        }
    else:
        shown = f"[{host}]" if ":" in host else host
        path = HTTP_PATH if transport == "http" else SSE_PATH
        entry = {
            "type": "http" if transport == "http" else "sse",
            "url": f"http://{shown}:{port}{path}",
        }
        if settings.auth_tokens:
            entry["headers"] = {"Authorization": "Bearer <token from chronomem token create>"}
    return {"mcpServers": {"chronomem": entry}}


def ranking(choice: str, chosen: Embedder | None) -> str:
    """How the server ranks what it finds, in the words it says on stderr (DESIGN §8)."""
    if chosen is not None:
        return f"ranking by words and meaning with {chosen.name}"
    if choice == "none":
        return "ranking by words only (--embedder none)"
    return (
        "ranking by words only: the semantic extra is not installed"
        " (pip install 'chronomem[semantic]')"
    )


@click.command()
@scope_options
@click.option("--transport", type=click.Choice(TRANSPORTS), default="stdio", show_default=True)
@click.option("--host", default=DEFAULT_HOST, show_default=True, help="Address to listen on.")
@click.option("--port", type=int, default=DEFAULT_PORT, show_default=True)
@click.option(
    "--compat",
    is_flag=True,
    help="Serve the reference memory server's nine tools instead (drop-in).",
)
@click.option(
    "--auth-tokens",
    envvar="CHRONOMEM_AUTH_TOKENS",
    type=click.Path(dir_okay=False),
    help="Token file: each bearer token maps to its own scope.",
)
@cap_options
@setting(
    "--max-request-bytes",
    click.IntRange(min=1024),
    DEFAULT_MAX_REQUEST_BYTES,
    "Largest HTTP request body (sse, http).",
)
@http_limit_options
def serve(
    db: str | None,
    app: str,
    user: str,
    project: str | None,
    embedder: str,
    language: str | None,
    transport: str,
    host: str,
    port: int,
    compat: bool,
    auth_tokens: str | None,
    max_facts: int,
    max_turns: int,
    max_request_bytes: int,
    **limits: Any,
) -> None:
    """Run the MCP server. Example: chronomem serve --transport http

    With --compat it offers the reference MCP memory server's tools (create_entities,
    add_observations, ...) so its users can switch by changing one line of config.
    """
    # The SDK loads only for the commands that serve.
    from ..transports import backend_options
    from ..transports import serve as run

    if compat:
        from ..compat import build_compat_server as build_server
    else:
        from ..app import build_server

    chosen = chosen_embedder(embedder)  # its model loads on first use, not here
    settings = Settings(
        resolve_db(db),
        app,
        user,
        project or None,
        auth_tokens,
        max_facts=max_facts,
        max_turns=max_turns,
        max_request_bytes=max_request_bytes,
        embedder=chosen or "none",
        language=language,
        on_progress=WordsReport(),
        **limits,
    )
    if transport == "stdio" and auth_tokens:
        raise click.UsageError("--auth-tokens applies to --transport sse or http, not stdio")
    if transport != "stdio" and not is_loopback(host) and not auth_tokens:
        raise click.UsageError(
            f"refusing to listen on {host} without authentication: anyone who can reach "
            "it could read and change this memory. Add --auth-tokens FILE (create tokens "
            "with `chronomem token create`), or listen on 127.0.0.1."
        )
    if auth_tokens and not Path(auth_tokens).exists():
        raise click.UsageError(f"--auth-tokens: {auth_tokens} does not exist; create a token first")
    if auth_tokens:
        refuse_bad_token_file(Path(auth_tokens))
    if transport != "stdio":
        refuse_a_taken_port(host, port)
    plain_logs_unless_terminal()
    who = "per token" if auth_tokens else (f"app={app!r} user={user!r} project={project!r}")
    where = "stdio" if transport == "stdio" else f"{transport} on {host}:{port}"
    if compat:
        where += ", reference-compatible tools"
    click.echo(f"chronomem: serving {settings.db} ({who}) over {where}", err=True)
    click.echo(f"chronomem: {ranking(embedder, chosen)}", err=True)
    if settings.db != ":memory:" and not Path(settings.db).expanduser().exists():
        click.echo(f"chronomem: creating a new, empty database at {settings.db}", err=True)
    if transport != "stdio":
        config = json.dumps(client_config(transport, host, port, settings), indent=2)
        click.echo(f"chronomem: client configuration:\n{config}", err=True)

    stopped_by: list[int] = []

    async def open_and_serve() -> None:
        async with settings.open_memory() as memory:
            with (
                anyio.CancelScope() as serving,
                stopped_by_signals(serving if transport == "stdio" else None, stopped_by),
            ):
                await run(build_server(settings, memory), settings, transport, host, port)

    try:
        anyio.run(open_and_serve, backend_options=backend_options(transport))
    except DatabaseFileError as exc:
        click.echo(f"chronomem: {exc}", err=True)
        sys.exit(1)
    except KeyboardInterrupt:  # a second Ctrl-C, or one before serving began
        pass
    if signal.SIGTERM in stopped_by:  # closed cleanly: now end as SIGTERM ends a process
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)


def refuse_a_taken_port(host: str, port: int) -> None:
    """Exit with one line if `host:port` cannot be listened on (another server has it),
    before the client configuration is printed and the database opened. Bound as
    uvicorn binds (SO_REUSEADDR), so a port left in TIME_WAIT counts as free."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)
    except OSError as exc:
        shown = f"[{host}]" if ":" in host else host
        cause = "the port is in use" if exc.errno == errno.EADDRINUSE else exc.strerror
        click.echo(
            f"chronomem: cannot listen on {shown}:{port}: {cause} (another server?); choose "
            "another with --port",
            err=True,
        )
        sys.exit(1)


def plain_logs_unless_terminal() -> None:
    """The SDK logs through rich's handler (when nothing else is set up), which draws
    panels sized for a terminal: in a client's log file a traceback became hundreds of
    lines of box drawing. Where stderr is not a terminal, log plain lines instead."""
    if sys.stderr.isatty():
        return
    logging.basicConfig(
        level=logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


@contextmanager
def stopped_by_signals(serving: anyio.CancelScope | None, received: list[int]) -> Iterator[None]:
    """SIGTERM and SIGINT stop serving cleanly, noted in `received`, so the database is
    checkpointed and closed as the server unwinds (SIGTERM's default ends the process
    at once, leaving -wal and -shm behind). Over stdio the signal cancels `serving`;
    over HTTP (`serving` None) uvicorn stops by itself on both, answering what it is
    answering first, and the event loop still hears of the signal, only to note it.
    A second SIGINT while stopping stdio is Python's KeyboardInterrupt again."""
    loop = asyncio.get_running_loop()

    def stop(signum: int) -> None:
        received.append(signum)
        if serving is not None:
            serving.cancel()
            loop.remove_signal_handler(signal.SIGINT)

    handled: list[signal.Signals] = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        with suppress(NotImplementedError, RuntimeError, ValueError):  # Windows, a thread
            loop.add_signal_handler(signum, stop, signum)
            handled.append(signum)
    try:
        yield
    finally:
        for signum in handled:
            loop.remove_signal_handler(signum)


def refuse_bad_token_file(path: Path) -> None:
    """Exit 2 with one line naming the file and its problem, if it cannot be used."""
    try:
        read_tokens(path)
    except TokenFileError as exc:
        click.echo(f"chronomem: {exc}", err=True)
        sys.exit(2)


@click.group()
def token() -> None:
    """Manage bearer tokens for the HTTP and SSE transports."""


@token.command("create")
@click.option(
    "--auth-tokens",
    required=True,
    type=click.Path(dir_okay=False),
    help="The token file (created if missing); it stores only hashes.",
)
@click.option("--app", required=True, help="The application the token may use.")
@click.option("--user", required=True, help="The user whose memory the token opens.")
@click.option("--project", default=None, help="Confine the token to this project.")
@click.option("--read-only", is_flag=True, help="The token may read but not write.")
def token_create(
    auth_tokens: str, app: str, user: str, project: str | None, read_only: bool
) -> None:
    """Create a token and print it, alone, on stdout. It is shown only this once.

    Example: chronomem token create --auth-tokens tokens.json --app coach --user alice
    """
    for name, value in (("--app", app), ("--user", user), ("--project", project)):
        if value is not None and not value.strip():
            raise click.BadParameter("must not be blank", param_hint=name)
    if Path(auth_tokens).exists():
        refuse_bad_token_file(Path(auth_tokens))
    click.echo(create_token(auth_tokens, Grant(app, user, project, read_only)))
