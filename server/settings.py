"""Server settings, read once from flags and the environment by the CLI and passed down."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path

from memory import GraphMemory
from memory.store import DEFAULT_MAX_FACTS, DEFAULT_MAX_TURNS

__all__ = [
    "DEFAULT_MAX_FACTS",
    "DEFAULT_MAX_REQUEST_BYTES",
    "DEFAULT_MAX_TURNS",
    "Settings",
    "is_loopback",
    "resolve_db",
]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
TRANSPORTS = ("stdio", "sse", "http")
HTTP_PATH = "/mcp"
SSE_PATH = "/sse"
MESSAGES_PATH = "/messages/"


def default_db_path(environ: Mapping[str, str]) -> Path:
    """`$XDG_DATA_HOME/chronomem/memory.db`, else `~/.local/share/chronomem/memory.db`."""
    data_home = environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data_home) / "chronomem" / "memory.db"


def resolve_db(db: str | None, environ: Mapping[str, str] = os.environ) -> str:
    """`--db`, else `CHRONOMEM_DB`, else the default location."""
    return db or environ.get("CHRONOMEM_DB") or str(default_db_path(environ))


def is_loopback(host: str) -> bool:
    """Only "localhost" or a loopback IP literal: any other name might resolve anywhere."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


# The largest valid call (200 turns of 20,000 characters) is about 4 MB of JSON; a
# request body past this limit is refused before it is read whole.
DEFAULT_MAX_REQUEST_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class Settings:
    db: str
    app: str = "default"
    user: str = "default"
    project: str | None = None
    auth_tokens: str | None = None  # path of the token file; None: no auth
    max_facts: int = DEFAULT_MAX_FACTS  # per (app, user): see GraphMemory.open
    max_turns: int = DEFAULT_MAX_TURNS
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES  # HTTP transports only

    def open_memory(self) -> AbstractAsyncContextManager[GraphMemory]:
        return GraphMemory.open(self.db, max_facts=self.max_facts, max_turns=self.max_turns)
