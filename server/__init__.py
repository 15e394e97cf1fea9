"""chronomem's MCP surface: tools, resources, prompts, transports, auth and the CLI.

No SQL here: every operation is a call of the engine in `memory/`.
"""

from .access import AppState
from .app import build_server
from .settings import Settings

__all__ = ["AppState", "Settings", "build_server"]
