"""Each tool result as a compact text for the model that reads it (DESIGN §1).

Many clients pass a model only a tool result's text block, not its structured
content, so the text carries the same information: every id (for `forget` and
`replaces`), every text, both time axes, `current`, reasons, scores, what was left
out and how to page on. Timestamps are the JSON's own instants, a midnight-UTC one
written as its date (which the tools take back as that instant).

Memory text is data (`memory.render`). Stored text never begins a line: a fact or
a turn is the last thing on a line that chronomem began, and every other stored
piece (a name, type, attribute, reason, role or session) is written with
look-alike brackets, so the `[...]` around it cannot be closed from inside. A line
begins with `[` (an entity), `- ` (a fact, relation or turn, its id first) or
chronomem's own words (`Relations:`, `Missing:`, `… and 3 more facts`).

    [Alice] (person), score 0.87
    - o_1f2e since 2026-01-05 (recorded 2026-01-05T09:30:00.250000Z): prefers tea
    - r_9a8b since 2026-02-01 (recorded then): [Alice] works_at [Acme]
    … and 12 more facts (open_nodes for all)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pydantic import BaseModel

from memory import (
    Entity,
    ForgetResult,
    HistoryResult,
    Observation,
    OpenNodesResult,
    ProfileCard,
    ReadGraphResult,
    RecallResult,
    RecordTurnsResult,
    RelateResult,
    Relation,
    RememberResult,
    SearchNodesResult,
)
from memory.render import inline, inline_heading

__all__ = ["render"]

MIDNIGHT = "T00:00:00Z"


def render(result: BaseModel) -> str:
    """`result`, one of the ten operations' results, as the text block of its tool."""
    return _RENDERERS[type(result)](result)


# ---------------------------------------------------------------- pieces


def _when(timestamp: str) -> str:
    return timestamp.removesuffix(MIDNIGHT)


def _name(name: str) -> str:
    return f"[{inline_heading(name)}]"


def _names(names: Iterable[str]) -> str:
    return ", ".join(map(_name, names))


def _ids(ids: Iterable[str]) -> str:
    """Ids as data too: an imported id may hold any text, a line break included."""
    return ", ".join(map(inline, ids))


def _times(row: Observation | Relation) -> str:
    """Both time axes: `since A (recorded R)`, or `from A (recorded R) until B
    (invalidated I)`; `then` for the instant just named."""
    recorded = "then" if row.recorded_at == row.valid_from else _when(row.recorded_at)
    invalidated = row.invalidated_at
    if row.valid_to is None:
        notes = f"recorded {recorded}" + (
            f", invalidated {_when(invalidated)}" if invalidated else ""
        )
        text = f"since {_when(row.valid_from)} ({notes})"
    else:
        text = f"from {_when(row.valid_from)} (recorded {recorded}) until {_when(row.valid_to)}"
        if invalidated is not None:
            text += (
                f" (invalidated {'then' if invalidated == row.valid_to else _when(invalidated)})"
            )
    return text if row.current else f"{text}, not current"


def _reason(row: Observation | Relation) -> str:
    return f", reason [{inline_heading(row.reason)}]" if row.reason else ""


def _fact(o: Observation) -> str:
    slot = f" attribute [{inline_heading(o.attribute)}]" if o.attribute else ""
    return f"- {inline(o.id)}{slot} {_times(o)}{_reason(o)}: {inline(o.text)}"


def _relation(r: Relation) -> str:
    triple = f"{_name(r.source)} {inline(r.relation)} {_name(r.target)}"
    return f"- {inline(r.id)} {_times(r)}{_reason(r)}: {triple}"


def _entity(e: Entity) -> list[str]:
    lines = [f"{_name(e.name)} ({inline_heading(e.entity_type)})"]
    return lines + ([_fact(o) for o in e.observations] or ["(no facts)"])


def _section(title: str, lines: Sequence[str]) -> list[str]:
    return [f"{title}:", *lines] if lines else []


def _more(count: int, one: str, many: str) -> str | None:
    if count == 0:
        return None
    return f"{count} more {one if count == 1 else many}"


def _graph(entities: Sequence[Entity], relations: Sequence[Relation]) -> list[str]:
    lines = [line for e in entities for line in _entity(e)]
    return lines + _section("Relations", [_relation(r) for r in relations])


# ---------------------------------------------------------------- reads


def _search(result: SearchNodesResult) -> str:
    if not result.hits:
        return "No entity matches."
    lines = []
    for hit in result.hits:
        entity = f"{_name(hit.entity.name)} ({inline_heading(hit.entity.entity_type)})"
        lines.append(f"{entity}, score {hit.score:.2f}")
        lines += [_fact(o) for o in hit.observations]
        lines += [_relation(r) for r in hit.relations]
        more = [
            part
            for part in (
                _more(hit.more_observations, "fact", "facts"),
                _more(hit.more_relations, "relation", "relations"),
            )
            if part
        ]
        if more:
            lines.append(f"… and {' and '.join(more)} (open_nodes for all)")
    return "\n".join(lines)


def _open_nodes(result: OpenNodesResult) -> str:
    lines = _graph(result.entities, result.relations)
    if result.missing:
        lines.append(f"Missing: {_names(result.missing)}")
    return "\n".join(lines) or "Nothing found."


def _read_graph(result: ReadGraphResult) -> str:
    lines = _graph(result.entities, result.relations)
    page = f"{len(result.entities)} of {result.total_entities} entities on this page"
    if result.next_cursor is None:
        lines.append(f"{page}, the last.")
    else:
        lines.append(f"{page}; for the next page, read_graph with cursor {result.next_cursor}")
    return "\n".join(lines)


def _history(result: HistoryResult) -> str:
    lines = [f"History of {_name(result.entity)}, by valid time:"]
    # Types and deletions are on transaction time: when chronomem recorded them.
    types = (
        f"{_name(t.entity_type)} (recorded {_when(t.recorded_at)})" for t in result.entity_types
    )
    lines.append("Type: " + ", then ".join(types))
    for deletion in result.deletions:
        back = deletion.restored_at
        again = f", back at {_when(back)}" if back is not None else ", and still is"
        lines.append(f"Deleted at {_when(deletion.deleted_at)}{again}")
    for item in result.timeline:
        lines.append(_fact(item) if item.kind == "observation" else _relation(item))
    if not result.timeline:
        lines.append("(nothing recorded)")
    return "\n".join(lines)


def _recall(result: RecallResult) -> str:
    if not result.turns:
        return "No turn matches."
    return "\n".join(
        f"- {inline(t.id)} (session [{inline_heading(t.session_id)}], at {_when(t.at)}, "
        f"score {t.score:.2f}) [{inline_heading(t.role)}]: {inline(t.text)}"
        for t in result.turns
    )


def _profile_card(card: ProfileCard) -> str:
    return card.text


# ---------------------------------------------------------------- writes


def _remember(result: RememberResult) -> str:
    entity = result.entity
    created = ", created" if entity.created else ""
    return "\n".join(
        [
            f"{_name(entity.name)} ({inline_heading(entity.entity_type)}){created}",
            *_section("Added", [_fact(o) for o in result.added]),
            *_section("Already known", [_fact(o) for o in result.duplicates]),
            *_section("Closed", [_fact(o) for o in result.superseded]),
            *_section("Similar (forget one, or replace it)", [_fact(o) for o in result.similar]),
        ]
    )


def _relate(result: RelateResult) -> str:
    lines = [_relation(result.relation)]
    if result.existing:
        lines.append("Already known: returned unchanged.")
    if result.created_entities:
        lines.append(f"Created: {_names(result.created_entities)}")
    return "\n".join(lines + _section("Closed", [_relation(r) for r in result.superseded]))


def _forget(result: ForgetResult) -> str:
    lines = [f"Invalidated: {_ids(result.invalidated) or 'none'}"]
    if result.already_invalid:
        lines.append(f"Already invalid: {_ids(result.already_invalid)}")
    if result.not_found:
        lines.append(f"Not found: {_names(result.not_found)}")
    return "\n".join(lines)


def _record_turns(result: RecordTurnsResult) -> str:
    return f"Stored {result.stored} turn{'' if result.stored == 1 else 's'}: {_ids(result.ids)}"


_RENDERERS: dict[type[BaseModel], Callable[[Any], str]] = {
    SearchNodesResult: _search,
    OpenNodesResult: _open_nodes,
    ReadGraphResult: _read_graph,
    HistoryResult: _history,
    RecallResult: _recall,
    ProfileCard: _profile_card,
    RememberResult: _remember,
    RelateResult: _relate,
    ForgetResult: _forget,
    RecordTurnsResult: _record_turns,
}
