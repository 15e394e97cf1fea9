"""Export and import: a scope's whole memory as JSON Lines, and the reference MCP
memory server's `memory.jsonl`.

The export is deterministic (only the scope's rows, in storage order, no export
time), so export -> import -> export gives the same lines. An import is checked
whole before anything is written, so a malformed line keeps nothing; it is then
written in batches, each batch one transaction.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from pydantic import BaseModel, ValidationError

from .errors import InvalidInputError
from .models import RelateArgs, RememberArgs, RememberResult
from .names import match_key, relation_type
from .queries import GLOBAL, ScopeKey, ensure_owner
from .store import Tx
from .timestamps import format_time, parse_time
from .validation import FACTS_PER_CALL, parse_arguments
from .writes import relate, remember

__all__ = ["ImportResult", "export_records", "parse_import", "write_batch"]

KINDS = ("entity", "observation", "relation", "turn")
COUNTED = ("entities", "observations", "relations", "turns", "skipped")


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


class Batch:
    """What the steps of one import transaction share: the transaction, the scope, the
    entity ids looked up so far, and the latest time the batch wrote (which later
    writes must not precede)."""

    def __init__(self, tx: Tx, scope: ScopeKey) -> None:
        self.tx = tx
        self.scope = scope
        self.entity_ids: dict[str, int] = {}
        self.latest = 0


Step = Callable[[Batch], dict[str, int]]  # writes one record; returns counts


def _field(record: dict[str, Any], name: str, kinds: type | tuple[type, ...] = str) -> Any:
    value = record.get(name)
    if not isinstance(value, kinds):
        expected = getattr(kinds, "__name__", "value")
        raise ValueError(f"field {name!r} is missing or not a {expected}")
    return value


def _optional_time(record: dict[str, Any], name: str) -> int | None:
    value = record.get(name)
    return None if value is None else parse_time(value, name)


def _own_record(record: dict[str, Any]) -> Step:
    """One line of chronomem's own export format, checked; the step writes it as is."""
    kind = record["type"]
    project = record.get("project")
    if project is not None and (not isinstance(project, str) or not project.strip()):
        raise ValueError("field 'project' must be null or a non-blank string")
    if kind == "entity":
        name, entity_type = _field(record, "name"), _field(record, "entity_type")
        recorded_at = parse_time(_field(record, "recorded_at"), "recorded_at")
        parse_arguments(RememberArgs, entity=name, facts=["x"], entity_type=entity_type)

        def step(batch: Batch) -> dict[str, int]:
            created = _insert_entity(batch, name, entity_type, project, recorded_at)[1]
            return {"entities" if created else "skipped": 1}

        return step
    times = {}
    if kind in ("observation", "relation"):
        for name in ("valid_from", "recorded_at"):
            times[name] = parse_time(_field(record, name), name)
        for name in ("valid_to", "invalidated_at"):
            times[name] = _optional_time(record, name)
        if (times["valid_to"] is None) != (times["invalidated_at"] is None):
            raise ValueError("valid_to and invalidated_at must both be set or both be null")
        if times["valid_to"] is not None and times["valid_to"] < times["valid_from"]:
            raise ValueError("valid_to is before valid_from")
    identifier = _field(record, "id")
    if kind == "observation":
        entity, text = _field(record, "entity"), _field(record, "text")
        attribute = record.get("attribute")
        parse_arguments(RememberArgs, entity=entity, facts=[text], attribute=attribute)
        values = {"entity": entity, "text": text, "attribute": attribute,
                  "reason": record.get("reason"), **times}  # fmt: skip
        return lambda batch: _insert_row(batch, "observation", identifier, project, values)
    if kind == "relation":
        source, relation, target = (_field(record, n) for n in ("source", "relation", "target"))
        parse_arguments(RelateArgs, source=source, relation=relation, target=target)
        values = {"source": source, "relation": relation, "target": target,
                  "reason": record.get("reason"), **times}  # fmt: skip
        return lambda batch: _insert_row(batch, "relation", identifier, project, values)
    session_id, role, text = (_field(record, n) for n in ("session_id", "role", "text"))
    values = {"session_id": session_id, "role": role, "text": text,
              "at": parse_time(_field(record, "at"), "at"),
              "recorded_at": parse_time(_field(record, "recorded_at"), "recorded_at")}  # fmt: skip
    return lambda batch: _insert_row(batch, "turn", identifier, project, values)


def _reference_record(record: dict[str, Any]) -> list[Step]:
    """One line of the reference memory server's `memory.jsonl`, as engine calls."""
    if record["type"] == "entity":
        name, entity_type = _field(record, "name"), _field(record, "entityType")
        observations = _field(record, "observations", list)
        batches = [
            observations[i : i + FACTS_PER_CALL]
            for i in range(0, len(observations), FACTS_PER_CALL)
        ] or [[]]
        steps: list[Step] = []
        for batch in batches:
            if not batch:  # an entity with no observations: create it alone
                parse_arguments(RememberArgs, entity=name, facts=["x"], entity_type=entity_type)
                steps.append(lambda batch, n=name, t=entity_type: _reference_entity(batch, n, t))
                continue
            args = parse_arguments(RememberArgs, entity=name, facts=batch, entity_type=entity_type)
            steps.append(lambda batch, a=args: _remembered(remember(batch.tx, batch.scope, a)))
        return steps
    args = parse_arguments(
        RelateArgs,
        source=_field(record, "from"),
        relation=_field(record, "relationType"),
        target=_field(record, "to"),
    )
    return [
        lambda batch: {
            "relations" if not relate(batch.tx, batch.scope, args).existing else "skipped": 1
        }
    ]


def _remembered(result: RememberResult) -> dict[str, int]:
    counts = {"observations": len(result.added), "skipped": len(result.duplicates)}
    if result.entity.created:
        counts["entities"] = 1
    return counts


def parse_import(lines: Iterable[str]) -> list[tuple[int, Step]]:
    """Check every line and return the steps that write them, numbered by line.

    Raises:
        InvalidInputError: naming the first bad line and what is wrong with it.
    """
    steps: list[tuple[int, Step]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
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
            reference = any(marker in record for marker in markers)
            if reference:
                steps += [(number, step) for step in _reference_record(record)]
            elif record["type"] in KINDS:
                steps.append((number, _own_record(record)))
        except (ValueError, InvalidInputError, ValidationError) as exc:  # JSONDecodeError too
            raise InvalidInputError(f"line {number}: {exc}") from None
    return steps


def write_batch(tx: Tx, scope: ScopeKey, steps: Iterable[tuple[int, Step]]) -> dict[str, int]:
    """Run a batch of import steps in `tx`; counts by kind."""
    counts: dict[str, int] = {}
    ensure_owner(tx, scope)
    batch = Batch(tx, scope)
    for number, step in steps:
        try:
            done = step(batch)
        except InvalidInputError as exc:
            raise InvalidInputError(f"line {number}: {exc}") from None
        for kind, count in done.items():
            counts[kind] = counts.get(kind, 0) + count
    if batch.latest > tx.now:  # later writes must come after imported history
        tx.run(ADVANCE_CLOCK_TO, {"latest": batch.latest})
    return counts


ADVANCE_CLOCK_TO = "UPDATE tx_clock SET last = max(last, :latest) WHERE id = 1"

FIND_ENTITY = "SELECT id FROM entity WHERE owner_id = :owner AND name_key = :key"
INSERT_ENTITY = """
    INSERT INTO entity (owner_id, project, name, name_key, entity_type, recorded_at)
    VALUES (:owner, :project, :name, :key, :entity_type, :recorded_at)
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


def _reference_entity(batch: Batch, name: str, entity_type: str) -> dict[str, int]:
    project = batch.scope.project or None
    created = _insert_entity(batch, name, entity_type, project, batch.tx.now)[1]
    return {"entities" if created else "skipped": 1}


def _entity_id(batch: Batch, name: str, project: str | None, at: int) -> int:
    return _insert_entity(batch, name, "general", project, at)[0]


# A row whose id is already stored is left alone (ON CONFLICT): importing the same
# file twice changes nothing.
INSERT_OBSERVATION = """
    INSERT INTO observation (id, owner_id, project, entity_id, text, text_key, attribute,
                             attribute_key, valid_from, valid_to, recorded_at, invalidated_at,
                             reason)
    VALUES (:id, :owner, :project, :entity_id, :text, :text_key, :attribute, :attribute_key,
            :valid_from, :valid_to, :recorded_at, :invalidated_at, :reason)
    ON CONFLICT (id) DO NOTHING
"""
INSERT_RELATION = """
    INSERT INTO relation (id, owner_id, project, source_id, relation, target_id, valid_from,
                          valid_to, recorded_at, invalidated_at, reason)
    VALUES (:id, :owner, :project, :source_id, :relation, :target_id, :valid_from, :valid_to,
            :recorded_at, :invalidated_at, :reason)
    ON CONFLICT (id) DO NOTHING
"""
INSERT_TURN = """
    INSERT INTO turn (id, owner_id, project, session_id, role, text, at, recorded_at)
    VALUES (:id, :owner, :project, :session_id, :role, :text, :at, :recorded_at)
    ON CONFLICT (id) DO NOTHING
"""
ID_OWNER = {
    "observation": "SELECT owner_id FROM observation WHERE id = :id",
    "relation": "SELECT owner_id FROM relation WHERE id = :id",
    "turn": "SELECT owner_id FROM turn WHERE id = :id",
}
HISTORY_TIMES = ("valid_from", "valid_to", "recorded_at", "invalidated_at", "reason")


def _insert_row(
    batch: Batch, kind: str, identifier: str, project: str | None, values: dict
) -> dict[str, int]:
    tx = batch.tx
    row = {"id": identifier, "owner": tx.owner, "project": project or GLOBAL}
    if kind == "observation":
        attribute = values["attribute"]
        sql = INSERT_OBSERVATION
        row.update({
            "entity_id": _entity_id(batch, values["entity"], project, values["recorded_at"]),
            "text": values["text"], "text_key": match_key(values["text"]),
            "attribute": " ".join(attribute.split()) if attribute else None,
            "attribute_key": match_key(attribute) if attribute else None,
            **{k: values[k] for k in HISTORY_TIMES},
        })  # fmt: skip
    elif kind == "relation":
        sql = INSERT_RELATION
        row.update({
            "source_id": _entity_id(batch, values["source"], project, values["recorded_at"]),
            "relation": relation_type(values["relation"]),
            "target_id": _entity_id(batch, values["target"], project, values["recorded_at"]),
            **{k: values[k] for k in HISTORY_TIMES},
        })  # fmt: skip
    else:
        sql = INSERT_TURN
        row.update(values)
    if not tx.add(kind, sql, row):
        holder = tx.one(ID_OWNER[kind], {"id": identifier})
        if holder is not None and holder[0] != tx.owner:
            raise InvalidInputError(f"id {identifier!r} belongs to another memory; not imported")
        return {"skipped": 1}
    latest = max(values["recorded_at"], values.get("invalidated_at") or 0)
    batch.latest = max(batch.latest, latest)
    return {kind + "s": 1}


def export_lines(records: Iterable[dict[str, Any]]) -> Iterator[str]:
    for record in records:
        yield json.dumps(record, ensure_ascii=False, separators=(",", ":"))
