"""Limits on HTTP connections, enforced before a request reaches the app (or a token
is checked): how many connections, how large a request head, how long to send it.

uvicorn bounds none of these for httptools: its keep-alive timeout closes a
connection idle between requests, but a client that sends part of a request head,
or a header of hundreds of MiB, was buffered and waited on forever (issue 15: a
256 MiB header from a client without a token was read whole; 1,100 idle sockets
locked valid clients out). `guarded_protocol` is uvicorn's httptools protocol with
those limits; `CompleteBodies` reads a POST's body before the app does, so a client
that hangs up mid-body is dropped quietly instead of raising inside the SDK.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

__all__ = ["CompleteBodies", "ConnectionLimits", "guarded_protocol"]


@dataclass(frozen=True)
class ConnectionLimits:
    max_connections: int  # open at once; one more is answered 503 and closed
    max_header_bytes: int  # request line and headers; over it: 431
    header_timeout: float  # seconds to send a whole request head; then closed


def _answer(status: bytes, text: str) -> bytes:
    body = text.encode()
    return (
        b"HTTP/1.1 " + status + b"\r\ncontent-type: text/plain; charset=utf-8\r\n"
        b"content-length: " + str(len(body)).encode() + b"\r\nconnection: close\r\n\r\n" + body
    )


def guarded_protocol(limits: ConnectionLimits) -> type[HttpToolsProtocol]:
    """uvicorn's httptools protocol, held to `limits` (pass it as `Config(http=...)`)."""
    too_large = _answer(
        b"431 Request Header Fields Too Large",
        f"the request line and headers exceed {limits.max_header_bytes:,} bytes "
        "(--max-header-bytes, CHRONOMEM_MAX_HEADER_BYTES)\n",
    )
    too_slow = _answer(
        b"408 Request Timeout",
        f"the request head was not complete within {limits.header_timeout:g} s "
        "(--header-timeout, CHRONOMEM_HEADER_TIMEOUT)\n",
    )
    too_many = _answer(
        b"503 Service Unavailable",
        f"the server has {limits.max_connections:,} connections open, the most it "
        "takes (--max-connections, CHRONOMEM_MAX_CONNECTIONS); try again shortly\n",
    )

    class GuardedHttpToolsProtocol(HttpToolsProtocol):
        """Counts the bytes of each request head as they arrive (httptools buffers a
        header whole before it reports one) and measures it once parsed; closes a
        connection whose head is not complete within the timeout, from its first
        byte or its opening."""

        def __init__(
            self,
            config: Config,
            server_state: ServerState,
            app_state: dict[str, Any],
            _loop: asyncio.AbstractEventLoop | None = None,
        ) -> None:
            super().__init__(config, server_state, app_state, _loop)
            self._in_head = True  # between a request's first byte and its last header
            self._head_bytes = 0  # received while in a head: bounds what httptools holds
            self._head_timer: asyncio.TimerHandle | None = None
            self._refused = False

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]  # uvicorn's own signature, narrower than asyncio's
            super().connection_made(transport)
            if len(self.connections) > limits.max_connections:
                self._refuse(too_many)
                return
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if self._refused:
                return
            if self._in_head:
                self._head_bytes += len(data)
            super().data_received(data)
            if self._in_head and self._head_bytes > limits.max_header_bytes:
                self._refuse(too_large)

        def on_message_begin(self) -> None:
            if self._refused:
                return
            super().on_message_begin()
            self._in_head = True
            self._arm()

        def on_headers_complete(self) -> None:
            if self._refused:
                return
            self._disarm()
            self._in_head, self._head_bytes = False, 0
            size = len(self.url) + sum(len(name) + len(value) + 4 for name, value in self.headers)
            if size > limits.max_header_bytes:  # a whole head that came in one read
                self._refuse(too_large)
                return
            super().on_headers_complete()

        def on_body(self, body: bytes) -> None:
            if not self._refused:
                super().on_body(body)

        def on_message_complete(self) -> None:
            if not self._refused:
                super().on_message_complete()

        def _arm(self) -> None:
            if self._head_timer is None:
                self._head_timer = self.loop.call_later(limits.header_timeout, self._timed_out)

        def _disarm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _timed_out(self) -> None:
            self._head_timer = None
            if self._in_head and not self._refused:
                # Nothing sent at all: close, as uvicorn closes an idle keep-alive.
                self._refuse(too_slow if self._head_bytes else b"")

        def _refuse(self, answer: bytes) -> None:
            """Answer and close. A client still sending would be sent a reset by a plain
            close, which can destroy the answer before it is read; so the answer is
            followed by end-of-file, and what still arrives is discarded until the
            client closes, for at most the header timeout (a "lingering close")."""
            self._refused = True
            self._disarm()
            if self.transport.is_closing():
                return
            if not answer or not self.transport.can_write_eof():
                self.transport.close()
                return
            self.transport.write(answer)
            self.transport.write_eof()
            self._head_timer = self.loop.call_later(limits.header_timeout, self.transport.close)

        def eof_received(self) -> None:
            if self._refused:  # the client read the answer and hung up
                self.transport.close()
            super().eof_received()

    return GuardedHttpToolsProtocol


class CompleteBodies:
    """ASGI middleware: a POST's whole body is read before the app sees the request.

    A client that hangs up mid-body has nobody left to answer: it is dropped here,
    quietly, where the SDK raised `ClientDisconnect` and logged a traceback for it
    (~100 ms of CPU, issue 15). A body over `max_bytes` is answered 413 as the SDK
    answers it, without reading on."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        for name, value in scope["headers"]:
            if name == b"content-length":
                if value.isdigit() and int(value) > self.max_bytes:
                    await _too_large(send)  # declared too large: not a byte read
                    return
                break
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client left before its body was complete
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await _too_large(send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        if len(chunks) > 1:  # else the one message, as it came, is the whole body
            message = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
        pending = [message]

        async def replay() -> Message:
            return pending.pop() if pending else await receive()

        await self.app(scope, replay, send)


async def _too_large(send: Send) -> None:
    body = b"Request body too large"
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
