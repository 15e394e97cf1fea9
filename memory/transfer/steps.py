"""The steps of an import: one checked line becomes one or more steps, each named by
its kind, written by the writer of that kind (`write`).

Each step starts with the number of the line it came from and its kind. The kinds
of chronomem's own format are written row by row as they are; those of the
reference memory server's `memory.jsonl` are engine calls.
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = [
    "STEP_TYPES",
    "ClosingStep",
    "EntityStep",
    "LifeStep",
    "ObservationStep",
    "ProjectTypeStep",
    "RawStep",
    "ReferenceEntityStep",
    "RelateStep",
    "RelationStep",
    "RememberStep",
    "Step",
    "TurnStep",
    "TypeVersionStep",
    "line_of",
    "named_step",
]


class EntityStep(NamedTuple):
    line: int
    kind: str  # "entity"
    name: str
    entity_type: str
    recorded_at: int
    project: str | None


class ObservationStep(NamedTuple):
    line: int
    kind: str  # "observation"
    id: str
    entity: str
    text: str
    attribute: str | None
    reason: str | None
    valid_from: int
    valid_to: int | None
    recorded_at: int
    invalidated_at: int | None
    project: str | None


class RelationStep(NamedTuple):
    line: int
    kind: str  # "relation"
    id: str
    source: str
    relation: str  # normalised (`names.relation_type`)
    target: str
    reason: str | None
    valid_from: int
    valid_to: int | None
    recorded_at: int
    invalidated_at: int | None
    project: str | None


class TurnStep(NamedTuple):
    line: int
    kind: str  # "turn"
    id: str
    session_id: str
    role: str
    text: str
    at: int
    recorded_at: int
    project: str | None


class ClosingStep(NamedTuple):
    """A project's own closing of a global fact or relation."""

    line: int
    kind: str  # "closing"
    id: str
    project: str
    valid_to: int
    invalidated_at: int
    reason: str | None


class ProjectTypeStep(NamedTuple):
    """The type a project gave an entity for itself."""

    line: int
    kind: str  # "entity_type"
    name: str
    entity_type: str
    project: str


class TypeVersionStep(NamedTuple):
    """A type an entity had (`entity_life`)."""

    line: int
    kind: str  # "entity_type_version"
    name: str
    entity_type: str
    recorded_at: int
    project: str | None


class LifeStep(NamedTuple):
    """An entity deleted, or back, in a context (`entity_life`)."""

    line: int
    kind: str  # "entity_life"
    name: str
    at: int
    deleted: bool
    project: str | None


class ReferenceEntityStep(NamedTuple):
    """A reference-format entity with no observations: created alone."""

    line: int
    kind: str  # "reference_entity"
    name: str
    entity_type: str


class RememberStep(NamedTuple):
    line: int
    kind: str  # "remember"
    name: str
    facts: list[str]
    entity_type: str


class RelateStep(NamedTuple):
    line: int
    kind: str  # "relate"
    source: str
    relation: str
    target: str


Step = (
    EntityStep
    | ObservationStep
    | RelationStep
    | TurnStep
    | ClosingStep
    | ProjectTypeStep
    | TypeVersionStep
    | LifeStep
    | ReferenceEntityStep
    | RememberStep
    | RelateStep
)

STEP_TYPES: dict[str, type[Step]] = {
    "entity": EntityStep,
    "observation": ObservationStep,
    "relation": RelationStep,
    "turn": TurnStep,
    "closing": ClosingStep,
    "entity_type": ProjectTypeStep,
    "entity_type_version": TypeVersionStep,
    "entity_life": LifeStep,
    "reference_entity": ReferenceEntityStep,
    "remember": RememberStep,
    "relate": RelateStep,
}
# A step as plain values, as spooled and read back (`check.ImportPlan`): a step type's
# values in order. Batches are kept so, and named only as they are written: Python's
# collector stops tracking a plain tuple of plain values, never a NamedTuple.
RawStep = tuple[Any, ...]
LINE_AT, KIND_AT = 0, 1  # where a raw step holds its line number and its kind


def named_step(values: RawStep) -> Step:
    """A raw step as its step type."""
    step: Step = tuple.__new__(STEP_TYPES[values[KIND_AT]], values)  # `_make`, less its check
    return step


def line_of(values: RawStep) -> int:
    """The line number of a raw step."""
    line: int = values[LINE_AT]
    return line
