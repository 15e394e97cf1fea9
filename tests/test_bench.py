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

from bench.load import IDLE_REUSE, Connection

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "bench-data" / "longmemeval_s_dev.json.gz"
LOCOMO = ROOT.parent / "shared" / "bench-data" / "locomo_dev.json.gz"


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


@pytest.mark.skipif(not LOCOMO.exists(), reason="LoCoMo data not beside the repository")
def test_locomo_runs(tmp_path: Path) -> None:
    out = _run(
        "bench.locomo",
        "--conversations",
        "1",
        "--questions",
        "3",
        "--json",
        str(tmp_path / "r.json"),
    )
    assert "LoCoMo dev: 1 conversation;" in out and "adversarial (category 5)" in out
    assert "(a) turns: 3 questions scored" in out and "(b) facts: " in out
    assert "| question type | n | recall_any@5 | recall_any@10 | recall_any@25 |" in out
    assert (
        "| question type | n | fact_any@5 | fact_any@10 | fact_recall@5 | fact_recall@10 |" in out
    )
    assert out.count("| overall |") == 4  # chronomem and the baseline, in both parts
    assert out.count("plain Okapi BM25") == 2
    assert "search_nodes result JSON: p50" in out and "ingest: " in out
    result = json.loads((tmp_path / "r.json").read_text())
    assert len(result["turns"]) == 3 and set(result["facts"][0]["baseline"]) == {
        "fact_any@5",
        "fact_any@10",
        "fact_recall@5",
        "fact_recall@10",
    }


@pytest.mark.skipif(not (DATA.exists() and LOCOMO.exists()), reason="data not beside it")
def test_embedders_runs() -> None:
    out = _run("bench.embedders", "--rows", "8")
    assert "| all-MiniLM-L6-v2-int8 (bundled) |" in out


def test_search_latency_runs() -> None:
    out = _run("bench.search_latency", "--entities", "20", "--turns", "60", "--queries", "5")
    assert "| search_nodes |" in out and "| recall |" in out
    args = ("--entities", "20", "--turns", "200", "--queries", "5", "--in-project", "0.25")
    out = _run("bench.search_latency", *args)
    assert "25% of them in a project" in out and "| recall (in the project) |" in out


def test_tenants_runs(tmp_path: Path) -> None:
    out = _run(
        "bench.tenants",
        "--users",
        "4",
        "--facts",
        "40",
        "--turns",
        "40",
        "--queries",
        "6",
        "--samples",
        "2",
        "--dir",
        str(tmp_path),
        "--json",
        str(tmp_path / "r.json"),
    )
    assert "Tenants: 4 users x (40 facts on 4 entities + 40 turns)" in out
    assert "Sample users (owner order): user00000, user00003" in out
    assert "Machine: " in out and "Phases: generate " in out and "import shared " in out
    header = (
        "| operation | words | calls | shared p50 ms | shared p99 ms | alone p50 ms "
        "| alone p99 ms | shared/alone p50 |"
    )
    assert header in out
    for operation in ("search_nodes", "recall"):
        for words in ("common", "middling", "rare"):
            assert f"| {operation} | {words} | " in out
    assert "| user00003 | " in out
    result = json.loads((tmp_path / "r.json").read_text())
    assert len(result["results"]) == 6 and result["samples"] == ["user00000", "user00003"]
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # the databases are gone


@pytest.mark.skipif(
    not (DATA.exists() and LOCOMO.exists()), reason="data not beside the repository"
)
def test_semantic_runs(tmp_path: Path) -> None:
    out = _run("bench.semantic", "recall", "--rows", "300", "--queries", "5")
    assert "300 rows, 5 queries" in out and "| 10 | " in out and "| 200 | " in out
    out = _run("bench.semantic", "indexer", "--facts", "20", "--turns", "10")
    assert (
        "| facts | 22 facts and their entities' names | " in out and "| turns | 10 turns | " in out
    )
    out = _run(
        "bench.semantic",
        "search",
        "--facts",
        "40",
        "--queries",
        "6",
        "--synthetic",
        "--dir",
        str(tmp_path),
    )
    assert "40 facts (ten to an entity) of 40 distinct real texts" in out
    for row in ("words", "hybrid", "hybrid, query known"):
        assert f"| {row} | " in out
    assert "`chronomem serve` on this file with the model" in out
    out = _run("bench.semantic", "tenants", "--users", "3", "--facts", "20", "--queries", "5")
    assert "3 users x 20 facts" in out and "| shared | 6 | " in out and "| alone | 6 | " in out
    assert list(tmp_path.iterdir()) == []  # the files are gone


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
        "api",
        "stdio",
        "sdk_client",
    }


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
        "bench.load",
        "--clients",
        "2",
        "--seconds",
        "2",
        "--entities",
        "20",
        "--client",
        client,
        "--json",
        str(tmp_path / "r.json"),
    )
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
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
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
async def test_load_connection_does_not_reuse_one_the_server_closed_while_idle() -> None:
    """Found in review: uvicorn closes a keep-alive connection idle for 5 s, and a
    request written to it was lost (counted as an error)."""
    accepted: list[int] = []
    now = [0.0]  # the connection's clock, moved by hand

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
            connection = Connection(f"http://127.0.0.1:{port}/mcp", clock=lambda: now[0])
            assert (await connection.request("POST", {}, b"")).status == 202
            now[0] += IDLE_REUSE + 1  # idle past the limit: the server may have closed it
            assert (await connection.request("POST", {}, b"")).status == 202
            await connection.aclose()
            group.cancel_scope.cancel()
    assert len(accepted) == 2


def test_similar_runs() -> None:
    out = _run("bench.similar", "--embedder", "none")
    assert re.match(r"\d+ pairs \(\d+ restatements\); threshold chosen on \d+, held out", out)
    assert "| words: overlap (remember) | 1.000 |" in out
    assert "RESTATES_AT = 1.0: the same as chosen here" in out


def test_languages_runs(tmp_path: Path) -> None:
    out = _run(
        "bench.languages",
        "--languages",
        "fr,ko",
        "--embedder",
        "none",
        "--json",
        str(tmp_path / "r.json"),
    )
    assert "Languages: 2 (fr, ko); 48 facts" in out and "Machine: " in out
    for kind in ("form", "same", "paraphrase", "cross"):
        assert f"{kind}: hit@3" in out
    assert out.count("| language | n | chronomem hit@3 | baseline hit@3 |") == 4
    rows = re.findall(
        r"^\| (French \(fr\)|Korean \(ko\)) \| (\d+) \| ([\d.]+) \| ([\d.]+) \|$", out, re.M
    )
    assert len(rows) == 8 and all(int(n) >= 4 for _, n, _, _ in rows)
    assert "| language | form | same | paraphrase | cross |" in out
    assert re.search(r"^\| French \(fr\) \| [\d.]+ \| [\d.]+ \| [\d.]+ \| [\d.]+ \|$", out, re.M)
    result = json.loads((tmp_path / "r.json").read_text())
    assert {row["language"] for row in result["rows"]} == {"fr", "ko"}
    assert {row["kind"] for row in result["rows"]} == {"form", "same", "paraphrase", "cross"}


def test_languages_refuses_an_unknown_language() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.languages", "--languages", "fr,xx", "--embedder", "none"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "--languages: no data for xx" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.skipif(
    not LOCOMO.exists() or not DATA.exists(), reason="dev data not beside the repository"
)
def test_langid_runs(tmp_path: Path) -> None:
    out = _run(
        "bench.langid",
        "--identifier",
        "chronomem",
        "--english",
        "20",
        "--json",
        str(tmp_path / "r.json"),
    )
    assert re.search(r"questions mean top1/top3 +\d+% /100%", out), out
    assert "chronomem 0.4.0: lacks none" in out
    row = json.loads((tmp_path / "r.json").read_text())["identifiers"][0]
    assert row["identifier"] == "chronomem" and row["same_probabilities"] is True
    assert set(row["english"]) == {"locomo", "longmemeval"}
