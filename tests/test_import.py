"""The bulk import's two passes: every line checked first (a malformed line keeps
nothing), then the steps spooled to a file and written a batch per transaction."""

from __future__ import annotations

import io
import itertools
import json
import re
import sqlite3
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from memory import GraphMemory, InvalidInputError
from memory.store import BULK_CHECKPOINT_PAGES, Store, add_functions
from memory.timestamps import format_time, system_clock
from memory.transfer.check import ImportPlan, check_import
from memory.transfer.records import decode, plain_step, record_steps
from memory.transfer.steps import RawStep, named_step
from memory.validation import (
    FACT_MAX,
    LABEL_MAX,
    NAME_MAX,
    FactText,
    Label,
    Name,
    plain_text,
)

from .conftest import dump

pytestmark = pytest.mark.anyio

T = "2026-01-01T00:00:00Z"


def _observation(i: int, entity: str = "Alice") -> str:
    return json.dumps(
        {
            "type": "observation",
            "id": f"o{i}",
            "entity": entity,
            "text": f"fact {i}",
            "attribute": None,
            "project": None,
            "valid_from": T,
            "recorded_at": T,
            "valid_to": None,
            "invalidated_at": None,
            "reason": None,
        }
    )


def _relation(i: int, relation: str) -> str:
    return json.dumps(
        {
            "type": "relation",
            "id": f"r{i}",
            "source": "Alice",
            "relation": relation,
            "target": "Bob",
            "project": None,
            "valid_from": T,
            "recorded_at": T,
            "valid_to": None,
            "invalidated_at": None,
            "reason": None,
        }
    )


async def test_a_one_shot_iterable_is_imported_in_batches(db_path: Path) -> None:
    lines = [_observation(i) for i in range(7)] + ["", _relation(1, "knows")]
    told: list[int] = []
    async with GraphMemory.open(db_path) as mem:
        scope = mem.scope(app="a", user="u")
        result = await scope.import_lines(iter(lines), batch_size=3, progress=told.append)
        assert (result.lines, result.observations, result.relations) == (8, 7, 1)
        assert result.entities == 0  # created by facts, not by entity lines
        assert told == [3, 3, 2]
        graph = await scope.open_nodes(names=["Alice"])
        assert len(graph.entities[0].observations) == 7
        again = await scope.import_lines(iter(lines), batch_size=3)
        assert again.skipped == 8


async def test_a_relation_type_with_no_letters_in_a_later_batch_keeps_nothing(
    db_path: Path,
) -> None:
    lines = [_observation(i) for i in range(4)] + [_relation(1, "--")]
    async with GraphMemory.open(db_path) as mem:
        with pytest.raises(InvalidInputError, match="^line 5: relation: '--' has no letters"):
            await mem.scope(app="a", user="u").import_lines(lines, batch_size=2)
    assert not dump(db_path)["observation"]


async def test_a_reference_relation_with_no_letters_keeps_nothing(db_path: Path) -> None:
    entity = {"type": "entity", "name": "A", "entityType": "t", "observations": ["x"]}
    relation = {"type": "relation", "from": "A", "to": "B", "relationType": "!!"}
    lines = [json.dumps(entity)] * 3 + [json.dumps(relation)]
    async with GraphMemory.open(db_path) as mem:
        with pytest.raises(InvalidInputError, match="^line 4: relation: '!!' has no letters"):
            await mem.scope(app="a", user="u").import_lines(lines, batch_size=1)
    assert not dump(db_path)["entity"]


async def test_batch_size_must_be_positive(db_path: Path) -> None:
    async with GraphMemory.open(db_path) as mem:
        with pytest.raises(ValueError, match="at least 1"):
            await mem.scope(app="a", user="u").import_lines([_observation(1)], batch_size=0)


def test_the_plan_spools_batches_and_reads_them_back_unchanged() -> None:
    spool = io.BytesIO()
    reason = "moved to Lyon ✓ ünïcode"  # kept as is
    line = json.loads(_observation(1))
    line["reason"] = reason
    lines = [_observation(i) for i in range(4)] + [json.dumps(line)]
    plan = check_import(lines, spool, batch_size=2)
    assert spool.tell() > 0  # two full batches already left memory
    batches = [list(map(named_step, b)) for b in plan.batches()]
    assert [len(b) for b in batches] == [2, 2, 1]
    assert [step.line for b in batches for step in b] == [1, 2, 3, 4, 5]
    first = batches[0][0]
    assert first[:5] == (1, "observation", "o0", "Alice", "fact 0")
    assert (first.id, first.entity, first.text) == ("o0", "Alice", "fact 0")
    assert batches[-1][0].reason == reason
    assert plan.lines == 5


def test_an_empty_plan_has_no_batches() -> None:
    plan = ImportPlan(io.BytesIO(), batch_size=10)
    assert list(plan.batches()) == []


def _accepts(kind: object, value: object) -> bool:
    try:
        TypeAdapter(kind).validate_python(value)
    except ValidationError:
        return False
    return True


TEXT_TYPES = [(Name, NAME_MAX), (Label, LABEL_MAX), (FactText, FACT_MAX)]
AWKWARD = st.text(
    alphabet=st.sampled_from(["a", "é", " ", "\t", "\u2003", "\x00", "\ud800", "字"]),
    max_size=70,
)


@given(value=AWKWARD, which=st.integers(0, 2))
def test_plain_text_never_accepts_what_the_text_types_refuse(value: str, which: int) -> None:
    kind, limit = TEXT_TYPES[which]
    if plain_text(value, limit):
        assert _accepts(kind, value)


@pytest.mark.parametrize(
    "value", ["", "   ", "\u2003", "a\x00b", "a\ud800", "x" * (LABEL_MAX + 1), 5, None]
)
def test_plain_text_refuses_what_a_label_refuses(value: object) -> None:
    assert not plain_text(value, LABEL_MAX)
    assert not _accepts(Label, value)


def test_plain_text_accepts_ordinary_text() -> None:
    assert plain_text("Zoë works at Acme", NAME_MAX)
    assert plain_text("x" * LABEL_MAX, LABEL_MAX)


async def test_an_import_checkpoints_less_often_and_restores_the_setting(db_path: Path) -> None:
    store = await Store.open(str(db_path), system_clock)
    try:
        usual = await store.checkpoint_pages()
        async with store.bulk():
            assert await store.checkpoint_pages() == BULK_CHECKPOINT_PAGES
        assert await store.checkpoint_pages() == usual
        scope = GraphMemory(store).scope(app="a", user="u")
        with pytest.raises(InvalidInputError):  # refused while checking: never raised
            await scope.import_lines(["{"])
        await scope.import_lines([_observation(1)])
        assert await store.checkpoint_pages() == usual
    finally:
        await store.close()


def _segments(db_path: Path, table: str) -> int:
    with sqlite3.connect(db_path) as conn:
        return conn.execute(f"SELECT count(DISTINCT segid) FROM {table}_idx").fetchone()[0]


async def test_a_large_import_merges_the_index_it_filled(db_path: Path) -> None:
    """Each transaction writes its full-text entries as a new index segment; after an
    import of many rows their index is one segment, and search finds the same."""
    lines = [_observation(i, entity=f"E{i}") for i in range(60)]
    async with GraphMemory.open(db_path) as mem:
        scope = mem.scope(app="a", user="u")
        for i in range(12):  # segments of earlier writes, one transaction each
            await scope.remember(entity=f"Early {i}", facts=[f"fact early {i}"])
        assert _segments(db_path, "observation_fts") > 1
        await scope.import_lines(lines, batch_size=5, merge_after_rows=30)
        assert _segments(db_path, "observation_fts") == 1
        found = await scope.search_nodes(query="fact 42", limit=3)
        assert found.hits[0].entity.name == "E42"
        small = [_observation(i, entity="F") for i in range(100, 110)]  # under the threshold
        await scope.import_lines(small, batch_size=5, merge_after_rows=30)
        assert _segments(db_path, "observation_fts") > 1
    with sqlite3.connect(db_path) as conn:
        add_functions(conn)
        conn.execute(
            "INSERT INTO observation_fts (observation_fts, rank) VALUES ('integrity-check', 1)"
        )


def _turn(i: int, **fields: object) -> str:
    record = {
        "type": "turn",
        "id": f"t{i}",
        "session_id": "s",
        "role": "user",
        "text": f"turn {i}",
        "at": T,
        "recorded_at": T,
        "project": None,
    }
    return json.dumps({**record, **fields})


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        (json.dumps({**json.loads(_observation(9)), "reason": {"x": 1}}), "reason"),
        (json.dumps({**json.loads(_relation(9, "knows")), "reason": "r" * 501}), "reason"),
        (json.dumps({**json.loads(_observation(9)), "id": "o" * 201}), "'id'"),
        (_turn(9, role="r" * 65), "role"),
        (_turn(9, text="nul \x00 inside"), "text"),
        (_turn(9, session_id=" "), "session_id"),
        (_turn(9, id=""), "'id'"),
    ],
)
async def test_own_lines_are_checked_as_the_operations_check_them(
    db_path: Path, bad: str, field: str
) -> None:
    """Found in review: reasons, turns and ids of the export format reached the
    database unchecked (a dict as reason failed mid-import, after earlier batches)."""
    lines = [_observation(i) for i in range(6)] + [bad]
    async with GraphMemory.open(db_path) as mem:
        with pytest.raises(InvalidInputError, match=rf"line 7: .*{field}"):
            await mem.scope(app="a", user="u").import_lines(lines, batch_size=2)
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("SELECT count(*) FROM observation").fetchone() == (0,)


async def test_an_id_of_another_memory_says_what_earlier_batches_kept(db_path: Path) -> None:
    """Found in review: found only while writing, after earlier batches committed, the
    error claimed nothing was kept."""
    async with GraphMemory.open(db_path) as mem:
        await mem.scope(app="a", user="other").import_lines([_observation(5)])
        scope = mem.scope(app="a", user="u")
        lines = [_observation(100 + i) for i in range(5)] + [_observation(5)]
        with pytest.raises(InvalidInputError, match=r"line 6: .*another memory.*before 5 were"):
            await scope.import_lines(lines, batch_size=2)
        assert (await scope.stats()).observations_current == 4


async def test_a_cap_in_a_line_split_across_batches_says_part_was_kept(db_path: Path) -> None:
    many = json.dumps(
        {
            "type": "entity",
            "name": "A",
            "entityType": "t",
            "observations": [f"fact {i}" for i in range(120)],
        }
    )
    async with GraphMemory.open(db_path, max_facts=60) as mem:
        scope = mem.scope(app="a", user="u")
        with pytest.raises(InvalidInputError, match=r"part of line 1 was imported"):
            await scope.import_lines([many], batch_size=1)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=12,
)
JUNK = [
    "",
    "}",
    "]",
    ",",
    ":",
    "\\",
    '"',
    "\\ud800",
    "\\udc00x",
    "NaN",
    "-Infinity",
    "01",
    "1.",
    " ",
    "\t",
    "\x0c",
    "\u2028",
    "\ufeff",
    "\x00",
    "é",
]


@given(value=JSON_VALUES, ascii=st.booleans(), at=st.integers(0, 300), junk=st.sampled_from(JUNK))
def test_a_line_decodes_as_json_decodes_it(value: object, ascii: bool, at: int, junk: str) -> None:
    """The faster parser must accept exactly what `json` accepts, as the same values;
    what it refuses goes to `json`, which raises its own message."""
    text = json.dumps(value, ensure_ascii=ascii)
    line = text[:at] + junk + text[at:]
    try:
        expected = json.loads(line)
    except ValueError as exc:
        with pytest.raises(ValueError, match=re.escape(str(exc))):
            decode(line)
    else:
        assert repr(decode(line)) == repr(expected)  # repr: NaN is not equal to itself


@pytest.mark.parametrize(
    "line", ['{"a":"\\ud800"}', '"\\ud83d\\ude00"', "[" * 300 + "]" * 300, '{"a":1,"a":2}', "1e999"]
)
def test_lines_the_faster_parser_refuses_are_decoded_by_json(line: str) -> None:
    assert repr(decode(line)) == repr(json.loads(line))


def _plain_records() -> list[dict[str, object]]:
    return [
        json.loads(_observation(1)),
        {
            **json.loads(_observation(2)),
            "attribute": "plan",
            "project": "p",
            "reason": "r",
            "valid_to": "2026-02-01T00:00:00Z",
            "invalidated_at": "2026-02-01T00:00:00.5Z",
        },
        json.loads(_relation(1, "works at")),
        json.loads(_turn(1)),
        {
            "type": "entity",
            "name": "Alice",
            "entity_type": "person",
            "project": None,
            "recorded_at": T,
        },
    ]


ODD_VALUES = [
    None,
    "",
    " ",
    "\u2003",
    "x" * 65,
    "x" * 201,
    "x" * 2_001,
    5,
    1.5,
    True,
    [],
    {},
    "a\x00b",
    "a\ud800",
    "2026-13-01T00:00:00Z",
    "2026-01-01",
    "2026-01-01T03:00:00+02:00",
    "2025-06-01T00:00:00Z",
    "2027-01-01T00:00:00.123456Z",
    "works at",
    "!!!",
    "observation",
    "turn",
    "entity",
    "fact 1",
]
TIME_FIELDS = ["valid_from", "valid_to", "recorded_at", "invalidated_at", "at"]
FIELDS = [
    "type",
    "id",
    "entity",
    "text",
    "attribute",
    "project",
    "valid_from",
    "valid_to",
    "recorded_at",
    "invalidated_at",
    "reason",
    "source",
    "relation",
    "target",
    "session_id",
    "role",
    "at",
    "name",
    "entity_type",
    "entityType",
    "observations",
    "from",
]


def _full_check(record: object) -> tuple[str, object]:
    try:
        return "steps", record_steps(record, 1)
    except (ValueError, InvalidInputError, ValidationError) as exc:
        return "error", str(exc)


def _assert_plain_agrees(record: dict[str, object]) -> None:
    expected = _full_check(record)
    try:
        step = plain_step(record, 1)
    except InvalidInputError as exc:
        assert expected == ("error", str(exc)), record
        return
    if step is not None:
        assert expected == ("steps", [step]), record


def _changed(record: dict[str, object], changes: Iterable[tuple[str, object]]) -> dict[str, object]:
    record = dict(record)
    for field, value in changes:
        if value == "DROP":
            record.pop(field, None)
        else:
            record[field] = value
    return record


def test_the_plain_check_gives_what_the_full_check_gives_for_each_odd_field() -> None:
    """`plain_step` inlines the own format's rules for speed: wherever it gives a step,
    the full check gives that same step; where it raises, the full check raises so.
    Every record with one field made odd (or dropped), and with two times swapped."""
    for record in _plain_records():
        for field in FIELDS:
            for value in [*ODD_VALUES, "DROP"]:
                _assert_plain_agrees(_changed(record, [(field, value)]))
        for first, second in itertools.permutations(TIME_FIELDS, 2):
            if first in record and second in record:
                _assert_plain_agrees(_changed(record, [(first, record[second])]))


@settings(max_examples=300)
@given(
    which=st.integers(0, 4),
    changes=st.lists(st.tuples(st.sampled_from(FIELDS), st.sampled_from([*ODD_VALUES, "DROP"]))),
)
def test_the_plain_check_gives_what_the_full_check_gives(
    which: int, changes: list[tuple[str, object]]
) -> None:
    _assert_plain_agrees(_changed(_plain_records()[which], changes))


def test_ordinary_lines_take_the_plain_check() -> None:
    for record in _plain_records():
        assert plain_step(record, 1) is not None
        assert [plain_step(record, 1)] == record_steps(record, 1)
    assert plain_step(["not", "a", "record"], 1) is None
    assert plain_step({**json.loads(_observation(1)), "from": "x"}, 1) is None  # reference


def _fts_agrees(db_path: Path) -> None:
    """Every full-text index holds exactly its table's rows."""
    with sqlite3.connect(db_path) as conn:
        add_functions(conn)
        for table, key in [
            ("entity", "id"),
            ("observation", "seq"),
            ("relation", "seq"),
            ("turn", "seq"),
        ]:
            conn.execute(
                f"INSERT INTO {table}_fts ({table}_fts, rank) VALUES ('integrity-check', 1)"
            )
            rows = conn.execute(f"SELECT {key} FROM {table} ORDER BY {key}").fetchall()
            assert (
                conn.execute(f"SELECT id FROM {table}_fts_docsize ORDER BY id").fetchall() == rows
            )


async def test_stored_and_new_ids_in_one_run_are_told_apart(db_path: Path) -> None:
    """Rows of one kind are inserted together; the ids already stored are skipped, the
    new ones are counted, indexed and searchable, and an id twice counts once."""
    async with GraphMemory.open(db_path) as mem:
        scope = mem.scope(app="a", user="u")
        await scope.import_lines([_observation(1), _observation(2), _turn(1)])
        lines = [_observation(i) for i in (1, 3, 2, 4, 3)] + [_turn(i) for i in (2, 1, 3)]
        result = await scope.import_lines(lines)
        assert (result.observations, result.turns, result.skipped) == (2, 2, 4)
        hits = await scope.search_nodes(query="fact 4")
        assert [o.text for o in hits.hits[0].observations if o.text == "fact 4"] == ["fact 4"]
        assert (await scope.recall(query="turn 3")).turns[0].text == "turn 3"
        again = await scope.import_lines(lines)
        assert (again.observations, again.turns, again.skipped) == (0, 0, 8)
    _fts_agrees(db_path)


@pytest.mark.parametrize("stored", [False, True])
async def test_an_id_of_another_memory_inside_a_run_names_its_line(
    db_path: Path, stored: bool
) -> None:
    async with GraphMemory.open(db_path) as mem:
        await mem.scope(app="a", user="other").import_lines([_observation(5)])
        scope = mem.scope(app="a", user="u")
        if stored:  # a stored id of this memory before it is skipped, not blamed
            await scope.import_lines([_observation(101)])
        before = dump(db_path)
        lines = [_observation(i) for i in (100, 101, 5, 102)]
        with pytest.raises(InvalidInputError, match=r"^line 3: id 'o5' belongs to another"):
            await scope.import_lines(lines, batch_size=10)
        assert dump(db_path) == before


async def test_own_lines_find_entities_that_reference_lines_created_in_the_batch(
    db_path: Path,
) -> None:
    """Entities are looked up once a batch; a reference-format line in the batch adds
    entities through the engine, after which own lines must look again."""
    reference = json.dumps(
        {"type": "entity", "name": "Bob", "entityType": "person", "observations": ["likes tea"]}
    )
    lines = [
        _observation(1, entity="Alice"),
        _observation(2, entity=" ALICE "),
        reference,
        _observation(3, entity="bob"),
        _relation(4, "knows"),
        json.dumps({"type": "relation", "from": "alice", "to": "Carol", "relationType": "knows"}),
        _observation(5, entity="carol"),
    ]
    async with GraphMemory.open(db_path) as mem:
        scope = mem.scope(app="a", user="u")
        result = await scope.import_lines(lines)
        assert (result.observations, result.relations) == (5, 2)
        opened = await scope.open_nodes(names=["Alice", "Bob", "Carol"])
        assert [e.name for e in opened.entities] == ["Alice", "Bob", "Carol"]
        facts = {e.name: sorted(o.text for o in e.observations) for e in opened.entities}
        assert facts == {
            "Alice": ["fact 1", "fact 2"],
            "Bob": ["fact 3", "likes tea"],
            "Carol": ["fact 5"],
        }
    _fts_agrees(db_path)


async def test_the_first_id_of_another_memory_in_line_order_is_told(db_path: Path) -> None:
    """Each kind's rows are inserted together; the error still names the first line."""
    async with GraphMemory.open(db_path) as mem:
        await mem.scope(app="a", user="other").import_lines([_observation(5), _relation(7, "x")])
        scope = mem.scope(app="a", user="u")
        lines = [_observation(100), _relation(7, "knows"), _observation(5)]
        with pytest.raises(InvalidInputError, match=r"^line 2: id 'r7' belongs to another"):
            await scope.import_lines(lines)
        assert (await scope.stats()).observations_current == 0


def _at(day: int) -> str:
    return f"2020-01-{day:02d}T00:00:00Z"


def _fact(identifier: str, entity: str, day: int) -> str:
    return json.dumps(
        {
            **json.loads(_observation(0, entity)),
            "id": identifier,
            "valid_from": _at(day),
            "recorded_at": _at(day),
        }
    )


def _changed_at(db_path: Path) -> dict[str, str]:
    with sqlite3.connect(db_path) as conn:
        rows = conn.execute("SELECT name, changed_at FROM entity ORDER BY id").fetchall()
    return {name: format_time(at) for name, at in rows}


async def test_changed_at_counts_the_rows_an_import_wrote_and_no_others(db_path: Path) -> None:
    """A new entity is written with the changed_at of its rows in the batch: rows
    skipped as already stored must not count; a stored entity is only ever raised."""
    entity = json.dumps(
        {
            "type": "entity",
            "name": "Zed",
            "entity_type": "t",
            "project": None,
            "recorded_at": _at(1),
        }
    )
    async with GraphMemory.open(db_path) as mem:
        scope = mem.scope(app="a", user="u")
        await scope.import_lines([_fact("o1", "Old", 3), _fact("o2", "Gone", 8)])
        lines = [
            entity,
            _fact("o1", "Zed", 9),
            _fact("o3", "Zed", 5),
            _fact("o2", "Yan", 7),
            _fact("o4", "Old", 6),
            _fact("o5", "Old", 2),
        ]
        result = await scope.import_lines(lines)
        assert (result.entities, result.observations, result.skipped) == (1, 3, 2)
    assert _changed_at(db_path) == {"Old": _at(6), "Gone": _at(8), "Zed": _at(5), "Yan": _at(7)}
    # Yan's only fact was skipped: changed_at is its creation, as for the stored rows.


async def test_entities_are_numbered_in_the_order_lines_name_them(db_path: Path) -> None:
    reference = json.dumps(
        {"type": "entity", "name": "Bea", "entityType": "t", "observations": ["x"]}
    )
    lines = [
        _fact("o1", "Ann", 1),
        _relation(2, "knows").replace("Alice", "Cid"),
        reference,
        _fact("o3", "Dan", 3),
        _fact("o4", "bea", 4),
    ]
    async with GraphMemory.open(db_path) as mem:
        await mem.scope(app="a", user="u").import_lines(lines)
    with sqlite3.connect(db_path) as conn:
        names = [name for (name,) in conn.execute("SELECT name FROM entity ORDER BY id")]
    assert names == ["Ann", "Cid", "Bob", "Bea", "Dan"]


def _plan_steps(lines: Iterable[str], batch_size: int = 4) -> list[list[RawStep]]:
    """The batches of `lines`, checked 3 lines at a time."""
    return list(check_import(lines, io.BytesIO(), batch_size, chunk_lines=3).batches())


def test_chunks_of_lines_plan_the_steps_in_batches() -> None:
    lines = [_observation(i) if i % 4 else "" for i in range(40)] + [_turn(1), _relation(1, "x")]
    batches = _plan_steps(lines)
    assert [len(batch) for batch in batches] == [4] * 8  # 32 steps, 10 blank lines
    assert [named_step(step).line for batch in batches for step in batch] == [
        n for n in range(1, 43) if n > 40 or (n - 1) % 4
    ]


@pytest.mark.parametrize("first_bad", [5, 8, 14, 15])
def test_the_first_bad_line_is_told(first_bad: int) -> None:
    lines = [_observation(i) for i in range(1, 31)]
    for bad in (first_bad, first_bad + 3, 25):  # in this chunk and later ones
        lines[bad - 1] = lines[bad - 1].replace('"text"', '"txt"')
    with pytest.raises(InvalidInputError, match=rf"^line {first_bad}: field 'text'"):
        _plan_steps(lines)


def test_a_line_nested_too_deeply_is_named() -> None:
    lines = [_observation(1), "[" * 100_000 + "]" * 100_000]
    with pytest.raises(InvalidInputError, match=r"^line 2: nested too deeply$"):
        _plan_steps(lines)


def _then_failing(lines: list[str], error: Exception) -> Iterator[str]:
    yield from lines
    raise error


@pytest.mark.parametrize("bad", [None, 2, 7])
def test_an_error_reading_the_input_is_told_after_the_lines_before_it(bad: int | None) -> None:
    """Lines are checked a chunk at a time: an error while reading a later line (one
    that is not UTF-8) must not hide a bad line before it, nor be lost."""
    lines = [_observation(i) for i in range(1, 9)]
    if bad:
        lines[bad - 1] = "{"
    unreadable = InvalidInputError("line 9: not UTF-8 text (byte 3 of the line)")
    expected = rf"^line {bad}: Expecting" if bad else "^line 9: not UTF-8"
    with pytest.raises(InvalidInputError, match=expected):
        _plan_steps(_then_failing(lines, unreadable))


def _typed(name: str, entity_type: str) -> str:
    return json.dumps(
        {
            "type": "entity",
            "name": name,
            "entity_type": entity_type,
            "project": None,
            "recorded_at": _at(1),
        }
    )


@pytest.mark.parametrize("batch_size", [100, 1])
async def test_an_entity_line_after_a_fact_naming_it_gives_its_type(
    db_path: Path, batch_size: int
) -> None:
    """A fact line creates its entity as `general`; an entity line after it (in the
    same batch or a later one, either format) gives the type; a type already chosen
    is never replaced."""
    reference_entity = json.dumps(
        {"type": "entity", "name": "Rex", "entityType": "dog", "observations": []}
    )
    async with GraphMemory.open(db_path) as mem:
        scope = mem.scope(app="a", user="u")
        await scope.remember(entity="Chosen", facts=["x"], entity_type="person")
        await scope.remember(entity="Plain", facts=["y"])
        lines = [
            _fact("o1", "Ann", 1),
            _fact("o2", "Rex", 2),
            _fact("o3", "Chosen", 3),
            _typed("ann", "person"),
            reference_entity,
            _typed("Chosen", "robot"),
            _typed("Plain", "place"),
            _fact("o4", "Bo", 4),
            _typed("Bo", "general"),
        ]
        await scope.import_lines(lines, batch_size=batch_size)
        opened = await scope.open_nodes(names=["Ann", "Rex", "Chosen", "Plain", "Bo"])
    types = {entity.name: entity.entity_type for entity in opened.entities}
    assert types == {
        "Ann": "person",
        "Rex": "dog",
        "Chosen": "person",
        "Plain": "place",
        "Bo": "general",
    }
    _fts_agrees(db_path)
