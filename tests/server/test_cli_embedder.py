"""`--embedder` and `chronomem reindex` (DESIGN §5, §8): the model is chosen on the
command line, only `serve` and `reindex` embed rows, a search ranks by meaning too,
and `stats` shows what waits.

The suite runs with CHRONOMEM_EMBEDDER=none (tests/conftest.py): a test that wants
the bundled model says `--embedder default`.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path

import anyio
import numpy as np
import numpy.typing as npt
import pytest

from memory import GraphMemory
from server.cli.serve import ranking

from .command_line import Cli
from .conftest import CHRONOMEM

MODEL = "all-MiniLM-L6-v2-int8"


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path / "memory.db")


def _write_a_little(cli: Cli) -> int:
    """Rows of every kind, written without the model; how many wait for a vector."""
    cli("remember", "Alice", "likes tea", "has three sisters", "--type", "person")
    cli("relate", "Alice", "works at", "Acme")
    cli("record-turns", "s1", "--turn", "user", "my beagle ate my shoe")
    return 2 + 2 + 1 + 1  # the entities Alice and Acme, two facts, a relation, a turn


class StandIn:
    """Another model, by name: vectors of two models are never compared."""

    name = "stand-in"
    dim = 8

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        rows = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            rows[row, len(text) % self.dim] = 1.0
        return rows


@pytest.mark.parametrize(
    "command",
    [["remember", "Alice", "likes tea"], ["stats"], ["reindex"], ["search", "tea"], ["serve"]],
    ids=lambda c: c[0],
)
def test_an_unknown_embedder_is_refused_naming_the_flag_and_its_choices(
    cli: Cli, command: list[str]
) -> None:
    refused = cli(*command, "--embedder", "bert", code=2)
    assert "--embedder" in refused.stderr and "'default', 'none'" in refused.stderr
    cli.env["CHRONOMEM_EMBEDDER"] = "bert"
    from_environment = cli(*command, code=2)
    assert "--embedder" in from_environment.stderr
    assert not cli.db.exists()  # refused before anything was opened


def test_the_embedder_is_chosen_in_any_case(cli: Cli) -> None:
    cli("remember", "Alice", "likes tea", "--embedder", "NONE")
    assert cli.json("reindex", "--embedder", "Default") == {"indexed": 2, "pending": 0}


def test_reindex_embeds_what_a_file_written_without_the_model_waits_for(cli: Cli) -> None:
    waiting = _write_a_little(cli)
    before = cli.json("stats")
    assert (before["vectors"], before["vectors_pending"]) == (0, waiting)

    done = cli("reindex", "--embedder", "default")
    assert done.stdout.strip() == f"{waiting:,} rows have their vector ({MODEL}), 0 wait"

    after = cli.json("stats")
    assert (after["vectors"], after["vectors_pending"]) == (waiting, 0)
    shown = " ".join(cli("stats").stdout.split())
    assert f"vectors {waiting} vectors pending 0" in shown
    # nothing waits now: a second reindex has nothing to do
    assert cli.json("reindex", "--embedder", "default") == {"indexed": waiting, "pending": 0}


def test_reindex_all_embeds_every_row_again_after_a_change_of_model(cli: Cli) -> None:
    waiting = _write_a_little(cli)

    async def embed_with_another_model() -> int:
        async with GraphMemory.open(cli.db, embedder=StandIn()) as memory:
            return (await memory.reindex()).indexed

    assert anyio.run(embed_with_another_model) == waiting

    refused = cli("reindex", "--embedder", "default", code=1)
    assert refused.stderr.count("\n") == 1, refused.stderr
    assert "'stand-in'" in refused.stderr and "reindex --all" in refused.stderr

    again = cli.json("reindex", "--all", "--embedder", "default")
    assert again == {"indexed": waiting, "pending": 0}
    # the vectors are the bundled model's now: a plain reindex is content
    assert cli.json("reindex", "--embedder", "default") == again


def test_reindex_without_an_embedder_says_so_in_one_line(cli: Cli) -> None:
    _write_a_little(cli)
    refused = cli("reindex", "--embedder", "none", code=1)
    assert refused.stderr.count("\n") == 1, refused.stderr
    assert "no embedder in use" in refused.stderr and "--embedder default" in refused.stderr
    assert refused.stdout == ""


def test_a_one_shot_command_leaves_its_rows_to_serve_and_reindex(cli: Cli) -> None:
    """With the model chosen, a one-shot write neither embeds nor claims its rows: a
    claim would keep `reindex` or a server waiting out its lease."""
    cli("remember", "Alice", "likes tea", "--embedder", "default")
    cli("search", "tea", "--embedder", "default")
    with closing(sqlite3.connect(cli.db)) as conn:
        (claimed,) = conn.execute(
            "SELECT count(*) FROM vector_pending WHERE claimed_by != 0"
        ).fetchone()
    assert claimed == 0
    stats = cli.json("stats", "--embedder", "default")
    assert (stats["vectors"], stats["vectors_pending"]) == (0, 2)


def test_a_search_ranks_by_meaning_once_the_rows_have_vectors(cli: Cli) -> None:
    _write_a_little(cli)
    cli("remember", "Bob", "drives a red pickup truck")
    question = "how many siblings does she have?"
    assert cli.json("search", question, "--embedder", "default")["hits"] == []  # no vectors
    cli("reindex", "--embedder", "default")
    hits = cli.json("search", question, "--embedder", "default")["hits"]
    assert hits[0]["entity"]["name"] == "Alice"
    assert hits[0]["observations"][0]["text"] == "has three sisters"
    assert cli.json("search", question, "--embedder", "none")["hits"] == []  # words only
    turns = cli.json("recall", "a dog", "--embedder", "default")["turns"]
    assert turns[0]["text"] == "my beagle ate my shoe"


def _serve_until_end_of_input(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CHRONOMEM, "serve", "--db", str(db), *args],
        input="",
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "CHRONOMEM_DB": ""},
    )


@pytest.mark.parametrize(
    ("choice", "said"),
    [
        ("default", f"chronomem: ranking by words and meaning with {MODEL}"),
        ("none", "chronomem: ranking by words only (--embedder none)"),
    ],
)
def test_serve_says_how_it_ranks_next_to_the_file_it_uses(
    tmp_path: Path, choice: str, said: str
) -> None:
    served = _serve_until_end_of_input(tmp_path / "memory.db", "--embedder", choice)
    assert served.returncode == 0, served.stderr
    lines = served.stderr.splitlines()
    assert lines[0].startswith("chronomem: serving "), served.stderr
    assert lines[1] == said


def test_serve_without_the_semantic_extra_says_how_to_install_it() -> None:
    said = ranking("default", None)
    assert said.startswith("ranking by words only: the semantic extra is not installed")
    assert "pip install 'chronomem[semantic]'" in said
