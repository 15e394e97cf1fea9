"""Shared helpers for the benchmarks: machine description and percentiles."""

from __future__ import annotations

import argparse
import os
import platform
import sqlite3
import statistics
from collections.abc import Sequence
from pathlib import Path


def machine() -> str:
    return (
        f"{os.cpu_count()} cores, Python {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version}, {platform.system()} {platform.machine()}"
    )


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) by linear interpolation; 0 for no values."""
    if not values:
        return 0.0
    if len(values) == 1:
        return float(values[0])
    return statistics.quantiles(values, n=100, method="inclusive")[max(0, min(98, int(q) - 1))]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f}"


def size_arguments(description: str, sizes: str, runs: int) -> argparse.Namespace:
    """`--sizes` (entity counts, parsed to a list), `--runs` and `--json`, shared by
    the benchmarks that measure at several sizes. Sizes below 3 or runs below 1 are
    refused."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--sizes", default=sizes, help="entity counts, comma-separated")
    parser.add_argument("--runs", type=int, default=runs, help="timed calls per operation")
    parser.add_argument("--json", type=Path, help="also write the results here as JSON")
    args = parser.parse_args()
    try:
        args.sizes = [int(size) for size in args.sizes.split(",") if size.strip()]
    except ValueError:
        parser.error(f"--sizes: {args.sizes!r} is not a comma-separated list of numbers")
    if not args.sizes or min(args.sizes) < 3 or args.runs < 1:
        parser.error("sizes must be at least 3 entities, runs at least 1")
    return args
