"""A program run in a fresh interpreter that records every network socket, connection
or name lookup and every file opened for writing, from its first import to its last
line: what the offline tests (DESIGN §8) read back to say nothing reached the network
and nothing was written where it should not be."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

# Put before each test's own body, which ends by printing, as its last line, a JSON
# object holding `sockets` and `written` alongside what it found.
RECORDING = r"""
import json, os, socket, sys
sockets, written = [], []
NETWORK = (socket.AF_INET, socket.AF_INET6)
def watch(event, args):
    # asyncio's own loop makes a pair of Unix sockets: only the network counts.
    if event == "socket.__new__" and args[1] in NETWORK or event in (
        "socket.connect", "socket.getaddrinfo", "socket.gethostbyname", "urllib.Request"
    ):
        sockets.append([event, repr(args)[:200]])
    elif event == "open" and len(args) > 1 and isinstance(args[0], str):
        mode, flags = args[1], args[2] if len(args) > 2 else 0
        if (mode and any(c in mode for c in "wax+")) or (flags & (os.O_WRONLY | os.O_RDWR)):
            written.append(args[0])
sys.addaudithook(watch)
"""

# Settings that would point a model hub or a cache somewhere other than `home`.
DROPPED = ("HF_", "HUGGINGFACE", "XDG_")


def run_recorded(
    body: str,
    *argv: str,
    home: Path,
    temporary: Path,
    env: Mapping[str, str] | None = None,
    timeout: float = 120,
) -> dict[str, Any]:
    """The JSON report `body` prints last, run after RECORDING as `python -c` with
    `argv`, from the repository's root. HOME is `home` (a cache would appear under it)
    and the temporary folder is `temporary`, made here so that `tempfile` uses it:
    py3langid unpacks its model through an anonymous temporary file. `env` is added
    after the hub and cache settings are dropped."""
    temporary.mkdir(parents=True, exist_ok=True)
    environment = {k: v for k, v in os.environ.items() if not k.startswith(DROPPED)}
    folder = str(temporary)
    environment.update(HOME=str(home), TMPDIR=folder, TMP=folder, TEMP=folder)
    environment.update(env or {})
    done = subprocess.run(
        [sys.executable, "-c", RECORDING + body, *argv],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return report


def written_outside(report: Mapping[str, Any], *folders: Path) -> list[str]:
    """The paths of `report["written"]` in none of `folders`, links and `..` resolved."""
    allowed = [folder.resolve() for folder in folders]
    return [
        path
        for path in report["written"]
        if not any(Path(path).resolve().is_relative_to(folder) for folder in allowed)
    ]
