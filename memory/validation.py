"""Argument types that carry DESIGN §7's limits, and the conversion of pydantic's
errors into `InvalidInputError` messages that name the field and the rule.

The same annotated types give the MCP input schemas their limits, so a limit is
written once.
"""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BaseModel, BeforeValidator, Field, ValidationError
from pydantic.json_schema import WithJsonSchema

from .errors import InvalidInputError
from .timestamps import parse_time

__all__ = [
    "Cursor",
    "FactText",
    "Id",
    "Label",
    "Name",
    "Query",
    "Reason",
    "ScopePart",
    "SessionId",
    "Timestamp",
    "TurnText",
    "parse_arguments",
    "plain_text",
]

NAME_MAX = 200
LABEL_MAX = 64
FACT_MAX = 2_000
FACTS_PER_CALL = 50
QUERY_MAX = 1_000
IDS_PER_CALL = 100
SESSION_ID_MAX = 200
REASON_MAX = 500
TURN_TEXT_MAX = 20_000
TURNS_PER_CALL = 200
ID_MAX = 200


def _clean_text(value: str) -> str:
    """Reject what SQLite or a prompt cannot carry faithfully."""
    if "\x00" in value:
        raise ValueError("contains a NUL character, which memory text cannot hold")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("contains an unpaired surrogate; send valid UTF-8 text") from None
    return value


def _not_blank(value: str) -> str:
    value = _clean_text(value).strip()
    if not value:
        raise ValueError("must not be blank")
    return value


def _optional_text(value: str) -> str | None:
    value = _clean_text(value).strip()
    return value or None


def plain_text(value: object, max_length: int) -> bool:
    """Whether the text types below (`Name`, `Label`, `FactText`: at most `max_length`
    characters, not blank, no NUL, valid UTF-8) accept `value`. The bulk import checks
    a million values this way in a fraction of pydantic's time and asks pydantic only
    about the rest, for its message; so this may say no where pydantic says yes (that
    costs time only), never the reverse."""
    return (
        isinstance(value, str)
        and 0 < len(value) <= max_length
        and not value.isspace()  # what strips to nothing
        and "\x00" not in value
        and (value.isascii() or _encodes(value))
    )


def _encodes(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _timestamp(value: Any, info: Any) -> int:
    return parse_time(value, info.field_name if info else "time")


_TIMESTAMP_SCHEMA = {
    "type": "string",
    "description": "RFC 3339 or YYYY-MM-DD.",
}

Name = Annotated[str, Field(min_length=1, max_length=NAME_MAX), AfterValidator(_not_blank)]
Label = Annotated[str, Field(min_length=1, max_length=LABEL_MAX), AfterValidator(_not_blank)]
FactText = Annotated[str, Field(min_length=1, max_length=FACT_MAX), AfterValidator(_not_blank)]
TurnText = Annotated[str, Field(min_length=1, max_length=TURN_TEXT_MAX), AfterValidator(_not_blank)]
SessionId = Annotated[
    str, Field(min_length=1, max_length=SESSION_ID_MAX), AfterValidator(_not_blank)
]
Id = Annotated[str, Field(min_length=1, max_length=ID_MAX), AfterValidator(_not_blank)]
Reason = Annotated[str, Field(max_length=REASON_MAX), AfterValidator(_optional_text)]
ScopePart = Annotated[str, Field(min_length=1, max_length=NAME_MAX), AfterValidator(_not_blank)]
Query = Annotated[str, Field(min_length=1, max_length=QUERY_MAX), AfterValidator(_not_blank)]
Cursor = Annotated[str, Field(min_length=1, max_length=100), AfterValidator(_not_blank)]
Timestamp = Annotated[int, BeforeValidator(_timestamp), WithJsonSchema(_TIMESTAMP_SCHEMA)]
"""An input time, held as microseconds since the epoch once validated."""

M = TypeVar("M", bound=BaseModel)
MESSAGES_SHOWN = 5


def parse_arguments(model: type[M], **arguments: Any) -> M:
    """Validate `arguments` against `model`.

    Raises:
        InvalidInputError: naming the first field at fault and every other problem found.
    """
    try:
        return model.model_validate(arguments)
    except ValidationError as exc:
        messages = list(dict.fromkeys(_describe(error) for error in exc.errors()))
        if len(messages) > MESSAGES_SHOWN:  # 200 bad turns need not echo 200 messages
            hidden = len(messages) - MESSAGES_SHOWN
            messages = [*messages[:MESSAGES_SHOWN], f"and {hidden} more problem(s)"]
        raise InvalidInputError("; ".join(messages)) from None


def _location(loc: tuple[int | str, ...]) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part.startswith(("function-", "json-or-python", "lax-or-strict")):
            continue
        else:
            text += f".{part}" if text else part
    return text or "arguments"


def _shown(value: Any) -> str:
    """A value as an error message may quote it: short, whatever was sent."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**20:
        digits = len(str(abs(value))) if value.bit_length() < 10_000 else None
        size = f"{digits}-digit" if digits else "huge"
        return f"a {size} {'negative ' if value < 0 else ''}number"
    text = repr(value)
    return text if len(text) <= 60 else text[:60] + "…"


def _describe(error: Any) -> str:
    where = _location(error["loc"])
    kind = error["type"]
    ctx = error.get("ctx") or {}
    value = error.get("input")
    in_list = bool(error["loc"]) and isinstance(error["loc"][-1], int)
    if kind == "string_too_long":
        return f"{where}: {len(value):,} characters; at most {ctx['max_length']:,} are allowed"
    if kind == "string_too_short":
        return f"{where}: must not be empty"
    if kind == "too_long":
        return f"{where}: {len(value):,} items; at most {ctx['max_length']:,} are allowed"
    if kind == "too_short":
        return f"{where}: needs at least {ctx['min_length']} item(s)"
    if kind == "greater_than_equal":
        return f"{where}: {_shown(value)} is too small; the minimum is {ctx['ge']:,}"
    if kind == "less_than_equal":
        return f"{where}: {_shown(value)} is too large; the maximum is {ctx['le']:,}"
    if kind == "string_unicode":
        return f"{where}: contains an unpaired surrogate; send valid UTF-8 text"
    if kind == "missing":
        return f"{where}: is required"
    if kind == "extra_forbidden":
        return f"{where}: is not an argument of this operation"
    if kind == "value_error":
        message = str(ctx.get("error", error["msg"]))
        field = str(error["loc"][-1]) if error["loc"] else ""
        return f"{where}: {message.removeprefix(f'{field}: ')}"
    if value is None and kind.endswith("_type") and not in_list:
        return f"{where}: is required"
    if kind.endswith("_type") or kind.endswith("_parsing"):
        expected = kind.split("_")[0]
        expected = {
            "int": "an integer",
            "string": "a string",
            "list": "a list",
            "model": "an object",
            "dict": "an object",
        }.get(expected, expected)
        if kind == "bool_type" or kind == "bool_parsing":
            expected = "true or false"
        got = "null" if value is None else type(value).__name__
        return f"{where}: must be {expected}, got {got}"
    return f"{where}: {error['msg']}"
