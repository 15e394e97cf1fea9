"""Bearer tokens for HTTP and SSE: each token maps to one scope, read-only or read-write.

The token file holds only SHA-256 hashes of tokens (a token is 256 random bits, so a
fast hash is enough); a token is shown once, when created. The file is re-read when
it changes, so a new or removed token takes effect without a restart.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["BearerAuth", "Grant", "TokenFile", "TokenHolder", "create_token", "grant_of"]

TOKEN_PREFIX = "cm_"
SCOPE_KEY = "chronomem.grant"
TOKEN_ID_KEY = "chronomem.token_id"


@dataclass(frozen=True)
class Grant:
    """What one token (or the command line, without auth) may touch."""

    app: str
    user: str
    project: str | None = None
    read_only: bool = False


@dataclass(frozen=True)
class TokenHolder:
    """A verified token: `token_id` (the token's SHA-256, as the file stores it) names
    the credential without revealing it; `grant` is what it may touch."""

    token_id: str
    grant: Grant

    def user(self) -> AuthenticatedUser:
        """The ASGI `user` the SDK binds each session to: a session opened with one
        token answers 404 to every other (SSE messages, and streamable HTTP's POST,
        GET and DELETE alike), as though it did not exist (issue 15)."""
        scopes = ["read"] if self.grant.read_only else ["read", "write"]
        return AuthenticatedUser(
            AccessToken(token=self.token_id, client_id=self.token_id, scopes=scopes)
        )


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class TokenFile:
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._stamp: tuple[float, int] | None = None
        self._entries: list[tuple[str, Grant]] = []

    def _load(self) -> None:
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            self._entries, self._stamp = [], None
            return
        stamp = (stat.st_mtime, stat.st_size)
        if stamp == self._stamp:
            return
        data = json.loads(self.path.read_text() or "{}")
        self._entries = [
            (
                entry["sha256"],
                Grant(entry["app"], entry["user"], entry.get("project"), entry["read_only"]),
            )
            for entry in data.get("tokens", [])
        ]
        self._stamp = stamp

    def verify(self, token: str) -> Grant | None:
        """The grant of `token`, or None. Compares against every hash in constant time."""
        found = self.holder(token)
        return found.grant if found is not None else None

    def holder(self, token: str) -> TokenHolder | None:
        """Who presents `token`: its grant and a stable identity (its hash), or None."""
        self._load()
        digest = _hash(token)
        found = None
        for stored, grant in self._entries:
            if hmac.compare_digest(stored, digest):
                found = TokenHolder(digest, grant)
        return found


def create_token(path: str | os.PathLike[str], grant: Grant) -> str:
    """Add a new token for `grant` to the file (created if missing) and return it.

    The file is replaced atomically and readable by its owner only.
    """
    target = Path(path)
    data: dict[str, Any] = {"tokens": []}
    if target.exists() and target.read_text().strip():
        data = json.loads(target.read_text())
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    data["tokens"].append(
        {
            "sha256": _hash(token),
            "app": grant.app,
            "user": grant.user,
            "project": grant.project,
            "read_only": grant.read_only,
            "created_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
    )
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=".tokens-")
    with os.fdopen(handle, "w") as out:
        json.dump(data, out, indent=2)
    os.chmod(temporary, 0o600)
    os.replace(temporary, target)
    return token


class BearerAuth:
    """ASGI middleware: every HTTP request needs `Authorization: Bearer <token>`; the
    token's grant travels with the request to the tools. Anything else gets 401."""

    def __init__(self, app: ASGIApp, tokens: TokenFile) -> None:
        self.app = app
        self.tokens = tokens

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        header = dict(scope.get("headers") or []).get(b"authorization", b"").decode("latin-1")
        scheme, _, token = header.partition(" ")
        holder = self.tokens.holder(token.strip()) if scheme.lower() == "bearer" else None
        if holder is None:
            body = json.dumps(
                {
                    "error": "invalid_token",
                    "error_description": "send a chronomem token: Authorization: Bearer <token>",
                }
            ).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"www-authenticate", b'Bearer realm="chronomem"'),
                        (b"content-length", str(len(body)).encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        scope[SCOPE_KEY] = holder.grant
        scope[TOKEN_ID_KEY] = holder.token_id
        scope["user"] = holder.user()
        await self.app(scope, receive, send)


def grant_of(request: Any) -> Grant | None:
    """The grant the auth middleware attached to an HTTP request, if any."""
    scope = getattr(request, "scope", None)
    return scope.get(SCOPE_KEY) if isinstance(scope, dict) else None
