from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory.timestamps import format_time, parse_time


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("2026-06-01", "2026-06-01T00:00:00Z"),
        ("2026-06-01T09:30:00Z", "2026-06-01T09:30:00Z"),
        ("2026-06-01t09:30:00z", "2026-06-01T09:30:00Z"),
        ("2026-06-01T09:30:00", "2026-06-01T09:30:00Z"),
        ("2026-06-01 09:30:00", "2026-06-01T09:30:00Z"),
        ("2026-06-01T11:30:00+02:00", "2026-06-01T09:30:00Z"),
        ("2026-06-01T04:00:00-05:30", "2026-06-01T09:30:00Z"),
        ("2026-06-01T09:30:00.25Z", "2026-06-01T09:30:00.250000Z"),
        ("2026-06-01T09:30:00.000001Z", "2026-06-01T09:30:00.000001Z"),
        ("2026-06-01T09:30:00.000000Z", "2026-06-01T09:30:00Z"),
        ("2026-06-01T09:30:00.123456789Z", "2026-06-01T09:30:00.123456Z"),
        ("0001-01-01T00:00:00Z", "0001-01-01T00:00:00Z"),
        ("9999-12-31T23:59:59.999999Z", "9999-12-31T23:59:59.999999Z"),
        ("1969-07-20T20:17:40Z", "1969-07-20T20:17:40Z"),
    ],
)
def test_timestamps_round_trip_to_utc_with_microseconds(given: str, expected: str) -> None:
    assert format_time(parse_time(given)) == expected


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "yesterday",
        "now",
        "2026-13-01",
        "2026-02-30",
        "2026-06-01T24:00:00Z",
        "2026-06-01T09:30Z",
        "2026-06-01T09:30:00+25:00",
        "2026-06-01T09:30:00 +02:00",
        "06/01/2026",
        "1780306200",
        "0001-01-01T00:00:00+01:00",
        "9999-12-31T23:00:00-02:00",
    ],
)
def test_bad_timestamps_are_rejected_naming_the_field(bad: str) -> None:
    with pytest.raises(ValueError, match="^valid_from: "):
        parse_time(bad, "valid_from")


@pytest.mark.parametrize("bad", [None, 1780306200, 1.5, ["2026-06-01"]])
def test_non_string_timestamps_are_rejected(bad: object) -> None:
    with pytest.raises(ValueError, match="as_of: expected"):
        parse_time(bad, "as_of")


def test_datetimes_are_accepted_and_naive_ones_are_utc() -> None:
    aware = datetime(2026, 6, 1, 11, 30, tzinfo=timezone(timedelta(hours=2)))
    assert format_time(parse_time(aware)) == "2026-06-01T09:30:00Z"
    assert parse_time(datetime(2026, 6, 1, 9, 30)) == parse_time(
        datetime(2026, 6, 1, 9, 30, tzinfo=UTC)
    )


@pytest.mark.parametrize("text", ["２０２６-０１-０１", "٢٠٢٦-٠١-٠١"])
def test_only_ascii_digits_make_a_timestamp(text: str) -> None:
    with pytest.raises(ValueError, match="valid_from: .* is not a timestamp"):
        parse_time(text, "valid_from")


@given(
    date=st.tuples(st.integers(0, 9999), st.integers(0, 13), st.integers(0, 32)),
    time=st.tuples(st.integers(0, 25), st.integers(0, 61), st.integers(0, 61)),
    fraction=st.one_of(st.just(""), st.integers(0, 999_999).map(lambda f: f".{f:06d}")),
)
def test_exported_times_read_the_same_on_the_fast_path(
    date: tuple[int, int, int], time: tuple[int, int, int], fraction: str
) -> None:
    """`2026-06-01T09:30:00.250000Z`, the form every exported line carries, is read by
    a faster path; a leading space sends the same text down the general one."""
    text = "{:04d}-{:02d}-{:02d}T{:02d}:{:02d}:{:02d}".format(*date, *time) + fraction + "Z"
    try:
        general = parse_time(" " + text)
    except ValueError:
        with pytest.raises(ValueError, match="is not a valid calendar time"):
            parse_time(text)
    else:
        assert parse_time(text) == general
