"""The subcommands of the ten memory operations, made from the operation table.

Each subcommand takes its operation's arguments (`memory.operations`): one option
per field of the argument model, typed, described and defaulted by the field, so an
argument added to a model is on the command line with no edit here. What stays
here is where the command line differs by design (DESIGN §5): the subcommand's
name, which arguments are positional, a few flag names, and the human view of the
result. The command runs the engine method of the operation's name, so a bad value
gets the engine's message (exit 2).
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Union, get_args, get_origin

import click
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from rich.table import Table

from memory import Observation, Relation
from memory.models import (
    Entity,
    ForgetResult,
    HistoryResult,
    OpenNodesResult,
    ProfileCard,
    ReadGraphResult,
    RecallResult,
    RecordTurnsResult,
    RelateResult,
    RememberResult,
    SearchNodesResult,
    TurnIn,
)
from memory.operations import OPERATIONS, Operation

from .options import (
    DEFAULT_CAPS,
    SHARED_PARAMETERS,
    Caps,
    cap_options,
    emit,
    json_option,
    run,
    scope_options,
)

__all__ = ["COMMANDS", "COMMAND_OF", "Typed"]

Kind = Literal["list", "flag", "int", "text"]
Decorator = Callable[[Callable[..., None]], Callable[..., None]]

# One name, one meaning, in every subcommand: the flags DESIGN §5 gives these
# fields. Any other field `foo_bar` is `--foo-bar`.
FLAG_NAMES: Mapping[str, str] = {
    "entity_type": "--type",
    "include_history": "--history",
    "session_id": "--session",
    "entities": "--entity",
}


@dataclass(frozen=True, slots=True)
class Typed:
    """A field typed on the command line in a shape of its own: `options` are its
    click parameters, and `value` makes the field's value from theirs."""

    options: tuple[Decorator, ...]
    value: Callable[[Mapping[str, Any]], Any]


@dataclass(frozen=True, slots=True)
class Subcommand:
    """How one operation's subcommand differs from its argument model."""

    name: str
    example: str
    render: Callable[[Any], str | Table]  # the human view of the result
    positional: tuple[str, ...] = ()  # fields taken as arguments, in this order
    # Help where the field's description says too little at a terminal, or nothing.
    helps: Mapping[str, str] = field(default_factory=dict)
    typed: Mapping[str, Typed] = field(default_factory=dict)
    creates: bool = False  # may start a new database file


# ---------------------------------------------------------------- human views


def _fact(o: Observation) -> str:
    until = f" until {o.valid_to}" if o.valid_to else ""
    slot = f" [{o.attribute}]" if o.attribute else ""
    return f"{o.text}{slot}  (since {o.valid_from}{until}; {o.id})"


def _link(r: Relation, name: str) -> str:
    """A relation of the entity `name`, seen from it."""
    return f"→ {r.relation} {r.target}" if r.source == name else f"← {r.relation} {r.source}"


def _entity_lines(entities: list[Entity], relations: list[Relation]) -> list[str]:
    lines = []
    for entity in entities:
        lines.append(f"{entity.name} ({entity.entity_type})")
        lines += [f"  - {_fact(o)}" for o in entity.observations]
        lines += [
            f"  {_link(r, entity.name)}" for r in relations if entity.name in (r.source, r.target)
        ]
    return lines


def _remembered(r: RememberResult) -> str:
    created = " created" if r.entity.created else ""
    return "\n".join(
        [f"{r.entity.name} ({r.entity.entity_type}){created}"]
        + [f"  + {_fact(o)}" for o in r.added]
        + [f"  = {_fact(o)} (already known)" for o in r.duplicates]
        + [f"  - {_fact(o)}" for o in r.superseded]
        + [f"  ~ {_fact(o)} (similar)" for o in r.similar]
    )


def _related(r: RelateResult) -> str:
    known = ", already known" if r.existing else ""
    link = r.relation
    return "\n".join(
        [f"{link.source} {link.relation} → {link.target}  ({link.id}{known})"]
        + [f"  - closed {x.source} {x.relation} → {x.target} ({x.id})" for x in r.superseded]
    )


def _forgotten(r: ForgetResult) -> str:
    return "\n".join(
        [f"invalidated: {', '.join(r.invalidated) or '-'}"]
        + ([f"already invalid: {', '.join(r.already_invalid)}"] if r.already_invalid else [])
        + ([f"not found: {', '.join(r.not_found)}"] if r.not_found else [])
    )


def _found(r: SearchNodesResult) -> str:
    if not r.hits:
        return "no matches"
    lines = []
    for hit in r.hits:
        lines.append(f"{hit.score:.2f}  {hit.entity.name} ({hit.entity.entity_type})")
        lines += [f"      - {_fact(o)}" for o in hit.observations]
        lines += [f"      {_link(x, hit.entity.name)}" for x in hit.relations]
        more = [
            f"{count} more {noun}{'' if count == 1 else 's'}"
            for count, noun in ((hit.more_observations, "fact"), (hit.more_relations, "relation"))
            if count
        ]
        if more:
            lines.append(f"      … and {' and '.join(more)}")
    return "\n".join(lines)


def _opened(r: OpenNodesResult) -> str:
    missing = [f"not found: {name}" for name in r.missing]
    return "\n".join(_entity_lines(r.entities, r.relations) + missing)


def _page(r: ReadGraphResult) -> str:
    more = f"; next page: --cursor {r.next_cursor}" if r.next_cursor else ""
    summary = f"({len(r.entities)} of {r.total_entities} entities{more})"
    return "\n".join([*_entity_lines(r.entities, r.relations), summary])


def _card(r: ProfileCard) -> str:
    return r.text


def _timeline(r: HistoryResult) -> Table:
    types = ", then ".join(f"{t.entity_type} (recorded {t.recorded_at})" for t in r.entity_types)
    deletions = [
        f"deleted at {d.deleted_at}" + (f", back at {d.restored_at}" if d.restored_at else "")
        for d in r.deletions
    ]
    caption = "\n".join([f"type: {types}", *deletions])
    table = Table(title=f"{r.entity}: history", caption=caption, show_lines=False)
    for column in ("valid from", "valid to", "recorded", "invalidated", "what", "id"):
        table.add_column(column)
    for item in r.timeline:
        if item.kind == "observation":
            what = item.text
        elif item.target == r.entity:
            what = f"{item.source} {item.relation} → (this)"
        else:
            what = f"{item.relation} → {item.target}"
        table.add_row(
            item.valid_from,
            item.valid_to or "now",
            item.recorded_at,
            item.invalidated_at or "-",
            what,
            item.id,
        )
    return table


def _stored(r: RecordTurnsResult) -> str:
    return f"stored {r.stored} turn(s): {', '.join(r.ids)}"


def _recalled(r: RecallResult) -> str:
    lines = [f"{t.score:.2f}  [{t.session_id} {t.at}] {t.role}: {t.text}" for t in r.turns]
    return "\n".join(lines) or "no matches"


# ---------------------------------------------------------------- the subcommands


def _turns(values: Mapping[str, Any]) -> list[dict[str, Any]]:
    at = {"at": values["at"]} if values["at"] else {}
    return [{"role": role, "text": text, **at} for role, text in values["turns"]]


# `--turn ROLE TEXT` (repeatable) and one `--at` for them all, as DESIGN §5 has it.
TURNS = Typed(
    options=(
        click.option(
            "--turn",
            "turns",
            nargs=2,
            multiple=True,
            required=True,
            metavar="ROLE TEXT",
            help="One turn (repeatable): --turn user 'hello'.",
        ),
        click.option(
            "--at", help=f"When the turns were said. {TurnIn.model_fields['at'].description}"
        ),
    ),
    value=_turns,
)

SUBCOMMANDS: Mapping[str, Subcommand] = {
    "remember": Subcommand(
        "remember",
        'chronomem remember Alice "likes tea" --type person',
        _remembered,
        positional=("entity", "facts"),
        creates=True,
    ),
    "relate": Subcommand(
        "relate",
        'chronomem relate Alice "works at" Acme --exclusive',
        _related,
        positional=("source", "relation", "target"),
        helps={
            "source_type": "Type of SOURCE.",
            "target_type": "Type of TARGET.",
            "valid_from": "When it became true. Default: now.",
            "replaces": "Ids of the relations this replaces.",
        },
        creates=True,
    ),
    "forget": Subcommand(
        "forget",
        'chronomem forget o_123 --reason "moved"',
        _forgotten,
        positional=("ids",),
        helps={
            "entities": "Forget everything about this entity.",
            "valid_to": "When it stopped being true. Default: now.",
            "reason": "Why, kept in the history.",
        },
    ),
    "search_nodes": Subcommand(
        "search", 'chronomem search "where does she work?"', _found, positional=("query",)
    ),
    "open_nodes": Subcommand("open", "chronomem open Alice", _opened, positional=("names",)),
    "read_graph": Subcommand("read-graph", "chronomem read-graph --json", _page),
    "profile_card": Subcommand(
        "profile",
        "chronomem profile",
        _card,
        helps={
            "max_entities": "At most this many entities.",
            "max_facts_per_entity": "At most this many facts of each entity.",
            "max_chars": "At most this many characters in all.",
        },
    ),
    "history": Subcommand("history", "chronomem history Alice", _timeline, positional=("entity",)),
    "record_turns": Subcommand(
        "record-turns",
        'chronomem record-turns s1 --turn user "hi"',
        _stored,
        positional=("session_id",),
        typed={"turns": TURNS},
        creates=True,
    ),
    "recall": Subcommand("recall", 'chronomem recall "beagle"', _recalled, positional=("query",)),
}


def _kind(annotation: Any) -> Kind:
    """How a field is typed on the command line, from its annotation. A type that
    parses text itself (a time) is typed as text."""
    options = [annotation]
    if get_origin(annotation) in (Union, types.UnionType):
        options = [option for option in get_args(annotation) if option is not type(None)]
    if len(options) != 1:
        return "text"
    [kind] = options
    if get_origin(kind) is list:
        return "list"
    if kind is bool:
        return "flag"
    if kind is int:
        return "int"
    return "text"


def _parameter(name: str, info: FieldInfo, subcommand: Subcommand) -> Decorator:
    """The click argument or option of the field `name`."""
    kind = _kind(info.annotation)
    required = info.is_required()
    if name in subcommand.positional:
        return click.argument(name, nargs=-1 if kind == "list" else 1, required=required)
    flag = FLAG_NAMES.get(name, "--" + name.replace("_", "-"))
    described = subcommand.helps.get(name) or info.description
    default = None if required else info.get_default(call_default_factory=True)
    if kind == "list":
        repeatable = f"{described.rstrip('.')} (repeatable)." if described else "Repeatable."
        return click.option(flag, name, multiple=True, required=required, help=repeatable)
    if kind == "flag":
        both = flag if not default else f"{flag}/--no-{flag.removeprefix('--')}"
        return click.option(both, name, is_flag=True, default=bool(default), help=described)
    return click.option(
        flag,
        name,
        type=int if kind == "int" else str,
        default=default,
        required=required,
        show_default=default is not None,
        help=described,
    )


def _arguments(
    operation: Operation[Any, Any], subcommand: Subcommand, values: Mapping[str, Any]
) -> dict[str, Any]:
    """The operation's arguments from the command's values; what was not given is
    left out, so the engine's default applies."""
    given: dict[str, Any] = {}
    for name, info in operation.arguments.model_fields.items():
        if name in subcommand.typed:
            given[name] = subcommand.typed[name].value(values)
            continue
        value = values[name]
        if _kind(info.annotation) == "list":
            value = list(value) or None
        if value is not None:
            given[name] = value
    return given


def _command(operation: Operation[Any, Any], subcommand: Subcommand) -> click.Command:
    fields = operation.arguments.model_fields
    if SHARED_PARAMETERS & set(fields):
        raise TypeError(f"{operation.name}: an argument is named as a shared option")
    order = [
        *subcommand.positional,
        *(name for name in fields if name not in subcommand.positional),
    ]
    decorators: list[Decorator] = []
    for name in order:
        typed = subcommand.typed.get(name)
        decorators += typed.options if typed else [_parameter(name, fields[name], subcommand)]

    def callback(as_json: bool, **values: Any) -> None:
        where = {
            name: values.pop(name)
            for name in ("db", "app", "user", "project", "embedder", "language")
        }
        caps = (
            Caps(values.pop("max_facts"), values.pop("max_turns"))
            if operation.writes
            else DEFAULT_CAPS
        )
        given = _arguments(operation, subcommand, values)
        result = run(
            where,
            lambda scope: getattr(scope, operation.name)(**given),
            creates=subcommand.creates,
            caps=caps,
            ranks=bool(given.get("query")),  # a search: by meaning too
        )
        emit(result, as_json, subcommand.render)

    decorators += [scope_options, *([cap_options] if operation.writes else []), json_option]
    for decorate in reversed(decorators):
        callback = decorate(callback)
    command = click.command(
        subcommand.name, help=f"{operation.summary}\n\nExample: {subcommand.example}"
    )(callback)
    names = [param.name for param in command.params]
    flags = [flag for param in command.params for flag in param.opts + param.secondary_opts]
    if len(set(names)) < len(names) or len(set(flags)) < len(flags):
        # one would silently take the other's value
        raise TypeError(f"{subcommand.name}: two parameters named alike in {flags}")
    return command


def _as_json(result: BaseModel) -> str:
    return result.model_dump_json(indent=2)


def _subcommand(name: str) -> Subcommand:
    """The subcommand of `name`; an operation without an entry above still gets one,
    named after it, that prints its JSON result."""
    made = name.replace("_", "-")
    return SUBCOMMANDS.get(name) or Subcommand(made, f"chronomem {made} --json", _as_json)


COMMAND_OF: Mapping[str, click.Command] = {
    name: _command(operation, _subcommand(name)) for name, operation in OPERATIONS.items()
}
COMMANDS = tuple(COMMAND_OF.values())
