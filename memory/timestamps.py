"""Timestamps: parsed from RFC 3339 or bare dates, kept as integer microseconds (UTC).

Integers keep comparisons exact in SQL and tell apart writes a microsecond apart,
which a realtime agent produces (DESIGN §2, "Timestamps").
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import lru_cache

__all__ = ["Clock", "format_time", "parse_text", "parse_time", "system_clock", "to_micros"]

Clock = Callable[[], int]
"""Returns the current time in microseconds since the Unix epoch (UTC)."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_NAIVE_EPOCH = datetime(1970, 1, 1)
_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})"
    r"(?:[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(?P<frac>\d{1,9}))?"
    r"(?P<offset>[Zz]|[+-]\d{2}:\d{2})?)?",
    re.ASCII,  # digits 0-9 only, not every Unicode digit
)
# The form chronomem exports: UTC with a `Z`, whole seconds or six fractional digits.
_EXPORTED = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{6})?Z", re.ASCII)
_MICROSECOND = timedelta(microseconds=1)


def system_clock() -> int:
    return time.time_ns() // 1_000


def to_micros(moment: datetime) -> int:
    """Microseconds since the epoch of an aware datetime (naive ones are taken as UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def parse_time(value: object, field: str = "time") -> int:
    """Parse an input timestamp into microseconds since the epoch.

    Accepts RFC 3339 with any offset (no offset means UTC), a bare `YYYY-MM-DD`
    (midnight UTC), or a `datetime`. Digits past the microsecond are dropped, since
    microseconds are the stored precision.

    Raises:
        ValueError: the value is not one of those forms; the message names `field`.
    """
    if isinstance(value, datetime):
        return to_micros(value)
    if not isinstance(value, str):
        raise ValueError(
            f"{field}: expected an RFC 3339 timestamp or YYYY-MM-DD string, "
            f"got {type(value).__name__}"
        )
    try:
        return parse_text(value)
    except ValueError as exc:
        raise ValueError(f"{field}: {_preview(value)} {exc}") from None


@lru_cache(maxsize=4_096)  # an import repeats times: valid_from is often recorded_at
def parse_text(value: str) -> int:
    """`parse_time` of a string, for callers that say which field failed themselves.

    Raises:
        ValueError: the text is not a timestamp; the message does not name a field.
    """
    if _EXPORTED.fullmatch(value):  # an import's every line: read in C
        try:
            return (datetime.fromisoformat(value) - _EPOCH) // _MICROSECOND
        except ValueError:
            pass  # not a calendar time: the general path below says why
    match = _RFC3339.fullmatch(value.strip())
    if match is None:
        raise ValueError(
            "is not a timestamp; use RFC 3339 such as 2026-06-01T09:30:00Z or "
            "2026-06-01T11:30:00+02:00, or a date YYYY-MM-DD"
        )
    year, month, day, hour, minute, second, frac, offset = match.groups()
    try:  # the constructor checks the calendar (no 31 April, no second 60)
        time_of_day = (int(hour or 0), int(minute or 0), int(second or 0))
        micros = int((frac or "").ljust(6, "0")[:6])
        moment = datetime(int(year), int(month), int(day), *time_of_day, micros, UTC)
    except ValueError:
        raise ValueError("is not a valid calendar time") from None
    if offset and offset not in ("Z", "z"):
        sign = 1 if offset[0] == "+" else -1
        hours, minutes = int(offset[1:3]), int(offset[4:6])
        if hours > 23 or minutes > 59:
            raise ValueError("has an invalid UTC offset")
        try:
            moment -= sign * timedelta(hours=hours, minutes=minutes)
        except OverflowError:
            raise ValueError("falls outside years 0001-9999 in UTC") from None
    return to_micros(moment)


# Rows written together share their timestamps, so a result repeats them; the cache
# stays small, since every full garbage collection walks it (docs/benchmarks.md).
@lru_cache(maxsize=4_096)
def format_time(micros: int) -> str:
    """RFC 3339 in UTC with a `Z`; six fractional digits only when they are not zero."""
    # isoformat() (C code) already omits the fraction when it is zero.
    return (_NAIVE_EPOCH + timedelta(microseconds=micros)).isoformat() + "Z"


def _preview(value: str, limit: int = 60) -> str:
    return repr(value if len(value) <= limit else value[:limit] + "…")
