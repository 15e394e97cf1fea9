"""The relay's pieces in process (`server.stdio_relay`): which lines are refused and
how the answer names the field, the requests owed an answer, counted from parsed
messages, and the client's lines read up to the end, an over-long one dropped."""

from __future__ import annotations

import asyncio
import json

import pytest

from server.stdio_relay import NOT_JSON, Owed, checked, client_lines, refusal

pytestmark = pytest.mark.anyio


def _answer(line: bytes) -> dict[str, object]:
    answer = refusal(line)
    assert answer
    return json.loads(answer)


def test_a_request_with_bad_utf8_is_refused_naming_the_argument() -> None:
    line = b'{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "remember", "arguments": {"facts": ["ok", "caf\xe9"]}}}\n'
    assert _answer(line) == {
        "jsonrpc": "2.0",
        "id": 5,
        "error": {
            "code": -32602,
            "message": "facts[1]: is not valid UTF-8 (byte 0xe9); send valid UTF-8 text",
        },
    }


def test_a_lone_surrogate_is_refused_and_a_pair_or_an_escaped_backslash_is_text() -> None:
    lone = b'{"jsonrpc": "2.0", "id": "a", "method": "m", "params": {"b": "\\udfff"}}\n'
    assert _answer(lone)["error"] == {
        "code": -32602,
        "message": "b: contains an unpaired surrogate; send valid UTF-8 text",
    }
    assert refusal(b'{"pair": "\\ud83d\\ude00", "escaped": "\\\\ud800"}\n') is None


def test_bad_text_outside_params_or_not_json_is_a_parse_error_and_a_notification_gets_none() -> (
    None
):
    assert _answer(b'{"jsonrpc": "2.0", "id": 1, "method": "\xff"}\n')["error"] == {
        "code": -32700,
        "message": "the request: is not valid UTF-8 (byte 0xff); send valid UTF-8 text",
    }
    assert _answer(b"\xff not json\n")["id"] is None
    assert refusal(b'{"jsonrpc": "2.0", "method": "n", "params": {"b": "\\udfff"}}\n') == b""


def test_checked_passes_good_lines_on_parsed_and_refuses_bad_ones() -> None:
    assert checked(b'{"id": 1, "method": "ping"}\n') == (
        {"id": 1, "method": "ping"},
        None,
    )
    assert checked(b"not json\n") == (None, None)  # the SDK reports it
    message, answer = checked(b'{"id": 1, "method": "m", "params": {"x": "\\ud800"}}\n')
    assert message is None and answer


async def test_requests_are_owed_until_answered_by_id_and_a_cancel_takes_one_back() -> None:
    owed = Owed()
    assert owed.settled.is_set()
    owed.client_sent({"jsonrpc": "2.0", "id": 1, "method": "tools/call"})
    owed.client_sent({"jsonrpc": "2.0", "id": "1", "method": "ping"})
    owed.client_sent({"jsonrpc": "2.0", "id": 9, "method": "tools/call"})
    owed.client_sent({"jsonrpc": "2.0", "method": "notifications/initialized"})
    owed.client_sent({"jsonrpc": "2.0", "id": 4, "result": {}})  # answers the server
    owed.client_sent({"jsonrpc": "2.0", "id": True, "method": "m"})  # no valid id
    cancel = {"method": "notifications/cancelled", "params": {"requestId": 9}}
    owed.client_sent({"jsonrpc": "2.0", **cancel})
    owed.server_sent({"jsonrpc": "2.0", "id": 7, "method": "ping"})  # the server asks
    owed.server_sent({"jsonrpc": "2.0", "method": "notifications/message", "params": {}})
    owed.server_sent({"jsonrpc": "2.0", "id": 1, "result": {}})
    assert not owed.settled.is_set()  # "1" is no answer to 1, nor 1 to "1"
    owed.server_sent({"jsonrpc": "2.0", "id": 1, "result": {}})  # a second: ignored
    assert not owed.settled.is_set()
    owed.server_sent({"jsonrpc": "2.0", "id": "1", "error": {"code": 1, "message": "m"}})
    assert owed.settled.is_set()


async def test_a_request_id_sent_twice_is_owed_twice() -> None:
    owed = Owed()
    for _ in range(2):
        owed.client_sent({"jsonrpc": "2.0", "id": 3, "method": "ping"})
    owed.server_sent({"jsonrpc": "2.0", "id": 3, "result": {}})
    assert not owed.settled.is_set()
    owed.server_sent({"jsonrpc": "2.0", "id": 3, "result": {}})
    assert owed.settled.is_set()


async def _lines(data: bytes, limit: int) -> list[bytes]:
    reader = asyncio.StreamReader(limit=limit)
    reader.feed_data(data)
    reader.feed_eof()
    return [line async for line in client_lines(reader)]


async def test_lines_end_at_newline_and_the_last_gets_one() -> None:
    data = b'{"a": 1}\r\n{"b": 2}\n{"c": 3}'
    assert await _lines(data, 2**16) == [b'{"a": 1}\r\n', b'{"b": 2}\n', b'{"c": 3}\n']


async def test_a_line_over_the_limit_stands_in_as_not_json_and_reading_goes_on() -> None:
    lines = await _lines(b"x" * 100 + b"\n" + b'{"next": 1}\n' + b"y" * 100, limit=50)
    assert lines == [NOT_JSON, b'{"next": 1}\n', NOT_JSON]
    with pytest.raises(json.JSONDecodeError):
        json.loads(NOT_JSON)
