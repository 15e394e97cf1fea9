"""How many MCP sessions one token may hold open over HTTP, and for how long idle.

A session costs memory for as long as it is open (a server task, its streams), so
one client opening sessions in a loop could fill the server's memory and, at the
SDK's own cap, lock every other client out. Each token may hold `max_sessions`
open at once; without auth (one user, on loopback) that cap is the server's. A
session with no request in flight for `idle_timeout` seconds is closed: the SDK
closes streamable-HTTP sessions itself (given the same timeout), and an SSE
stream that no message was posted to for that long is ended here.

Over the cap, the request that would open a session is answered 429 with a JSON-RPC
error naming the limit and its setting; the sessions already open are untouched.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import parse_qs
from uuid import UUID

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .auth import TOKEN_ID_KEY

__all__ = ["HttpSessionLimits", "SessionLimit", "SseSessionLimits"]

SESSION_HEADER = b"mcp-session-id"
SERVER_ERROR = -32000  # JSON-RPC: implementation-defined server error
ENDPOINT_SESSION = re.compile(rb"session_id=([0-9a-f]{32})")


def _session_of(query_string: bytes) -> str | None:
    """The session id of a messages POST, spelled as the SDK reads it."""
    given = parse_qs(query_string.decode("latin-1")).get("session_id")
    try:
        return UUID(hex=given[0]).hex if given else None
    except ValueError:
        return None


@dataclass(frozen=True)
class SessionLimit:
    """The per-token cap and the idle timeout, with the clock that measures it."""

    max_sessions: int
    idle_timeout: float  # seconds
    clock: Callable[[], float] = time.monotonic

    def refuse(self, owner: str | None) -> tuple[Message, Message]:
        """The 429 answer to a request that would open one session too many."""
        holder = "this token already has" if owner is not None else "the server already has"
        message = (
            f"too many open sessions: {holder} {self.max_sessions}, the most allowed "
            "(--max-sessions, CHRONOMEM_MAX_SESSIONS); end one (DELETE it, or close its "
            f"stream), or wait: a session idle for {self.idle_timeout:g} s is closed "
            "(--session-idle-timeout)"
        )
        error = {"jsonrpc": "2.0", "id": None, "error": {"code": SERVER_ERROR, "message": message}}
        body = json.dumps(error).encode()
        start: Message = {
            "type": "http.response.start",
            "status": 429,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"retry-after", str(math.ceil(self.idle_timeout)).encode()),
            ],
        }
        return start, {"type": "http.response.body", "body": body}


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope["headers"]:
        if key == name:
            return value
    return None


@dataclass
class _Session:
    busy: int  # requests in flight; a GET stream counts for as long as it is open
    idle_since: float


class HttpSessionLimits:
    """ASGI middleware for streamable HTTP: counts each token's open sessions.

    A request without a session id opens one (the SDK admits it, and keeps it if it
    answers below 400 with an `mcp-session-id`), so it takes a place while in flight;
    a session stays counted while a request is in flight or it was busy within the
    idle timeout, which is when the SDK closes it, and not after its DELETE. (One the
    SDK ended otherwise answers 404 and is counted out once idle for the timeout.)"""

    def __init__(self, app: ASGIApp, limit: SessionLimit) -> None:
        self.app = app
        self.limit = limit
        self._opening: Counter[str | None] = Counter()
        self._sessions: dict[str | None, dict[bytes, _Session]] = {}

    def _open(self, owner: str | None) -> int:
        sessions = self._sessions.get(owner, {})
        now, timeout = self.limit.clock(), self.limit.idle_timeout
        for session_id, session in list(sessions.items()):
            if not session.busy and now - session.idle_since >= timeout:
                del sessions[session_id]  # the SDK has closed it, or is closing it now
        if not sessions:
            self._sessions.pop(owner, None)
        return self._opening[owner] + len(sessions)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        owner: str | None = scope.get(TOKEN_ID_KEY)
        session_id = _header(scope, SESSION_HEADER)
        if session_id is None:
            await self._opening_request(owner, scope, receive, send)
            return
        session = self._sessions.get(owner, {}).get(session_id)
        if session is None:  # another token's or unknown (404), or counted out early
            await self._untracked(owner, session_id, scope, receive, send)
            return
        ending = scope["method"] == "DELETE"
        status = 0

        async def watch(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        session.busy += 1
        try:
            await self.app(scope, receive, watch if ending else send)
        finally:
            session.busy -= 1
            session.idle_since = self.limit.clock()
            if ending and (200 <= status < 300 or status == 404):  # ended, or already gone
                self._sessions.get(owner, {}).pop(session_id, None)

    async def _untracked(
        self, owner: str | None, session_id: bytes, scope: Scope, receive: Receive, send: Send
    ) -> None:
        """A session this token holds that was counted out a moment before the SDK
        closed it, and used in between, is counted again; anything else is the SDK's
        404."""

        counted: _Session | None = None

        async def watch(message: Message) -> None:
            nonlocal counted
            if message["type"] == "http.response.start" and message["status"] < 400:
                sessions = self._sessions.setdefault(owner, {})
                counted = sessions.setdefault(session_id, _Session(0, self.limit.clock()))
                counted.busy += 1
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            if counted is not None:
                counted.busy -= 1
                counted.idle_since = self.limit.clock()

    async def _opening_request(
        self, owner: str | None, scope: Scope, receive: Receive, send: Send
    ) -> None:
        if self._open(owner) >= self.limit.max_sessions:
            for message in self.limit.refuse(owner):
                await send(message)
            return
        self._opening[owner] += 1
        opened: _Session | None = None

        async def watch(message: Message) -> None:
            nonlocal opened
            if message["type"] == "http.response.start" and message["status"] < 400:
                session_id = next((v for k, v in message["headers"] if k == SESSION_HEADER), None)
                if session_id is not None and opened is None:
                    opened = _Session(busy=1, idle_since=self.limit.clock())
                    self._sessions.setdefault(owner, {})[session_id] = opened
                    self._release(owner)  # counted as a session from now on
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            if opened is None:
                self._release(owner)
            else:
                opened.busy -= 1
                opened.idle_since = self.limit.clock()

    def _release(self, owner: str | None) -> None:
        self._opening[owner] -= 1
        if not self._opening[owner]:
            del self._opening[owner]


@dataclass
class _Stream:
    owner: str | None
    last_message: float


class SseSessionLimits:
    """ASGI middleware for SSE: a session is one open `GET sse_path` stream.

    Each token may hold `max_sessions` streams; a stream that no message was posted
    to (`POST messages_path?session_id=...`, by its own token) for the idle timeout is
    ended, its response closed cleanly, and the SDK forgets the session."""

    def __init__(
        self, app: ASGIApp, limit: SessionLimit, sse_path: str, messages_path: str
    ) -> None:
        self.app = app
        self.limit = limit
        self.sse_path = sse_path
        self.messages_path = messages_path
        self._streams: Counter[str | None] = Counter()
        self._by_session: dict[str, _Stream] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        owner: str | None = scope.get(TOKEN_ID_KEY)
        if scope["path"] == self.sse_path and scope["method"] == "GET":
            await self._stream(owner, scope, receive, send)
            return
        if scope["path"] == self.messages_path:
            session_id = _session_of(scope.get("query_string", b""))
            stream = self._by_session.get(session_id) if session_id else None
            if stream is not None and stream.owner == owner:
                stream.last_message = self.limit.clock()
        await self.app(scope, receive, send)

    async def _stream(self, owner: str | None, scope: Scope, receive: Receive, send: Send) -> None:
        if self._streams[owner] >= self.limit.max_sessions:
            for message in self.limit.refuse(owner):
                await send(message)
            return
        self._streams[owner] += 1
        stream = _Stream(owner, self.limit.clock())
        session_id: str | None = None
        started = finished = False

        async def watch(message: Message) -> None:
            nonlocal session_id, started, finished
            if message["type"] == "http.response.start":
                started = True
            elif message["type"] == "http.response.body":
                finished = not message.get("more_body", False)
                if session_id is None:  # the first event names the messages endpoint
                    found = ENDPOINT_SESSION.search(message.get("body", b""))
                    if found is not None:
                        session_id = found.group(1).decode()
                        self._by_session[session_id] = stream
            await send(message)

        try:
            async with anyio.create_task_group() as group:
                group.start_soon(self._expire, stream, group.cancel_scope)
                await self.app(scope, receive, watch)
                group.cancel_scope.cancel()
            if started and not finished:  # ended for idleness: close the response
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            self._streams[owner] -= 1
            if not self._streams[owner]:
                del self._streams[owner]
            if session_id is not None:
                self._by_session.pop(session_id, None)

    async def _expire(self, stream: _Stream, scope: anyio.CancelScope) -> None:
        while (left := stream.last_message + self.limit.idle_timeout - self.limit.clock()) > 0:
            await anyio.sleep(left)
        scope.cancel()
