"""The database schema, as forward-only migrations keyed on `PRAGMA user_version`.

Each step runs in the transaction that bumps the version, so a crash leaves the file
at one version or the next, and two processes opening a new file migrate it once.

Times are integer microseconds since the epoch (UTC). `project` is '' for global
rows, so "global + P" is an index-friendly `project IN ('', P)`.
"""

from __future__ import annotations

APPLICATION_ID = 0x6368726D  # "chrm": tells a chronomem file from any other SQLite file

MIGRATIONS: dict[int, list[str]] = {
    1: [
        # The latest transaction time handed out, so that time never runs backwards
        # across processes sharing the file or across restarts (a clock set back).
        """
        CREATE TABLE tx_clock (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            last INTEGER NOT NULL
        )
        """,
        "INSERT INTO tx_clock (id, last) VALUES (1, 0)",
        """
        CREATE TABLE owner (
            id INTEGER PRIMARY KEY,
            app TEXT NOT NULL,
            user TEXT NOT NULL,
            UNIQUE (app, user)
        )
        """,
        """
        CREATE TABLE entity (
            id INTEGER PRIMARY KEY,
            owner_id INTEGER NOT NULL REFERENCES owner (id),
            project TEXT NOT NULL,
            name TEXT NOT NULL,
            name_key TEXT NOT NULL,
            entity_type TEXT NOT NULL,
            recorded_at INTEGER NOT NULL,
            UNIQUE (owner_id, name_key)
        )
        """,
        "CREATE INDEX entity_owner ON entity (owner_id)",
        """
        CREATE TABLE observation (
            seq INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            owner_id INTEGER NOT NULL REFERENCES owner (id),
            project TEXT NOT NULL,
            entity_id INTEGER NOT NULL REFERENCES entity (id),
            text TEXT NOT NULL,
            text_key TEXT NOT NULL,
            attribute TEXT,
            attribute_key TEXT,
            valid_from INTEGER NOT NULL,
            valid_to INTEGER,
            recorded_at INTEGER NOT NULL,
            invalidated_at INTEGER,
            reason TEXT,
            CHECK (valid_to IS NULL OR valid_to >= valid_from),
            CHECK ((valid_to IS NULL) = (invalidated_at IS NULL))
        )
        """,
        "CREATE INDEX observation_entity ON observation (entity_id, valid_to)",
        "CREATE INDEX observation_scope ON observation (owner_id, project, recorded_at)",
        """
        CREATE TABLE relation (
            seq INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            owner_id INTEGER NOT NULL REFERENCES owner (id),
            project TEXT NOT NULL,
            source_id INTEGER NOT NULL REFERENCES entity (id),
            relation TEXT NOT NULL,
            target_id INTEGER NOT NULL REFERENCES entity (id),
            valid_from INTEGER NOT NULL,
            valid_to INTEGER,
            recorded_at INTEGER NOT NULL,
            invalidated_at INTEGER,
            reason TEXT,
            CHECK (valid_to IS NULL OR valid_to >= valid_from),
            CHECK ((valid_to IS NULL) = (invalidated_at IS NULL))
        )
        """,
        "CREATE INDEX relation_source ON relation (source_id, relation, valid_to)",
        "CREATE INDEX relation_target ON relation (target_id, valid_to)",
        "CREATE INDEX relation_scope ON relation (owner_id, project, recorded_at)",
        """
        CREATE TABLE turn (
            seq INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            owner_id INTEGER NOT NULL REFERENCES owner (id),
            project TEXT NOT NULL,
            session_id TEXT NOT NULL,
            role TEXT NOT NULL,
            text TEXT NOT NULL,
            at INTEGER NOT NULL,
            recorded_at INTEGER NOT NULL
        )
        """,
        "CREATE INDEX turn_session ON turn (owner_id, session_id, at)",
        "CREATE INDEX turn_time ON turn (owner_id, at)",
    ],
}


def porter_fts(table: str, source: str, key: str, columns: tuple[str, ...]) -> list[str]:
    """An external-content FTS5 index over `source`, kept in step by triggers, so a row
    and its index entry commit in the same transaction (schemas 2 to 8)."""
    cols = ", ".join(columns)
    new = ", ".join(f"new.{c}" for c in columns)
    old = ", ".join(f"old.{c}" for c in columns)
    return [
        f"""
        CREATE VIRTUAL TABLE {table} USING fts5(
            {cols}, content='{source}', content_rowid='{key}', tokenize='{TOKENIZER}'
        )
        """,
        f"""
        CREATE TRIGGER {table}_insert AFTER INSERT ON {source} BEGIN
            INSERT INTO {table} (rowid, {cols}) VALUES (new.{key}, {new});
        END
        """,
        f"""
        CREATE TRIGGER {table}_delete AFTER DELETE ON {source} BEGIN
            INSERT INTO {table} ({table}, rowid, {cols}) VALUES ('delete', old.{key}, {old});
        END
        """,
        f"""
        CREATE TRIGGER {table}_update AFTER UPDATE OF {cols} ON {source} BEGIN
            INSERT INTO {table} ({table}, rowid, {cols}) VALUES ('delete', old.{key}, {old});
            INSERT INTO {table} (rowid, {cols}) VALUES (new.{key}, {new});
        END
        """,
        f"INSERT INTO {table} ({table}) VALUES ('rebuild')",
    ]


# Porter stemming over Unicode words, accents folded: "running" finds "runs", "cafe" "café".
TOKENIZER = "porter unicode61 remove_diacritics 2"

MIGRATIONS[2] = [
    # Search (issue 3): full-text indexes over names and types, facts, relation types
    # and conversation turns.
    *porter_fts("entity_fts", "entity", "id", ("name", "entity_type")),
    *porter_fts("observation_fts", "observation", "seq", ("text",)),
    *porter_fts("relation_fts", "relation", "seq", ("relation",)),
    *porter_fts("turn_fts", "turn", "seq", ("text",)),
    # When anything about an entity last changed, for the profile card's "most
    # recently changed first", kept by triggers so no write path can forget it.
    "ALTER TABLE entity ADD COLUMN changed_at INTEGER NOT NULL DEFAULT 0",
    """
    UPDATE entity SET changed_at = max(
        recorded_at,
        coalesce((SELECT max(coalesce(invalidated_at, recorded_at)) FROM observation
                  WHERE entity_id = entity.id), 0),
        coalesce((SELECT max(coalesce(invalidated_at, recorded_at)) FROM relation
                  WHERE source_id = entity.id OR target_id = entity.id), 0)
    )
    """,
    "CREATE INDEX entity_changed ON entity (owner_id, changed_at)",
    """
    CREATE TRIGGER entity_changed_insert AFTER INSERT ON entity BEGIN
        UPDATE entity SET changed_at = new.recorded_at WHERE id = new.id;
    END
    """,
    """
    CREATE TRIGGER observation_changed AFTER INSERT ON observation BEGIN
        UPDATE entity SET changed_at = max(changed_at, new.recorded_at)
        WHERE id = new.entity_id;
    END
    """,
    """
    CREATE TRIGGER observation_closed AFTER UPDATE OF invalidated_at ON observation BEGIN
        UPDATE entity SET changed_at = max(changed_at, new.invalidated_at)
        WHERE id = new.entity_id;
    END
    """,
    """
    CREATE TRIGGER relation_changed AFTER INSERT ON relation BEGIN
        UPDATE entity SET changed_at = max(changed_at, new.recorded_at)
        WHERE id IN (new.source_id, new.target_id);
    END
    """,
    """
    CREATE TRIGGER relation_closed AFTER UPDATE OF invalidated_at ON relation BEGIN
        UPDATE entity SET changed_at = max(changed_at, new.invalidated_at)
        WHERE id IN (new.source_id, new.target_id);
    END
    """,
]

COUNT_STORED = """
    UPDATE owner SET
        facts = (SELECT count(*) FROM observation WHERE owner_id = owner.id)
              + (SELECT count(*) FROM relation WHERE owner_id = owner.id),
        turns = (SELECT count(*) FROM turn WHERE owner_id = owner.id)
"""

# Full-text entries of new rows are written by the engine at the end of each write
# transaction, in one statement per table (`INDEX_NEW`), not by AFTER INSERT
# triggers. A statement that fires a trigger runs in a statement savepoint, at which
# FTS5 flushes its pending terms: with a trigger per row every insert flushed, and a
# bulk import spent ten times as long in FTS5. Deletes and updates, which are rare,
# keep their triggers.
MIGRATIONS[3] = [
    *(f"DROP TRIGGER {t}_fts_insert" for t in ("entity", "observation", "relation", "turn")),
    # read_graph's total counts a user's entities in the scope's projects from this
    # index alone. (entity_owner stays: it gives a user's entities in id order, which
    # read_graph pages by.)
    "CREATE INDEX entity_scope ON entity (owner_id, project, recorded_at)",
    # How many facts (observations and relations) and turns each user has stored,
    # kept by the engine, so the per-user caps cost nothing to check.
    "ALTER TABLE owner ADD COLUMN facts INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE owner ADD COLUMN turns INTEGER NOT NULL DEFAULT 0",
    COUNT_STORED,
]
# (`INDEX_NEW` is defined with schema 9's word indexes, below.)

# An entity's changed_at is likewise written by the engine, not by an AFTER INSERT
# trigger a row: the trigger's UPDATE of the entity and of its entity_changed entry,
# for every fact and relation, was a third of a bulk import's time in SQLite. An
# entity is inserted with changed_at set; the facts and relations added in a
# transaction raise their entities' changed_at once per entity at its end
# (`CHANGED_NEW`). Both are max(), so the order does not matter. Closing a fact or
# relation, which is rare, keeps its trigger.
MIGRATIONS[4] = [
    "DROP TRIGGER entity_changed_insert",
    "DROP TRIGGER observation_changed",
    "DROP TRIGGER relation_changed",
]
_NEW_OBSERVATIONS = """
    SELECT entity_id, project, owner_id, recorded_at FROM observation
    WHERE seq IN (SELECT value FROM json_each(:rowids))
"""
_NEW_RELATIONS = """
    SELECT source_id AS entity_id, project, owner_id, recorded_at FROM relation
    WHERE seq IN (SELECT value FROM json_each(:rowids))
    UNION ALL
    SELECT target_id, project, owner_id, recorded_at FROM relation
    WHERE seq IN (SELECT value FROM json_each(:rowids))
"""
# Each raises changed_at of the entities of the rows in :rowids: of the entity for
# global rows, of the entity in the project for a project's (`entity_change`, schema 6).
CHANGED_NEW = {
    kind: [
        f"""
        UPDATE entity SET changed_at = max(changed_at, new.at)
        FROM (SELECT entity_id, max(recorded_at) AS at FROM ({rows}) WHERE project = ''
              GROUP BY entity_id) AS new
        WHERE entity.id = new.entity_id
        """,
        f"""
        INSERT INTO entity_change (entity_id, project, owner_id, changed_at)
        SELECT entity_id, project, owner_id, max(recorded_at) FROM ({rows})
        WHERE project <> '' GROUP BY entity_id, project
        ON CONFLICT (entity_id, project) DO UPDATE
        SET changed_at = max(changed_at, excluded.changed_at)
        """,
    ]
    for kind, rows in (("observation", _NEW_OBSERVATIONS), ("relation", _NEW_RELATIONS))
}

# Each user's rows of a kind have rowids of their own range, (owner << 32) + n: FTS5
# keeps its doclists in rowid order, so a full-text query given the range reads only
# that user's entries, and the cost of a search follows the user's own memory rather
# than the file's. It also keeps a user's rows together in their tables. The engine
# numbers new rows itself (`Tx.add`), since SQLite would give the largest rowid + 1.
OWNER_BITS = 32


def owner_range(owner: int) -> tuple[int, int]:
    """The first and last rowid of `owner`'s rows of each kind."""
    first = owner << OWNER_BITS
    return first, first + (1 << OWNER_BITS) - 1


def _renumber(table: str, key: str) -> list[str]:
    """Every row of `table` renumbered in its owner's range, in its old order: first
    to the negative of its old rowid, so that no new rowid meets an old one."""
    return [
        f"UPDATE {table} SET {key} = -{key}",
        f"""
        UPDATE {table} SET {key} = renumbered.new
        FROM (SELECT {key} AS old,
                     (owner_id << {OWNER_BITS})
                       + row_number() OVER (PARTITION BY owner_id ORDER BY {key} DESC) - 1 AS new
              FROM {table}) AS renumbered
        WHERE {table}.{key} = renumbered.old
        """,
    ]


MIGRATIONS[5] = [
    # Owner ranges (above): every row is renumbered in its owner's range, in its old
    # order, and the full-text indexes are built again over the new rowids.
    "PRAGMA defer_foreign_keys = ON",
    f"""
    CREATE TEMP TABLE entity_renumbered AS
    SELECT id AS old,
           (owner_id << {OWNER_BITS})
             + row_number() OVER (PARTITION BY owner_id ORDER BY id) - 1 AS new
    FROM entity
    """,
    "CREATE UNIQUE INDEX temp.entity_renumbered_old ON entity_renumbered (old)",
    "UPDATE entity SET id = -id",  # no new id meets an old one on the way
    "UPDATE entity SET id = (SELECT new FROM entity_renumbered WHERE old = -entity.id)",
    """
    UPDATE observation
    SET entity_id = (SELECT new FROM entity_renumbered WHERE old = observation.entity_id)
    """,
    """
    UPDATE relation
    SET source_id = (SELECT new FROM entity_renumbered WHERE old = relation.source_id),
        target_id = (SELECT new FROM entity_renumbered WHERE old = relation.target_id)
    """,
    "DROP TABLE entity_renumbered",
    *_renumber("observation", "seq"),
    *_renumber("relation", "seq"),
    *_renumber("turn", "seq"),
    *(
        f"INSERT INTO {fts} ({fts}) VALUES ('rebuild')"
        for fts in ("entity_fts", "observation_fts", "relation_fts", "turn_fts")
    ),
    # A search counts each hit's visible facts and shows an entity's newest ones: with
    # every column of the visibility rule in the index, both read the index alone,
    # newest first, however many facts the entity has.
    "DROP INDEX observation_entity",
    """
    CREATE INDEX observation_entity
    ON observation (entity_id, valid_from, recorded_at, valid_to, invalidated_at, project)
    """,
    # Each user's own full-text statistics, which BM25 needs (see `ranking`): how many
    # rows of a kind the user has, and their tokens in each column (the most any
    # index has is two). Kept by the engine in the transaction that indexes the rows.
    """
    CREATE TABLE fts_stats (
        owner_id INTEGER NOT NULL REFERENCES owner (id),
        kind TEXT NOT NULL,
        rows INTEGER NOT NULL,
        tokens_0 INTEGER NOT NULL,
        tokens_1 INTEGER NOT NULL,
        PRIMARY KEY (owner_id, kind)
    ) WITHOUT ROWID
    """,
]

FTS_INDEXES = {  # kind of row -> its full-text index
    "entity": "entity_fts",
    "observation": "observation_fts",
    "relation": "relation_fts",
    "turn": "turn_fts",
}
ROWIDS = {"entity": "id", "observation": "seq", "relation": "seq", "turn": "seq"}

# `tokens(sz, column)`: the token count of one column of an FTS5 docsize entry (a
# list of SQLite varints), registered on every connection the engine opens.
TOKENS_FUNCTION = "chronomem_tokens"


def token_counts(blob: bytes) -> list[int]:
    """The token count of each column, from an FTS5 docsize entry."""
    counts, value = [], 0
    for byte in blob:
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            counts.append(value)
            value = 0
    return counts


def column_tokens(blob: bytes | None, column: int) -> int:
    counts = token_counts(blob or b"")
    return counts[column] if column < len(counts) else 0


def _sizes_of(kind: str, where: str, by_project: bool = True) -> str:
    """Rows and tokens of `kind`'s index by owner (and project: schema 6)."""
    fts = FTS_INDEXES[kind]
    project = "o.project, " if by_project else ""
    return f"""
        SELECT o.owner_id, {project}'{kind}', count(*),
               coalesce(sum({TOKENS_FUNCTION}(d.sz, 0)), 0),
               coalesce(sum({TOKENS_FUNCTION}(d.sz, 1)), 0)
        FROM {kind} o JOIN {fts}_docsize d ON d.id = o.{ROWIDS[kind]}
        WHERE {where} GROUP BY o.owner_id{", o.project" if by_project else ""}
    """


# Every user's statistics counted from the index, or one user's (`:owner`).
COUNT_FTS_STATS = [f"INSERT INTO fts_stats {_sizes_of(kind, 'true')}" for kind in FTS_INDEXES]
RECOUNT_FTS_STATS = [
    "DELETE FROM fts_stats WHERE owner_id = :owner",
    *(f"INSERT INTO fts_stats {_sizes_of(kind, 'o.owner_id = :owner')}" for kind in FTS_INDEXES),
]
MIGRATIONS[5] += [
    f"INSERT INTO fts_stats {_sizes_of(kind, 'true', by_project=False)}" for kind in FTS_INDEXES
]
# A process of an older chronomem that opened the file before it was migrated would
# go on numbering rows the old way (the largest rowid + 1, another user's range),
# where its user's searches never find them: such a row is refused instead.
OUTSIDE_OWNER_RANGE = (
    "this file was upgraded by a newer chronomem (schema 5): "
    "restart every process that uses it with that version"
)
MIGRATIONS[5] += [
    f"""
    CREATE TRIGGER {table}_in_owner_range BEFORE INSERT ON {table}
    WHEN (new.{key} >> {OWNER_BITS}) IS NOT new.owner_id
    BEGIN SELECT RAISE(ABORT, '{OUTSIDE_OWNER_RANGE}'); END
    """
    for table, key in ROWIDS.items()
]
# What the rows of `:rowids` (just indexed) add to `:owner`'s statistics, by project.
ADD_FTS_STATS = {
    kind: f"""
        INSERT INTO fts_stats (owner_id, project, kind, rows, tokens_0, tokens_1)
        SELECT :owner, t.project, '{kind}', count(*),
               coalesce(sum({TOKENS_FUNCTION}(d.sz, 0)), 0),
               coalesce(sum({TOKENS_FUNCTION}(d.sz, 1)), 0)
        FROM {fts}_docsize d JOIN {kind} t ON t.{ROWIDS[kind]} = d.id
        WHERE d.id IN (SELECT value FROM json_each(:rowids)) GROUP BY t.project
        ON CONFLICT (owner_id, kind, project) DO UPDATE SET rows = rows + excluded.rows,
            tokens_0 = tokens_0 + excluded.tokens_0, tokens_1 = tokens_1 + excluded.tokens_1
    """
    for kind, fts in FTS_INDEXES.items()
}
# An entity's type is its index's second column: what a retype takes away (sign -1)
# before it, and adds (sign 1) after it.
RETYPE_FTS_STATS = f"""
    UPDATE fts_stats SET tokens_1 = tokens_1 + :sign * coalesce(
        (SELECT {TOKENS_FUNCTION}(sz, 1) FROM entity_fts_docsize WHERE id = :id), 0)
    WHERE owner_id = :owner AND kind = 'entity'
      AND project = (SELECT project FROM entity WHERE id = :id)
"""

# Projects are overlays (`overlay`): a closing made inside a project of a global fact
# or relation is the project's own, kept here, never on the global row.
_CLOSING_TABLES = [
    f"""
    CREATE TABLE {table}_closing (
        seq INTEGER NOT NULL REFERENCES {table} (seq),
        project TEXT NOT NULL CHECK (project <> ''),
        owner_id INTEGER NOT NULL REFERENCES owner (id),
        valid_to INTEGER NOT NULL,
        invalidated_at INTEGER NOT NULL,
        reason TEXT,
        PRIMARY KEY (seq, project)
    ) WITHOUT ROWID
    """
    for table in ("observation", "relation")
] + [
    f"CREATE INDEX {table}_closing_scope ON {table}_closing (owner_id, project)"
    for table in ("observation", "relation")
]
# Files written before schema 6 closed global rows from inside a project on the row
# itself. Where the closing says who made it (a supersession names the rows that
# replaced it, "superseded by o_1, o_2"), and those are a project's, the closing moves
# to that project and the row is open again everywhere else. A `forget` made inside a
# project left no trace of where it was made, and stays global.
_SUPERSEDED_BY = "superseded by "
_FIRST_ID = f"""
    CASE WHEN instr(substr(o.reason, {len(_SUPERSEDED_BY) + 1}), ',') > 0
         THEN substr(o.reason, {len(_SUPERSEDED_BY) + 1},
                     instr(substr(o.reason, {len(_SUPERSEDED_BY) + 1}), ',') - 1)
         ELSE substr(o.reason, {len(_SUPERSEDED_BY) + 1}) END
"""


def _move_project_closings(table: str) -> list[str]:
    return [
        f"""
        INSERT INTO {table}_closing (seq, project, owner_id, valid_to, invalidated_at, reason)
        SELECT o.seq, n.project, o.owner_id, o.valid_to, o.invalidated_at, o.reason
        FROM {table} o JOIN {table} n ON n.id = {_FIRST_ID} AND n.owner_id = o.owner_id
        WHERE o.project = '' AND o.reason LIKE '{_SUPERSEDED_BY}%' AND n.project <> ''
        """,
        f"""
        UPDATE {table} SET valid_to = NULL, invalidated_at = NULL, reason = NULL
        WHERE seq IN (SELECT seq FROM {table}_closing)
        """,
    ]


# When an entity last changed is likewise per context: `entity.changed_at` by what was
# done globally (and the entity's creation), `entity_change` by what was done inside
# each project, so that the profile card's "most recently changed first" in one
# context never moves for work done in another.
_ENTITY_CHANGE = [
    """
    CREATE TABLE entity_change (
        entity_id INTEGER NOT NULL REFERENCES entity (id),
        project TEXT NOT NULL CHECK (project <> ''),
        owner_id INTEGER NOT NULL REFERENCES owner (id),
        changed_at INTEGER NOT NULL,
        PRIMARY KEY (entity_id, project)
    ) WITHOUT ROWID
    """,
    "CREATE INDEX entity_change_recent ON entity_change (owner_id, project, changed_at, entity_id)",
]
UPSERT_ENTITY_CHANGE = """
    INSERT INTO entity_change (entity_id, project, owner_id, changed_at) {values}
    ON CONFLICT (entity_id, project) DO UPDATE
    SET changed_at = max(changed_at, excluded.changed_at)
"""
_CHANGED_IN_PROJECT = UPSERT_ENTITY_CHANGE.format(values="VALUES ({}, {}, new.owner_id, {})")
_CLOSED_TRIGGERS = [
    # A closing on the row: a global one raises the entity, a project's own row its
    # entity in that project. (Reopening a row, in the migration, raises nothing.)
    """
    CREATE TRIGGER observation_closed AFTER UPDATE OF invalidated_at ON observation
    WHEN new.invalidated_at IS NOT NULL AND new.project = '' BEGIN
        UPDATE entity SET changed_at = max(changed_at, new.invalidated_at)
        WHERE id = new.entity_id;
    END
    """,
    """
    CREATE TRIGGER relation_closed AFTER UPDATE OF invalidated_at ON relation
    WHEN new.invalidated_at IS NOT NULL AND new.project = '' BEGIN
        UPDATE entity SET changed_at = max(changed_at, new.invalidated_at)
        WHERE id IN (new.source_id, new.target_id);
    END
    """,
    f"""
    CREATE TRIGGER observation_closed_in_project AFTER UPDATE OF invalidated_at ON observation
    WHEN new.invalidated_at IS NOT NULL AND new.project <> '' BEGIN
        {_CHANGED_IN_PROJECT.format("new.entity_id", "new.project", "new.invalidated_at")};
    END
    """,
    f"""
    CREATE TRIGGER relation_closed_in_project AFTER UPDATE OF invalidated_at ON relation
    WHEN new.invalidated_at IS NOT NULL AND new.project <> '' BEGIN
        {_CHANGED_IN_PROJECT.format("new.source_id", "new.project", "new.invalidated_at")};
        {_CHANGED_IN_PROJECT.format("new.target_id", "new.project", "new.invalidated_at")};
    END
    """,
    # A project's closing of a global row.
    f"""
    CREATE TRIGGER observation_closing_changed AFTER INSERT ON observation_closing BEGIN
        {
        _CHANGED_IN_PROJECT.format(
            "(SELECT entity_id FROM observation WHERE seq = new.seq)",
            "new.project",
            "new.invalidated_at",
        )
    };
    END
    """,
    f"""
    CREATE TRIGGER relation_closing_changed AFTER INSERT ON relation_closing BEGIN
        {
        _CHANGED_IN_PROJECT.format(
            "(SELECT source_id FROM relation WHERE seq = new.seq)",
            "new.project",
            "new.invalidated_at",
        )
    };
        {
        _CHANGED_IN_PROJECT.format(
            "(SELECT target_id FROM relation WHERE seq = new.seq)",
            "new.project",
            "new.invalidated_at",
        )
    };
    END
    """,
]
_COUNT_CHANGES = [
    """
    UPDATE entity SET changed_at = max(
        recorded_at,
        coalesce((SELECT max(coalesce(invalidated_at, recorded_at)) FROM observation
                  WHERE entity_id = entity.id AND project = ''), 0),
        coalesce((SELECT max(coalesce(invalidated_at, recorded_at)) FROM relation
                  WHERE (source_id = entity.id OR target_id = entity.id) AND project = ''), 0)
    )
    """,
    """
    INSERT INTO entity_change (entity_id, project, owner_id, changed_at)
    SELECT entity_id, project, owner_id, max(at) FROM (
        SELECT entity_id, project, owner_id, coalesce(invalidated_at, recorded_at) AS at
        FROM observation WHERE project <> ''
        UNION ALL
        SELECT source_id, project, owner_id, coalesce(invalidated_at, recorded_at)
        FROM relation WHERE project <> ''
        UNION ALL
        SELECT target_id, project, owner_id, coalesce(invalidated_at, recorded_at)
        FROM relation WHERE project <> ''
        UNION ALL
        SELECT o.entity_id, c.project, c.owner_id, c.invalidated_at
        FROM observation_closing c JOIN observation o ON o.seq = c.seq
        UNION ALL
        SELECT r.source_id, c.project, c.owner_id, c.invalidated_at
        FROM relation_closing c JOIN relation r ON r.seq = c.seq
        UNION ALL
        SELECT r.target_id, c.project, c.owner_id, c.invalidated_at
        FROM relation_closing c JOIN relation r ON r.seq = c.seq
    ) GROUP BY entity_id, project
    """,
]
# A search inside one context ranks by that context's rows alone (`ranking`): the
# statistics are kept by project.
_FTS_STATS_BY_PROJECT = [
    "DROP TABLE fts_stats",
    """
    CREATE TABLE fts_stats (
        owner_id INTEGER NOT NULL REFERENCES owner (id),
        project TEXT NOT NULL,
        kind TEXT NOT NULL,
        rows INTEGER NOT NULL,
        tokens_0 INTEGER NOT NULL,
        tokens_1 INTEGER NOT NULL,
        PRIMARY KEY (owner_id, kind, project)
    ) WITHOUT ROWID
    """,
    *COUNT_FTS_STATS,
]
_PROJECT_ENTITY_TYPE = [
    """
    CREATE TABLE project_entity_type (
        entity_id INTEGER NOT NULL REFERENCES entity (id),
        project TEXT NOT NULL CHECK (project <> ''),
        owner_id INTEGER NOT NULL REFERENCES owner (id),
        entity_type TEXT NOT NULL,
        PRIMARY KEY (entity_id, project)
    ) WITHOUT ROWID
    """,
    "CREATE INDEX project_entity_type_scope ON project_entity_type (owner_id, project)",
]
MIGRATIONS[6] = [
    *_FTS_STATS_BY_PROJECT,
    *_PROJECT_ENTITY_TYPE,
    *_CLOSING_TABLES,
    *_ENTITY_CHANGE,
    # A key of this file's own, which read_graph's cursors are sealed with (`reads`).
    "CREATE TABLE file_secret (id INTEGER PRIMARY KEY CHECK (id = 1), key BLOB NOT NULL)",
    "INSERT INTO file_secret (id, key) VALUES (1, randomblob(32))",
    *(f"DROP TRIGGER {table}_closed" for table in ("observation", "relation")),
    *_move_project_closings("observation"),
    *_move_project_closings("relation"),
    *_COUNT_CHANGES,
    *_CLOSED_TRIGGERS,
]

# An entity's own records on the time axes (`entity_life`): its deletions and returns
# by context, and every type it was given, globally or by a project. A file of
# schema 6 keeps each entity's types of now as their first versions. An entity's
# latest life record is read in key order, without sorting. The key's columns come
# first: SQLite's integrity_check misreads a WITHOUT ROWID table whose key columns
# follow others.
MIGRATIONS[7] = [
    """
    CREATE TABLE entity_life (
        entity_id INTEGER NOT NULL REFERENCES entity (id),
        at INTEGER NOT NULL,
        project TEXT NOT NULL,
        owner_id INTEGER NOT NULL REFERENCES owner (id),
        alive INTEGER NOT NULL CHECK (alive IN (0, 1)),
        PRIMARY KEY (entity_id, at, project)
    ) WITHOUT ROWID
    """,
    "CREATE INDEX entity_life_scope ON entity_life (owner_id, project)",
    """
    CREATE TABLE entity_type_version (
        entity_id INTEGER NOT NULL REFERENCES entity (id),
        project TEXT NOT NULL,
        recorded_at INTEGER NOT NULL,
        owner_id INTEGER NOT NULL REFERENCES owner (id),
        entity_type TEXT NOT NULL,
        PRIMARY KEY (entity_id, project, recorded_at)
    ) WITHOUT ROWID
    """,
    "CREATE INDEX entity_type_version_scope ON entity_type_version (owner_id, project)",
    """
    INSERT INTO entity_type_version (entity_id, project, owner_id, entity_type, recorded_at)
    SELECT id, '', owner_id, entity_type, recorded_at FROM entity
    """,
    """
    INSERT INTO entity_type_version (entity_id, project, owner_id, entity_type, recorded_at)
    SELECT c.entity_id, c.project, c.owner_id, c.entity_type, e.recorded_at
    FROM project_entity_type c JOIN entity e ON e.id = c.entity_id
    """,
]

# Vectors for ranking by meaning (DESIGN §8), in the file beside the rows they stand
# for, and the backlog of rows still without one. The engine queues every new row in
# its write transaction (`QUEUE_NEW`); the indexer (`indexer`) claims a batch for a
# while, embeds it outside any transaction and stores the vectors, so a restart, a
# crash or a second process resumes from the file. A row's vector and queue entry go
# when the row goes (purge); `vector_removed` counts an owner's vectors gone, which tells
# a process's in-memory copy (`vectors`) to reload. `seq` orders vectors as they were
# stored: that copy reads only those past the last it has.
VECTOR_KINDS = {"entity": 0, "observation": 1, "relation": 2, "turn": 3}
QUEUE_NEW = {
    kind: f"""
        INSERT OR IGNORE INTO vector_pending (kind, row_id, owner_id)
        SELECT {code}, value, :owner FROM json_each(:rowids)
    """
    for kind, code in VECTOR_KINDS.items()
}


def _vector_dropped(table: str, key: str, code: int) -> list[str]:
    return [
        f"""
        CREATE TRIGGER {table}_vector_delete AFTER DELETE ON {table} BEGIN
            DELETE FROM vector WHERE kind = {code} AND row_id = old.{key};
            DELETE FROM vector_pending WHERE kind = {code} AND row_id = old.{key};
        END
        """
    ]


# The vectors' own tables (also what `vectors.NearestRows` reads, for its tests).
VECTOR_TABLES = [
    """
    CREATE TABLE vector (
        seq INTEGER PRIMARY KEY,
        kind INTEGER NOT NULL,
        row_id INTEGER NOT NULL,
        owner_id INTEGER NOT NULL,
        vec BLOB NOT NULL,
        UNIQUE (kind, row_id)
    )
    """,
    "CREATE INDEX vector_owner ON vector (owner_id, kind, seq)",
    "CREATE TABLE vector_state (id INTEGER PRIMARY KEY CHECK (id = 1), model TEXT)",
    "INSERT INTO vector_state (id, model) VALUES (1, NULL)",
    # Vectors gone, by owner: a process reads that owner's vectors again.
    """
    CREATE TABLE vector_removed (owner_id INTEGER PRIMARY KEY, removed INTEGER NOT NULL)
    """,
    """
    CREATE TRIGGER vector_removed AFTER DELETE ON vector BEGIN
        INSERT INTO vector_removed (owner_id, removed) VALUES (old.owner_id, 1)
        ON CONFLICT (owner_id) DO UPDATE SET removed = removed + 1;
    END
    """,
]

MIGRATIONS[8] = [
    *VECTOR_TABLES,
    """
    CREATE TABLE vector_pending (
        kind INTEGER NOT NULL,
        row_id INTEGER NOT NULL,
        owner_id INTEGER NOT NULL,
        claimed_until INTEGER NOT NULL DEFAULT 0,
        claimed_by INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (kind, row_id)
    ) WITHOUT ROWID
    """,
    "CREATE INDEX vector_pending_free ON vector_pending (claimed_until)",
    "CREATE INDEX vector_pending_owner ON vector_pending (owner_id)",
    *(
        statement
        for kind, code in VECTOR_KINDS.items()
        for statement in _vector_dropped(kind, ROWIDS[kind], code)
    ),
    # A new name or type is embedded again.
    """
    CREATE TRIGGER entity_vector_stale AFTER UPDATE OF name, entity_type ON entity BEGIN
        DELETE FROM vector WHERE kind = 0 AND row_id = new.id;
        INSERT OR IGNORE INTO vector_pending (kind, row_id, owner_id)
        VALUES (0, new.id, new.owner_id);
    END
    """,
    *(
        f"INSERT INTO vector_pending (kind, row_id, owner_id) SELECT {code}, {ROWIDS[kind]},"
        f" owner_id FROM {kind}"
        for kind, code in VECTOR_KINDS.items()
    ),
]

# Words in every script (`words`): FTS5 indexes what the analyzer makes of each row,
# terms separated by spaces, and only splits them at the spaces. The analyzer runs in
# Python, as an SQL function registered on every connection the engine opens
# (`WORDS_FUNCTION(text, language)`), over views of the rows that FTS5 reads as its
# external content, so 'rebuild' and the triggers' 'delete' see exactly the terms that
# were indexed. `word_index.language` is the file's default language, for words whose
# language neither their script nor their text tells; every statement reads it from
# the file, so processes that share it index alike.
WORDS_FUNCTION = "chronomem_words"
WORDS_TOKENIZER = "unicode61 remove_diacritics 0 categories 'L* M* N* S* Co'"
FILE_LANGUAGE = "(SELECT language FROM word_index WHERE id = 1)"
WORD_COLUMNS = {
    "entity": ("name", "entity_type"),
    "observation": ("text",),
    "relation": ("relation",),
    "turn": ("text",),
}


def _words_of(row: str, columns: tuple[str, ...]) -> str:
    return ", ".join(f"{WORDS_FUNCTION}({row}{c}, {FILE_LANGUAGE})" for c in columns)


def _word_index(kind: str) -> list[str]:
    table, key, columns = FTS_INDEXES[kind], ROWIDS[kind], WORD_COLUMNS[kind]
    cols = ", ".join(columns)
    return [
        f"DROP TRIGGER {table}_delete",
        f"DROP TRIGGER {table}_update",
        f"DROP TABLE {table}",
        f"""
        CREATE VIEW {kind}_words AS SELECT {key}, {
            ", ".join(f"{WORDS_FUNCTION}({c}, {FILE_LANGUAGE}) AS {c}" for c in columns)
        } FROM {kind}
        """,
        f"""
        CREATE VIRTUAL TABLE {table} USING fts5(
            {cols}, content='{kind}_words', content_rowid='{key}', tokenize="{WORDS_TOKENIZER}"
        )
        """,
        f"""
        CREATE TRIGGER {table}_delete AFTER DELETE ON {kind} BEGIN
            INSERT INTO {table} ({table}, rowid, {cols})
            VALUES ('delete', old.{key}, {_words_of("old.", columns)});
        END
        """,
        f"""
        CREATE TRIGGER {table}_update AFTER UPDATE OF {cols} ON {kind} BEGIN
            INSERT INTO {table} ({table}, rowid, {cols})
            VALUES ('delete', old.{key}, {_words_of("old.", columns)});
            INSERT INTO {table} (rowid, {cols}) VALUES (new.{key}, {_words_of("new.", columns)});
        END
        """,
    ]


MIGRATIONS[9] = [
    "CREATE TABLE word_index (id INTEGER PRIMARY KEY CHECK (id = 1), language TEXT NOT NULL)",
    "INSERT INTO word_index (id, language) VALUES (1, 'en')",
    *(statement for kind in FTS_INDEXES for statement in _word_index(kind)),
    # The indexes are filled again by `words_index.reindex_words` in the same
    # transaction, with progress.
]


def _index_new(kind: str) -> str:
    cols, key = ", ".join(WORD_COLUMNS[kind]), ROWIDS[kind]
    return f"""
        INSERT INTO {FTS_INDEXES[kind]} (rowid, {cols}) SELECT {key}, {cols} FROM {kind}_words
        WHERE {key} IN (SELECT value FROM json_each(:rowids))
    """


# Each indexes the rows whose rowids are in the JSON list :rowids (see schema 3).
INDEX_NEW = {kind: _index_new(kind) for kind in FTS_INDEXES}

LATEST_VERSION = max(MIGRATIONS)
