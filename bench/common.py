"""Shared helpers for the benchmarks: machine description and percentiles."""

from __future__ import annotations

import os
import platform
import sqlite3
import statistics
from collections.abc import Sequence


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
