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
from collections.abc import Callable, Iterable, Iterator
from typing import Any, BinaryIO

from pydantic import BaseModel, ValidationError

from .errors import InvalidInputError
from .models import ForgetArgs, RecordTurnsArgs, RelateArgs, RememberArgs
from .names import match_key, relation_type
from .queries import GLOBAL, ScopeKey, ensure_owner
from .store import Tx
from .timestamps import format_time, parse_time
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
        self._pending: list[Step] = []
        self._batches = 0
        self._file = spool

    def add(self, step: Step) -> None:
        self._pending.append(step)
        if len(self._pending) == self.batch_size:
            self._spool()

    def _spool(self) -> None:
        data = marshal.dumps(self._pending)  # plain values only: the fastest format
        self._file.write(len(data).to_bytes(8, "little") + data)
        self._batches += 1
        self._pending = []

    def batches(self) -> Iterator[list[Step]]:
        """The steps, batch by batch, in line order."""
        if self._pending:
            self._spool()
        self._file.seek(0)
        for _ in range(self._batches):
            size = int.from_bytes(self._file.read(8), "little")
            yield marshal.loads(self._file.read(size))


def check_import(lines: Iterable[str], spool: BinaryIO, batch_size: int = BATCH_SIZE) -> ImportPlan:
    """Check every line and plan the steps that write them, numbered by line, in `spool`
    (an empty binary file).

    Raises:
        InvalidInputError: naming the first bad line and what is wrong with it.
    """
    plan = ImportPlan(spool, batch_size)
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            steps = _record_steps(json.loads(line))
        except (ValueError, InvalidInputError, ValidationError) as exc:  # JSONDecodeError too
            raise InvalidInputError(f"line {number}: {exc}") from None
        for step in steps:
            plan.add((number, *step))
        plan.lines += 1
    return plan


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
    markers = ("entityType", "observations", "relationType", "from")
    if any(marker in record for marker in markers):
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
        self.latest = 0
        self.counts: dict[str, int] = {}

    def count(self, kind: str, count: int = 1) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + count

    def entity_id(self, name: str, project: str | None, at: int) -> int:
        """The id of the entity a fact or relation names, created as `general` if new."""
        known = self.named.get(name)
        if known is None:
            known = self.named[name] = _insert_entity(self, name, "general", project, at)[0]
        return known


def write_batch(tx: Tx, scope: ScopeKey, steps: Iterable[Step]) -> dict[str, int]:
    """Run a batch of import steps in `tx`; counts by kind."""
    ensure_owner(tx, scope)
    batch = Batch(tx, scope)
    for number, kind, *values in steps:
        try:
            WRITERS[kind](batch, *values)
        except InvalidInputError as exc:
            raise InvalidInputError(f"line {number}: {exc}") from None
    if batch.latest > tx.now:  # later writes must come after imported history
        tx.run(ADVANCE_CLOCK_TO, {"latest": batch.latest})
    return batch.counts


ADVANCE_CLOCK_TO = "UPDATE tx_clock SET last = max(last, :latest) WHERE id = 1"

FIND_ENTITY = "SELECT id FROM entity WHERE owner_id = :owner AND name_key = :key"
INSERT_ENTITY = """
    INSERT INTO entity (owner_id, project, name, name_key, entity_type, recorded_at, changed_at)
    VALUES (:owner, :project, :name, :key, :entity_type, :recorded_at, :recorded_at)
"""


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


def _write_observation(
    batch: Batch, identifier: str, entity: str, text: str, attribute: str | None,
    reason: Any, valid_from: int, valid_to: int | None, recorded_at: int,
    invalidated_at: int | None, project: str | None,
) -> None:  # fmt: skip
    tx = batch.tx
    entity_id = batch.entity_id(entity, project, recorded_at)
    row = (identifier, tx.owner, project or GLOBAL, entity_id, text, match_key(text),
           " ".join(attribute.split()) if attribute else None,
           match_key(attribute) if attribute else None,
           valid_from, valid_to, recorded_at, invalidated_at, reason)  # fmt: skip
    latest = max(recorded_at, invalidated_at or 0)
    _insert_row(batch, "observation", INSERT_OBSERVATION, row, latest)


INSERT_RELATION = """
    INSERT INTO relation (id, owner_id, project, source_id, relation, target_id, valid_from,
                          valid_to, recorded_at, invalidated_at, reason)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (id) DO NOTHING
"""


def _write_relation(
    batch: Batch, identifier: str, source: str, relation: str, target: str, reason: Any,
    valid_from: int, valid_to: int | None, recorded_at: int, invalidated_at: int | None,
    project: str | None,
) -> None:  # fmt: skip
    tx = batch.tx
    source_id = batch.entity_id(source, project, recorded_at)
    target_id = batch.entity_id(target, project, recorded_at)
    row = (identifier, tx.owner, project or GLOBAL, source_id, relation, target_id,
           valid_from, valid_to, recorded_at, invalidated_at, reason)  # fmt: skip
    latest = max(recorded_at, invalidated_at or 0)
    _insert_row(batch, "relation", INSERT_RELATION, row, latest)


INSERT_TURN = """
    INSERT INTO turn (id, owner_id, project, session_id, role, text, at, recorded_at)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (id) DO NOTHING
"""


def _write_turn(
    batch: Batch, identifier: str, session_id: str, role: str, text: str, at: int,
    recorded_at: int, project: str | None,
) -> None:  # fmt: skip
    row = (identifier, batch.tx.owner, project or GLOBAL, session_id, role, text, at, recorded_at)
    _insert_row(batch, "turn", INSERT_TURN, row, recorded_at)


ID_OWNER = {
    "observation": "SELECT owner_id FROM observation WHERE id = ?",
    "relation": "SELECT owner_id FROM relation WHERE id = ?",
    "turn": "SELECT owner_id FROM turn WHERE id = ?",
}


def _insert_row(batch: Batch, kind: str, sql: str, row: tuple[Any, ...], latest: int) -> None:
    """Insert `row` (its id first) unless its id is stored: then it is skipped, or
    refused when another memory holds that id."""
    tx = batch.tx
    if not tx.add(kind, sql, row):
        holder = tx.one(ID_OWNER[kind], (row[0],))
        if holder is not None and holder[0] != tx.owner:
            raise InvalidInputError(f"id {row[0]!r} belongs to another memory; not imported")
        batch.count("skipped")
        return
    batch.latest = max(batch.latest, latest)
    batch.count(kind + "s")


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


WRITERS: dict[str, Callable[..., None]] = {
    "entity": _write_entity,
    "observation": _write_observation,
    "relation": _write_relation,
    "turn": _write_turn,
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
