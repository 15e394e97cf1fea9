"""The benchmarks run (at a tiny size); they never decide pass or fail on numbers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

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
