"""Export, and the second pass of an import: a scope's whole memory as JSON Lines,
and the checked steps of an import written batch by batch.

The export is deterministic (only the scope's rows, in storage order, no export
time), so export -> import -> export gives the same lines. An import is checked
whole before anything is written (`import_check`), so a malformed line keeps
nothing; it is then written in batches, each batch one transaction, read back from
a temporary file so that memory holds one batch at a time.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import groupby
from operator import itemgetter
from typing import Any, NamedTuple

from pydantic import BaseModel

from .errors import InvalidInputError
from .import_check import Step
from .models import RelateArgs, RememberArgs
from .names import match_key
from .overlay import CLOSINGS, SET_PROJECT_TYPE
from .queries import GLOBAL, ScopeKey, ensure_owner
from .schema import UPSERT_ENTITY_CHANGE
from .store import Tx, json_list
from .timestamps import format_time
from .validation import parse_arguments
from .writes import GENERAL, relate, remember, retype

__all__ = ["ImportResult", "export_lines", "export_records", "write_batch"]

COUNTED = ("entities", "observations", "relations", "closings", "turns", "skipped")
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
    closings: int  # projects' own closings of global facts and relations
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
# The types projects gave entities for themselves (`overlay`), after the entities.
EXPORT_PROJECT_TYPES = """
    SELECT e.name, c.project, c.entity_type
    FROM project_entity_type c JOIN entity e ON e.id = c.entity_id
    WHERE c.owner_id = :owner AND (:project IS NULL OR c.project = :project)
    ORDER BY c.entity_id, c.project
"""
# A project's closings of global rows (`overlay`), after the rows they close.
EXPORT_CLOSINGS = {
    table: f"""
        SELECT c.*, t.id FROM {closings} c JOIN {table} t ON t.seq = c.seq
        WHERE c.owner_id = :owner AND (:project IS NULL OR c.project = :project)
        ORDER BY c.seq, c.project
    """
    for table, closings in CLOSINGS.items()
}
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
    for row in tx.all(EXPORT_PROJECT_TYPES, params):
        records.append(
            {
                "type": "entity_type",
                "name": row["name"],
                "entity_type": row["entity_type"],
                "project": row["project"],
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
    for statement in EXPORT_CLOSINGS.values():
        for row in tx.all(statement, params):
            records.append(
                {
                    "type": "closing",
                    "id": row["id"],
                    "project": row["project"],
                    "valid_to": _time(row["valid_to"]),
                    "invalidated_at": _time(row["invalidated_at"]),
                    "reason": row["reason"],
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
        self.pending: dict[str, list[Any]] = {}  # the same rows, by match key
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
        the id `Tx.add_rows` will give it, and `_write_rows` writes it."""
        key = match_key(name)
        known = self.entity_ids.get(key)
        if known is not None:
            return known, False
        entity_id = self.entity_ids[key] = self.next_entity_id
        self.next_entity_id += 1
        row = [self.tx.owner, project or GLOBAL, " ".join(name.split()), key, entity_type,
               recorded_at, recorded_at]  # fmt: skip
        self.new_entities.append(row)
        self.pending[key] = row
        self.latest = max(self.latest, recorded_at)
        return entity_id, True

    def give_type(self, name: str, entity_type: str) -> None:
        """An entity line naming an entity already known: its type replaces only the
        placeholder `general` a fact or relation line before it gave (an export lists
        entities first; a file put together by hand may not), never a type chosen."""
        if entity_type == GENERAL:
            return
        key = match_key(name)
        pending = self.pending.get(key)
        if pending is not None:
            if pending[4] == GENERAL:
                pending[4] = entity_type
            return
        entity_id = self.entity_ids[key]
        if self.tx.one(SELECT_ENTITY_TYPE, (entity_id,))[0] == GENERAL:
            retype(self.tx, entity_id, entity_type)

    def entity_id(self, name: str, project: str | None, at: int) -> int:
        """The id of the entity a fact or relation names, created as `general` if new."""
        known = self.named.get(name)
        if known is None:
            known = self.named[name] = self.entity(name, GENERAL, project, at)[0]
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
    INSERT INTO entity (id, owner_id, project, name, name_key, entity_type, recorded_at,
                        changed_at)
    VALUES (:rowid, :owner, :project, :name, :key, :entity_type, :recorded_at, :recorded_at)
"""
INSERT_ENTITY_ROW = """
    INSERT INTO entity (id, owner_id, project, name, name_key, entity_type, recorded_at,
                        changed_at)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
"""
SET_CHANGED_AT = "UPDATE entity SET changed_at = ? WHERE id = ?"
SELECT_ENTITY_TYPE = "SELECT entity_type FROM entity WHERE id = ?"


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
    if not created:
        batch.give_type(name, entity_type)
    batch.count("entities" if created else "skipped")


# A row whose id is already stored is left alone (ON CONFLICT): importing the same
# file twice changes nothing. Parameters by position: a million rows bind faster so.
INSERT_OBSERVATION = """
    INSERT INTO observation (seq, id, owner_id, project, entity_id, text, text_key, attribute,
                             attribute_key, valid_from, valid_to, recorded_at, invalidated_at,
                             reason)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
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
    INSERT INTO relation (seq, id, owner_id, project, source_id, relation, target_id,
                          valid_from, valid_to, recorded_at, invalidated_at, reason)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
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
    INSERT INTO turn (seq, id, owner_id, project, session_id, role, text, at, recorded_at)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
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
    the new ones numbered in step order, as `Tx.add` numbers them when written one
    by one; rowids too are in order within each kind. A new entity is written with the
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
            if not created:
                batch.give_type(name, entity_type)
            batch.count("entities" if created else "skipped")
            continue
        kind_steps, rows = by_kind.setdefault(kind, ([], []))
        kind_steps.append(step)
        rows.append(ROW_KINDS[kind].row(batch, step))
    new_entities, batch.new_entities = batch.new_entities, []
    batch.pending.clear()
    expected = _changed_at([rows for _, rows in by_kind.values()], by_kind.keys())
    for entity_id, entity in enumerate(new_entities, start=first_new):
        entity[6] = max(entity[5], expected.get(entity_id, 0))  # changed_at
    if new_entities:
        created = tx.add_rows("entity", INSERT_ENTITY_ROW, new_entities)
        if list(created) != list(range(first_new, first_new + len(new_entities))):
            raise RuntimeError("entity ids are not the ones Tx.add_rows gave")
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
    tx.run_many(RAISE_CHANGED_IN_PROJECT, _project_changes(tx.owner, kept_rows, by_kind.keys()))
    if skipped:  # a new entity's skipped rows do not count: set its changed_at again
        tx.run_many(SET_CHANGED_AT, [
            (max(entity[5], changed.get(entity_id, 0)), entity_id)
            for entity_id, entity in enumerate(new_entities, start=first_new)
            if max(entity[5], changed.get(entity_id, 0)) != entity[6]
        ])  # fmt: skip
    tx.raise_changed_at({id_: at for id_, at in changed.items() if id_ < first_new})


def _named(
    rows_by_kind: Iterable[list[tuple[Any, ...]]], kinds: Iterable[str]
) -> Iterator[tuple[int, str, int]]:
    """(entity, project, recorded_at) for each entity each fact or relation of
    `rows_by_kind` (rows of `kinds`, in that order) names."""
    for kind, rows in zip(kinds, rows_by_kind, strict=True):
        names = ROW_KINDS[kind].names
        if names is None:  # turns name no entity
            continue
        for row in rows:
            entity_ids, recorded_at = names(row)
            for entity_id in entity_ids:
                yield entity_id, row[2], recorded_at


def _changed_at(
    rows_by_kind: Iterable[list[tuple[Any, ...]]], kinds: Iterable[str]
) -> dict[int, int]:
    """The latest recorded_at of the global facts and relations in `rows_by_kind` for
    each entity they name: `schema.CHANGED_NEW` in Python. (A project's rows raise the
    entity in that project: `_project_changes`.)"""
    latest: dict[int, int] = {}
    for entity_id, project, recorded_at in _named(rows_by_kind, kinds):
        if project == GLOBAL and recorded_at > latest.get(entity_id, -1):
            latest[entity_id] = recorded_at
    return latest


RAISE_CHANGED_IN_PROJECT = UPSERT_ENTITY_CHANGE.format(values="VALUES (?, ?, ?, ?)")


def _project_changes(
    owner: int | None, rows_by_kind: Iterable[list[tuple[Any, ...]]], kinds: Iterable[str]
) -> list[tuple[int, str, int | None, int]]:
    """(entity, project, owner, latest recorded_at) for the project rows of
    `rows_by_kind`, as `schema.CHANGED_NEW` raises them in `entity_change`."""
    latest: dict[tuple[int, str], int] = {}
    for entity_id, project, recorded_at in _named(rows_by_kind, kinds):
        if project != GLOBAL:
            key = (entity_id, project)
            latest[key] = max(latest.get(key, -1), recorded_at)
    return [(entity, project, owner, at) for (entity, project), at in latest.items()]


ID_OWNER = {
    "observation": "SELECT owner_id FROM observation WHERE id = ?",
    "relation": "SELECT owner_id FROM relation WHERE id = ?",
    "turn": "SELECT owner_id FROM turn WHERE id = ?",
}
IDS_AT = {  # the ids of the rows of some rowids
    "observation": "SELECT id FROM observation WHERE seq IN (SELECT value FROM json_each(?))",
    "relation": "SELECT id FROM relation WHERE seq IN (SELECT value FROM json_each(?))",
    "turn": "SELECT id FROM turn WHERE seq IN (SELECT value FROM json_each(?))",
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
        new_ids = {row[0] for row in batch.tx.all(IDS_AT[kind], (json_list(inserted),))}
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


FIND_GLOBAL_ROW = {
    table: f"SELECT seq, valid_from FROM {table} WHERE id = ? AND owner_id = ? AND project = ''"
    for table in CLOSINGS
}
INSERT_CLOSING_ROW = {
    table: f"""
        INSERT INTO {closings} (seq, project, owner_id, valid_to, invalidated_at, reason)
        VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (seq, project) DO NOTHING
    """
    for table, closings in CLOSINGS.items()
}


def _write_closing(
    batch: Batch,
    identifier: str,
    project: str,
    valid_to: int,
    invalidated_at: int,
    reason: str | None,
) -> None:
    """A project's own closing of a global fact or relation of this memory."""
    tx = batch.tx
    for table, statement in FIND_GLOBAL_ROW.items():  # noqa: B007 (used after the loop)
        row = tx.one(statement, (identifier, tx.owner))
        if row is not None:
            break
    else:
        raise InvalidInputError(
            f"id: no global fact or relation {identifier!r} in this memory for this closing"
        )
    if valid_to < row["valid_from"]:
        raise InvalidInputError(f"valid_to: before {identifier!r} began")
    values = (row["seq"], project, tx.owner, valid_to, invalidated_at, reason)
    batch.count("closings" if tx.run(INSERT_CLOSING_ROW[table], values) else "skipped")
    batch.latest = max(batch.latest, invalidated_at)


def _write_project_type(batch: Batch, name: str, entity_type: str, project: str) -> None:
    """The type a project gave an entity of this memory for itself."""
    tx = batch.tx
    row = tx.one(FIND_ENTITY, {"owner": tx.owner, "key": match_key(name)})
    if row is None:
        raise InvalidInputError(f"name: no entity named {name!r} in this memory for this type")
    values = {"id": row["id"], "project": project, "owner": tx.owner, "entity_type": entity_type}
    tx.run(SET_PROJECT_TYPE, values)


WRITERS: dict[str, Callable[..., None]] = {  # the reference format's steps, one at a time
    "closing": _write_closing,
    "entity_type": _write_project_type,
    "reference_entity": _write_reference_entity,
    "remember": _remember,
    "relate": _relate,
}


def export_lines(records: Iterable[dict[str, Any]]) -> Iterator[str]:
    for record in records:
        yield json.dumps(record, ensure_ascii=False, separators=(",", ":"))
