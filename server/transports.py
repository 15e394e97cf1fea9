"""Running the server over stdio, SSE or streamable HTTP. The SDK's entry points stay here."""

from __future__ import annotations

import gc
import sys
from collections.abc import Awaitable, Callable
from contextlib import suppress
from importlib.util import find_spec
from typing import Any

import uvicorn
from mcp.server import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp

from .auth import BearerAuth, TokenFile
from .connections import CompleteBodies, ConnectionLimits, guarded_protocol
from .sessions import HttpSessionLimits, SessionLimit, SseSessionLimits
from .settings import HTTP_PATH, MESSAGES_PATH, SSE_PATH, Settings, is_loopback
from .stdio_relay import EOF_GRACE, relayable, serve_relayed

__all__ = ["backend_options", "http_app", "rebinding_protection", "serve", "serve_stdio"]

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")


def rebinding_protection(host: str) -> TransportSecuritySettings | None:
    """The Host and Origin headers a server on loopback `host` answers, against DNS
    rebinding: a web page whose name now resolves to 127.x must not reach it.

    The SDK protects only 127.0.0.1, localhost and ::1, and only with a port in the
    header; any loopback address (all of 127/8) is protected here, the bound address
    and the usual loopback names allowed with or without a port (`--port 80` sends
    none). Off loopback the server requires tokens, which a browser never adds."""
    if not is_loopback(host):
        return None
    bound = f"[{host.strip('[]')}]" if ":" in host else host
    names = dict.fromkeys((bound, *LOOPBACK_NAMES))
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[spelling for name in names for spelling in (name, f"{name}:*")],
        allowed_origins=[
            spelling for name in names for spelling in (f"http://{name}", f"http://{name}:*")
        ],
    )


def http_app(server: MCPServer, settings: Settings, transport: str, host: str) -> ASGIApp:
    """The ASGI app for `sse` or `http`, behind bearer auth when a token file is set,
    each token held to its open sessions (`server.sessions`). A request body over
    `max_request_bytes` is answered 413, with or without Content-Length, before it
    is read past the limit; one cut off by its client is dropped quietly.

    Streamable HTTP answers each POST with plain JSON (`json_response`), not an SSE
    stream per call: no tool sends progress or logs mid-call, and a stream per call
    cost throughput (docs/benchmarks.md)."""
    limit = settings.max_request_bytes
    security = rebinding_protection(host)
    if transport == "sse":
        app: ASGIApp = server.sse_app(
            sse_path=SSE_PATH,
            message_path=MESSAGES_PATH,
            host=host,
            transport_security=security,
            max_request_body_size=limit,
        )
    else:
        app = server.streamable_http_app(
            streamable_http_path=HTTP_PATH,
            host=host,
            session_idle_timeout=settings.session_idle_timeout,
            transport_security=security,
            max_request_body_size=limit,
            json_response=True,
        )
    app = CompleteBodies(app, limit)
    sessions = SessionLimit(settings.max_sessions, settings.session_idle_timeout)
    if transport == "sse":
        app = SseSessionLimits(app, sessions, SSE_PATH, MESSAGES_PATH)
    else:
        app = HttpSessionLimits(app, sessions)
    if settings.auth_tokens is not None:
        app = BearerAuth(app, TokenFile(settings.auth_tokens))
    return app


def backend_options(transport: str) -> dict[str, Any]:
    """anyio's options for `anyio.run` of `serve`: uvloop's event loop for SSE and
    HTTP where it is installed (a dependency except on Windows): the server spends
    most of its CPU in the SDK's HTTP stack, which runs faster on it."""
    use_uvloop = transport != "stdio" and find_spec("uvloop") is not None
    return {"use_uvloop": True} if use_uvloop else {}


def uvicorn_config(app: ASGIApp, host: str, port: int, settings: Settings) -> uvicorn.Config:
    """HTTP/1.1 parsed by httptools (a dependency), not uvicorn's pure-Python h11, with
    the connection limits of `settings` (`server.connections`)."""
    limits = ConnectionLimits(
        max_connections=settings.max_connections,
        max_header_bytes=settings.max_header_bytes,
        header_timeout=settings.header_timeout,
    )
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        http=guarded_protocol(limits),
        timeout_keep_alive=settings.keep_alive_timeout,
        log_level="warning",
        lifespan="on",
    )


async def serve_stdio(server: MCPServer, eof_grace: float = EOF_GRACE) -> None:
    """The SDK's own stdio transport (`run_stdio_async`), behind `server.stdio_relay`
    where stdin and stdout are pipes or sockets: bad text refused naming the field,
    the requests read answered at end of input (waiting at most `eof_grace` seconds),
    a stop by signal prompt while the client keeps stdin open."""
    try:
        if relayable():
            client_reading = await serve_relayed(server, eof_grace)
        else:
            await server.run_stdio_async()
            client_reading = True
    except* (BrokenPipeError, ConnectionResetError):
        client_reading = False
    if not client_reading:
        # The client stopped reading (it exited or closed its end): nobody is left
        # to answer, which is the end of a stdio session, not a crash to report.
        with suppress(OSError):  # stderr may have gone with the client
            print("chronomem: the client closed the connection", file=sys.stderr)


async def serve(
    server: MCPServer,
    settings: Settings,
    transport: str,
    host: str,
    port: int,
    stdio: Callable[[MCPServer], Awaitable[None]] = serve_stdio,
) -> None:
    """Serve until stopped, under `anyio.run` with `backend_options(transport)`;
    `stdio` serves the stdio transport.

    Everything loaded so far (the SDK, pydantic's models) lives as long as the
    process, so it is frozen out of the garbage collector's reach: a full collection
    walked it all, a pause now and then that showed in the 99th percentile."""
    gc.freeze()
    if transport == "stdio":
        await stdio(server)
        return
    app = http_app(server, settings, transport, host)
    await uvicorn.Server(uvicorn_config(app, host, port, settings)).serve()
