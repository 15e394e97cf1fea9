"""DESIGN §6: one SQLite file, WAL, migrations on open, and refusal of foreign files."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import anyio
import pytest

from memory import DatabaseFileError, GraphMemory
from memory.profile import (
    CARD_FACTS,
    CARD_RELATIONS,
    LAST_SESSION,
    RECENT_ENTITIES,
    RECENT_IN_PROJECT,
    SESSION_TAIL,
)
from memory.queries import SELECT_VISIBLE_ENTITIES, observations_sql, relations_sql
from memory.ranking import INDEXES, STATS, all_words_sql, count_sql, scored_sql
from memory.ranking import newest_sql as newest_rows_sql
from memory.reads import COUNT_VISIBLE, SELECT_PAGE
from memory.schema import (
    ADD_FTS_STATS,
    APPLICATION_ID,
    CHANGED_NEW,
    COUNT_FTS_STATS,
    INDEX_NEW,
    LATEST_VERSION,
    MIGRATIONS,
    RETYPE_FTS_STATS,
    TOKENS_FUNCTION,
    column_tokens,
)
from memory.search import (
    COUNTS,
    FACT_ROWS,
    FACTS_BY_SEQ,
    LINKED,
    NAME_ROWS,
    NEWEST_FACTS,
    NEWEST_RELATIONS,
    RECALL_ROWS,
    RELATION_ROWS,
    RELATIONS_BY_SEQ,
    newest_sql,
)
from memory.store import LAST_ROWID, ROWIDS_BETWEEN, add_functions
from memory.writes import SELECT_OPEN_FACTS, SELECT_OPEN_TRIPLE, SELECT_RELATION_SLOT, SELECT_SLOT

from .conftest import FakeClock

pytestmark = pytest.mark.anyio


def _schema(path: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT name, sql FROM sqlite_master ORDER BY name").fetchall()


async def test_a_reopened_file_has_everything(db_path: Path, clock: FakeClock) -> None:
    async with GraphMemory.open(db_path, clock=clock) as mem:
        alice = mem.scope(app="coach", user="alice", project="p")
        fact = await alice.remember(entity="Alice", facts=["likes tea"], attribute="drink")
        rel = await alice.relate(source="Alice", relation="knows", target="Bob")
        await alice.record_turns(session_id="s", turns=[{"role": "user", "text": "hi"}])
        before = await alice.read_graph(include_history=True)
    async with GraphMemory.open(db_path, clock=clock) as mem:
        alice = mem.scope(app="coach", user="alice", project="p")
        after = await alice.read_graph(include_history=True)
        assert after == before
        assert after.entities[0].observations[0].id == fact.added[0].id
        assert after.relations[0].id == rel.relation.id


async def test_opening_twice_migrates_once(db_path: Path) -> None:
    async with GraphMemory.open(db_path):
        pass
    first = _schema(db_path)
    async with GraphMemory.open(db_path), GraphMemory.open(db_path):
        pass
    assert _schema(db_path) == first
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == LATEST_VERSION
        assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID


async def test_concurrent_first_opens_of_a_new_file_both_succeed(db_path: Path) -> None:
    async def open_and_write(user: str) -> None:
        async with GraphMemory.open(db_path) as mem:
            await mem.scope(app="a", user=user).remember(entity="E", facts=[user])

    async with anyio.create_task_group() as tg:
        for user in ("u1", "u2", "u3"):
            tg.start_soon(open_and_write, user)
    async with GraphMemory.open(db_path) as mem:
        for user in ("u1", "u2", "u3"):
            graph = await mem.scope(app="a", user=user).read_graph()
            assert [o.text for o in graph.entities[0].observations] == [user]


def _version_1_file(path: Path) -> sqlite3.Connection:
    """A file as chronomem's first schema left it."""
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    for statement in MIGRATIONS[1]:
        conn.execute(statement)
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    return conn


async def test_an_old_version_is_migrated_forward(db_path: Path) -> None:
    """A file at version 1 picks up later steps; at the latest it is left as is."""
    _version_1_file(db_path).close()
    async with GraphMemory.open(db_path) as mem:
        await mem.scope(app="a", user="u").remember(entity="E", facts=["x"])
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == LATEST_VERSION


async def test_connection_settings(db_path: Path) -> None:
    async with GraphMemory.open(db_path) as mem:
        await mem.scope(app="a", user="u").remember(entity="E", facts=["x"])
        with sqlite3.connect(db_path) as conn:
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


async def test_in_memory_databases_work_and_are_separate() -> None:
    async with GraphMemory.open(":memory:") as one, GraphMemory.open() as two:
        await one.scope(app="a", user="u").remember(entity="E", facts=["x"])
        assert (await two.scope(app="a", user="u").read_graph()).total_entities == 0


async def test_a_missing_parent_folder_is_created(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "memory.db"
    async with GraphMemory.open(path) as mem:
        assert mem.path == str(path)
    assert path.exists()


async def test_another_programs_database_is_refused_untouched(db_path: Path) -> None:
    with sqlite3.connect(db_path) as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    before = db_path.read_bytes()
    with pytest.raises(DatabaseFileError, match="another program, not a chronomem database"):
        async with GraphMemory.open(db_path):
            pass
    assert db_path.read_bytes() == before


async def test_a_file_that_is_not_sqlite_is_refused_untouched(db_path: Path) -> None:
    db_path.write_bytes(b"this is my shopping list, not a database\n" * 100)
    before = db_path.read_bytes()
    with pytest.raises(DatabaseFileError, match="not a usable SQLite database"):
        async with GraphMemory.open(db_path):
            pass
    assert db_path.read_bytes() == before


async def test_a_newer_schema_is_refused(db_path: Path) -> None:
    async with GraphMemory.open(db_path):
        pass
    with sqlite3.connect(db_path) as conn:
        conn.execute(f"PRAGMA user_version = {LATEST_VERSION + 1}")
    with pytest.raises(DatabaseFileError, match="newer than this chronomem understands"):
        async with GraphMemory.open(db_path):
            pass


HOT_STATEMENTS = {
    **{
        f"{kind} {step}{' in context' if scoped else ''}": sql
        for kind, index in INDEXES.items()
        for scoped in (False, True)
        for step, sql in (
            ("count", count_sql(index, 2, scoped)),
            ("scored rows", scored_sql(index, (0, len(index.columns) - 1), scoped)),
            ("newest rows", newest_rows_sql(index, 2, scoped)),
            ("rows with every word", all_words_sql(index, scoped)),
            ("statistics added", ADD_FTS_STATS[kind]),
        )
    },
    "statistics": STATS,
    "statistics of a retype": RETYPE_FTS_STATS,
    **{f"last rowid of {kind}": sql for kind, sql in LAST_ROWID.items()},
    **{f"rowids of {kind}": sql for kind, sql in ROWIDS_BETWEEN.items()},
    "search names": NAME_ROWS,
    **{f"search facts, history {h}": sql for h, sql in FACT_ROWS.items()},
    **{f"search relations, history {h}": sql for h, sql in RELATION_ROWS.items()},
    **{f"hit fact counts, history {h}": sql for h, (sql, _) in COUNTS.items()},
    **{f"hit relation counts, history {h}": sql for h, (_, sql) in COUNTS.items()},
    **{f"relations to named entities, history {h}": sql for h, sql in LINKED.items()},
    "newest facts of hits": newest_sql(NEWEST_FACTS, 2),
    "newest relations of hits": newest_sql(NEWEST_RELATIONS, 2),
    "hit facts": FACTS_BY_SEQ,
    "hit relations": RELATIONS_BY_SEQ,
    "recall candidates": RECALL_ROWS,
    **{f"index new {kind}": sql for kind, sql in INDEX_NEW.items()},
    **{
        f"entities changed by new {kind} ({i})": sql
        for kind, statements in CHANGED_NEW.items()
        for i, sql in enumerate(statements)
    },
    "recent entities": RECENT_ENTITIES,
    "recent entities in a project": RECENT_IN_PROJECT,
    "card facts": CARD_FACTS,
    "card relations": CARD_RELATIONS,
    "last session": LAST_SESSION,
    "session tail": SESSION_TAIL,
    "visible entities by name": SELECT_VISIBLE_ENTITIES[False],
    "visible or deleted entities by name": SELECT_VISIBLE_ENTITIES[True],
    "graph page": SELECT_PAGE,
    "graph count": COUNT_VISIBLE,
    "facts of entities": observations_sql(False),
    "facts of entities with history": observations_sql(True),
    "relations from entities": relations_sql(False, touching=False),
    "relations touching entities": relations_sql(True, touching=True),
    "open facts of an entity": SELECT_OPEN_FACTS,
    "attribute slot": SELECT_SLOT,
    "open triple": SELECT_OPEN_TRIPLE,
    "relation slot": SELECT_RELATION_SLOT,
}


@pytest.mark.parametrize("name", sorted(HOT_STATEMENTS))
async def test_hot_statements_use_indexes(db_path: Path, name: str) -> None:
    """No full scan of a table whose size grows with the whole database."""
    async with GraphMemory.open(db_path) as mem:
        await mem.scope(app="a", user="u").remember(entity="E", facts=["x"])
    sql = HOT_STATEMENTS[name]
    with sqlite3.connect(db_path) as conn:
        add_functions(conn)
        names = "owner g p key known_at as_of after before limit entity attribute source"
        names += " relation target session_id changed_at id batch cap window first last n"
        params: dict[str, object] = dict.fromkeys(names.split(), 1)
        for name_ in ("entities", "rowids", "hits", "named", "seqs"):
            params[name_] = "[1]"
        params["keys"] = '["e"]'
        params["m0"] = params["m1"] = '"x"'
        params["kind"] = "entity"
        params["e0"] = params["e1"] = 1
        params["sign"] = 1
        params.update(w0=1, w1=1, top0=1, top1=1, slope0=1, slope1=1, base=1)
        plan = conn.execute(f"EXPLAIN QUERY PLAN {sql}", params).fetchall()
    details = [row[3] for row in plan]
    scans = [
        d
        for d in details
        if d.startswith("SCAN")
        and not any(ok in d for ok in ("json_each", "VIRTUAL TABLE", "(subquery", "CONSTANT ROW"))
        and d != "SCAN new"  # a transaction's new rows, grouped by entity
        and d != "SCAN m"  # the owner's rows an FTS query matched
    ]
    assert scans == [], details
    if name == "graph page":  # pages in id order from an index, never by sorting them all
        assert not any("TEMP B-TREE" in d for d in details), details


async def test_processes_opening_a_new_file_at_once_all_succeed(db_path: Path) -> None:
    script = (
        "import sys, anyio\n"
        "from memory import GraphMemory\n"
        "async def main():\n"
        "    async with GraphMemory.open(sys.argv[1]) as mem:\n"
        "        await mem.scope(app='a', user=sys.argv[2]).remember(entity='E', facts=['x'])\n"
        "anyio.run(main)\n"
    )
    processes = [
        await anyio.open_process([sys.executable, "-c", script, str(db_path), f"u{i}"])
        for i in range(4)
    ]
    for process in processes:
        assert await process.wait() == 0
    async with GraphMemory.open(db_path) as mem:
        for i in range(4):
            assert (await mem.scope(app="a", user=f"u{i}").read_graph()).total_entities == 1


async def test_migrating_a_version_1_file_indexes_its_rows(db_path: Path) -> None:
    with _version_1_file(db_path) as conn:
        conn.execute("INSERT INTO owner (id, app, user) VALUES (1, 'a', 'u')")
        conn.execute(
            "INSERT INTO entity (id, owner_id, project, name, name_key, entity_type, recorded_at)"
            " VALUES (1, 1, '', 'Rex', 'rex', 'pet', 1000)"
        )
        conn.execute(
            "INSERT INTO observation (id, owner_id, project, entity_id, text, text_key,"
            " valid_from, recorded_at) VALUES ('o_1', 1, '', 1, 'a beagle', 'a beagle', 0, 2000)"
        )
        conn.execute(
            "INSERT INTO turn (id, owner_id, project, session_id, role, text, at, recorded_at)"
            " VALUES ('t_1', 1, '', 's', 'user', 'my beagle chewed a shoe', 0, 3000)"
        )
    async with GraphMemory.open(db_path) as mem:
        scope = mem.scope(app="a", user="u")
        assert [h.entity.name for h in (await scope.search_nodes(query="beagle")).hits] == ["Rex"]
        assert [t.id for t in (await scope.recall(query="shoe")).turns] == ["t_1"]
        assert (await scope.profile_card()).entities == ["Rex"]
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("SELECT changed_at FROM entity").fetchone()[0] == 2000


# What changed_at means (migration 2 computed it so for existing rows): the latest of
# the entity's creation and of each of its facts' and relations' recording or closing.
CHANGED_AT_BY_DEFINITION = """
    SELECT id, changed_at, max(
        recorded_at,
        coalesce((SELECT max(coalesce(invalidated_at, recorded_at)) FROM observation
                  WHERE entity_id = entity.id AND project = ''), 0),
        coalesce((SELECT max(coalesce(invalidated_at, recorded_at)) FROM relation
                  WHERE (source_id = entity.id OR target_id = entity.id) AND project = ''), 0)
    ) FROM entity ORDER BY id
"""
# What was done inside each project, by entity (schema 6's own count of it).
PROJECT_CHANGES_BY_DEFINITION = next(
    statement for statement in MIGRATIONS[6] if "INSERT INTO entity_change" in statement
).replace("INSERT INTO entity_change (entity_id, project, owner_id, changed_at)", "")


async def test_changed_at_follows_every_write_without_insert_triggers(db_path: Path) -> None:
    clock = FakeClock(step=1_000)
    export = [
        '{"type":"entity","name":"Old","entity_type":"t","project":null,'
        '"recorded_at":"2020-01-01T00:00:00Z"}',
        '{"type":"observation","id":"o1","entity":"Old","text":"a","attribute":null,'
        '"project":null,"valid_from":"2020-01-02T00:00:00Z","recorded_at":"2020-01-02T00:00:00Z",'
        '"valid_to":"2020-01-03T00:00:00Z","invalidated_at":"2020-01-04T00:00:00Z"}',
        '{"type":"relation","id":"r1","source":"New","relation":"knows","target":"Old",'
        '"project":null,"valid_from":"2020-01-05T00:00:00Z","recorded_at":"2020-01-05T00:00:00Z",'
        '"valid_to":null,"invalidated_at":null}',
    ]
    async with GraphMemory.open(db_path, clock=clock) as mem:
        scope = mem.scope(app="a", user="u")
        await scope.import_lines(export, batch_size=2)
        await scope.remember(entity="Alice", facts=["likes tea", "runs"], entity_type="person")
        await scope.remember(entity="Alice", facts=["walks"], entity_type="athlete")
        await scope.relate(source="Alice", relation="knows", target="Bob")
        fact = (await scope.remember(entity="Bob", facts=["sings"])).added[0]
        await scope.forget(ids=[fact.id])
        await scope.relate(source="Bob", relation="knows", target="Old")
        in_p = mem.scope(app="a", user="u", project="p")
        await in_p.remember(entity="Alice", facts=["in p"])
        await in_p.forget(entities=["Old"])
        own = (await in_p.relate(source="Bob", relation="likes", target="Cid")).relation
        await in_p.forget(ids=[own.id])
        await in_p.import_lines(
            [
                line.replace('"project":null', '"project":"p"')
                .replace('"o1"', '"o2"')
                .replace('"r1"', '"r2"')
                for line in export
            ]
        )
    with sqlite3.connect(db_path) as conn:
        triggers = {
            n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type='trigger'")
        }
        rows = conn.execute(CHANGED_AT_BY_DEFINITION).fetchall()
        in_projects = conn.execute(
            "SELECT entity_id, project, owner_id, changed_at FROM entity_change ORDER BY 1, 2"
        ).fetchall()
        defined = conn.execute(f"{PROJECT_CHANGES_BY_DEFINITION} ORDER BY 1, 2").fetchall()
    assert not {"entity_changed_insert", "observation_changed", "relation_changed"} & triggers
    assert in_projects == defined and len(defined) == 5  # Alice Old Bob Cid, New
    assert len(rows) == 5
    assert [(i, stored) for i, stored, _ in rows] == [(i, defined) for i, _, defined in rows]


def _version_4_file(path: Path) -> None:
    """A file as schema 4 left it: rowids handed out across users, in write order."""
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    for step in range(1, 5):
        for statement in MIGRATIONS[step]:
            conn.execute(statement)
    conn.execute("PRAGMA user_version = 4")
    conn.executemany("INSERT INTO owner (id, app, user) VALUES (?, 'a', ?)", [(1, "u"), (2, "v")])
    entity = (
        "INSERT INTO entity (id, owner_id, project, name, name_key, entity_type, recorded_at,"
        " changed_at) VALUES (?, ?, ?, ?, ?, 'general', ?, ?)"
    )
    fact = (
        "INSERT INTO observation (seq, id, owner_id, project, entity_id, text, text_key,"
        " valid_from, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?)"
    )
    for n in range(1, 7):  # entities 1, 3, 5 are u's and 2, 4, 6 v's
        owner = 1 if n % 2 else 2
        project = "p" if n == 5 else ""
        conn.execute(entity, (n, owner, project, f"E{n}", f"e{n}", n, n))
        for k in range(2):
            seq = 2 * n + k
            text = f"fact {seq} about tea"
            conn.execute(fact, (seq, f"o_{seq}", owner, project, n, text, text, seq))
    conn.execute(
        "INSERT INTO relation (seq, id, owner_id, project, source_id, relation, target_id,"
        " valid_from, recorded_at) VALUES (1, 'r_1', 1, '', 3, 'knows', 1, 0, 1), "
        "(2, 'r_2', 2, '', 2, 'knows', 4, 0, 2)"
    )
    conn.execute(
        "INSERT INTO turn (seq, id, owner_id, project, session_id, role, text, at, recorded_at)"
        " VALUES (1, 't_1', 2, '', 's', 'user', 'tea for v', 0, 1),"
        " (2, 't_2', 1, '', 's', 'user', 'tea for u', 0, 2)"
    )
    for fts in ("entity_fts", "observation_fts", "relation_fts", "turn_fts"):
        conn.execute(f"INSERT INTO {fts} ({fts}) VALUES ('rebuild')")
    conn.commit()
    conn.close()


LOGICAL_ROWS = """
    SELECT 'fact', o.id, ow.user, o.project, e.name, o.text FROM observation o
      JOIN entity e ON e.id = o.entity_id JOIN owner ow ON ow.id = o.owner_id
    UNION ALL
    SELECT 'relation', r.id, ow.user, r.project, s.name || ' ' || t.name, r.relation
      FROM relation r JOIN entity s ON s.id = r.source_id JOIN entity t ON t.id = r.target_id
      JOIN owner ow ON ow.id = r.owner_id
    UNION ALL
    SELECT 'turn', id, owner_id, project, session_id, text FROM turn
    ORDER BY 1, 2
"""


async def test_migration_5_puts_every_users_rows_in_a_range_of_their_own(db_path: Path) -> None:
    _version_4_file(db_path)
    with sqlite3.connect(db_path) as conn:
        before = conn.execute(LOGICAL_ROWS).fetchall()
        entity_order = conn.execute("SELECT name FROM entity ORDER BY owner_id, id").fetchall()
    async with GraphMemory.open(db_path) as mem:
        u, v = mem.scope(app="a", user="u"), mem.scope(app="a", user="v")
        assert {h.entity.name for h in (await u.search_nodes(query="tea")).hits} == {"E1", "E3"}
        assert {h.entity.name for h in (await v.search_nodes(query="tea")).hits} == {
            "E2",
            "E4",
            "E6",
        }
        assert [t.id for t in (await u.recall(query="tea")).turns] == ["t_2"]
        project = mem.scope(app="a", user="u", project="p")
        assert "E5" in {h.entity.name for h in (await project.search_nodes(query="tea")).hits}
        added = await u.remember(entity="E1", facts=["a new fact about tea"])
        opened = await u.open_nodes(["E1", "E3"])
    assert [o.text for o in opened.entities[0].observations][-1] == "a new fact about tea"
    assert [r.id for r in opened.relations] == ["r_1"]
    with sqlite3.connect(db_path) as conn:
        add_functions(conn)
        assert conn.execute("PRAGMA user_version").fetchone()[0] == LATEST_VERSION
        after = conn.execute(LOGICAL_ROWS).fetchall()
        assert [row for row in after if row[1] != added.added[0].id] == before
        assert (
            conn.execute("SELECT name FROM entity ORDER BY owner_id, id").fetchall() == entity_order
        )
        for table, key in (
            ("entity", "id"),
            ("observation", "seq"),
            ("relation", "seq"),
            ("turn", "seq"),
        ):
            outside = conn.execute(
                f"SELECT count(*) FROM {table} WHERE {key} >> 32 != owner_id"
            ).fetchone()[0]
            assert outside == 0, table
        for fts in ("entity_fts", "observation_fts", "relation_fts", "turn_fts"):
            conn.execute(f"INSERT INTO {fts} ({fts}, rank) VALUES ('integrity-check', 1)")
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


async def test_each_users_new_rows_take_rowids_in_their_own_range(db_path: Path) -> None:
    async with GraphMemory.open(db_path) as mem:
        for turn in range(3):
            for user in ("u", "v", "w"):
                scope = mem.scope(app="a", user=user)
                await scope.remember(entity=f"{user} {turn}", facts=[f"fact {turn}"])
                await scope.relate(source=f"{user} {turn}", relation="knows", target=user)
                await scope.record_turns(session_id="s", turns=[{"role": "user", "text": "hi"}])
    with sqlite3.connect(db_path) as conn:
        for table, key in (
            ("entity", "id"),
            ("observation", "seq"),
            ("relation", "seq"),
            ("turn", "seq"),
        ):
            rows = conn.execute(f"SELECT owner_id, {key} FROM {table} ORDER BY {key}").fetchall()
            assert all(rowid >> 32 == owner for owner, rowid in rows), table
            for owner in (1, 2, 3):  # consecutive from the range's start, in write order
                mine = [rowid for o, rowid in rows if o == owner]
                assert mine == list(range(owner << 32, (owner << 32) + len(mine))), table


def _stats_and_recount(path: Path) -> tuple[list[tuple], list[tuple]]:
    with sqlite3.connect(path) as conn:
        conn.create_function(TOKENS_FUNCTION, 2, column_tokens)
        kept = conn.execute("SELECT * FROM fts_stats WHERE rows > 0 ORDER BY 1, 2").fetchall()
        conn.execute("CREATE TEMP TABLE recount AS SELECT * FROM fts_stats WHERE false")
        for statement in COUNT_FTS_STATS:
            conn.execute(statement.replace("INSERT INTO fts_stats", "INSERT INTO recount"))
        counted = conn.execute("SELECT * FROM recount ORDER BY 1, 2").fetchall()
    return kept, counted


async def test_search_statistics_follow_every_write_retype_import_and_purge(
    db_path: Path,
) -> None:
    """Each user's BM25 statistics (rows and tokens of each kind) are always what
    counting the full-text index would give."""
    async with GraphMemory.open(db_path) as mem:
        u, v = mem.scope(app="a", user="u"), mem.scope(app="a", user="v")
        project = mem.scope(app="a", user="u", project="p")
        await u.remember(entity="Alice", facts=["likes green tea", "runs"], entity_type="person")
        await u.remember(entity="alice", facts=["x"], entity_type="long distance runner")
        await project.remember(entity="Plan", facts=["a secret plan with many words in it"])
        await project.relate(source="Plan", relation="part of", target="Alice")
        await u.relate(source="Alice", relation="works at", target="Acme", target_type="company")
        await project.record_turns(session_id="s1", turns=[{"role": "user", "text": "hi there"}])
        await u.record_turns(session_id="s2", turns=[{"role": "user", "text": "one two three"}])
        await v.remember(entity="Bob", facts=["has a cat"])
        await v.import_lines(
            [
                '{"type":"entity","name":"Cat","entityType":"animal","observations":["purrs"]}',
                '{"type":"relation","from":"Bob","to":"Cat","relationType":"owns"}',
            ]
        )
        kept, counted = _stats_and_recount(db_path)
        assert kept == counted and len(kept) == 11  # u: 4 kinds, in p too; v: no turns
        await u.purge("session", session_id="s2")
        assert _stats_and_recount(db_path)[0] == _stats_and_recount(db_path)[1]
        await project.purge("project")
        kept, counted = _stats_and_recount(db_path)
        assert kept == counted
        await v.purge("user")
        kept, counted = _stats_and_recount(db_path)
        assert kept == counted and {row[0] for row in kept} == {1}


def _segments(path: Path) -> dict[str, int]:
    with sqlite3.connect(path) as conn:
        return {
            fts: conn.execute(f"SELECT count(DISTINCT segid) FROM {fts}_idx").fetchone()[0]
            for fts in ("entity_fts", "observation_fts", "relation_fts", "turn_fts")
        }


async def test_optimize_merges_every_index_into_one_segment(db_path: Path) -> None:
    async with GraphMemory.open(db_path) as mem:
        scopes = [mem.scope(app="a", user=f"u{i}") for i in range(3)]
        for i in range(12):  # one segment per index and transaction
            for scope in scopes:
                await scope.remember(entity=f"E{i}", facts=[f"green tea number {i}"])
                await scope.relate(source=f"E{i}", relation="likes", target="Tea")
                await scope.record_turns(session_id="s", turns=[{"role": "user", "text": "tea"}])
        before = [await s.search_nodes(query="green tea", limit=50) for s in scopes]
        turns = [await s.recall(query="tea", limit=50) for s in scopes]
        assert min(_segments(db_path).values()) > 1
        await mem.optimize()
        assert _segments(db_path) == dict.fromkeys(_segments(db_path), 1)
        assert [await s.search_nodes(query="green tea", limit=50) for s in scopes] == before
        assert [await s.recall(query="tea", limit=50) for s in scopes] == turns


async def test_a_process_of_the_old_schema_cannot_write_into_another_users_range(
    db_path: Path,
) -> None:
    """Found in review: a process that opened the file before it was migrated numbers
    a row the old way (the largest rowid + 1: the last user's range)."""
    async with GraphMemory.open(db_path) as mem:
        await mem.scope(app="a", user="u").remember(entity="E", facts=["x"])
        await mem.scope(app="a", user="v").remember(entity="F", facts=["y"])
    with (
        sqlite3.connect(db_path) as conn,
        pytest.raises(sqlite3.IntegrityError, match="upgraded by a newer chronomem"),
    ):
        conn.execute(  # what schema 4's engine ran for u (owner 1)
            "INSERT INTO observation (id, owner_id, project, entity_id, text, text_key,"
            " valid_from, recorded_at) VALUES ('o_old', 1, '', ?, 'z', 'z', 0, 0)",
            (1 << 32,),
        )


async def test_a_file_migrated_by_a_newer_version_meanwhile_is_refused(db_path: Path) -> None:
    async with GraphMemory.open(db_path) as mem:
        scope = mem.scope(app="a", user="u")
        await scope.remember(entity="E", facts=["x"])
        with sqlite3.connect(db_path) as conn:
            conn.execute(f"PRAGMA user_version = {LATEST_VERSION + 1}")
        with pytest.raises(DatabaseFileError, match="upgraded to schema version"):
            await scope.remember(entity="E", facts=["y"])
        with pytest.raises(DatabaseFileError, match="nothing was changed"):
            await scope.search_nodes(query="x")


async def test_migration_5_renumbers_rowids_past_the_first_range(db_path: Path) -> None:
    """Found in review: an old rowid at or past 1 << 32 met a new one."""
    _version_4_file(db_path)
    with sqlite3.connect(db_path) as conn:
        conn.execute("PRAGMA foreign_keys = OFF")
        conn.execute("UPDATE observation SET seq = seq + (1 << 32) WHERE seq = 3")
        conn.execute("UPDATE turn SET seq = (2 << 32) WHERE seq = 1")
        for fts in ("observation_fts", "turn_fts"):
            conn.execute(f"INSERT INTO {fts} ({fts}) VALUES ('rebuild')")
    async with GraphMemory.open(db_path) as mem:
        found = await mem.scope(app="a", user="u").search_nodes(query="tea")
        assert {h.entity.name for h in found.hits} == {"E1", "E3"}
        assert [t.id for t in (await mem.scope(app="a", user="v").recall(query="tea")).turns] == [
            "t_1"
        ]
