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
import sys
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.types import ASGIApp, Receive, Scope, Send

if TYPE_CHECKING:
    from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser

__all__ = [
    "BearerAuth",
    "Grant",
    "TokenFile",
    "TokenFileError",
    "TokenHolder",
    "create_token",
    "grant_of",
    "read_tokens",
]

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
        # Imported here: the SDK's auth package loads the whole SDK, which every CLI
        # command would otherwise pay for at start.
        from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
        from mcp.server.auth.provider import AccessToken

        scopes = ["read"] if self.grant.read_only else ["read", "write"]
        return AuthenticatedUser(
            AccessToken(token=self.token_id, client_id=self.token_id, scopes=scopes)
        )


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class TokenFileError(ValueError):
    """The token file cannot be trusted or read; the message names the file and why."""


HASH_LENGTH = 64
FIELDS: dict[str, tuple[type, ...]] = {
    "sha256": (str,),
    "app": (str,),
    "user": (str,),
    "project": (str, type(None)),
    "read_only": (bool,),
}
RULES = {
    "sha256": "64 hexadecimal digits",
    "app": "a non-empty string",
    "user": "a non-empty string",
    "project": "a non-empty string or null",
    "read_only": "true or false",
}


def _entry(index: int, entry: Any) -> tuple[str, Grant]:
    where = f"tokens[{index}]"
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: expected an object, found {type(entry).__name__}")
    for name, kinds in FIELDS.items():
        if name == "project" and name not in entry:
            continue  # optional: a token for every project
        if name not in entry:
            raise ValueError(f'{where}: "{name}" is missing')
        value = entry[name]
        valid = isinstance(value, kinds) and (not isinstance(value, str) or value.strip())
        if name == "sha256" and valid:
            valid = len(value) == HASH_LENGTH and all(c in "0123456789abcdef" for c in value)
        if not valid:
            raise ValueError(f'{where}: "{name}" must be {RULES[name]}')
    grant = Grant(entry["app"], entry["user"], entry.get("project"), entry["read_only"])
    return entry["sha256"], grant


def read_tokens(path: Path) -> list[tuple[str, Grant]]:
    """The (hash, grant) entries of the token file at `path`.

    Raises:
        TokenFileError: the file is writable by other users (any of them could add
            a grant), unreadable, not JSON, or an entry lacks a field or has a bad one.
    """
    try:
        mode = path.stat().st_mode
        if mode & 0o022:
            raise TokenFileError(
                f"{path}: is writable by other users (mode {mode & 0o777:04o}): anyone who "
                f"can write it can grant themselves access; run chmod 600 {path}"
            )
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise TokenFileError(f"{path}: cannot be read: {reason}") from None
    try:
        data = json.loads(text or "{}")
    except json.JSONDecodeError as exc:
        raise TokenFileError(
            f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    if not isinstance(data, dict):
        raise TokenFileError(f'{path}: expected an object with a "tokens" list')
    listed = data.get("tokens", [])
    if not isinstance(listed, list):
        raise TokenFileError(f'{path}: "tokens": expected a list')
    try:
        return [_entry(index, entry) for index, entry in enumerate(listed)]
    except ValueError as exc:
        raise TokenFileError(f"{path}: {exc}") from None


class TokenFile:
    """The token file, read at start and again whenever it changes.

    Raises:
        TokenFileError: at construction, if the file cannot be used (`read_tokens`).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._stamp: tuple[int, ...] | None = self._stamp_now()
        self._entries = read_tokens(self.path)

    def _stamp_now(self) -> tuple[int, ...] | None:
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            return None
        return (stat.st_mtime_ns, stat.st_size, stat.st_mode, stat.st_ino)

    def _load(self) -> None:
        stamp = self._stamp_now()
        if stamp == self._stamp:
            return
        self._stamp = stamp
        if stamp is None:  # deleted: every token is revoked
            self._entries = []
            return
        try:
            self._entries = read_tokens(self.path)
        except TokenFileError as exc:
            # A half-saved or mistyped edit must not lock every client out, nor
            # answer each request with a traceback (issue 15): the tokens read
            # before stay, and the problem is said once, for this version.
            print(f"chronomem: {exc}; still serving the tokens read before", file=sys.stderr)

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

    Raises:
        TokenFileError: the existing file cannot be used (`read_tokens`).
    """
    target = Path(path)
    data: dict[str, Any] = {"tokens": []}
    if target.exists():
        read_tokens(target)  # the same checks as the server's, before it is rewritten
        data = json.loads(target.read_text() or "{}")
        data.setdefault("tokens", [])
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
