"""Export and import: a scope's whole memory as JSON Lines, and the reference MCP
memory server's `memory.jsonl`.

The export is deterministic (only the scope's rows, in storage order, no export
time), so export -> import -> export gives the same lines. An import is checked
whole before anything is written, so a malformed line keeps nothing; it is then
written in batches, each batch one transaction, read back from a temporary file so
that memory holds one batch at a time.
"""

from __future__ import annotations

import json
import marshal
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import groupby
from operator import itemgetter
from typing import Any, BinaryIO, NamedTuple

from pydantic import BaseModel, ValidationError
from pydantic_core import from_json

from .check_helper import CheckHelper, HelperGone, cores
from .errors import InvalidInputError
from .models import ForgetArgs, RecordTurnsArgs, RelateArgs, RememberArgs
from .names import match_key, relation_type
from .queries import GLOBAL, ScopeKey, ensure_owner
from .store import Tx, json_list
from .timestamps import format_time, parse_text, parse_time
from .validation import (
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
from .writes import relate, remember

__all__ = ["ImportPlan", "ImportResult", "check_import", "export_records", "write_batch"]

KINDS = ("entity", "observation", "relation", "turn")
COUNTED = ("entities", "observations", "relations", "turns", "skipped")
INDEXED_KINDS = {  # kind of row -> its count in an ImportResult
    "entity": "entities",
    "observation": "observations",
    "relation": "relations",
    "turn": "turns",
}


class ImportResult(BaseModel):
    lines: int
    entities: int
    observations: int
    relations: int
    turns: int
    skipped: int  # rows whose id was already in this memory (a repeated import)


def _time(value: int | None) -> str | None:
    return None if value is None else format_time(value)


EXPORT_ENTITIES = """
    SELECT * FROM entity WHERE owner_id = :owner AND (:project IS NULL OR project = :project)
    ORDER BY id
"""
EXPORT_OBSERVATIONS = """
    SELECT o.*, e.name AS entity_name FROM observation o JOIN entity e ON e.id = o.entity_id
    WHERE o.owner_id = :owner AND (:project IS NULL OR o.project = :project) ORDER BY o.seq
"""
EXPORT_RELATIONS = """
    SELECT r.*, s.name AS source_name, t.name AS target_name
    FROM relation r JOIN entity s ON s.id = r.source_id JOIN entity t ON t.id = r.target_id
    WHERE r.owner_id = :owner AND (:project IS NULL OR r.project = :project) ORDER BY r.seq
"""
EXPORT_TURNS = """
    SELECT * FROM turn WHERE owner_id = :owner AND (:project IS NULL OR project = :project)
    ORDER BY seq
"""


def _history_fields(row: Any) -> dict[str, Any]:
    """What observations and relations share: project, both time axes, reason."""
    times = ("valid_from", "valid_to", "recorded_at", "invalidated_at")
    return {
        "project": row["project"] or None,
        **{name: _time(row[name]) for name in times},
        "reason": row["reason"],
    }


def export_records(tx: Tx, project: str | None) -> list[dict[str, Any]]:
    """Every row of the (app, user) of `tx`, or of one project of it, with all ids and times."""
    if tx.owner is None:
        return []
    params = {"owner": tx.owner, "project": project}
    records: list[dict[str, Any]] = []
    for row in tx.all(EXPORT_ENTITIES, params):
        records.append(
            {
                "type": "entity",
                "name": row["name"],
                "entity_type": row["entity_type"],
                "project": row["project"] or None,
                "recorded_at": _time(row["recorded_at"]),
            }
        )
    for row in tx.all(EXPORT_OBSERVATIONS, params):
        records.append(
            {
                "type": "observation",
                "id": row["id"],
                "entity": row["entity_name"],
                "text": row["text"],
                "attribute": row["attribute"],
                **_history_fields(row),
            }
        )
    for row in tx.all(EXPORT_RELATIONS, params):
        records.append(
            {
                "type": "relation",
                "id": row["id"],
                "source": row["source_name"],
                "relation": row["relation"],
                "target": row["target_name"],
                **_history_fields(row),
            }
        )
    for row in tx.all(EXPORT_TURNS, params):
        records.append(
            {
                "type": "turn",
                "id": row["id"],
                "session_id": row["session_id"],
                "role": row["role"],
                "text": row["text"],
                "at": _time(row["at"]),
                "project": row["project"] or None,
                "recorded_at": _time(row["recorded_at"]),
            }
        )
    return records


# ---------------------------------------------------------------- import
#
# An import runs in two passes. The first checks every line and turns it into steps:
# tuples of plain values (line number, kind, values), spooled to a temporary file one
# batch at a time, so memory holds one batch whatever the size of the input, and a
# malformed line is found before anything is written. The second reads the batches
# back and writes each in one transaction (`write_batch`).

Step = tuple[Any, ...]  # (line number, kind, *values); the kind names its writer
# Steps a transaction: fewer commits write each hot page (index edges, full-text
# segments) to the WAL fewer times; 5,000 rows hold the write lock ~0.2 s here.
BATCH_SIZE = 5_000


class ImportPlan:
    """The checked steps of an import, in batches of `batch_size`, kept in `spool` (a
    temporary file) rather than in memory: a million facts are ~1.5 GB as Python objects."""

    def __init__(self, spool: BinaryIO, batch_size: int) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.batch_size = batch_size
        self.lines = 0  # lines that gave steps (all but blank ones)
        self._chunks = 0
        self._file = spool

    def add(self, steps: list[Step], lines: int) -> None:
        """Spool the steps of the next `lines` lines."""
        self.add_marshalled(marshal.dumps(steps), lines)  # plain values: the fastest format

    def add_marshalled(self, data: bytes, lines: int) -> None:
        self._file.write(len(data).to_bytes(8, "little") + data)
        self._chunks += 1
        self.lines += lines

    def batches(self) -> Iterator[list[Step]]:
        """The steps, batch by batch, in line order."""
        self._file.seek(0)
        steps: list[Step] = []
        for _ in range(self._chunks):
            size = int.from_bytes(self._file.read(8), "little")
            steps += marshal.loads(self._file.read(size))
            while len(steps) >= self.batch_size:
                yield steps[: self.batch_size]
                del steps[: self.batch_size]
        if steps:
            yield steps


# Lines checked at a time, by this process or by the helper (`check_helper`): the
# helper is started only for an import longer than this, on a machine with two cores.
CHUNK_LINES = 10_000


def check_import(
    lines: Iterable[str], spool: BinaryIO, batch_size: int = BATCH_SIZE, *, helper: bool = True
) -> ImportPlan:
    """Check every line and plan the steps that write them, numbered by line, in `spool`
    (an empty binary file). With `helper`, an import longer than one chunk is checked in
    two processes: the helper is given the next chunk whenever it is idle, and this
    process checks the others and never waits for it: at the end, a chunk the helper
    has not answered yet is checked here.

    Raises:
        InvalidInputError: naming the first bad line and what is wrong with it.
    """
    plan = ImportPlan(spool, batch_size)
    checker: CheckHelper | None = None
    chunks: deque[Chunk] = deque()  # in line order, not yet spooled
    try:
        for start, part, unread in _chunks(lines, CHUNK_LINES):
            if checker is None and helper and start > 1 and cores() > 1:
                checker, helper = _start_helper(), False
            chunk = Chunk(start, part)
            chunks.append(chunk)
            try:
                if checker is not None and part and checker.idle():
                    checker.check(start, part)
                    chunk.sent = True
            except HelperGone:
                checker = _stop_helper(checker)
            if not chunk.sent:
                chunk.check_here()
            if unread is not None and chunk.error is None:
                chunks.append(Chunk(start + len(part), [], error=unread))
            if chunk.error is not None or unread is not None:
                break  # told once the chunks before it are spooled
            checker = _spool_checked(plan, chunks, checker, wait=False)
        checker = _spool_checked(plan, chunks, checker, wait=True)
    finally:
        if checker is not None:
            checker.close()
    return plan


@dataclass
class Chunk:
    """Lines numbered from `start`, sent to the helper or checked here."""

    start: int
    lines: list[str]
    sent: bool = False
    steps: list[Step] = field(default_factory=list)
    count: int = 0  # lines that gave steps
    error: Exception | None = None  # the first bad line's, or one reading the input

    def check_here(self) -> None:
        try:
            self.steps, self.count = check_lines(self.start, self.lines)
        except InvalidInputError as exc:
            self.error = exc
        self.sent, self.lines = False, []


def _spool_checked(
    plan: ImportPlan, chunks: deque[Chunk], checker: CheckHelper | None, wait: bool
) -> CheckHelper | None:
    """Spool the checked chunks at the front of `chunks`, in order. The chunk the helper
    has is spooled once it answers; with `wait`, it is checked here instead if the
    answer has not begun to come, and the helper is stopped. Returns the helper, or
    None once it is gone.

    Raises:
        InvalidInputError: the first bad line of the chunks spooled.
    """
    while chunks:
        chunk = chunks[0]
        if chunk.sent:
            if checker is not None and not checker.answered():
                if not wait:
                    return checker
                checker = _stop_helper(checker)
            try:
                if checker is None:
                    raise HelperGone
                _, passed, count, message, steps = checker.result()
            except HelperGone:
                checker = _stop_helper(checker)
                chunk.check_here()
                continue
            if not passed:
                raise InvalidInputError(message)
            plan.add_marshalled(steps, count)
        elif chunk.error is not None:
            raise chunk.error
        else:
            plan.add(chunk.steps, chunk.count)
        chunks.popleft()
    return checker


def _chunks(lines: Iterable[str], size: int) -> Iterator[tuple[int, list[str], Exception | None]]:
    """The lines in lists of `size`, each with the number of its first line. An error
    reading the input (a line that is not UTF-8) comes with the lines read before it,
    to be told only if none of them is bad, as when lines were checked as read."""
    chunk: list[str] = []
    start = number = 0
    iterator = iter(lines)
    while True:
        try:
            line = next(iterator)
        except StopIteration:
            break
        except (InvalidInputError, ValueError, OSError) as exc:
            yield start or number + 1, chunk, exc
            return
        number += 1
        start = start or number
        chunk.append(line)
        if len(chunk) == size:
            yield start, chunk, None
            start, chunk = 0, []
    if chunk:
        yield start, chunk, None


def _start_helper() -> CheckHelper | None:
    try:
        return CheckHelper()
    except HelperGone:
        return None


def _stop_helper(checker: CheckHelper | None) -> None:
    if checker is not None:
        checker.close()


def check_lines(start: int, lines: list[str]) -> tuple[list[Step], int]:
    """The steps of `lines`, numbered from `start`, and how many lines gave steps.

    Raises:
        InvalidInputError: naming the first bad line and what is wrong with it.
    """
    steps: list[Step] = []
    count = 0
    for number, line in enumerate(lines, start=start):
        if not line.strip():
            continue
        try:
            record = _decode(line)
            step = _plain_step(record)
            more = () if step is not None else _record_steps(record)
        except (ValueError, InvalidInputError, ValidationError) as exc:  # JSONDecodeError too
            raise InvalidInputError(f"line {number}: {exc}") from None
        if step is not None:
            steps.append((number, *step))
        for other in more:
            steps.append((number, *other))
        count += 1
    return steps, count


def _decode(line: str) -> Any:
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
# its limit (`plain_text`), times that parse. `_plain_step` checks such a line with
# the rules of `_own_record` below, inlined, and returns its step; for any other line
# it returns None and `_own_record` (or `_reference_record`) checks it, so every
# message comes from one place. A test holds the two to the same steps.

MARKERS = ("entityType", "observations", "relationType", "from")  # reference memory.jsonl


def _plain_step(record: Any) -> tuple[Any, ...] | None:
    """The step of a plain line of chronomem's own format, or None: check it in full."""
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
    return check(record, project)


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


def _plain_observation(record: dict[str, Any], project: str | None) -> tuple[Any, ...] | None:
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
    return ("observation", identifier, entity, text, attribute, reason, *times, project)


def _plain_relation(record: dict[str, Any], project: str | None) -> tuple[Any, ...] | None:
    identifier, source, target = record.get("id"), record.get("source"), record.get("target")
    relation, reason = record.get("relation"), record.get("reason")
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
    return ("relation", identifier, source, relation_type(relation), target, reason, *times,
            project)  # fmt: skip


def _plain_entity(record: dict[str, Any], project: str | None) -> tuple[Any, ...] | None:
    name, entity_type = record.get("name"), record.get("entity_type")
    recorded_at = _plain_time(record.get("recorded_at"))
    if (
        recorded_at is None
        or not plain_text(name, NAME_MAX)
        or not plain_text(entity_type, LABEL_MAX)
    ):
        return None
    return ("entity", name, entity_type, recorded_at, project)


def _plain_turn(record: dict[str, Any], project: str | None) -> tuple[Any, ...] | None:
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
    return ("turn", identifier, session_id, role, text, at, recorded_at, project)


PLAIN_CHECKS: dict[Any, Callable[[dict[str, Any], str | None], tuple[Any, ...] | None]] = {
    "entity": _plain_entity,
    "observation": _plain_observation,
    "relation": _plain_relation,
    "turn": _plain_turn,
}


def _record_steps(record: Any) -> list[tuple[Any, ...]]:
    """The steps (less their line number) of one decoded line, checked."""
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
        return _reference_record(record)
    return [_own_record(record)]


def _field(record: dict[str, Any], name: str, kinds: type | tuple[type, ...] = str) -> Any:
    value = record.get(name)
    if not isinstance(value, kinds):
        expected = getattr(kinds, "__name__", "value")
        raise ValueError(f"field {name!r} is missing or not a {expected}")
    return value


def _optional_time(record: dict[str, Any], name: str) -> int | None:
    value = record.get(name)
    return None if value is None else parse_time(value, name)


def _own_record(record: dict[str, Any]) -> tuple[Any, ...]:
    """One line of chronomem's own export format, checked; its step writes it as is."""
    kind = record["type"]
    project = record.get("project")
    if project is not None and (not isinstance(project, str) or not project.strip()):
        raise ValueError("field 'project' must be null or a non-blank string")
    if kind == "entity":
        return ("entity", *_entity_values(record), project)
    if kind == "turn":
        return ("turn", *_turn_values(record), project)
    times = _history_times(record)
    identifier = _identifier(record)
    if kind == "observation":
        return ("observation", identifier, *_observation_values(record), *times, project)
    return ("relation", identifier, *_relation_values(record), *times, project)


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


def _turn_values(record: dict[str, Any]) -> tuple[Any, ...]:
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


def _observation_values(record: dict[str, Any]) -> tuple[Any, ...]:
    entity, text = _field(record, "entity"), _field(record, "text")
    attribute = record.get("attribute")
    plain = plain_text(entity, NAME_MAX) and plain_text(text, FACT_MAX)
    if not (plain and (attribute is None or plain_text(attribute, LABEL_MAX))):
        parse_arguments(RememberArgs, entity=entity, facts=[text], attribute=attribute)
    return entity, text, attribute, _reason(record)


def _relation_values(record: dict[str, Any]) -> tuple[Any, ...]:
    source, relation, target = (_field(record, n) for n in ("source", "relation", "target"))
    if not (
        plain_text(source, NAME_MAX)
        and plain_text(relation, LABEL_MAX)
        and plain_text(target, NAME_MAX)
    ):
        parse_arguments(RelateArgs, source=source, relation=relation, target=target)
    # Normalised here, so a type with no letters stops the import before any write.
    return source, relation_type(relation), target, _reason(record)


def _reference_record(record: dict[str, Any]) -> list[tuple[Any, ...]]:
    """One line of the reference memory server's `memory.jsonl`, as engine calls: an
    entity in calls of at most FACTS_PER_CALL facts, or a relation."""
    if record["type"] == "entity":
        name, entity_type = _field(record, "name"), _field(record, "entityType")
        observations = _field(record, "observations", list)
        if not observations:  # an entity with no observations: create it alone
            parse_arguments(RememberArgs, entity=name, facts=["x"], entity_type=entity_type)
            return [("reference_entity", name, entity_type)]
        steps: list[tuple[Any, ...]] = []
        for i in range(0, len(observations), FACTS_PER_CALL):
            facts = observations[i : i + FACTS_PER_CALL]
            parse_arguments(RememberArgs, entity=name, facts=facts, entity_type=entity_type)
            steps.append(("remember", name, facts, entity_type))
        return steps
    source, relation, target = (_field(record, n) for n in ("from", "relationType", "to"))
    args = parse_arguments(RelateArgs, source=source, relation=relation, target=target)
    relation_type(args.relation)  # what `relate` would refuse, refused before any write
    return [("relate", source, relation, target)]


class Batch:
    """What the steps of one import transaction share: the transaction, the scope, the
    entity ids looked up so far, the latest time the batch wrote (which later writes
    must not precede), and the counts by kind."""

    def __init__(self, tx: Tx, scope: ScopeKey) -> None:
        self.tx = tx
        self.scope = scope
        self.entity_ids: dict[str, int] = {}  # by match key
        self.named: dict[str, int] = {}  # by name as written: no key to compute
        self.new_entities: list[list[Any]] = []  # INSERT_ENTITY rows not yet written
        self.next_entity_id = 0
        self.latest = 0
        self.counts: dict[str, int] = {}

    def count(self, kind: str, count: int = 1) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + count

    def look_up(self, names: Iterable[str]) -> None:
        """Find which of `names` are stored entities, in one query rather than one a
        name (a batch names thousands): the others are new (`entity`)."""
        keys = {match_key(name) for name in set(names)} - self.entity_ids.keys()
        found = self.tx.all(FIND_ENTITIES, {"owner": self.tx.owner, "keys": json_list(keys)})
        self.entity_ids.update((row["name_key"], row["id"]) for row in found)
        self.next_entity_id = self.tx.next_rowid("entity")

    def entity(
        self, name: str, entity_type: str, project: str | None, recorded_at: int
    ) -> tuple[int, bool]:
        """The id of a looked-up entity, and whether this creates it. A new one is given
        the id SQLite will give it, and `_write_rows` writes it."""
        key = match_key(name)
        known = self.entity_ids.get(key)
        if known is not None:
            return known, False
        entity_id = self.entity_ids[key] = self.next_entity_id
        self.next_entity_id += 1
        self.new_entities.append([self.tx.owner, project or GLOBAL, " ".join(name.split()), key,
                                  entity_type, recorded_at, recorded_at])  # fmt: skip
        self.latest = max(self.latest, recorded_at)
        return entity_id, True

    def entity_id(self, name: str, project: str | None, at: int) -> int:
        """The id of the entity a fact or relation names, created as `general` if new."""
        known = self.named.get(name)
        if known is None:
            known = self.named[name] = self.entity(name, "general", project, at)[0]
        return known


NAMED_AT = {"entity": (2,), "observation": (3,), "relation": (3, 5)}  # where steps name entities


def write_batch(tx: Tx, scope: ScopeKey, steps: Sequence[Step]) -> dict[str, int]:
    """Run a batch of import steps in `tx`; counts by kind. The steps of chronomem's own
    format between two of the reference format's are written together (`_write_rows`)."""
    ensure_owner(tx, scope)
    batch = Batch(tx, scope)
    for own, run in groupby(steps, key=lambda step: step[1] in OWN_KINDS):
        if own:
            _write_rows(batch, list(run))
            continue
        for number, kind, *values in run:
            try:
                WRITERS[kind](batch, *values)
            except InvalidInputError as exc:
                raise InvalidInputError(f"line {number}: {exc}") from None
    if batch.latest > tx.now:  # later writes must come after imported history
        tx.run(ADVANCE_CLOCK_TO, {"latest": batch.latest})
    return batch.counts


ADVANCE_CLOCK_TO = "UPDATE tx_clock SET last = max(last, :latest) WHERE id = 1"

FIND_ENTITY = "SELECT id FROM entity WHERE owner_id = :owner AND name_key = :key"
FIND_ENTITIES = """
    SELECT name_key, id FROM entity
    WHERE owner_id = :owner AND name_key IN (SELECT value FROM json_each(:keys))
"""
INSERT_ENTITY = """
    INSERT INTO entity (owner_id, project, name, name_key, entity_type, recorded_at, changed_at)
    VALUES (:owner, :project, :name, :key, :entity_type, :recorded_at, :recorded_at)
"""
INSERT_ENTITY_ROW = """
    INSERT INTO entity (owner_id, project, name, name_key, entity_type, recorded_at, changed_at)
    VALUES (?, ?, ?, ?, ?, ?, ?)
"""
SET_CHANGED_AT = "UPDATE entity SET changed_at = ? WHERE id = ?"


def _insert_entity(
    batch: Batch, name: str, entity_type: str, project: str | None, recorded_at: int
) -> tuple[int, bool]:
    """The entity's id, and whether this created it."""
    key = match_key(name)
    known = batch.entity_ids.get(key)
    if known is not None:
        return known, False
    tx = batch.tx
    row = tx.one(FIND_ENTITY, {"owner": tx.owner, "key": key})
    created = row is None
    if row is not None:
        entity_id = row["id"]
    else:
        entity_id = tx.add(
            "entity",
            INSERT_ENTITY,
            {"owner": tx.owner, "project": project or GLOBAL, "name": " ".join(name.split()),
             "key": key, "entity_type": entity_type, "recorded_at": recorded_at},
        )  # fmt: skip
        batch.latest = max(batch.latest, recorded_at)
    batch.entity_ids[key] = entity_id
    return entity_id, created


def _write_entity(
    batch: Batch, name: str, entity_type: str, recorded_at: int, project: str | None
) -> None:
    created = _insert_entity(batch, name, entity_type, project, recorded_at)[1]
    batch.count("entities" if created else "skipped")


# A row whose id is already stored is left alone (ON CONFLICT): importing the same
# file twice changes nothing. Parameters by position: a million rows bind faster so.
INSERT_OBSERVATION = """
    INSERT INTO observation (id, owner_id, project, entity_id, text, text_key, attribute,
                             attribute_key, valid_from, valid_to, recorded_at, invalidated_at,
                             reason)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (id) DO NOTHING
"""


def _observation_row(batch: Batch, step: Step) -> tuple[Any, ...]:
    (_, _, identifier, entity, text, attribute, reason, valid_from, valid_to, recorded_at,
     invalidated_at, project) = step  # fmt: skip
    return (identifier, batch.tx.owner, project or GLOBAL,
            batch.entity_id(entity, project, recorded_at), text, match_key(text),
            " ".join(attribute.split()) if attribute else None,
            match_key(attribute) if attribute else None,
            valid_from, valid_to, recorded_at, invalidated_at, reason)  # fmt: skip


INSERT_RELATION = """
    INSERT INTO relation (id, owner_id, project, source_id, relation, target_id, valid_from,
                          valid_to, recorded_at, invalidated_at, reason)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (id) DO NOTHING
"""


def _relation_row(batch: Batch, step: Step) -> tuple[Any, ...]:
    (_, _, identifier, source, relation, target, reason, valid_from, valid_to, recorded_at,
     invalidated_at, project) = step  # fmt: skip
    source_id = batch.entity_id(source, project, recorded_at)  # source first, as written
    target_id = batch.entity_id(target, project, recorded_at)
    return (identifier, batch.tx.owner, project or GLOBAL, source_id, relation, target_id,
            valid_from, valid_to, recorded_at, invalidated_at, reason)  # fmt: skip


INSERT_TURN = """
    INSERT INTO turn (id, owner_id, project, session_id, role, text, at, recorded_at)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (id) DO NOTHING
"""


def _turn_row(batch: Batch, step: Step) -> tuple[Any, ...]:
    _, _, identifier, session_id, role, text, at, recorded_at, project = step
    return (identifier, batch.tx.owner, project or GLOBAL, session_id, role, text, at,
            recorded_at)  # fmt: skip


class RowKind(NamedTuple):
    """How a step of chronomem's own format becomes a row: its INSERT, its values, the
    latest time it records (which later writes must not precede), and the entities it
    names with its recorded_at (which raises their changed_at)."""

    insert: str
    row: Callable[[Batch, Step], tuple[Any, ...]]
    latest: Callable[[tuple[Any, ...]], int]
    names: Callable[[tuple[Any, ...]], tuple[tuple[int, ...], int]] | None


ROW_KINDS = {
    "observation": RowKind(
        INSERT_OBSERVATION, _observation_row, lambda r: max(r[10], r[11] or 0),
        lambda r: ((r[3],), r[10]),
    ),
    "relation": RowKind(
        INSERT_RELATION, _relation_row, lambda r: max(r[8], r[9] or 0),
        lambda r: ((r[3], r[5]), r[8]),
    ),
    "turn": RowKind(INSERT_TURN, _turn_row, itemgetter(7), None),
}  # fmt: skip
OWN_KINDS = {"entity", *ROW_KINDS}


def _write_rows(batch: Batch, steps: list[Step]) -> None:
    """Write steps of chronomem's own format with one statement a kind (`Tx.add_rows`,
    ~3 us a row less than one each). The entities they name are looked up at once and
    the new ones numbered in step order, as SQLite numbers them when written one by
    one; rowids too are in order within each kind. A new entity is written with the
    changed_at its rows give it, so only the entities stored before are updated."""
    tx = batch.tx
    batch.look_up(step[i] for step in steps for i in NAMED_AT.get(step[1], ()))
    first_new = batch.next_entity_id
    by_kind: dict[str, tuple[list[Step], list[tuple[Any, ...]]]] = {}
    for step in steps:
        kind = step[1]
        if kind == "entity":
            _, _, name, entity_type, recorded_at, project = step
            created = batch.entity(name, entity_type, project, recorded_at)[1]
            batch.count("entities" if created else "skipped")
            continue
        kind_steps, rows = by_kind.setdefault(kind, ([], []))
        kind_steps.append(step)
        rows.append(ROW_KINDS[kind].row(batch, step))
    new_entities, batch.new_entities = batch.new_entities, []
    expected = _changed_at([rows for _, rows in by_kind.values()], by_kind.keys())
    for entity_id, entity in enumerate(new_entities, start=first_new):
        entity[6] = max(entity[5], expected.get(entity_id, 0))  # changed_at
    if new_entities:
        created = tx.add_rows("entity", INSERT_ENTITY_ROW, new_entities)
        if created != range(first_new, first_new + len(new_entities)):
            raise RuntimeError("entity ids are not the ones SQLite gave")
    skipped: list[tuple[int, str, str]] = []
    kept_rows = []
    for kind, (kind_steps, rows) in by_kind.items():
        kept, kind_skipped = _insert_rows(batch, kind, kind_steps, rows)
        kept_rows.append(kept)
        skipped += kind_skipped
    for number, kind, identifier in sorted(skipped):  # the first in line order is told
        holder = tx.one(ID_OWNER[kind], (identifier,))
        if holder is not None and holder[0] != tx.owner:
            raise InvalidInputError(
                f"line {number}: id {identifier!r} belongs to another memory; not imported"
            )
        batch.count("skipped")
    changed = _changed_at(kept_rows, by_kind.keys()) if skipped else expected
    if skipped:  # a new entity's skipped rows do not count: set its changed_at again
        tx.run_many(SET_CHANGED_AT, [
            (max(entity[5], changed.get(entity_id, 0)), entity_id)
            for entity_id, entity in enumerate(new_entities, start=first_new)
            if max(entity[5], changed.get(entity_id, 0)) != entity[6]
        ])  # fmt: skip
    tx.raise_changed_at({id_: at for id_, at in changed.items() if id_ < first_new})


def _changed_at(
    rows_by_kind: Iterable[list[tuple[Any, ...]]], kinds: Iterable[str]
) -> dict[int, int]:
    """The latest recorded_at of the facts and relations in `rows_by_kind` (rows of
    `kinds`, in that order) for each entity they name: `schema.CHANGED_NEW` in Python."""
    latest: dict[int, int] = {}
    for kind, rows in zip(kinds, rows_by_kind, strict=True):
        names = ROW_KINDS[kind].names
        if names is None:  # turns name no entity
            continue
        for entity_ids, recorded_at in map(names, rows):
            for entity_id in entity_ids:
                if recorded_at > latest.get(entity_id, -1):
                    latest[entity_id] = recorded_at
    return latest


ID_OWNER = {
    "observation": "SELECT owner_id FROM observation WHERE id = ?",
    "relation": "SELECT owner_id FROM relation WHERE id = ?",
    "turn": "SELECT owner_id FROM turn WHERE id = ?",
}
IDS_FROM = {  # the ids of the rows from a rowid on
    "observation": "SELECT id FROM observation WHERE seq >= ?",
    "relation": "SELECT id FROM relation WHERE seq >= ?",
    "turn": "SELECT id FROM turn WHERE seq >= ?",
}


def _insert_rows(
    batch: Batch, kind: str, steps: list[Step], rows: list[tuple[Any, ...]]
) -> tuple[list[tuple[Any, ...]], list[tuple[int, str, str]]]:
    """Insert `rows` (each its id first; `steps` their steps) but those whose id is
    stored. Returns the rows inserted, and (line, kind, id) of each row skipped."""
    inserted = batch.tx.add_rows(kind, ROW_KINDS[kind].insert, rows, raise_changed=False)
    kept = rows
    skipped = []
    if len(inserted) < len(rows):  # some ids were stored (a repeated import): which?
        new_ids = {row[0] for row in batch.tx.all(IDS_FROM[kind], (inserted.start,))}
        kept = []
        for step, row in zip(steps, rows, strict=True):
            if row[0] in new_ids:
                new_ids.discard(row[0])  # an id twice in a batch: only the first is new
                kept.append(row)
            else:
                skipped.append((step[0], kind, row[0]))
    if kept:
        batch.count(kind + "s", len(kept))
        batch.latest = max(batch.latest, *map(ROW_KINDS[kind].latest, kept))
    return kept, skipped


def _write_reference_entity(batch: Batch, name: str, entity_type: str) -> None:
    project = batch.scope.project or None
    _write_entity(batch, name, entity_type, batch.tx.now, project)


def _remember(batch: Batch, name: str, facts: list[str], entity_type: str) -> None:
    args = parse_arguments(RememberArgs, entity=name, facts=facts, entity_type=entity_type)
    result = remember(batch.tx, batch.scope, args)
    batch.count("observations", len(result.added))
    batch.count("skipped", len(result.duplicates))
    if result.entity.created:
        batch.count("entities")


def _relate(batch: Batch, source: str, relation: str, target: str) -> None:
    args = parse_arguments(RelateArgs, source=source, relation=relation, target=target)
    batch.count("skipped" if relate(batch.tx, batch.scope, args).existing else "relations")


WRITERS: dict[str, Callable[..., None]] = {  # the reference format's steps, one at a time
    "reference_entity": _write_reference_entity,
    "remember": _remember,
    "relate": _relate,
}


def export_lines(records: Iterable[dict[str, Any]]) -> Iterator[str]:
    for record in records:
        yield json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def text_lines(raw_lines: Iterable[bytes]) -> Iterator[str]:
    """The lines of a file opened in binary mode, as text: UTF-8, an optional byte
    order mark first (as Windows editors write), and a line that is not UTF-8 named
    by its number, which a file decoded as a whole could not say.

    Raises:
        InvalidInputError: naming the first line that is not UTF-8 text.
    """
    for number, raw in enumerate(raw_lines, start=1):
        try:
            yield raw.decode("utf-8-sig" if number == 1 else "utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidInputError(
                f"line {number}: not UTF-8 text (byte {exc.start + 1} of the line)"
            ) from None
