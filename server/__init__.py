"""chronomem's MCP surface: tools, resources, prompts, transports, auth and the CLI.

No SQL here: every operation is a call of the engine in `memory/`. The MCP SDK is
imported only by what serves, so the CLI's other commands start fast.
"""

from typing import Any

__all__ = ["AppState", "Settings", "build_server"]


def __getattr__(name: str) -> Any:
    if name == "build_server":
        from .app import build_server

        return build_server
    if name == "AppState":
        from .access import AppState

        return AppState
    if name == "Settings":
        from .settings import Settings

        return Settings
    raise AttributeError(name)
