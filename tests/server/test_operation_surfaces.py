"""One operation, one definition: every surface (Python, MCP, the command line)
takes exactly the arguments of the operation's model (`memory.operations`), and
hands each of them to the engine.

A surface that drops, renames or adds an argument fails here: each argument is sent
alone with a value no field accepts, through each surface, and the engine's message
must name that very argument; then every argument is sent with a valid value. A
command-line flag, which takes no value to get wrong, must change what the engine
answers.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import anyio
import click
import pytest
from mcp import Client

from memory import GraphMemory, InvalidInputError
from memory.operations import OPERATIONS
from server import Settings, build_server
from server.cli.operations import COMMAND_OF
from server.cli.options import SHARED_PARAMETERS

from .command_line import Cli

pytestmark = pytest.mark.anyio

# A valid value for every argument of every operation. An argument added to a model
# without a value here fails `test_every_argument_has_a_sample`.
SAMPLES: dict[str, dict[str, Any]] = {
    "remember": {
        "entity": "Alice",
        "facts": ["likes tea"],
        "entity_type": "person",
        "valid_from": "2027-01-01",
        "replaces": ["{fact}"],
        "attribute": "drink",
    },
    "relate": {
        "source": "Alice",
        "relation": "knows",
        "target": "Bob",
        "source_type": "person",
        "target_type": "person",
        "valid_from": "2027-01-01",
        "exclusive": True,
        "replaces": ["{relation}"],
    },
    "forget": {
        "ids": ["o_missing"],
        "entities": ["Nobody"],
        "valid_to": "2027-02-01",
        "reason": "moved",
    },
    "search_nodes": {
        "query": "tea",
        "limit": 3,
        "facts_per_hit": 2,
        "entity_type": "person",
        "as_of": "2026-06-01",
        "known_at": "2030-01-01",
        "include_history": True,
    },
    "open_nodes": {
        "names": ["Alice"],
        "as_of": "2026-06-01",
        "known_at": "2030-01-01",
        "include_history": True,
    },
    "read_graph": {
        "as_of": "2026-06-01",
        "known_at": "2030-01-01",
        "include_history": True,
        "limit": 5,
        "cursor": None,
    },
    "profile_card": {
        "max_entities": 3,
        "max_facts_per_entity": 2,
        "max_chars": 500,
        "query": "tea",
        "as_of": "2026-06-01",
    },
    "history": {"entity": "Alice"},
    "record_turns": {
        "session_id": "s1",
        "turns": [{"role": "user", "text": "hi", "at": "2026-05-01"}],
    },
    "recall": {
        "query": "hi",
        "limit": 3,
        "session_id": "s1",
        "after": "2020-01-01",
        "before": "2100-01-01",
    },
}
NO_FIELD_TAKES_THIS = {"not": "a value of any argument"}


def cases() -> list[tuple[str, str]]:
    return [(name, field) for name, op in OPERATIONS.items() for field in op.arguments.model_fields]


def with_bad(operation: str, field: str) -> dict[str, Any]:
    arguments = {
        name: value
        for name, value in SAMPLES[operation].items()
        if OPERATIONS[operation].arguments.model_fields[name].is_required()
    }
    return {**arguments, field: NO_FIELD_TAKES_THIS}


def ids_in(sample: dict[str, Any], fact: str, relation: str) -> dict[str, Any]:
    """`sample` with the ids of an existing fact and relation put in."""
    ids = {"{fact}": fact, "{relation}": relation}
    return {
        name: [ids.get(item, item) for item in value] if name == "replaces" else value
        for name, value in sample.items()
    }


def test_every_argument_has_a_sample() -> None:
    for name, operation in OPERATIONS.items():
        assert set(SAMPLES[name]) == set(operation.arguments.model_fields), name


def test_the_python_methods_take_the_models_arguments() -> None:
    from memory import MemoryScope

    for name, operation in OPERATIONS.items():
        parameters = inspect.signature(getattr(MemoryScope, name)).parameters
        fields = operation.arguments.model_fields
        assert set(parameters) - {"self"} == set(fields), name
        for field, info in fields.items():
            default = parameters[field].default
            if info.is_required():
                assert default is inspect.Parameter.empty, (name, field)
            else:
                assert default == info.get_default(call_default_factory=True), (name, field)


@pytest.fixture
async def memory(tmp_path: Path) -> Any:
    async with GraphMemory.open(str(tmp_path / "memory.db")) as opened:
        yield opened


@pytest.mark.parametrize(("operation", "field"), cases())
async def test_each_argument_reaches_the_engine_from_python(
    memory: GraphMemory, operation: str, field: str
) -> None:
    scope = memory.scope(app="coach", user="alice")
    with pytest.raises(InvalidInputError) as caught:
        await getattr(scope, operation)(**with_bad(operation, field))
    assert str(caught.value).startswith(field), str(caught.value)


async def test_each_argument_reaches_the_engine_over_mcp(tmp_path: Path) -> None:
    settings = Settings(db=str(tmp_path / "memory.db"), app="coach", user="alice")
    async with Client(build_server(settings)) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(listed) == set(OPERATIONS)
        for operation, field in cases():
            schema = listed[operation].input_schema
            model = OPERATIONS[operation].arguments
            assert set(schema["properties"]) == set(model.model_fields), operation
            required = {name for name, info in model.model_fields.items() if info.is_required()}
            assert set(schema.get("required", [])) == required, operation
            result = await client.call_tool(operation, with_bad(operation, field))
            assert result.is_error, (operation, field)
            assert result.content[0].text.startswith(field), (operation, field)


async def test_every_argument_at_once_through_both(tmp_path: Path) -> None:
    """A call with every argument given works the same from Python and over MCP."""
    settings = Settings(db=str(tmp_path / "memory.db"), app="coach", user="alice")
    async with (
        GraphMemory.open(str(tmp_path / "python.db")) as memory,
        Client(build_server(settings)) as client,
    ):
        scope = memory.scope(app="coach", user="alice")
        fact = (await scope.remember(entity="Alice", facts=["likes coffee"])).added[0].id
        link = (await scope.relate(source="Alice", relation="knows", target="Carol")).relation.id
        over = await client.call_tool("remember", {"entity": "Alice", "facts": ["likes coffee"]})
        mcp_fact = over.structured_content["added"][0]["id"]
        over = await client.call_tool(
            "relate", {"source": "Alice", "relation": "knows", "target": "Carol"}
        )
        mcp_link = over.structured_content["relation"]["id"]
        for name, sample in SAMPLES.items():
            result = await getattr(scope, name)(**ids_in(sample, fact, link))
            assert isinstance(result, OPERATIONS[name].result)
            over_mcp = await client.call_tool(name, ids_in(sample, mcp_fact, mcp_link))
            assert not over_mcp.is_error, (name, over_mcp.content)
            OPERATIONS[name].result.model_validate(over_mcp.structured_content)
            assert over_mcp.structured_content.keys() == result.model_dump(mode="json").keys()


# ---------------------------------------------------------------- the command line

# record_turns' turns are typed `--turn ROLE TEXT` (repeatable), with one `--at` for all.
TURN_OPTIONS = {"turns", "at"}
# What each flag makes the engine answer with more of (`counted`), given `seed_for_flags`.
FLAG_SHOWS_MORE = {"exclusive": "superseded", "include_history": "observations"}
TOO_LONG = "x" * 100_000  # longer than any text argument may be


def command_line(operation: str, arguments: dict[str, Any]) -> list[str]:
    """The command line that gives `arguments`, written from the subcommand's own
    parameters: an argument the subcommand has no parameter for fails here."""
    command = COMMAND_OF[operation]
    params = {param.name: param for param in command.params}
    positional: list[str] = []
    options: list[str] = []
    for param in command.params:  # arguments in the subcommand's order
        if isinstance(param, click.Argument) and param.name in arguments:
            value = arguments[param.name]
            positional += [str(item) for item in value] if isinstance(value, list) else [value]
    for name, value in arguments.items():
        if name == "turns" and operation == "record_turns":
            for turn in value:
                options += ["--turn", turn["role"], turn["text"]]
            at = {turn["at"] for turn in value if "at" in turn}
            options += ["--at", *at] if at else []
            continue
        param = params[name]
        if isinstance(param, click.Argument) or value is None:
            continue
        assert isinstance(param, click.Option)
        if param.is_flag:
            options += [param.opts[0]] if value else param.secondary_opts
            continue
        for item in value if isinstance(value, list) else [value]:
            options += [param.opts[0], str(item)]
    assert command.name is not None
    return [command.name, *positional, *options]


def bad_for_the_command_line(operation: str, field: str) -> Any:
    """A value the field refuses, as it can be typed."""
    if operation == "record_turns" and field == "turns":
        return [{"role": "user", "text": TOO_LONG}]
    param = next(p for p in COMMAND_OF[operation].params if p.name == field)
    bad = "-1" if param.type == click.INT else TOO_LONG  # every number is counted from 1
    return [bad] if isinstance(SAMPLES[operation][field], list) else bad


def flags() -> list[tuple[str, str]]:
    return [
        (operation, field)
        for operation, field in cases()
        if OPERATIONS[operation].arguments.model_fields[field].annotation is bool
    ]


def counted(result: Any, key: str) -> int:
    """How many items the lists under `key` hold, anywhere in a JSON result."""
    if isinstance(result, dict):
        return sum(
            (len(value) if name == key and isinstance(value, list) else 0) + counted(value, key)
            for name, value in result.items()
        )
    if isinstance(result, list):
        return sum(counted(item, key) for item in result)
    return 0


def test_each_subcommand_takes_the_models_arguments_and_no_others() -> None:
    assert set(COMMAND_OF) == set(OPERATIONS)
    for name, command in COMMAND_OF.items():
        taken = {param.name for param in command.params} - SHARED_PARAMETERS
        fields = set(OPERATIONS[name].arguments.model_fields)
        expected = fields | TURN_OPTIONS if name == "record_turns" else fields
        assert taken == expected, name


@pytest.mark.parametrize(("operation", "field"), [c for c in cases() if c not in flags()])
def test_each_argument_reaches_the_engine_from_the_command_line(
    tmp_path: Path, operation: str, field: str
) -> None:
    cli = Cli(tmp_path / "memory.db")
    cli("remember", "Someone", "exists")  # so that the reads find a database
    arguments = {**with_bad(operation, field), field: bad_for_the_command_line(operation, field)}
    refused = cli(*command_line(operation, arguments), code=2)
    assert refused.stderr.startswith(f"chronomem: {field}"), refused.stderr


def test_one_time_for_all_turns_reaches_the_engine(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "memory.db")
    refused = cli("record-turns", "s1", "--turn", "user", "hi", "--at", "soon", code=2)
    assert refused.stderr.startswith("chronomem: turns[0].at: 'soon' is not a timestamp")
    said = cli(
        "record-turns", "s1", "--turn", "user", "hi", "--turn", "user", "yo", "--at", "2026-05-01"
    )
    assert "stored 2 turn(s)" in said.stdout
    turns = cli.json("recall", "hi yo")["turns"]
    assert [turn["at"] for turn in turns] == ["2026-05-01T00:00:00Z"] * 2


def seed_for_flags(cli: Cli) -> None:
    """Alice with a closed fact about tea beside a current one, and a relation from
    her that `relate --exclusive` would close."""
    closed = cli.json("remember", "Alice", "likes tea", "drinks green tea")["added"][0]["id"]
    cli("forget", closed)
    cli("relate", "Alice", "knows", "Dan")


def test_every_flag_is_expected_to_show_something() -> None:
    assert {field for _, field in flags()} == set(FLAG_SHOWS_MORE)


@pytest.mark.parametrize(("operation", "field"), flags())
def test_each_flag_changes_what_the_engine_answers(
    tmp_path: Path, operation: str, field: str
) -> None:
    answers = []
    for given in (False, True):
        cli = Cli(tmp_path / f"{given}.db")  # the same memory, before either call
        seed_for_flags(cli)
        arguments = {**with_bad(operation, field), field: given}
        answers.append(
            counted(cli.json(*command_line(operation, arguments)), FLAG_SHOWS_MORE[field])
        )
    without, flagged = answers
    assert flagged > without, (operation, field)


def test_every_argument_at_once_from_the_command_line(tmp_path: Path) -> None:
    """A call with every argument given works, and answers in the shape Python's does."""
    cli = Cli(tmp_path / "memory.db")
    fact = cli.json("remember", "Alice", "likes coffee")["added"][0]["id"]
    link = cli.json("relate", "Alice", "knows", "Carol")["relation"]["id"]

    async def from_python() -> dict[str, set[str]]:
        async with GraphMemory.open(str(tmp_path / "python.db")) as memory:
            scope = memory.scope(app="coach", user="default")
            fact = (await scope.remember(entity="Alice", facts=["likes coffee"])).added[0].id
            link = (
                await scope.relate(source="Alice", relation="knows", target="Carol")
            ).relation.id
            return {
                name: set(
                    (await getattr(scope, name)(**ids_in(sample, fact, link))).model_dump(
                        mode="json"
                    )
                )
                for name, sample in SAMPLES.items()
            }

    shapes = anyio.run(from_python)
    for name, sample in SAMPLES.items():
        answer = cli.json(*command_line(name, ids_in(sample, fact, link)))
        OPERATIONS[name].result.model_validate(answer)
        assert set(answer) == shapes[name], name
