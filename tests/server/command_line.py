"""The `chronomem` command line as a test drives it: in this process with click's
runner (most tests), or as the installed executable (what needs a real process)."""

from __future__ import annotations

import json
import os
import subprocess
import traceback
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from server.cli import main

from .conftest import CHRONOMEM

# Settings a developer's shell might hold, cleared so every test starts from the defaults.
CLEARED = (
    "CHRONOMEM_USER",
    "CHRONOMEM_PROJECT",
    "CHRONOMEM_MAX_FACTS",
    "CHRONOMEM_MAX_TURNS",
    "CHRONOMEM_LANGUAGE",
)


class Cli:
    """`chronomem ARGS` run in this process, on the database `db`, in the app "coach"."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self.env: dict[str, str | None] = {
            "CHRONOMEM_DB": str(db),
            "CHRONOMEM_APP": "coach",
            **dict.fromkeys(CLEARED),
        }

    def __call__(self, *args: str, code: int = 0, stdin: str = "") -> Result:
        done = CliRunner().invoke(main, list(args), input=stdin, env=self.env)
        if done.exception is not None and not isinstance(done.exception, SystemExit):
            raise AssertionError(
                "".join(traceback.format_exception(done.exception))  # a traceback: a bug
            )
        assert done.exit_code == code, done.stdout + done.stderr
        return done

    def json(self, *args: str) -> Any:
        return json.loads(self(*args, "--json").stdout)


class Executable:
    """`chronomem ARGS` as a separate process, through the installed executable."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self.env = {**os.environ, "CHRONOMEM_DB": str(db), "CHRONOMEM_APP": "coach"}
        for name in CLEARED:
            self.env.pop(name, None)

    def __call__(
        self, *args: str, code: int = 0, stdin: str = ""
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [CHRONOMEM, *args],
            capture_output=True,
            text=True,
            env=self.env,
            input=stdin,
            timeout=60,
        )
        assert done.returncode == code, done.stdout + done.stderr
        assert "Traceback" not in done.stderr
        return done

    def json(self, *args: str) -> Any:
        return json.loads(self(*args, "--json").stdout)
