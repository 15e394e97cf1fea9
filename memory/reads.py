"""The graph reads: open_nodes, read_graph, history.

Each runs in one read snapshot and resolves `as_of`/`known_at` (default: now)
into a `Moment` once, so every row of an answer is judged at the same instant.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import sqlite3

from .entity_life import (
    NOT_DELETED,
    TypeRecord,
    deletions_of,
    type_versions,
    types_then,
)
from .errors import InvalidInputError
from .models import (
    Entity,
    EntityDeletion,
    HistoryArgs,
    HistoryResult,
    Observation,
    OpenNodesArgs,
    OpenNodesResult,
    ReadGraphArgs,
    ReadGraphResult,
    Relation,
    TimelineObservation,
    TimelineRelation,
    TypeVersion,
)
from .names import match_key
from .overlay import SEEN
from .queries import (
    ENTITY_VISIBLE,
    ScopeKey,
    find_owner,
    observations_of,
    relations_of,
    visible_entities,
    visible_entity,
)
from .schema import owner_range
from .store import Tx
from .temporal import Moment
from .timestamps import format_time, parse_time


def moment(tx: Tx, as_of: int | None, known_at: int | None) -> Moment:
    return Moment(
        as_of=tx.now if as_of is None else as_of,
        known_at=tx.now if known_at is None else known_at,
    )


def open_nodes(tx: Tx, scope: ScopeKey, args: OpenNodesArgs) -> OpenNodesResult:
    at = moment(tx, args.as_of, args.known_at)
    owner = find_owner(tx, scope)
    keys = list(dict.fromkeys(match_key(name) for name in args.names))
    found = visible_entities(tx, scope, owner, keys, at.known_at)
    rows: dict[str, sqlite3.Row] = {}
    missing: list[str] = []
    for name in args.names:
        key = match_key(name)
        if key in found:
            rows.setdefault(key, found[key])
        elif name not in missing:
            missing.append(name)
    if owner is None or not rows:
        return OpenNodesResult(entities=[], relations=[], missing=missing)
    ids = [row["id"] for row in rows.values()]
    facts = observations_of(tx, scope, owner, ids, at, args.include_history)
    relations = relations_of(tx, scope, owner, ids, at, args.include_history, touching=True)
    types = types_then(tx, scope.project, ids, at)
    entities = [_entity(row, types, facts) for row in rows.values()]
    return OpenNodesResult(entities=entities, relations=relations, missing=missing)


def _entity(row: sqlite3.Row, types: dict[int, str], facts: dict[int, list[Observation]]) -> Entity:
    """The entity of `row`, with its type at the read's moment where that is not today's."""
    entity_type = types.get(row["id"], row["entity_type"])
    return Entity(name=row["name"], entity_type=entity_type, observations=facts[row["id"]])


SELECT_PAGE = f"""
    SELECT e.* FROM {SEEN["entity"]} e
    WHERE e.id > :after AND {ENTITY_VISIBLE}
    ORDER BY e.id LIMIT :limit
"""
# The same entities as ENTITY_VISIBLE, counted in two parts so that the usual one,
# entities of the scope's own projects, is counted from an index alone.
COUNT_VISIBLE = f"""
    SELECT (SELECT count(*) FROM entity
            WHERE owner_id = :owner AND project IN (:g, :p) AND recorded_at <= :known_at)
         - (SELECT count(*) FROM entity e  -- of those, the ones the context deleted
            WHERE e.id IN (SELECT entity_id FROM entity_life
                           WHERE owner_id = :owner AND project IN (:g, :p))
              AND e.project IN (:g, :p) AND e.recorded_at <= :known_at
              AND NOT ({NOT_DELETED}))
         + (SELECT count(*) FROM entity e  -- project > '' (global): in some project
            WHERE e.owner_id = :owner AND e.project > :g AND e.project <> :p
              AND {ENTITY_VISIBLE})
"""
# A cursor is the position of the page's last entity among its user's entities,
# masked and sealed with the file's key for the scope (user and project): it tells
# nothing (not a rowid, which would count every user's activity before), and in any
# other scope, or forged, it is refused.
SELECT_FILE_KEY = "SELECT key FROM file_secret WHERE id = 1"
POSITION_BYTES = 8
SEAL_BYTES = 8


def _keyed(tx: Tx, scope: ScopeKey, owner: int, purpose: bytes, data: bytes = b"") -> bytes:
    row = tx.one(SELECT_FILE_KEY)
    assert row is not None
    message = b"\0".join([purpose, str(owner).encode(), scope.project.encode(), data])
    return hmac.digest(row["key"], message, hashlib.sha256)


def _encode_cursor(tx: Tx, scope: ScopeKey, owner: int, entity_id: int) -> str:
    position = (entity_id - owner_range(owner)[0]).to_bytes(POSITION_BYTES, "big")
    mask = _keyed(tx, scope, owner, b"mask")[:POSITION_BYTES]
    masked = bytes(a ^ b for a, b in zip(position, mask, strict=True))
    seal = _keyed(tx, scope, owner, b"seal", masked)[:SEAL_BYTES]
    return base64.urlsafe_b64encode(masked + seal).decode().rstrip("=")


BAD_CURSOR = (
    "cursor: not a cursor returned by read_graph in this scope; pass its next_cursor unchanged"
)


def _decode_cursor(tx: Tx, scope: ScopeKey, owner: int, cursor: str | None) -> int:
    """The id of the entity a page follows (0: the first page)."""
    if cursor is None:
        return 0
    try:
        raw = base64.urlsafe_b64decode(cursor.encode("ascii") + b"==")
    except (ValueError, binascii.Error, UnicodeError):
        raise InvalidInputError(BAD_CURSOR) from None
    masked, seal = raw[:POSITION_BYTES], raw[POSITION_BYTES:]
    expected = _keyed(tx, scope, owner, b"seal", masked)[:SEAL_BYTES]
    if len(raw) != POSITION_BYTES + SEAL_BYTES or not hmac.compare_digest(seal, expected):
        raise InvalidInputError(BAD_CURSOR)
    mask = _keyed(tx, scope, owner, b"mask")[:POSITION_BYTES]
    position = int.from_bytes(bytes(a ^ b for a, b in zip(masked, mask, strict=True)), "big")
    return owner_range(owner)[0] + position


def read_graph(tx: Tx, scope: ScopeKey, args: ReadGraphArgs) -> ReadGraphResult:
    at = moment(tx, args.as_of, args.known_at)
    owner = find_owner(tx, scope)
    if owner is None:  # no memory yet: no cursor of this scope exists either
        if args.cursor is not None:
            raise InvalidInputError(BAD_CURSOR)
        return ReadGraphResult(entities=[], relations=[], total_entities=0, next_cursor=None)
    after = _decode_cursor(tx, scope, owner, args.cursor)
    params = scope.params(owner, known_at=at.known_at)
    total_row = tx.one(COUNT_VISIBLE, params)
    page = tx.all(SELECT_PAGE, {**params, "after": after, "limit": args.limit + 1})
    has_more = len(page) > args.limit
    page = page[: args.limit]
    ids = [row["id"] for row in page]
    facts = observations_of(tx, scope, owner, ids, at, args.include_history)
    relations = relations_of(tx, scope, owner, ids, at, args.include_history, touching=False)
    types = types_then(tx, scope.project, ids, at)
    return ReadGraphResult(
        entities=[_entity(row, types, facts) for row in page],
        relations=relations,
        total_entities=total_row[0] if total_row else 0,
        next_cursor=_encode_cursor(tx, scope, owner, ids[-1]) if has_more else None,
    )


def history(tx: Tx, scope: ScopeKey, args: HistoryArgs) -> HistoryResult:
    owner = find_owner(tx, scope)
    row = visible_entity(tx, scope, owner, match_key(args.entity), tx.now, deleted_too=True)
    if owner is None or row is None:
        raise InvalidInputError(f"entity: no entity named {args.entity!r} in this scope")
    at = Moment(tx.now, tx.now)
    facts = observations_of(
        tx, scope, owner, [row["id"]], at, include_history=True, model=TimelineObservation
    )
    relations = relations_of(
        tx, scope, owner, [row["id"]], at, True, touching=True, model=TimelineRelation
    )
    items: list[Observation | Relation] = [*facts[row["id"]], *relations]
    timeline = sorted(
        items,
        key=lambda item: (parse_time(item.valid_from), parse_time(item.recorded_at)),
    )
    versions = type_versions(tx, scope.project, [row["id"]])[row["id"]] or [
        TypeRecord(row["entity_type"], row["recorded_at"])
    ]
    deletions = [
        EntityDeletion(deleted_at=span.deleted_at, restored_at=span.restored_at)
        for span in deletions_of(tx, scope.project, row["id"])
    ]
    deleted_now = deletions[-1] if deletions and deletions[-1].restored_at is None else None
    return HistoryResult(
        entity=row["name"],
        entity_types=[
            TypeVersion(entity_type=v.entity_type, recorded_at=format_time(v.recorded_at))
            for v in versions
        ],
        deleted_at=deleted_now.deleted_at if deleted_now is not None else None,
        deletions=deletions,
        timeline=timeline,
    )
