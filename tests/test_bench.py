"""The benchmarks run (at a tiny size); they never decide pass or fail on numbers."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from anyio.abc import SocketAttribute, SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream

from bench.load import Connection

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "bench-data" / "longmemeval_s_dev.json.gz"


def _run(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.skipif(not DATA.exists(), reason="LongMemEval data not beside the repository")
def test_longmemeval_runs(tmp_path: Path) -> None:
    out = _run("bench.longmemeval", "--questions", "2", "--json", str(tmp_path / "r.json"))
    assert "2 questions scored" in out
    assert "| overall | 2 |" in out
    assert "plain Okapi BM25" in out
    assert (tmp_path / "r.json").exists()


def test_search_latency_runs() -> None:
    out = _run("bench.search_latency", "--entities", "20", "--turns", "60", "--queries", "5")
    assert "| search_nodes |" in out and "| recall |" in out


def test_sizes_runs(tmp_path: Path) -> None:
    out = _run("bench.sizes", "--json", str(tmp_path / "r.json"))
    assert "| tools/list, json.dumps |" in out and "Machine: " in out
    for tool in ("search_nodes", "open_nodes", "read_graph", "profile_card", "forget"):
        assert f"| {tool} |" in out
    result = json.loads((tmp_path / "r.json").read_text())
    assert {row["tool"] for row in result["results"]} >= {"remember", "recall", "history"}


def test_scale_runs(tmp_path: Path) -> None:
    out = _run("bench.scale", "--sizes", "30", "--runs", "3", "--json", str(tmp_path / "r.json"))
    assert "### 30 entities: 300 facts" in out
    for operation in ("search_nodes", "remember (1 fact)", "recall", "record_turns (1 turn)"):
        assert f"| {operation} |" in out
    assert "Cold start:" in out and "Server peak RSS:" in out
    result = json.loads((tmp_path / "r.json").read_text())["sizes"][0]
    assert result["facts"] == 300 and set(result["operations"]["recall"]) == {
        "api", "stdio", "sdk_client"
    }  # fmt: skip


@pytest.mark.skipif(
    shutil.which("node") is None or shutil.which("npm") is None,
    reason="node and npm are needed to run the reference memory server",
)
def test_peer_runs(tmp_path: Path) -> None:
    out = _run("bench.peer", "--sizes", "20", "--runs", "3", "--json", str(tmp_path / "r.json"))
    assert "| entities | operation | reference ms (p50) | chronomem ms (p50) | ratio |" in out
    for operation in ("search_nodes", "open_nodes (3 names)", "write one fact"):
        assert f"| 20 | {operation} |" in out
    assert "@modelcontextprotocol/server-memory 2026.8.31" in out
    assert (
        "| entities | reference | chronomem | ceiling: search_nodes | ceiling: open_nodes |" in out
    )
    sdk = "| reference ms (p50) | chronomem ms (p50) | ratio | ratio less the client's check |"
    assert sdk in out
    result = json.loads((tmp_path / "r.json").read_text())
    least = result["sizes"][0]["no_match_search_p50_ms"]
    assert least["reference"] > 0 and least["chronomem"] > 0
    for operation in result["sizes"][0]["operations"].values():
        assert operation["ratio"] > 0  # raw JSON-RPC round trips
        assert operation["sdk_client"]["chronomem"]["client_check_p50_ms"] > 0


@pytest.mark.parametrize("client", ["raw", "sdk"])
def test_load_runs(tmp_path: Path, client: str) -> None:
    out = _run(
        "bench.load", "--clients", "2", "--seconds", "2", "--entities", "20", "--client", client,
        "--json", str(tmp_path / "r.json"),
    )  # fmt: skip
    header = "| operation | calls | calls/s | p50 ms | p99 ms | max ms | tool errors | exceptions |"
    assert header in out
    for operation in ("search_nodes", "profile_card", "remember (write)", "all"):
        assert f"| {operation} |" in out
    assert f"Client: {client}: " in out and "Machine: " in out
    assert re.search(r"errors: 0 \(tool errors 0, exceptions 0\)", out), out
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["results"]["overall"]["calls"] > 0
    assert report["results"]["overall"]["tool_errors"] == 0


def test_load_refuses_too_many_clients() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.load", "--clients", "65"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and "--clients: must be between 1 and 64" in done.stderr


# The load benchmark's hand-written HTTP/1.1 client against canned responses: each
# body framing a server may use, and keep-alive across requests.
CANNED = [
    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 7\r\n"
    b'mcp-session-id: abc\r\n\r\n{"a":1}',
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    b'3\r\n{"b\r\n4;x=1\r\n":2}\r\n0\r\nTrailer: t\r\n\r\n',
    b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nuntil closed",
]


@pytest.mark.anyio
async def test_load_connection_reads_every_framing_and_reuses_the_socket() -> None:
    accepted: list[int] = []
    requests: list[bytes] = []

    async def serve(stream: SocketStream) -> None:
        accepted.append(1)
        reader = BufferedByteReceiveStream(stream)
        async with stream:
            for canned in CANNED[len(requests) :]:
                head = await reader.receive_until(b"\r\n\r\n", 65536)
                length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                requests.append(head + b"\r\n\r\n" + await reader.receive_exactly(length))
                await stream.send(canned)
                if b"connection: close" in canned:
                    return

    async with await anyio.create_tcp_listener(local_host="127.0.0.1") as listener:
        port = listener.extra(SocketAttribute.local_port)
        async with anyio.create_task_group() as group:
            group.start_soon(listener.serve, serve)
            connection = Connection(f"http://127.0.0.1:{port}/mcp")
            first = await connection.request("POST", {"X-Test": "1"}, b'{"q":1}')
            second = await connection.request("POST", {}, b"{}")
            third = await connection.request("POST", {}, b"")
            fourth = await connection.request("DELETE", {})
            group.cancel_scope.cancel()

    assert (first.status, first.body, first.headers["mcp-session-id"]) == (200, b'{"a":1}', "abc")
    assert (second.status, second.body) == (200, b'{"b":2}')
    assert (third.status, third.body) == (202, b"")
    assert (fourth.status, fourth.body) == (200, b"until closed")
    assert len(accepted) == 1  # one keep-alive connection for all four
    assert requests[0].startswith(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:")
    assert b"X-Test: 1\r\n" in requests[0] and requests[0].endswith(b'\r\n\r\n{"q":1}')
    assert requests[3].startswith(b"DELETE /mcp HTTP/1.1\r\n")


@pytest.mark.anyio
async def test_load_connection_does_not_reuse_one_the_server_closed_while_idle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Found in review: uvicorn closes a keep-alive connection idle for 5 s, and a
    request written to it was lost (counted as an error)."""
    monkeypatch.setattr("bench.load.IDLE_REUSE", 0.05)
    accepted: list[int] = []

    async def serve(stream: SocketStream) -> None:  # one response, then an idle close
        accepted.append(1)
        reader = BufferedByteReceiveStream(stream)
        async with stream:
            await reader.receive_until(b"\r\n\r\n", 65536)
            await stream.send(CANNED[2])

    async with await anyio.create_tcp_listener(local_host="127.0.0.1") as listener:
        port = listener.extra(SocketAttribute.local_port)
        async with anyio.create_task_group() as group:
            group.start_soon(listener.serve, serve)
            connection = Connection(f"http://127.0.0.1:{port}/mcp")
            assert (await connection.request("POST", {}, b"")).status == 202
            await anyio.sleep(0.2)
            assert (await connection.request("POST", {}, b"")).status == 202
            await connection.aclose()
            group.cancel_scope.cancel()
    assert len(accepted) == 2
