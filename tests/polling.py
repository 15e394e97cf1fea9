"""Waiting on another process: a condition polled until it holds, within a deadline."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

T = TypeVar("T")


async def eventually(check: Callable[[], Awaitable[T]], *, within: float, every: float = 0.05) -> T:
    """The first truthy result of `check()`, polled every `every` seconds while it
    holds nothing. The deadline `within` guards against a hang (TimeoutError); it is
    never a measure of speed."""
    with anyio.fail_after(within):
        while not (found := await check()):
            await anyio.sleep(every)
    return found
