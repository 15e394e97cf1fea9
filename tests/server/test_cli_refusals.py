"""The command line refuses what would quietly go wrong, in one line a person can act
on: a `--db` typo that would start a new, empty memory, a purge of nothing, a file or
folder the system refuses."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
from pathlib import Path

import pytest

from ..polling import eventually
from .command_line import Cli, Executable
from .conftest import CHRONOMEM


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path / "memory.db")


READS = [
    ["stats"],
    ["inspect"],
    ["search", "tea"],
    ["open", "Alice"],
    ["read-graph"],
    ["profile"],
    ["history", "Alice"],
    ["recall", "tea"],
    ["export"],
    ["forget", "o_1"],
    ["optimize"],
    ["reindex"],
    ["purge", "--user", "alice", "--yes"],
]


@pytest.mark.parametrize("command", READS, ids=lambda c: c[0])
def test_a_command_that_reads_refuses_a_missing_database_and_creates_none(
    cli: Cli, tmp_path: Path, command: list[str]
) -> None:
    typo = tmp_path / "memroy.db"
    refused = cli(*command, "--db", str(typo), code=2)
    assert refused.stderr.count("\n") == 1, refused.stderr
    assert str(typo) in refused.stderr and "no database" in refused.stderr
    assert refused.stdout == ""
    assert not typo.exists()


def test_a_write_still_creates_a_new_database(cli: Cli) -> None:
    cli("remember", "Alice", "likes tea")
    assert cli.db.exists()
    assert "likes tea" in cli("search", "tea").stdout


@pytest.mark.parametrize(
    "what",
    [
        ["--user", "bob"],
        ["--user", "alice", "--project", "garden"],
        ["--user", "alice", "--session", "s9"],
    ],
    ids=["user", "project", "session"],
)
def test_a_purge_of_what_holds_nothing_says_so(cli: Cli, what: list[str]) -> None:
    cli("remember", "Alice", "likes tea", "--user", "alice")
    cli("record-turns", "s1", "--turn", "user", "hi", "--user", "alice")
    refused = cli("purge", *what, "--yes", code=2)
    assert "nothing to erase" in refused.stderr and refused.stderr.count("\n") == 1
    assert "likes tea" in cli("search", "tea", "--user", "alice").stdout


def test_a_folder_that_cannot_be_made_is_one_line(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "notes").write_text("a file, not a folder")
    db = tmp_path / "notes" / "memory.db"
    refused = cli("remember", "Alice", "likes tea", "--db", str(db), code=1)
    assert refused.stderr.count("\n") == 1, refused.stderr
    assert str(db) in refused.stderr and "is not a folder" in refused.stderr


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes read-only files")
def test_a_read_only_database_is_one_line(cli: Cli) -> None:
    cli("remember", "Alice", "likes tea")
    cli.db.chmod(0o444)
    refused = cli("remember", "Alice", "runs 5k", code=1)
    assert refused.stderr.count("\n") == 1, refused.stderr
    assert str(cli.db) in refused.stderr and "read-only" in refused.stderr


# ---------------------------------------------------------------- Ctrl-C during import


def _entities_in(db: Path) -> int:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
            return conn.execute("SELECT count(*) FROM entity").fetchone()[0]
    except sqlite3.Error:  # not created or not migrated yet
        return 0


@pytest.mark.anyio
async def test_ctrl_c_stops_an_import_between_batches_and_running_it_again_resumes(
    tmp_path: Path,
) -> None:
    cli = Executable(tmp_path / "memory.db")  # a real process, to be sent a real SIGINT
    lines = 45_000  # three batches
    source = tmp_path / "memory.jsonl"
    with source.open("w") as out:
        for i in range(lines):
            entity = {
                "type": "entity",
                "name": f"E{i}",
                "entityType": "thing",
                "observations": [f"fact number {i}"],
            }
            out.write(json.dumps(entity) + "\n")
    importing = subprocess.Popen(
        [CHRONOMEM, "import", str(source)],
        env=cli.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    async def first_batch_committed() -> int:
        assert importing.poll() is None
        return _entities_in(cli.db)

    try:
        await eventually(first_batch_committed, within=120)
        importing.send_signal(signal.SIGINT)
        _, stderr = importing.communicate(timeout=120)
    finally:
        if importing.poll() is None:
            importing.kill()
    assert importing.returncode == 130, stderr
    assert "Traceback" not in stderr and stderr.count("\n") == 1, stderr
    kept = _entities_in(cli.db)
    assert 0 < kept < lines  # stopped early, and kept what earlier batches wrote
    assert f"lines before {kept + 1} were imported ({kept:,} entities" in stderr
    assert "again" in stderr
    resumed = cli.json("import", str(source))
    assert resumed["entities"] == lines - kept
    assert _entities_in(cli.db) == lines
    assert cli.json("stats")["observations_current"] == lines
