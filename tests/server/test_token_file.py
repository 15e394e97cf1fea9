"""The token file: refused at start when unsafe or malformed, and a bad live edit
keeps the last good file serving. One plain line names the file and the problem."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import httpx2
import pytest

from .conftest import CHRONOMEM, PING, bearer, free_port, initialize, make_token, serving

pytestmark = pytest.mark.anyio
HASH = "0" * 64
GOOD = {"sha256": HASH, "app": "coach", "user": "alice", "project": None, "read_only": False}


def without(key: str) -> dict[str, object]:
    return {k: v for k, v in GOOD.items() if k != key}


@pytest.mark.parametrize(
    ("content", "mode", "problem"),
    [
        ({"tokens": [GOOD]}, 0o666, "is writable by other users (mode 0666)"),
        ({"tokens": [GOOD]}, 0o620, "is writable by other users (mode 0620)"),
        ('{"tokens": [', 0o600, "not valid JSON (line 1, column 13: Expecting value)"),
        ([GOOD], 0o600, 'expected an object with a "tokens" list'),
        ({"tokens": {"a": 1}}, 0o600, '"tokens": expected a list'),
        ({"tokens": [GOOD, without("user")]}, 0o600, 'tokens[1]: "user" is missing'),
        ({"tokens": [{**GOOD, "read_only": "no"}]}, 0o600, 'tokens[0]: "read_only" must be'),
        ({"tokens": [{**GOOD, "sha256": "abc"}]}, 0o600, 'tokens[0]: "sha256" must be'),
        ({"tokens": [{**GOOD, "app": ""}]}, 0o600, 'tokens[0]: "app" must be'),
        ({"tokens": [7]}, 0o600, "tokens[0]: expected an object"),
    ],
)
def test_an_unsafe_or_malformed_token_file_is_refused_at_start(
    tmp_path: Path, content: object, mode: int, problem: str
) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(content if isinstance(content, str) else json.dumps(content))
    os.chmod(tokens, mode)
    done = subprocess.run(
        [
            CHRONOMEM,
            "serve",
            "--transport",
            "http",
            "--port",
            str(free_port()),
            "--auth-tokens",
            str(tokens),
            "--db",
            str(tmp_path / "memory.db"),
        ],
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert done.returncode == 2
    assert done.stderr.startswith(f"chronomem: {tokens}: ")
    assert problem in done.stderr
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr
    assert not (tmp_path / "memory.db").exists()


async def test_a_bad_live_edit_keeps_the_last_good_tokens_and_is_logged_once(
    tmp_path: Path,
) -> None:
    tokens = tmp_path / "tokens.json"
    alice = make_token(tokens, "--app", "coach", "--user", "alice")
    good = tokens.read_text()
    async with (
        serving(tmp_path, "--transport", "http", "--auth-tokens", str(tokens)) as served,
        httpx2.AsyncClient(timeout=30) as http,
    ):
        url = served.url("/mcp")
        session = await initialize(http, url, alice)
        tokens.write_text(good.replace('"user"', '"usr"'))  # an entry missing a field
        for _ in range(3):
            answer = await http.post(
                url, json=PING, headers=bearer(alice, **{"mcp-session-id": session})
            )
            assert answer.status_code == 200 and answer.json()["result"] == {}
        assert (await http.post(url, json=PING, headers=bearer("cm_wrong"))).status_code == 401
        logged = [line for line in served.stderr().splitlines() if str(tokens) in line]
        assert logged == [
            f'chronomem: {tokens}: tokens[0]: "user" is missing; '
            "still serving the tokens read before"
        ]
        tokens.write_text(good)
        bob = make_token(tokens, "--app", "coach", "--user", "bob")  # a good edit applies
        await initialize(http, url, bob)
    assert "Traceback" not in served.stderr()
