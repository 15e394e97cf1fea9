"""One line of an import, checked and turned into steps: chronomem's own export
format (an entity, observation, relation or turn with all its ids and times) or the
reference MCP memory server's `memory.jsonl` (an entity with observations, or a
relation), whose steps are engine calls.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pydantic_core import from_json

from ..models import ForgetArgs, RecordTurnsArgs, RelateArgs, RememberArgs
from ..names import relation_type
from ..timestamps import parse_text, parse_time
from ..validation import (
    FACT_MAX,
    FACTS_PER_CALL,
    ID_MAX,
    LABEL_MAX,
    NAME_MAX,
    REASON_MAX,
    SESSION_ID_MAX,
    TURN_TEXT_MAX,
    parse_arguments,
    plain_text,
)
from . import entity_records
from .steps import (
    ClosingStep,
    EntityStep,
    ObservationStep,
    ProjectTypeStep,
    RawStep,
    ReferenceEntityStep,
    RelateStep,
    RelationStep,
    RememberStep,
    Step,
    TurnStep,
)

__all__ = ["KINDS", "decode", "plain_step", "record_steps"]

KINDS = (
    "entity",
    "entity_type",
    "observation",
    "relation",
    "closing",
    "turn",
    *entity_records.KINDS,
)


def decode(line: str) -> Any:
    """The JSON value of one line. pydantic-core's parser reads a line ~4x faster than
    `json`; where it refuses one (bad JSON, a lone surrogate escape, deep nesting), `json`
    decides, so the lines accepted, their values and every message stay `json`'s."""
    try:
        return from_json(line, cache_strings="keys")
    except (ValueError, TypeError):  # TypeError: a str that is not valid UTF-8
        return json.loads(line)


# ---- the plain case, checked fast
#
# Almost every line of an export is plain: strings where strings belong, each within
# its limit (`plain_text`), times that parse. `plain_step` checks such a line with
# the rules of `_own_record` below, inlined, and returns its step; for any other line
# it returns None and `_own_record` (or `_reference_record`) checks it, so every
# message comes from one place. A test holds the two to the same steps.

MARKERS = ("entityType", "observations", "relationType", "from")  # reference memory.jsonl


def plain_step(record: Any, line: int) -> RawStep | None:
    """The step of plain line `line` of chronomem's own format, or None: check it in full.
    A plain tuple in the layout of its step type (`steps`): the spool takes plain tuples,
    and these are built for almost every line."""
    if type(record) is not dict or type(kind := record.get("type")) is not str:
        return None
    check = PLAIN_CHECKS.get(kind)
    if check is None or (  # MARKERS, spelled out: 3x faster than any() over them
        "entityType" in record
        or "observations" in record
        or "relationType" in record
        or "from" in record
    ):
        return None
    project = record.get("project")
    if project is not None and (type(project) is not str or not project.strip()):
        return None
    return check(record, project, line)


def _plain_time(value: Any) -> int | None:
    """A time as `parse_time` reads it, or None where it would not."""
    if type(value) is not str:
        return None
    try:
        return parse_text(value)
    except ValueError:
        return None


def _plain_history(record: dict[str, Any]) -> tuple[int, int | None, int, int | None] | None:
    """What `_history_times` returns, or None where it would refuse."""
    valid_from = _plain_time(record.get("valid_from"))
    recorded_at = _plain_time(record.get("recorded_at"))
    if valid_from is None or recorded_at is None:
        return None
    valid_to, invalidated_at = record.get("valid_to"), record.get("invalidated_at")
    if valid_to is None and invalidated_at is None:
        return valid_from, None, recorded_at, None
    valid_to, invalidated_at = _plain_time(valid_to), _plain_time(invalidated_at)
    if valid_to is None or invalidated_at is None or valid_to < valid_from:
        return None
    return valid_from, valid_to, recorded_at, invalidated_at


def _plain_observation(record: dict[str, Any], project: str | None, line: int) -> RawStep | None:
    identifier, entity, text = record.get("id"), record.get("entity"), record.get("text")
    attribute, reason = record.get("attribute"), record.get("reason")
    times = _plain_history(record)
    if (
        times is None
        or not plain_text(identifier, ID_MAX)
        or not plain_text(entity, NAME_MAX)
        or not plain_text(text, FACT_MAX)
        or (attribute is not None and not plain_text(attribute, LABEL_MAX))
        or (reason is not None and not plain_text(reason, REASON_MAX))
    ):
        return None
    return (line, "observation", identifier, entity, text, attribute, reason, *times, project)


def _plain_relation(record: dict[str, Any], project: str | None, line: int) -> RawStep | None:
    identifier, source, target = record.get("id"), record.get("source"), record.get("target")
    relation: Any = record.get("relation")  # a str once plain_text says so
    reason = record.get("reason")
    times = _plain_history(record)
    if (
        times is None
        or not plain_text(identifier, ID_MAX)
        or not plain_text(source, NAME_MAX)
        or not plain_text(relation, LABEL_MAX)
        or not plain_text(target, NAME_MAX)
        or (reason is not None and not plain_text(reason, REASON_MAX))
    ):
        return None
    relation = relation_type(relation)
    return (line, "relation", identifier, source, relation, target, reason, *times, project)


def _plain_entity(record: dict[str, Any], project: str | None, line: int) -> RawStep | None:
    name, entity_type = record.get("name"), record.get("entity_type")
    recorded_at = _plain_time(record.get("recorded_at"))
    if (
        recorded_at is None
        or not plain_text(name, NAME_MAX)
        or not plain_text(entity_type, LABEL_MAX)
    ):
        return None
    return (line, "entity", name, entity_type, recorded_at, project)


def _plain_turn(record: dict[str, Any], project: str | None, line: int) -> RawStep | None:
    identifier, session_id = record.get("id"), record.get("session_id")
    role, text = record.get("role"), record.get("text")
    at, recorded_at = _plain_time(record.get("at")), _plain_time(record.get("recorded_at"))
    if (
        at is None
        or recorded_at is None
        or not plain_text(identifier, ID_MAX)
        or not plain_text(session_id, SESSION_ID_MAX)
        or not plain_text(role, LABEL_MAX)
        or not plain_text(text, TURN_TEXT_MAX)
    ):
        return None
    return (line, "turn", identifier, session_id, role, text, at, recorded_at, project)


PLAIN_CHECKS: dict[Any, Callable[[dict[str, Any], str | None, int], RawStep | None]] = {
    "entity": _plain_entity,
    "observation": _plain_observation,
    "relation": _plain_relation,
    "turn": _plain_turn,
}


def record_steps(record: Any, line: int) -> list[Step]:
    """The steps of one decoded line, `line`, checked."""
    if not isinstance(record, dict) or record.get("type") not in KINDS:
        raise ValueError(
            'not a record: expected an object whose "type" is one of ' + ", ".join(KINDS)
        )
    if record["type"] == "entity" and not {"entityType", "entity_type"} & set(record):
        raise ValueError(
            "an entity needs 'entityType' (reference memory.jsonl) "
            "or 'entity_type' (chronomem export)"
        )
    if any(marker in record for marker in MARKERS):
        return _reference_record(record, line)
    return [_own_record(record, line)]


def _field(record: dict[str, Any], name: str, kinds: type | tuple[type, ...] = str) -> Any:
    value = record.get(name)
    if not isinstance(value, kinds):
        expected = getattr(kinds, "__name__", "value")
        raise ValueError(f"field {name!r} is missing or not a {expected}")
    return value


def _optional_time(record: dict[str, Any], name: str) -> int | None:
    value = record.get(name)
    return None if value is None else parse_time(value, name)


def _own_record(record: dict[str, Any], line: int) -> Step:
    """One line of chronomem's own export format, checked; its step writes it as is."""
    kind = record["type"]
    project = record.get("project")
    if project is not None and (not isinstance(project, str) or not project.strip()):
        raise ValueError("field 'project' must be null or a non-blank string")
    if kind == "entity":
        return EntityStep(line, "entity", *_entity_values(record), project)
    if kind == "turn":
        return TurnStep(line, "turn", *_turn_values(record), project)
    if kind == "closing":
        return ClosingStep(line, "closing", _identifier(record), *_closing_values(record, project))
    if kind in entity_records.KINDS:
        return entity_records.record_step(record, project, line)
    if kind == "entity_type":
        if project is None:
            raise ValueError("field 'project' is missing: an entity_type is a project's own")
        name, entity_type = _field(record, "name"), _field(record, "entity_type")
        parse_arguments(RememberArgs, entity=name, facts=["x"], entity_type=entity_type)
        return ProjectTypeStep(line, "entity_type", name, entity_type, project)
    times = _history_times(record)
    identifier = _identifier(record)
    if kind == "observation":
        values = _observation_values(record)
        return ObservationStep(line, "observation", identifier, *values, *times, project)
    return RelationStep(line, "relation", identifier, *_relation_values(record), *times, project)


def _entity_values(record: dict[str, Any]) -> tuple[str, str, int]:
    name, entity_type = _field(record, "name"), _field(record, "entity_type")
    recorded_at = parse_time(_field(record, "recorded_at"), "recorded_at")
    if not (plain_text(name, NAME_MAX) and plain_text(entity_type, LABEL_MAX)):
        parse_arguments(RememberArgs, entity=name, facts=["x"], entity_type=entity_type)
    return name, entity_type, recorded_at


def _identifier(record: dict[str, Any]) -> str:
    identifier = _field(record, "id")
    if not plain_text(identifier, ID_MAX):
        raise ValueError(
            f"field 'id' must be a non-blank string of at most {ID_MAX} characters, without NUL"
        )
    return identifier


def _reason(record: dict[str, Any]) -> Any:
    """The reason a fact or relation was closed, checked as `forget` checks it."""
    reason = record.get("reason")
    if reason is not None and not plain_text(reason, REASON_MAX):
        parse_arguments(ForgetArgs, ids=["x"], reason=reason)
    return reason


def _turn_values(record: dict[str, Any]) -> tuple[str, str, str, str, int, int]:
    identifier = _identifier(record)
    session_id, role, text = (_field(record, n) for n in ("session_id", "role", "text"))
    plain = plain_text(session_id, SESSION_ID_MAX) and plain_text(role, LABEL_MAX)
    if not (plain and plain_text(text, TURN_TEXT_MAX)):
        turn = {"role": role, "text": text}
        parse_arguments(RecordTurnsArgs, session_id=session_id, turns=[turn])
    at = parse_time(_field(record, "at"), "at")
    recorded_at = parse_time(_field(record, "recorded_at"), "recorded_at")
    return identifier, session_id, role, text, at, recorded_at


def _history_times(record: dict[str, Any]) -> tuple[int, int | None, int, int | None]:
    """valid_from, valid_to, recorded_at, invalidated_at of a fact or relation, checked."""
    valid_from = parse_time(_field(record, "valid_from"), "valid_from")
    recorded_at = parse_time(_field(record, "recorded_at"), "recorded_at")
    valid_to = _optional_time(record, "valid_to")
    invalidated_at = _optional_time(record, "invalidated_at")
    if (valid_to is None) != (invalidated_at is None):
        raise ValueError("valid_to and invalidated_at must both be set or both be null")
    if valid_to is not None and valid_to < valid_from:
        raise ValueError("valid_to is before valid_from")
    return valid_from, valid_to, recorded_at, invalidated_at


def _closing_values(record: dict[str, Any], project: str | None) -> tuple[str, int, int, Any]:
    """A project's own closing of a global fact or relation: project, valid_to,
    invalidated_at, reason."""
    if project is None:
        raise ValueError("field 'project' is missing: a closing is a project's own")
    valid_to = parse_time(_field(record, "valid_to"), "valid_to")
    invalidated_at = parse_time(_field(record, "invalidated_at"), "invalidated_at")
    return project, valid_to, invalidated_at, _reason(record)


def _observation_values(record: dict[str, Any]) -> tuple[str, str, Any, Any]:
    entity, text = _field(record, "entity"), _field(record, "text")
    attribute = record.get("attribute")
    plain = plain_text(entity, NAME_MAX) and plain_text(text, FACT_MAX)
    if not (plain and (attribute is None or plain_text(attribute, LABEL_MAX))):
        parse_arguments(RememberArgs, entity=entity, facts=[text], attribute=attribute)
    return entity, text, attribute, _reason(record)


def _relation_values(record: dict[str, Any]) -> tuple[str, str, str, Any]:
    source, relation, target = (_field(record, n) for n in ("source", "relation", "target"))
    if not (
        plain_text(source, NAME_MAX)
        and plain_text(relation, LABEL_MAX)
        and plain_text(target, NAME_MAX)
    ):
        parse_arguments(RelateArgs, source=source, relation=relation, target=target)
    # Normalised here, so a type with no letters stops the import before any write.
    return source, relation_type(relation), target, _reason(record)


def _reference_record(record: dict[str, Any], line: int) -> list[Step]:
    """One line of the reference memory server's `memory.jsonl`, as engine calls: an
    entity in calls of at most FACTS_PER_CALL facts, or a relation."""
    if record["type"] == "entity":
        name, entity_type = _field(record, "name"), _field(record, "entityType")
        observations = _field(record, "observations", list)
        if not observations:  # an entity with no observations: create it alone
            parse_arguments(RememberArgs, entity=name, facts=["x"], entity_type=entity_type)
            return [ReferenceEntityStep(line, "reference_entity", name, entity_type)]
        steps: list[Step] = []
        for i in range(0, len(observations), FACTS_PER_CALL):
            facts = observations[i : i + FACTS_PER_CALL]
            parse_arguments(RememberArgs, entity=name, facts=facts, entity_type=entity_type)
            steps.append(RememberStep(line, "remember", name, facts, entity_type))
        return steps
    source, relation, target = (_field(record, n) for n in ("from", "relationType", "to"))
    args = parse_arguments(RelateArgs, source=source, relation=relation, target=target)
    relation_type(args.relation)  # what `relate` would refuse, refused before any write
    return [RelateStep(line, "relate", source, relation, target)]
