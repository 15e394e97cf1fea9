"""The write operations: remember, relate, forget, record_turns.

Each runs inside one write transaction; it checks everything before it changes
anything, and an exception rolls the whole call back (DESIGN §7).
"""

from __future__ import annotations

import secrets
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .entity_life import is_deleted, record_first_types, record_life, record_type
from .errors import InvalidInputError
from .models import (
    CreateEntityArgs,
    DeleteEntitiesArgs,
    DeleteEntitiesResult,
    EntityRef,
    ForgetArgs,
    ForgetResult,
    RecordTurnsArgs,
    RecordTurnsResult,
    RelateArgs,
    RelateResult,
    RememberArgs,
    RememberResult,
)
from .names import display_name, match_key, relation_type
from .overlay import CLOSE_ROW, GLOBAL, INSERT_CLOSING, SEEN, SET_PROJECT_TYPE, closing_rows
from .queries import (
    RELATION_COLUMNS,
    SELECT_OBSERVATION_BY_ID,
    SELECT_RELATION_BY_ID,
    ScopeKey,
    ensure_owner,
    find_owner,
    visible_entities,
    visible_entity,
)
from .restatement import restated
from .schema import RETYPE_FTS_STATS
from .store import Tx, json_list
from .temporal import Moment, observation_view, relation_view
from .timestamps import format_time
from .validation import IDS_PER_CALL


def new_id(prefix: str) -> str:
    """Opaque ids; the prefix keeps observation, relation and turn ids apart."""
    return f"{prefix}_{secrets.token_hex(8)}"


# ---------------------------------------------------------------- entities

SELECT_ENTITY = (
    f"SELECT e.* FROM {SEEN['entity']} e WHERE e.owner_id = :owner AND e.name_key = :key"
)
INSERT_ENTITY = """
    INSERT INTO entity (id, owner_id, project, name, name_key, entity_type, recorded_at,
                        changed_at)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
"""
UPDATE_ENTITY_TYPE = "UPDATE entity SET entity_type = :entity_type WHERE id = :id"
GENERAL = "general"  # the type of an entity created without one


@dataclass
class EntityRow:
    id: int
    name: str
    entity_type: str
    created: bool

    def ref(self) -> EntityRef:
        return EntityRef(name=self.name, entity_type=self.entity_type, created=self.created)


@dataclass(slots=True)
class NewEntity:
    """An entity row to insert (`insert_entities`); `changed_at` may be raised before."""

    owner: int
    project: str
    name: str
    key: str
    entity_type: str
    recorded_at: int
    changed_at: int

    @classmethod
    def named(
        cls, owner: int, project: str, name: str, entity_type: str, recorded_at: int
    ) -> NewEntity:
        """A new entity as written: its name as displayed and its match key."""
        key = match_key(name)
        return cls(owner, project, display_name(name), key, entity_type, recorded_at, recorded_at)


def insert_entities(tx: Tx, entities: Sequence[NewEntity]) -> Sequence[int]:
    """Insert new entities, in order, with one statement: the one way an entity is
    written (operations one at a time, the bulk import a batch at a time). Returns
    their ids, in the same order."""
    rows = [
        (e.owner, e.project, e.name, e.key, e.entity_type, e.recorded_at, e.changed_at)
        for e in entities
    ]
    ids = tx.add_rows("entity", INSERT_ENTITY, rows)
    record_first_types(tx, ids)
    return ids


def upsert_entity(
    tx: Tx, scope: ScopeKey, owner: int, name: str, entity_type: str | None
) -> EntityRow:
    """The entity named `name`, created if new; a given type replaces the old one (in
    a project, for that project only, unless the entity is new in this transaction)."""
    row = tx.one(SELECT_ENTITY, scope.params(owner, key=match_key(name)))
    if row is None:
        new = NewEntity.named(owner, scope.project, name, entity_type or GENERAL, tx.now)
        (entity_id,) = insert_entities(tx, [new])
        return EntityRow(entity_id, new.name, new.entity_type, created=True)
    if is_deleted(tx, scope.project, row["id"]):  # written about again: it is back
        record_life(tx, scope.project, row["id"], alive=True)
    kind = row["entity_type"]
    if entity_type is not None and entity_type != kind:
        if scope.project and row["recorded_at"] < tx.now:
            tx.run(
                SET_PROJECT_TYPE,
                {
                    "id": row["id"],
                    "project": scope.project,
                    "owner": owner,
                    "entity_type": entity_type,
                },
            )
            record_type(tx, scope.project, row["id"], entity_type, tx.now)
        else:
            retype(tx, row["id"], entity_type)
            record_type(tx, GLOBAL, row["id"], entity_type, tx.now)
        kind = entity_type
    return EntityRow(row["id"], row["name"], kind, created=False)


def retype(tx: Tx, entity_id: int, entity_type: str) -> None:
    """Give a stored entity another type (its type's tokens in the search statistics
    too)."""
    tx.index_new_rows()  # the entity may be new in this transaction, not yet indexed
    stats = {"id": entity_id, "owner": tx.owner}
    tx.run(RETYPE_FTS_STATS, {**stats, "sign": -1})
    tx.run(UPDATE_ENTITY_TYPE, {"entity_type": entity_type, "id": entity_id})
    tx.run(RETYPE_FTS_STATS, {**stats, "sign": 1})


# ---------------------------------------------------------------- closing rows


def _check_closable(row: sqlite3.Row, valid_to: int, field: str) -> None:
    if valid_to < row["valid_from"]:
        raise InvalidInputError(
            f"{field}: {format_time(valid_to)} is before {row['id']} began "
            f"({format_time(row['valid_from'])}); a fact cannot end before it began"
        )


def _close(
    tx: Tx,
    scope: ScopeKey,
    table: str,
    rows: Iterable[sqlite3.Row],
    valid_to: int,
    reason: str | None,
) -> None:
    """Close `rows` (open as `scope` sees them) at `valid_to`: inside a project, a
    global row is closed for that project only (`overlay`)."""
    assert tx.owner is not None
    on_row, overlaid = closing_rows(rows, scope.project, tx.owner, valid_to, tx.now, reason)
    if on_row:
        tx.run_many(CLOSE_ROW[table], on_row)
    if overlaid:
        tx.run_many(INSERT_CLOSING[table], overlaid)


def _resolve_replaces(
    tx: Tx, scope: ScopeKey, owner: int, ids: Sequence[str] | None, kind: str, valid_from: int
) -> list[sqlite3.Row]:
    """The open rows `replaces` names; already-closed ones are skipped so a retried call
    is harmless. Raises for ids unknown in this scope, of the wrong kind, or that would
    close before they began."""
    own, other = (
        (SELECT_OBSERVATION_BY_ID, SELECT_RELATION_BY_ID)
        if kind == "observation"
        else (SELECT_RELATION_BY_ID, SELECT_OBSERVATION_BY_ID)
    )
    rows: dict[int, sqlite3.Row] = {}
    for index, item in enumerate(ids or ()):
        row = tx.one(own, scope.params(owner, id=item))
        if row is None:
            if tx.one(other, scope.params(owner, id=item)) is not None:
                hint = (
                    "remember replaces facts; use relate to replace relations"
                    if kind == "observation"
                    else "relate replaces relations; use remember to replace facts"
                )
                noun = "an observation" if kind == "observation" else "a relation"
                raise InvalidInputError(f"replaces[{index}]: {item!r} is not {noun}; {hint}")
            raise InvalidInputError(f"replaces[{index}]: no {kind} with id {item!r} in this scope")
        if row["valid_to"] is None:
            rows[row["seq"]] = row
    for row in rows.values():
        _check_closable(row, valid_from, "valid_from")
    return list(rows.values())


def _backfill_end(slot_starts: Iterable[int], valid_from: int) -> int | None:
    """Where a fact for a slot must end if it is older than the slot's latest fact:
    at the next later fact's start (DESIGN §2, Backfill). None when it is not older."""
    later = [start for start in slot_starts if start > valid_from]
    return min(later) if later else None


def _superseded_reason(new_ids: Sequence[str]) -> str:
    return "superseded by " + ", ".join(new_ids) if new_ids else "superseded"


# ---------------------------------------------------------------- remember

# In the order they were written: of two open copies of a text (one global, one in
# the project), the later one is the duplicate a call reports.
SELECT_OPEN_FACTS = f"""
    SELECT o.* FROM {SEEN["observation"]} o
    WHERE o.entity_id = :entity AND o.valid_to IS NULL AND o.project IN (:g, :p)
    ORDER BY o.seq
"""
SELECT_SLOT = f"""
    SELECT o.* FROM {SEEN["observation"]} o
    WHERE o.entity_id = :entity AND o.attribute_key = :attribute AND o.project IN (:g, :p)
    ORDER BY o.seq
"""
INSERT_OBSERVATION = """
    INSERT INTO observation (seq, id, owner_id, project, entity_id, text, text_key, attribute,
                             attribute_key, valid_from, valid_to, recorded_at, invalidated_at)
    VALUES (:rowid, :id, :owner, :project, :entity, :text, :key, :attribute, :attribute_key,
            :valid_from, :valid_to, :now, :invalidated_at)
"""
SELECT_OBSERVATIONS_BY_SEQ = f"""
    SELECT o.* FROM {SEEN["observation"]} o
    WHERE o.seq IN (SELECT value FROM json_each(:seqs)) ORDER BY o.seq
"""


def remember(tx: Tx, scope: ScopeKey, args: RememberArgs) -> RememberResult:
    owner = ensure_owner(tx, scope)
    entity = upsert_entity(tx, scope, owner, args.entity, args.entity_type)
    valid_from = tx.now if args.valid_from is None else args.valid_from
    params = scope.params(owner, entity=entity.id)

    closing = {
        row["seq"]: row
        for row in _resolve_replaces(tx, scope, owner, args.replaces, "observation", valid_from)
    }
    visible_open = tx.all(SELECT_OPEN_FACTS, params)
    open_facts = [row for row in visible_open if row["seq"] not in closing]
    attribute_key = match_key(args.attribute) if args.attribute else None
    ends_at: int | None = None
    if attribute_key is not None:
        call_keys = {match_key(fact) for fact in args.facts}
        slot = tx.all(SELECT_SLOT, {**params, "attribute": attribute_key})
        ends_at = _backfill_end((row["valid_from"] for row in slot), valid_from)
        if ends_at is None:  # not a backfill: the call's facts become the whole slot
            for row in slot:
                if row["valid_to"] is None and row["text_key"] not in call_keys:
                    closing.setdefault(row["seq"], row)
            for row in open_facts:  # the same text open outside the slot moves into it
                if row["attribute_key"] != attribute_key and row["text_key"] in call_keys:
                    _check_closable(row, valid_from, "valid_from")
                    closing.setdefault(row["seq"], row)
        # Only the slot's own open facts make a call's fact a duplicate.
        open_facts = [
            row
            for row in open_facts
            if row["attribute_key"] == attribute_key and row["seq"] not in closing
        ]
    open_by_key = {row["text_key"]: row for row in open_facts}

    new_texts: dict[str, str] = {}  # key -> text, first spelling in the call
    duplicate_keys: list[str] = []
    for fact in args.facts:
        key = match_key(fact)
        if key in open_by_key or key in new_texts:
            duplicate_keys.append(key)
        else:
            new_texts[key] = fact

    new_ids = {key: new_id("o") for key in new_texts}
    _close(
        tx,
        scope,
        "observation",
        closing.values(),
        valid_from,
        _superseded_reason(list(new_ids.values())),
    )
    tx.add_many(
        "observation",
        INSERT_OBSERVATION,
        [
            {
                "id": new_ids[key],
                "owner": owner,
                "project": scope.project,
                "entity": entity.id,
                "text": text,
                "key": key,
                "attribute": display_name(args.attribute) if args.attribute else None,
                "attribute_key": attribute_key,
                "valid_from": valid_from,
                "valid_to": ends_at,
                "now": tx.now,
                "invalidated_at": tx.now if ends_at is not None else None,
            }
            for key, text in new_texts.items()
        ],
    )

    at = Moment(tx.now, tx.now)
    added = {
        row["text_key"]: observation_view(row, at)
        for row in tx.all(
            "SELECT * FROM observation WHERE id IN (SELECT value FROM json_each(:ids))"
            " ORDER BY seq",
            {"ids": json_list(new_ids.values())},
        )
    }
    superseded = (
        tx.all(SELECT_OBSERVATIONS_BY_SEQ, scope.params(owner, seqs=json_list(closing)))
        if closing
        else []
    )
    # A backfill is history: an open fact restating it is no repeat.
    similar = (
        _similar(visible_open, closing, {*new_texts, *duplicate_keys}, new_texts)
        if new_texts and ends_at is None
        else []
    )
    return RememberResult(
        entity=entity.ref(),
        added=[added[key] for key in new_texts],
        duplicates=[
            observation_view(open_by_key[key], at) if key in open_by_key else added[key]
            for key in duplicate_keys
        ],
        superseded=[observation_view(row, at) for row in superseded],
        similar=[observation_view(row, at) for row in similar],
    )


def _similar(
    visible_open: Sequence[sqlite3.Row],
    closing: dict[int, sqlite3.Row],
    call_keys: set[str],
    new_texts: dict[str, str],
) -> list[sqlite3.Row]:
    """The open facts, of those the call leaves open and does not repeat, that an added
    fact restates (DESIGN §8), most alike first."""
    known = [
        row
        for row in visible_open
        if row["seq"] not in closing and row["text_key"] not in call_keys
    ]
    found = restated(list(new_texts.values()), [row["text"] for row in known])
    return [known[index] for index in found]


# ---------------------------------------------------------------- relate

SELECT_OPEN_TRIPLE = f"""
    SELECT {RELATION_COLUMNS}
    WHERE r.source_id = :source AND r.relation = :relation AND r.target_id = :target
      AND r.valid_to IS NULL AND r.project IN (:g, :p)
    ORDER BY r.seq
"""
SELECT_RELATION_SLOT = f"""
    SELECT {RELATION_COLUMNS}
    WHERE r.source_id = :source AND r.relation = :relation AND r.project IN (:g, :p)
"""
INSERT_RELATION = """
    INSERT INTO relation (seq, id, owner_id, project, source_id, relation, target_id,
                          valid_from, valid_to, recorded_at, invalidated_at)
    VALUES (:rowid, :id, :owner, :project, :source, :relation, :target,
            :valid_from, :valid_to, :now, :invalidated_at)
"""
SELECT_RELATIONS_BY_SEQ = f"""
    SELECT {RELATION_COLUMNS}
    WHERE r.seq IN (SELECT value FROM json_each(:seqs)) ORDER BY r.seq
"""


def relate(tx: Tx, scope: ScopeKey, args: RelateArgs) -> RelateResult:
    kind = relation_type(args.relation)
    owner = ensure_owner(tx, scope)
    source = upsert_entity(tx, scope, owner, args.source, args.source_type)
    target = upsert_entity(tx, scope, owner, args.target, args.target_type)
    valid_from = tx.now if args.valid_from is None else args.valid_from
    params = scope.params(owner, source=source.id, relation=kind, target=target.id)

    closing = {
        row["seq"]: row
        for row in _resolve_replaces(tx, scope, owner, args.replaces, "relation", valid_from)
    }
    # The same triple can be open twice in view: once global, once in this project
    # (after a project call replaced the global one, and a global call stated it
    # again). The oldest one not being replaced is the existing one; when the call
    # replaces every copy of the triple it states, it is recorded anew.
    existing = next(
        (row for row in tx.all(SELECT_OPEN_TRIPLE, params) if row["seq"] not in closing), None
    )

    ends_at: int | None = None
    if args.exclusive:
        slot = [
            row
            for row in tx.all(SELECT_RELATION_SLOT, params)
            if existing is None or row["seq"] != existing["seq"]
        ]
        # A backfill (older than the slot's latest relation) closes nothing; with an
        # existing triple it is simply that triple, unchanged.
        ends_at = _backfill_end((row["valid_from"] for row in slot), valid_from)
        if ends_at is None:  # not a backfill: this relation is now the only one of its type
            for row in slot:
                if row["valid_to"] is None and row["seq"] not in closing:
                    _check_closable(row, valid_from, "valid_from")
                    closing[row["seq"]] = row

    relation_id = existing["id"] if existing is not None else new_id("r")
    _close(tx, scope, "relation", closing.values(), valid_from, _superseded_reason([relation_id]))
    if existing is None:
        tx.add(
            "relation",
            INSERT_RELATION,
            {
                **params,
                "id": relation_id,
                "project": scope.project,
                "valid_from": valid_from,
                "valid_to": ends_at,
                "now": tx.now,
                "invalidated_at": tx.now if ends_at is not None else None,
            },
        )

    at = Moment(tx.now, tx.now)
    stored = tx.one(
        f"SELECT {RELATION_COLUMNS} WHERE r.id = :id", scope.params(owner, id=relation_id)
    )
    assert stored is not None
    superseded = (
        tx.all(SELECT_RELATIONS_BY_SEQ, scope.params(owner, seqs=json_list(closing)))
        if closing
        else []
    )
    return RelateResult(
        relation=relation_view(stored, at),
        existing=existing is not None,
        created_entities=[entity.name for entity in (source, target) if entity.created],
        superseded=[relation_view(item, at) for item in superseded],
    )


# ---------------------------------------------------------------- forget

SELECT_OPEN_FACTS_OF_ENTITIES = f"""
    SELECT o.* FROM {SEEN["observation"]} o
    WHERE o.entity_id IN (SELECT value FROM json_each(:entities))
      AND o.valid_to IS NULL AND o.project IN (:g, :p)
"""
SELECT_OPEN_RELATIONS_OF_ENTITIES = f"""
    SELECT r.* FROM {SEEN["relation"]} r
    WHERE (r.source_id IN (SELECT value FROM json_each(:entities))
           OR r.target_id IN (SELECT value FROM json_each(:entities)))
      AND r.valid_to IS NULL AND r.project IN (:g, :p)
"""


def forget(tx: Tx, scope: ScopeKey, args: ForgetArgs) -> ForgetResult:
    ids = list(dict.fromkeys(args.ids or ()))
    names = list(dict.fromkeys(args.entities or ()))
    if not ids and not names:
        raise InvalidInputError("ids: forget needs at least one id in ids or name in entities")
    if len(args.ids or ()) + len(args.entities or ()) > IDS_PER_CALL:
        raise InvalidInputError(
            f"ids: {len(args.ids or ()) + len(args.entities or ())} ids and names in all; "
            f"at most {IDS_PER_CALL} per call"
        )
    owner = find_owner(tx, scope)
    if owner is None:
        return ForgetResult(invalidated=[], already_invalid=[], not_found=ids + names)
    valid_to = tx.now if args.valid_to is None else args.valid_to

    facts: dict[int, sqlite3.Row] = {}
    relations: dict[int, sqlite3.Row] = {}
    result = ForgetResult(invalidated=[], already_invalid=[], not_found=[])
    for item in ids:
        row = tx.one(SELECT_OBSERVATION_BY_ID, scope.params(owner, id=item))
        bucket = facts
        if row is None:
            row = tx.one(SELECT_RELATION_BY_ID, scope.params(owner, id=item))
            bucket = relations
        if row is None:
            result.not_found.append(item)
        elif row["valid_to"] is not None:
            result.already_invalid.append(item)
        else:
            bucket[row["seq"]] = row

    entity_ids = []
    for name in names:
        found = visible_entity(tx, scope, owner, match_key(name), tx.now)
        if found is None:
            result.not_found.append(name)
        else:
            entity_ids.append(found["id"])
    if entity_ids:
        entity_params = scope.params(owner, entities=json_list(entity_ids))
        for row in tx.all(SELECT_OPEN_FACTS_OF_ENTITIES, entity_params):
            facts.setdefault(row["seq"], row)
        for row in tx.all(SELECT_OPEN_RELATIONS_OF_ENTITIES, entity_params):
            relations.setdefault(row["seq"], row)

    for row in (*facts.values(), *relations.values()):
        _check_closable(row, valid_to, "valid_to")
    _close(tx, scope, "observation", facts.values(), valid_to, args.reason)
    _close(tx, scope, "relation", relations.values(), valid_to, args.reason)
    result.invalidated.extend(row["id"] for row in (*facts.values(), *relations.values()))
    return result


# ---------------------------------------------------------------- record_turns

INSERT_TURN = """
    INSERT INTO turn (seq, id, owner_id, project, session_id, role, text, at, recorded_at)
    VALUES (:rowid, :id, :owner, :project, :session_id, :role, :text, :at, :now)
"""


def record_turns(tx: Tx, scope: ScopeKey, args: RecordTurnsArgs) -> RecordTurnsResult:
    owner = ensure_owner(tx, scope)
    ids = [new_id("t") for _ in args.turns]
    tx.add_many(
        "turn",
        INSERT_TURN,
        [
            {
                "id": turn_id,
                "owner": owner,
                "project": scope.project,
                "session_id": args.session_id,
                "role": turn.role,
                "text": turn.text,
                "at": tx.now if turn.at is None else turn.at,
                "now": tx.now,
            }
            for turn_id, turn in zip(ids, args.turns, strict=True)
        ],
    )
    return RecordTurnsResult(stored=len(ids), ids=ids)


# ---------------------------------------------------------------- entities themselves


def create_entity(tx: Tx, scope: ScopeKey, args: CreateEntityArgs) -> EntityRef:
    """The entity, created with no facts if new; a given type replaces its old one, and
    a deleted entity is back (as any write about it brings it back)."""
    owner = ensure_owner(tx, scope)
    return upsert_entity(tx, scope, owner, args.name, args.entity_type).ref()


def delete_entities(tx: Tx, scope: ScopeKey, args: DeleteEntitiesArgs) -> DeleteEntitiesResult:
    """Close every open fact and relation of the entities, as `forget(entities=...)`
    does, and record that this context deleted the entities themselves (`entity_life`):
    reads from now on leave them out; reads at an earlier `known_at` still see them."""
    names = list({match_key(name): name for name in args.names}.values())
    owner = find_owner(tx, scope)
    if owner is None:
        return DeleteEntitiesResult(deleted=[], invalidated=[], not_found=names)
    valid_to = tx.now if args.valid_to is None else args.valid_to
    found = visible_entities(tx, scope, owner, [match_key(name) for name in names], tx.now)
    result = DeleteEntitiesResult(deleted=[], invalidated=[], not_found=[])
    entity_ids = []
    for name in names:
        row = found.get(match_key(name))
        if row is None:
            result.not_found.append(name)
        else:
            result.deleted.append(row["name"])
            entity_ids.append(row["id"])
    if not entity_ids:
        return result
    entity_params = scope.params(owner, entities=json_list(entity_ids))
    facts = tx.all(SELECT_OPEN_FACTS_OF_ENTITIES, entity_params)
    relations = tx.all(SELECT_OPEN_RELATIONS_OF_ENTITIES, entity_params)
    for table, rows in (("observation", facts), ("relation", relations)):
        if args.valid_to is not None:  # an end the caller chose must come after each start
            for row in rows:
                _check_closable(row, valid_to, "valid_to")
        begun = [row for row in rows if row["valid_from"] <= valid_to]
        _close(tx, scope, table, begun, valid_to, args.reason)
        # What was to begin later ends as it begins: a deleted entity keeps no plans.
        for row in rows:
            if row["valid_from"] > valid_to:
                _close(tx, scope, table, [row], row["valid_from"], args.reason)
    for entity_id in entity_ids:
        record_life(tx, scope.project, entity_id, alive=False)
    result.invalidated.extend(row["id"] for row in (*facts, *relations))
    return result
