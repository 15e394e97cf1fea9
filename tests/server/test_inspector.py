"""Interoperability with the official MCP Inspector CLI (npm, version 0.15.0).

The test setup installs it into the ignored folder .cache/inspector of the
repository, never globally. Skipped, with the reason, where node or npm is missing.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from .conftest import CHRONOMEM

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / ".cache" / "inspector"
VERSION = "0.15.0"
BINARY = FOLDER / "node_modules" / ".bin" / "mcp-inspector"


@pytest.fixture(scope="module")
def inspector() -> Path:
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are needed for the MCP Inspector interoperability test")
    installed = FOLDER / "node_modules" / "@modelcontextprotocol" / "inspector" / "package.json"
    if not installed.exists() or json.loads(installed.read_text())["version"] != VERSION:
        FOLDER.mkdir(parents=True, exist_ok=True)
        # npm refuses a package name starting with a dot, so the folder gets its own.
        (FOLDER / "package.json").write_text('{"name": "chronomem-inspector", "private": true}\n')
        subprocess.run(
            [
                "npm",
                "install",
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
                f"@modelcontextprotocol/inspector@{VERSION}",
            ],
            cwd=FOLDER,
            check=True,
            timeout=600,
            capture_output=True,
        )
    return BINARY


def run_inspector(binary: Path, db: Path, *method: str) -> dict:
    done = subprocess.run(
        [str(binary), "--cli", CHRONOMEM, "serve", "--db", str(db), *method],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def test_inspector_lists_calls_and_reads(inspector: Path, tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    tools = run_inspector(inspector, db, "--method", "tools/list")["tools"]
    assert {tool["name"] for tool in tools} == {
        "remember",
        "relate",
        "forget",
        "search_nodes",
        "open_nodes",
        "read_graph",
        "profile_card",
        "history",
        "record_turns",
        "recall",
    }
    called = run_inspector(
        inspector,
        db,
        "--method",
        "tools/call",
        "--tool-name",
        "remember",
        "--tool-arg",
        "entity=Alice",
        "--tool-arg",
        'facts=["likes green tea"]',
    )
    assert called.get("isError") is not True
    assert called["structuredContent"]["added"][0]["text"] == "likes green tea"
    read = run_inspector(inspector, db, "--method", "resources/read", "--uri", "memory://profile")
    (content,) = read["contents"]
    assert content["mimeType"] == "text/plain"
    assert content["text"] == "[Known about the user]\n• Alice (general): likes green tea"
