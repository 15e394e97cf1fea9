"""The second pass of an import: the checked steps written batch by batch, each
batch in one transaction.

Steps of chronomem's own format are written as they are, many rows a statement
(`_write_rows`); those of the reference format are engine calls, one at a time
(`WRITERS`). A row whose id is already stored is left alone, so importing the same
file twice changes nothing.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import groupby
from typing import Any, NamedTuple

from ..entity_life import record_type
from ..errors import InvalidInputError
from ..models import RelateArgs, RememberArgs
from ..names import display_name, match_key
from ..overlay import CLOSINGS, SET_PROJECT_TYPE
from ..queries import GLOBAL, ScopeKey, ensure_owner
from ..schema import UPSERT_ENTITY_CHANGE
from ..store import Tx, json_list
from ..validation import parse_arguments
from ..writes import GENERAL, NewEntity, insert_entities, relate, remember, retype
from . import entity_records
from .entity_records import implied_project_version
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
    named_step,
)

__all__ = ["COUNTED", "INDEXED_KINDS", "write_batch"]

COUNTED = ("entities", "observations", "relations", "closings", "turns", "skipped")
INDEXED_KINDS = {  # kind of row -> its count in an ImportResult
    "entity": "entities",
    "observation": "observations",
    "relation": "relations",
    "turn": "turns",
}

FIND_ENTITY = "SELECT id FROM entity WHERE owner_id = :owner AND name_key = :key"
FIND_ENTITIES = """
    SELECT name_key, id FROM entity
    WHERE owner_id = :owner AND name_key IN (SELECT value FROM json_each(:keys))
"""
SET_CHANGED_AT = "UPDATE entity SET changed_at = ? WHERE id = ?"
SELECT_ENTITY_TYPE = "SELECT entity_type, recorded_at FROM entity WHERE id = ?"
ADVANCE_CLOCK_TO = "UPDATE tx_clock SET last = max(last, :latest) WHERE id = 1"


@dataclass(slots=True)
class Batch:
    """What the steps of one import transaction share: the transaction, the scope, the
    entity ids looked up so far, the latest time the batch wrote (which later writes
    must not precede), and the counts by kind."""

    tx: Tx
    scope: ScopeKey
    owner: int
    entity_ids: dict[str, int] = field(default_factory=dict)  # by match key
    named: dict[str, int] = field(default_factory=dict)  # by name as written: no key to compute
    new_entities: list[NewEntity] = field(default_factory=list)  # not yet written
    pending: dict[str, NewEntity] = field(default_factory=dict)  # the same, by match key
    next_entity_id: int = 0
    latest: int = 0
    counts: dict[str, int] = field(default_factory=dict)

    def count(self, kind: str, count: int = 1) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + count

    def look_up(self, names: Iterable[str]) -> None:
        """Find which of `names` are stored entities, in one query rather than one a
        name (a batch names thousands): the others are new (`entity`)."""
        keys = {match_key(name) for name in set(names)} - self.entity_ids.keys()
        found = self.tx.all(FIND_ENTITIES, {"owner": self.owner, "keys": json_list(keys)})
        self.entity_ids.update((row["name_key"], row["id"]) for row in found)
        self.next_entity_id = self.tx.next_rowid("entity")

    def entity(
        self, name: str, entity_type: str, project: str | None, recorded_at: int
    ) -> tuple[int, bool]:
        """The id of a looked-up entity, and whether this creates it. A new one is given
        the id `insert_entities` will give it, and `_write_rows` writes it."""
        key = match_key(name)
        known = self.entity_ids.get(key)
        if known is not None:
            return known, False
        entity_id = self.entity_ids[key] = self.next_entity_id
        self.next_entity_id += 1
        new = NewEntity(
            self.owner,
            project or GLOBAL,
            display_name(name),
            key,
            entity_type,
            recorded_at,
            recorded_at,
        )
        self.new_entities.append(new)
        self.pending[key] = new
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
            if pending.entity_type == GENERAL:
                pending.entity_type = entity_type
            return
        entity_id = self.entity_ids[key]
        stored = self.tx.one(SELECT_ENTITY_TYPE, (entity_id,))
        if stored is not None and stored["entity_type"] == GENERAL:
            retype(self.tx, entity_id, entity_type)
            record_type(self.tx, GLOBAL, entity_id, entity_type, stored["recorded_at"])

    def entity_id(self, name: str, project: str | None, at: int) -> int:
        """The id of the entity a fact or relation names, created as `general` if new."""
        known = self.named.get(name)
        if known is None:
            known = self.named[name] = self.entity(name, GENERAL, project, at)[0]
        return known


def _named_entities(step: Step) -> tuple[str, ...]:
    """The entities a step of chronomem's own format names."""
    if type(step) is ObservationStep:
        return (step.entity,)
    if type(step) is RelationStep:
        return (step.source, step.target)
    if type(step) is EntityStep:
        return (step.name,)
    return ()


def write_batch(tx: Tx, scope: ScopeKey, raw_steps: Sequence[RawStep]) -> dict[str, int]:
    """Run a batch of import steps in `tx`; counts by kind. The steps of chronomem's own
    format between two of the reference format's are written together (`_write_rows`)."""
    with _collector_paused():
        return _write_steps(tx, scope, list(map(named_step, raw_steps)))


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic collector paused while a batch is written: its steps and rows
    are many objects it tracks (NamedTuples), none of them garbage, which would
    otherwise set off full collections that look at every object of the process."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _write_steps(tx: Tx, scope: ScopeKey, steps: list[Step]) -> dict[str, int]:
    owner = ensure_owner(tx, scope)
    batch = Batch(tx, scope, owner)
    for own, run in groupby(steps, key=lambda step: type(step) in OWN_KINDS):
        if own:
            _write_rows(batch, list(run))
            continue
        for step in run:
            try:
                WRITERS[type(step)](batch, step)
            except InvalidInputError as exc:
                raise InvalidInputError(f"line {step.line}: {exc}") from None
    if batch.latest > tx.now:  # later writes must come after imported history
        tx.run(ADVANCE_CLOCK_TO, {"latest": batch.latest})
    return batch.counts


# ---------------------------------------------------------------- own format, in bulk
#
# Rows are bound by position: a million rows bind faster so. ON CONFLICT (id): a
# row whose id is stored is skipped (a repeated import).

INSERT_OBSERVATION = """
    INSERT INTO observation (seq, id, owner_id, project, entity_id, text, text_key, attribute,
                             attribute_key, valid_from, valid_to, recorded_at, invalidated_at,
                             reason)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (id) DO NOTHING
"""


class ObservationRow(NamedTuple):
    seq: int  # the rowid
    id: str
    owner: int
    project: str
    entity_id: int
    text: str
    text_key: str
    attribute: str | None
    attribute_key: str | None
    valid_from: int
    valid_to: int | None
    recorded_at: int
    invalidated_at: int | None
    reason: str | None

    def latest(self) -> int:
        return max(self.recorded_at, self.invalidated_at or 0)

    def entities(self) -> tuple[int, ...]:
        return (self.entity_id,)


def _observation_row(batch: Batch, step: ObservationStep, seq: int) -> ObservationRow:
    attribute = step.attribute
    return ObservationRow(
        seq,
        step.id,
        batch.owner,
        step.project or GLOBAL,
        batch.entity_id(step.entity, step.project, step.recorded_at),
        step.text,
        match_key(step.text),
        display_name(attribute) if attribute else None,
        match_key(attribute) if attribute else None,
        step.valid_from,
        step.valid_to,
        step.recorded_at,
        step.invalidated_at,
        step.reason,
    )


INSERT_RELATION = """
    INSERT INTO relation (seq, id, owner_id, project, source_id, relation, target_id,
                          valid_from, valid_to, recorded_at, invalidated_at, reason)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (id) DO NOTHING
"""


class RelationRow(NamedTuple):
    seq: int  # the rowid
    id: str
    owner: int
    project: str
    source_id: int
    relation: str
    target_id: int
    valid_from: int
    valid_to: int | None
    recorded_at: int
    invalidated_at: int | None
    reason: str | None

    def latest(self) -> int:
        return max(self.recorded_at, self.invalidated_at or 0)

    def entities(self) -> tuple[int, ...]:
        return (self.source_id, self.target_id)


def _relation_row(batch: Batch, step: RelationStep, seq: int) -> RelationRow:
    project, at = step.project, step.recorded_at
    source_id = batch.entity_id(step.source, project, at)  # source first, as written
    target_id = batch.entity_id(step.target, project, at)
    return RelationRow(
        seq,
        step.id,
        batch.owner,
        project or GLOBAL,
        source_id,
        step.relation,
        target_id,
        step.valid_from,
        step.valid_to,
        at,
        step.invalidated_at,
        step.reason,
    )


INSERT_TURN = """
    INSERT INTO turn (seq, id, owner_id, project, session_id, role, text, at, recorded_at)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (id) DO NOTHING
"""


class TurnRow(NamedTuple):
    seq: int  # the rowid
    id: str
    owner: int
    project: str
    session_id: str
    role: str
    text: str
    at: int
    recorded_at: int

    def latest(self) -> int:
        return self.recorded_at

    def entities(self) -> tuple[int, ...]:
        return ()  # a turn names no entity


Row = ObservationRow | RelationRow | TurnRow


class RowKind(NamedTuple):
    """How a step of chronomem's own format becomes a row: its table, its INSERT, and
    its values, given its rowid."""

    table: str
    insert: str
    row: Callable[[Batch, Any, int], Row]


def _turn_row(batch: Batch, step: TurnStep, seq: int) -> TurnRow:
    return TurnRow(
        seq,
        step.id,
        batch.owner,
        step.project or GLOBAL,
        step.session_id,
        step.role,
        step.text,
        step.at,
        step.recorded_at,
    )


ROW_KINDS: dict[type[Step], RowKind] = {
    ObservationStep: RowKind("observation", INSERT_OBSERVATION, _observation_row),
    RelationStep: RowKind("relation", INSERT_RELATION, _relation_row),
    TurnStep: RowKind("turn", INSERT_TURN, _turn_row),
}
OWN_KINDS = {EntityStep, *ROW_KINDS}


class KindRows(NamedTuple):
    """The steps of one kind in a run, and their rows, in the same order, numbered
    from `first` (`Tx.next_rowid`)."""

    first: int
    steps: list[Any]
    rows: list[Any]


class Skipped(NamedTuple):
    line: int
    table: str
    id: str


def _write_rows(batch: Batch, steps: list[Step]) -> None:
    """Write steps of chronomem's own format with one statement a kind (`Tx.add_rows`),
    each row numbered as it is built.
    The entities they name are looked up at once and the new ones numbered in step
    order, as `insert_entities` numbers them; rowids too are in order within each
    kind. A new entity is written with the changed_at its rows give it, so only the
    entities stored before are updated."""
    tx = batch.tx
    batch.look_up(name for step in steps for name in _named_entities(step))
    first_new = batch.next_entity_id
    by_kind: dict[type[Step], KindRows] = {}
    for step in steps:
        if type(step) is EntityStep:
            created = batch.entity(step.name, step.entity_type, step.project, step.recorded_at)[1]
            if not created:
                batch.give_type(step.name, step.entity_type)
            batch.count("entities" if created else "skipped")
            continue
        row_kind = ROW_KINDS[type(step)]
        kind = by_kind.get(type(step))
        if kind is None:
            kind = by_kind[type(step)] = KindRows(tx.next_rowid(row_kind.table), [], [])
        kind.steps.append(step)
        kind.rows.append(row_kind.row(batch, step, kind.first + len(kind.rows)))
    new_entities, batch.new_entities = batch.new_entities, []
    batch.pending.clear()
    expected = _changed_at(kind.rows for kind in by_kind.values())
    for entity_id, entity in enumerate(new_entities, start=first_new):
        entity.changed_at = max(entity.recorded_at, expected.get(entity_id, 0))
    if new_entities:
        created_ids = insert_entities(tx, new_entities)
        if list(created_ids) != list(range(first_new, first_new + len(new_entities))):
            raise RuntimeError("entity ids are not the ones insert_entities gave")
    skipped: list[Skipped] = []
    kept_rows = []
    for step_type, kind in by_kind.items():
        kept, kind_skipped = _insert_rows(batch, ROW_KINDS[step_type], kind)
        kept_rows.append(kept)
        skipped += kind_skipped
    for line, table, identifier in sorted(skipped):  # the first in line order is told
        holder = tx.one(ID_OWNER[table], (identifier,))
        if holder is not None and holder["owner_id"] != batch.owner:
            raise InvalidInputError(
                f"line {line}: id {identifier!r} belongs to another memory; not imported"
            )
        batch.count("skipped")
    changed = _changed_at(kept_rows) if skipped else expected
    tx.run_many(RAISE_CHANGED_IN_PROJECT, _project_changes(batch.owner, kept_rows))
    if skipped:  # a new entity's skipped rows do not count: set its changed_at again
        tx.run_many(
            SET_CHANGED_AT,
            [
                (max(entity.recorded_at, changed.get(entity_id, 0)), entity_id)
                for entity_id, entity in enumerate(new_entities, start=first_new)
                if max(entity.recorded_at, changed.get(entity_id, 0)) != entity.changed_at
            ],
        )
    tx.raise_changed_at({id_: at for id_, at in changed.items() if id_ < first_new})


def _named(rows_by_kind: Iterable[list[Row]]) -> Iterator[tuple[int, str, int]]:
    """(entity, project, recorded_at) for each entity each row names."""
    for rows in rows_by_kind:
        for row in rows:
            for entity_id in row.entities():
                yield entity_id, row.project, row.recorded_at


def _changed_at(rows_by_kind: Iterable[list[Row]]) -> dict[int, int]:
    """The latest recorded_at of the global facts and relations in `rows_by_kind` for
    each entity they name: `schema.CHANGED_NEW` in Python. (A project's rows raise the
    entity in that project: `_project_changes`.)"""
    latest: dict[int, int] = {}
    for entity_id, project, recorded_at in _named(rows_by_kind):
        if project == GLOBAL and recorded_at > latest.get(entity_id, -1):
            latest[entity_id] = recorded_at
    return latest


RAISE_CHANGED_IN_PROJECT = UPSERT_ENTITY_CHANGE.format(values="VALUES (?, ?, ?, ?)")


def _project_changes(
    owner: int, rows_by_kind: Iterable[list[Row]]
) -> list[tuple[int, str, int, int]]:
    """(entity, project, owner, latest recorded_at) for the project rows of
    `rows_by_kind`, as `schema.CHANGED_NEW` raises them in `entity_change`."""
    latest: dict[tuple[int, str], int] = {}
    for entity_id, project, recorded_at in _named(rows_by_kind):
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


def _insert_rows(batch: Batch, kind: RowKind, rows: KindRows) -> tuple[list[Row], list[Skipped]]:
    """Insert the rows of one kind but those whose id is stored. Returns the rows
    inserted, and each row skipped."""
    inserted = batch.tx.add_numbered_rows(
        kind.table, kind.insert, rows.rows, rows.first, raise_changed=False
    )
    kept: list[Row] = rows.rows
    skipped = []
    if len(inserted) < len(rows.rows):  # some ids were stored (a repeated import): which?
        new_ids = {row["id"] for row in batch.tx.all(IDS_AT[kind.table], (json_list(inserted),))}
        kept = []
        for step, row in zip(rows.steps, rows.rows, strict=True):
            if row.id in new_ids:
                new_ids.discard(row.id)  # an id twice in a batch: only the first is new
                kept.append(row)
            else:
                skipped.append(Skipped(step.line, kind.table, row.id))
    if kept:
        batch.count(kind.table + "s", len(kept))
        batch.latest = max(batch.latest, *(row.latest() for row in kept))
    return kept, skipped


# ---------------------------------------------------------------- one step at a time


def _write_reference_entity(batch: Batch, step: ReferenceEntityStep) -> None:
    """A reference-format entity with no observations, created now in this scope."""
    tx = batch.tx
    key = match_key(step.name)
    known = batch.entity_ids.get(key)
    if known is None:
        row = tx.one(FIND_ENTITY, {"owner": batch.owner, "key": key})
        known = None if row is None else row["id"]
    if known is not None:
        batch.entity_ids[key] = known
        batch.give_type(step.name, step.entity_type)
        batch.count("skipped")
        return
    new = NewEntity.named(batch.owner, batch.scope.project, step.name, step.entity_type, tx.now)
    (batch.entity_ids[key],) = insert_entities(tx, [new])
    batch.latest = max(batch.latest, tx.now)
    batch.count("entities")


def _remember(batch: Batch, step: RememberStep) -> None:
    args = parse_arguments(
        RememberArgs, entity=step.name, facts=step.facts, entity_type=step.entity_type
    )
    result = remember(batch.tx, batch.scope, args)
    batch.count("observations", len(result.added))
    batch.count("skipped", len(result.duplicates))
    if result.entity.created:
        batch.count("entities")


def _relate(batch: Batch, step: RelateStep) -> None:
    args = parse_arguments(
        RelateArgs, source=step.source, relation=step.relation, target=step.target
    )
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


def _write_closing(batch: Batch, step: ClosingStep) -> None:
    """A project's own closing of a global fact or relation of this memory."""
    tx = batch.tx
    for table, statement in FIND_GLOBAL_ROW.items():  # noqa: B007 (used after the loop)
        row = tx.one(statement, (step.id, batch.owner))
        if row is not None:
            break
    else:
        raise InvalidInputError(
            f"id: no global fact or relation {step.id!r} in this memory for this closing"
        )
    if step.valid_to < row["valid_from"]:
        raise InvalidInputError(f"valid_to: before {step.id!r} began")
    values = (
        row["seq"],
        step.project,
        batch.owner,
        step.valid_to,
        step.invalidated_at,
        step.reason,
    )
    batch.count("closings" if tx.run(INSERT_CLOSING_ROW[table], values) else "skipped")
    batch.latest = max(batch.latest, step.invalidated_at)


def _write_project_type(batch: Batch, step: ProjectTypeStep) -> None:
    """The type a project gave an entity of this memory for itself."""
    tx = batch.tx
    row = tx.one(FIND_ENTITY, {"owner": batch.owner, "key": match_key(step.name)})
    if row is None:
        raise InvalidInputError(f"name: no entity named {step.name!r} in this memory for this type")
    values = {
        "id": row["id"],
        "project": step.project,
        "owner": batch.owner,
        "entity_type": step.entity_type,
    }
    tx.run(SET_PROJECT_TYPE, values)
    implied_project_version(tx, row["id"], step.project, step.entity_type)


WRITERS: dict[type[Step], Callable[[Batch, Any], None]] = {  # one step at a time
    ClosingStep: _write_closing,
    ProjectTypeStep: _write_project_type,
    ReferenceEntityStep: _write_reference_entity,
    RememberStep: _remember,
    RelateStep: _relate,
    **entity_records.WRITERS,
}
