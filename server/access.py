"""Who a request is: the scope and permission each MCP request works with."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from mcp.server.context import CallNext, ServerMiddleware, ServerRequestContext

from memory import GraphMemory, MemoryScope

from .auth import Grant, grant_of

__all__ = ["AppState", "NotAuthorized", "RequestScope", "scope_for", "scope_of"]


@dataclass(frozen=True)
class AppState:
    memory: GraphMemory
    grant: Grant  # the scope of stdio and unauthenticated HTTP
    auth_required: bool


class NotAuthorized(Exception):
    """A write with a read-only token, or a request without the token HTTP requires."""


_current: ContextVar[ServerRequestContext[Any, Any] | None] = ContextVar(
    "chronomem_request", default=None
)


class RequestScope(ServerMiddleware[Any]):
    """Makes each inbound request's context visible to the handler it reaches, static
    resources included (the SDK hands those no context)."""

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
        token = _current.set(ctx)
        try:
            return await call_next(ctx)
        finally:
            _current.reset(token)


def current_request() -> ServerRequestContext[Any, Any]:
    ctx = _current.get()
    if ctx is None:  # only reachable by calling a handler outside a request
        raise RuntimeError("no MCP request is being handled")
    return ctx


def grant_for(ctx: ServerRequestContext[Any, Any]) -> Grant:
    """The token's grant over HTTP with auth, else the scope the server started with."""
    state: AppState = ctx.lifespan_context
    grant = grant_of(ctx.request)
    if grant is not None:
        return grant
    if state.auth_required:  # the middleware answers 401 first; this is a second lock
        raise NotAuthorized("this server requires a bearer token")
    return state.grant


def scope_of(*, write: bool = False) -> MemoryScope:
    """The memory the current request may touch; raises `NotAuthorized` for a write
    with a read-only token."""
    return scope_for(current_request(), write=write)


def scope_for(ctx: ServerRequestContext[Any, Any], *, write: bool = False) -> MemoryScope:
    """The memory the request `ctx` may touch; raises `NotAuthorized` for a write
    with a read-only token."""
    grant = grant_for(ctx)
    if write and grant.read_only:
        raise NotAuthorized(
            "this token is read-only: it can search and read memory but not change it"
        )
    state: AppState = ctx.lifespan_context
    return state.memory.scope(app=grant.app, user=grant.user, project=grant.project)
