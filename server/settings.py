"""Server settings, read once from flags and the environment by the CLI and passed down."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path

from memory import GraphMemory, IndexerSettings
from memory.embedding import Embedder
from memory.store import DEFAULT_MAX_FACTS, DEFAULT_MAX_TURNS
from memory.word_index import WordProgress

__all__ = [
    "DEFAULT_HEADER_TIMEOUT",
    "DEFAULT_KEEP_ALIVE_TIMEOUT",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_MAX_FACTS",
    "DEFAULT_MAX_HEADER_BYTES",
    "DEFAULT_MAX_REQUEST_BYTES",
    "DEFAULT_MAX_SESSIONS",
    "DEFAULT_MAX_TURNS",
    "DEFAULT_SESSION_IDLE_TIMEOUT",
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
# A server says on stderr when the file's vectors are another model's (DESIGN §8).
SERVING = IndexerSettings(tell_other_model=True)


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
# Open MCP sessions per token (without auth: in all), and the seconds a session may
# sit idle before it is closed.
DEFAULT_MAX_SESSIONS = 64
DEFAULT_SESSION_IDLE_TIMEOUT = 300.0
# Before any token is checked: connections open at once, the bytes of a request line
# and headers (far more than an MCP request needs), the seconds a client has to send
# them, and how long a connection may idle between requests (uvicorn's default).
DEFAULT_MAX_CONNECTIONS = 512
DEFAULT_MAX_HEADER_BYTES = 64 * 1024
DEFAULT_HEADER_TIMEOUT = 10.0
DEFAULT_KEEP_ALIVE_TIMEOUT = 5


@dataclass(frozen=True)
class Settings:
    db: str
    app: str = "default"
    user: str = "default"
    project: str | None = None
    auth_tokens: str | None = None  # path of the token file; None: no auth
    max_facts: int = DEFAULT_MAX_FACTS  # per (app, user): see GraphMemory.open
    max_turns: int = DEFAULT_MAX_TURNS
    # "default", "none" or an Embedder (GraphMemory.open); None: $CHRONOMEM_EMBEDDER
    embedder: str | Embedder | None = None
    # The file's default language (GraphMemory.open); None: $CHRONOMEM_LANGUAGE, else
    # the file's own. `on_progress` hears how far a re-index of its words is.
    language: str | None = None
    on_progress: Callable[[WordProgress], None] | None = None
    # HTTP transports only:
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    max_sessions: int = DEFAULT_MAX_SESSIONS
    session_idle_timeout: float = DEFAULT_SESSION_IDLE_TIMEOUT
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES
    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    keep_alive_timeout: int = DEFAULT_KEEP_ALIVE_TIMEOUT

    def open_memory(self) -> AbstractAsyncContextManager[GraphMemory]:
        return GraphMemory.open(
            self.db,
            max_facts=self.max_facts,
            max_turns=self.max_turns,
            embedder=self.embedder,
            language=self.language,
            on_progress=self.on_progress,
            indexing=SERVING,
        )
