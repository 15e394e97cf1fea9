"""Every operation's arguments and result (DESIGN §3).

These models are the contract shared by the Python API, the MCP tools (input and
output schemas) and the CLI's `--json` output.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .validation import (
    FACTS_PER_CALL,
    IDS_PER_CALL,
    TURNS_PER_CALL,
    Cursor,
    FactText,
    Id,
    Label,
    Name,
    Query,
    Reason,
    SessionId,
    Timestamp,
    TurnText,
)

__all__ = [
    "ClosingRecord",
    "CreateEntityArgs",
    "DeleteEntitiesArgs",
    "DeleteEntitiesResult",
    "Entity",
    "EntityDeletion",
    "EntityInfo",
    "EntityLifeRecord",
    "EntityRecord",
    "EntityRef",
    "EntityTypeRecord",
    "EntityTypeVersionRecord",
    "ExportRecord",
    "ForgetArgs",
    "ForgetResult",
    "HistoryArgs",
    "HistoryResult",
    "ImportResult",
    "Observation",
    "ObservationRecord",
    "OpenNodesArgs",
    "OpenNodesResult",
    "ProfileCard",
    "ProfileCardArgs",
    "PurgeResult",
    "ReadGraphArgs",
    "ReadGraphResult",
    "RecallArgs",
    "RecallResult",
    "RecalledTurn",
    "RecordTurnsArgs",
    "RecordTurnsResult",
    "RelateArgs",
    "RelateResult",
    "Relation",
    "RelationRecord",
    "RememberArgs",
    "RememberResult",
    "SearchHit",
    "SearchNodesArgs",
    "SearchNodesResult",
    "Stats",
    "TimelineItem",
    "TimelineObservation",
    "TimelineRelation",
    "TurnIn",
    "TurnRecord",
    "TypeVersion",
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ---------------------------------------------------------------- arguments


AsOf = Annotated[
    Timestamp | None,
    Field(description="What was true then (valid time); default now."),
]
KnownAt = Annotated[
    Timestamp | None,
    Field(description="As memory stood then (transaction time); default now."),
]
IncludeHistory = Annotated[
    bool,
    Field(strict=True, description="Also facts no longer current."),
]


class _ReadAt(_Model):
    as_of: AsOf = None
    known_at: KnownAt = None
    include_history: IncludeHistory = False


class RememberArgs(_Model):
    entity: Name = Field(description="Matched case-insensitively.")
    facts: list[FactText] = Field(min_length=1, max_length=FACTS_PER_CALL)
    entity_type: Label | None = Field(None, description="e.g. person, place. Default: general.")
    valid_from: Timestamp | None = Field(None, description="When they became true. Default: now.")
    replaces: list[Id] | None = Field(
        None, max_length=IDS_PER_CALL, description="Ids of the facts these replace."
    )
    attribute: Label | None = Field(
        None,
        description="A single-valued slot (plan, timezone): these facts replace its open ones.",
    )


class RelateArgs(_Model):
    source: Name
    relation: Label = Field(description="e.g. works_at (made snake_case).")
    target: Name
    source_type: Label | None = None
    target_type: Label | None = None
    valid_from: Timestamp | None = None
    exclusive: bool = Field(
        False,
        strict=True,
        description="Close the source's other open relations of this type.",
    )
    replaces: list[Id] | None = Field(None, max_length=IDS_PER_CALL)


class ForgetArgs(_Model):
    ids: list[Id] | None = Field(None, max_length=IDS_PER_CALL)
    entities: list[Name] | None = Field(None, max_length=IDS_PER_CALL)
    valid_to: Timestamp | None = Field(None, description="Default: now.")
    reason: Reason | None = None


class CreateEntityArgs(_Model):
    name: Name = Field(description="Matched case-insensitively.")
    entity_type: Label | None = Field(None, description="e.g. person, place. Default: general.")


class DeleteEntitiesArgs(_Model):
    names: list[Name] = Field(min_length=1, max_length=IDS_PER_CALL)
    valid_to: Timestamp | None = Field(None, description="When their facts ended. Default: now.")
    reason: Reason | None = None


class OpenNodesArgs(_ReadAt):
    names: list[Name] = Field(min_length=1, max_length=IDS_PER_CALL)


GRAPH_PAGE_MAX = 500  # read_graph's largest page


class ReadGraphArgs(_ReadAt):
    limit: int = Field(50, ge=1, le=GRAPH_PAGE_MAX, strict=True, description="Entities per page.")
    cursor: Cursor | None = Field(None, description="The previous page's next_cursor.")


class SearchNodesArgs(_Model):
    query: Query = Field(description="Plain words, not query syntax.")
    limit: int = Field(10, ge=1, le=50, strict=True, description="At most this many hits.")
    facts_per_hit: int = Field(
        5,
        ge=1,
        le=20,
        strict=True,
        description="Facts, and relations, per hit at most.",
    )
    entity_type: Label | None = Field(None, description="Only entities of this type.")
    as_of: AsOf = None
    known_at: KnownAt = None
    include_history: IncludeHistory = False


class RecallArgs(_Model):
    query: Query = Field(description="Plain words.")
    limit: int = Field(10, ge=1, le=50, strict=True)
    session_id: SessionId | None = Field(None, description="Only this conversation.")
    after: Timestamp | None = Field(None, description="Only turns at or after this time.")
    before: Timestamp | None = Field(None, description="Only turns before this time.")


class ProfileCardArgs(_Model):
    max_entities: int = Field(12, ge=1, le=50, strict=True)
    max_facts_per_entity: int = Field(5, ge=1, le=20, strict=True)
    max_chars: int = Field(2000, ge=100, le=20_000, strict=True)
    query: Query | None = Field(None, description="The entities and facts relevant to this first.")
    as_of: AsOf = None


class HistoryArgs(_Model):
    entity: Name


class TurnIn(_Model):
    role: Label = Field(description="user, assistant, or a speaker's name.")
    text: TurnText
    at: Timestamp | None = Field(None, description="Default: now.")


class RecordTurnsArgs(_Model):
    session_id: SessionId
    turns: list[TurnIn] = Field(min_length=1, max_length=TURNS_PER_CALL)


# ---------------------------------------------------------------- results


def _is_none(value: object) -> bool:
    return value is None


def _is_empty(value: object) -> bool:
    return not value


# A field that is null is left out of the JSON form: results are read by models with
# small budgets (DESIGN §3), and most facts have no attribute and are still open.
def _omitted_when_none(description: str | None = None) -> Any:
    return Field(None, exclude_if=_is_none, description=description)


class Observation(_Model):
    """A fact as it stood at the read's `known_at`; `current` is for (`as_of`, `known_at`)."""

    id: str
    text: str
    attribute: str | None = _omitted_when_none()
    valid_from: str
    valid_to: str | None = _omitted_when_none()
    recorded_at: str
    invalidated_at: str | None = _omitted_when_none()
    current: bool
    reason: str | None = _omitted_when_none()


class Relation(_Model):
    id: str
    source: str
    relation: str
    target: str
    valid_from: str
    valid_to: str | None = _omitted_when_none()
    recorded_at: str
    invalidated_at: str | None = _omitted_when_none()
    current: bool
    reason: str | None = _omitted_when_none()


class TimelineObservation(Observation):
    """An observation in a history timeline, told from a relation by `kind`."""

    kind: Literal["observation"] = "observation"


class TimelineRelation(Relation):
    kind: Literal["relation"] = "relation"


TimelineItem = Annotated[TimelineObservation | TimelineRelation, Field(discriminator="kind")]


class EntityRef(_Model):
    name: str
    entity_type: str
    created: bool = Field(description="True when this call created the entity.")


class Entity(_Model):
    name: str
    entity_type: str
    observations: list[Observation]


class EntityInfo(_Model):
    name: str
    entity_type: str


class SearchHit(_Model):
    entity: EntityInfo
    score: float = Field(description="Relevance in (0, 1]; the best hit scores 1.")
    observations: list[Observation] = Field(
        description="The facts that best answer the query, best first; an entity found "
        "by its name, type or a relation shows its newest current facts."
    )
    relations: list[Relation] = Field(description="Relations touching it that match, best first.")
    more_observations: int = Field(description="Its visible facts left out.")
    more_relations: int = Field(description="Its visible relations left out.")


class SearchNodesResult(_Model):
    hits: list[SearchHit]


class RecalledTurn(_Model):
    id: str
    session_id: str
    role: str
    text: str
    at: str
    score: float = Field(description="Relevance in (0, 1]; the best turn scores 1.")


class RecallResult(_Model):
    turns: list[RecalledTurn]


class ProfileCard(_Model):
    text: str
    entities: list[str]
    truncated: bool = Field(description="True when something was left out to stay in bounds.")


class RememberResult(_Model):
    entity: EntityRef
    added: list[Observation]
    duplicates: list[Observation]
    superseded: list[Observation]
    similar: list[Observation] = Field(
        default_factory=list,
        exclude_if=_is_empty,
        description="Open facts of the entity that an added fact restates, most alike first.",
    )


class RelateResult(_Model):
    relation: Relation
    existing: bool
    created_entities: list[str]
    superseded: list[Relation]


class ForgetResult(_Model):
    invalidated: list[str]
    already_invalid: list[str]
    not_found: list[str]


class OpenNodesResult(_Model):
    entities: list[Entity]
    relations: list[Relation]
    missing: list[str]


class ReadGraphResult(_Model):
    entities: list[Entity]
    relations: list[Relation]
    total_entities: int
    next_cursor: str | None


class DeleteEntitiesResult(_Model):
    deleted: list[str] = Field(description="The entities deleted, as stored.")
    invalidated: list[str] = Field(description="Ids of their facts and relations closed.")
    not_found: list[str]


class TypeVersion(_Model):
    entity_type: str
    recorded_at: str


class EntityDeletion(_Model):
    deleted_at: str
    restored_at: str | None = _omitted_when_none("When something was written about it again.")


class HistoryResult(_Model):
    entity: str
    entity_types: list[TypeVersion] = Field(description="Its type over time, oldest first.")
    deleted_at: str | None = _omitted_when_none("When it was deleted, if it is deleted now.")
    deletions: list[EntityDeletion] = Field(
        default_factory=list, exclude_if=_is_empty, description="Every deletion, oldest first."
    )
    timeline: list[TimelineItem]


class RecordTurnsResult(_Model):
    stored: int
    ids: list[str]


# ---------------------------------------------------------------- administration


class Stats(_Model):
    entities: int
    observations_current: int
    observations_closed: int
    relations_current: int
    relations_closed: int
    turns: int
    sessions: int
    database_bytes: int
    # Ranking by meaning (DESIGN §8): this user's rows with a vector, and those still
    # waiting for one (every row, while no embedder is in use).
    vectors: int
    vectors_pending: int


class PurgeResult(_Model):
    entities: int
    observations: int
    relations: int
    turns: int
    closings: int  # a project's own closings of global facts and relations


class ImportResult(_Model):
    lines: int
    entities: int
    observations: int
    relations: int
    closings: int  # projects' own closings of global facts and relations
    turns: int
    skipped: int  # rows whose id was already in this memory (a repeated import)


# ---------------------------------------------------------------- export records
#
# One model a kind of line of chronomem's export format, told apart by `type`; the
# order of the fields is the order of the keys in each line. Times are as
# `format_time` writes them; `project` is null for a global row.


class EntityRecord(_Model):
    type: Literal["entity"] = "entity"
    name: str
    entity_type: str
    project: str | None
    recorded_at: str


class EntityTypeRecord(_Model):
    """The type a project gave an entity for itself (`overlay`)."""

    type: Literal["entity_type"] = "entity_type"
    name: str
    entity_type: str
    project: str


class ObservationRecord(_Model):
    type: Literal["observation"] = "observation"
    id: str
    entity: str
    text: str
    attribute: str | None
    project: str | None
    valid_from: str
    valid_to: str | None
    recorded_at: str
    invalidated_at: str | None
    reason: str | None


class RelationRecord(_Model):
    type: Literal["relation"] = "relation"
    id: str
    source: str
    relation: str
    target: str
    project: str | None
    valid_from: str
    valid_to: str | None
    recorded_at: str
    invalidated_at: str | None
    reason: str | None


class ClosingRecord(_Model):
    """A project's own closing of a global fact or relation (`overlay`)."""

    type: Literal["closing"] = "closing"
    id: str
    project: str
    valid_to: str
    invalidated_at: str
    reason: str | None


class TurnRecord(_Model):
    type: Literal["turn"] = "turn"
    id: str
    session_id: str
    role: str
    text: str
    at: str
    project: str | None
    recorded_at: str


class EntityTypeVersionRecord(_Model):
    """A type an entity had, globally or in a project (`entity_life`)."""

    type: Literal["entity_type_version"] = "entity_type_version"
    name: str
    entity_type: str
    project: str | None
    recorded_at: str


class EntityLifeRecord(_Model):
    """An entity deleted (or back) in a context (`entity_life`)."""

    type: Literal["entity_life"] = "entity_life"
    name: str
    project: str | None
    at: str
    deleted: bool


ExportRecord = Annotated[
    EntityRecord
    | EntityTypeVersionRecord
    | EntityLifeRecord
    | EntityTypeRecord
    | ObservationRecord
    | RelationRecord
    | ClosingRecord
    | TurnRecord,
    Field(discriminator="type"),
]
