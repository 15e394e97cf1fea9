"""Every subcommand, run as a person would type it: in this process with click's
runner, and a round trip through the installed executable."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from memory import DatabaseFileError, GraphMemory, MemoryScope

from ..conftest import dump
from .command_line import Cli, Executable


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path / "memory.db")


def test_the_installed_executable_helps_and_keeps_what_it_is_told(tmp_path: Path) -> None:
    chronomem = Executable(tmp_path / "memory.db")
    assert "remember" in chronomem("--help").stdout
    assert "Usage: chronomem search [OPTIONS] QUERY" in chronomem("search", "--help").stdout
    chronomem("remember", "Alice", "likes tea", "--type", "person")
    assert chronomem.json("search", "tea")["hits"][0]["entity"]["name"] == "Alice"
    assert "likes tea" in chronomem("search", "tea").stdout


def test_remember_shows_the_facts_a_new_one_restates(cli: Cli) -> None:
    paris = cli.json("remember", "Alice", "lives in Paris")["added"][0]["id"]
    shown = cli("remember", "Alice", "lives in Paris, France").stdout.splitlines()
    assert shown[1].startswith("  + lives in Paris, France  (since ")
    assert shown[2].startswith("  ~ lives in Paris  (since ")
    assert shown[2].endswith(f"; {paris}) (similar)")


def test_every_operation_from_the_command_line(cli: Cli) -> None:
    added = cli.json("remember", "Alice", "likes tea", "runs 5k", "--type", "person")
    assert added["entity"] == {"name": "Alice", "entity_type": "person", "created": True}
    tea = added["added"][0]["id"]
    cli("remember", "Alice", "basic plan", "--attribute", "plan", "--valid-from", "2026-01-01")
    pro = cli.json("remember", "Alice", "pro plan", "--attribute", "plan")
    assert [o["text"] for o in pro["superseded"]] == ["basic plan"]
    related = cli.json("relate", "Alice", "works at", "Acme", "--exclusive")
    assert related["relation"]["relation"] == "works_at"
    turns = cli.json(
        "record-turns",
        "s1",
        "--turn",
        "user",
        "my beagle ate my shoe",
        "--turn",
        "assistant",
        "oh no",
    )
    assert turns["stored"] == 2

    hits = cli.json("search", "tea", "--limit", "3")["hits"]
    assert hits[0]["entity"]["name"] == "Alice"
    opened = cli.json("open", "alice", "Nobody")
    assert opened["missing"] == ["Nobody"]
    then = cli.json("open", "Alice", "--as-of", "2026-02-01")
    assert [o["text"] for o in then["entities"][0]["observations"]] == ["basic plan"]
    assert cli.json("read-graph", "--limit", "1")["total_entities"] == 2
    assert cli.json("profile")["text"].startswith("[Known about the user]\n• Alice (person)")
    timeline = cli.json("history", "Alice")["timeline"]
    assert {item["kind"] for item in timeline} == {"observation", "relation"}
    assert cli.json("recall", "beagle")["turns"][0]["text"] == "my beagle ate my shoe"
    forgot = cli.json("forget", tea, "o_nope", "--reason", "asked")
    assert forgot == {"invalidated": [tea], "already_invalid": [], "not_found": ["o_nope"]}
    stats = cli.json("stats")
    assert (stats["entities"], stats["observations_current"], stats["turns"]) == (2, 2, 2)
    assert stats["observations_closed"] == 2 and stats["sessions"] == 1
    found = cli.json("search", "plan", "--history")
    assert cli("optimize").stderr.strip() == "search indexes merged"
    assert cli.json("search", "plan", "--history") == found and found["hits"]


def test_human_output_is_plain_text_when_piped(cli: Cli) -> None:
    cli("remember", "Alice", "likes tea", "--type", "person")
    cli("remember", "Alice", "old", "--valid-from", "2020-01-01")
    found = cli.json("search", "old")["hits"][0]["observations"]
    fact = next(o["id"] for o in found if o["text"] == "old")
    cli("forget", fact)
    cli("relate", "Alice", "knows", "Bob")
    for args in (
        ["inspect", "--history"],
        ["history", "Alice"],
        ["stats"],
        ["search", "tea"],
        ["open", "Alice"],
        ["profile"],
    ):
        out = cli(*args).stdout
        assert "\x1b[" not in out and "┃" not in out, args
    tree = cli("inspect", "--history").stdout
    assert "Alice (person)" in tree and "→ knows Bob" in tree
    assert "likes tea  [since " in tree and "(closed) old  [2020-01-01T00:00:00Z – " in tree
    assert "old" not in cli("inspect").stdout


def test_search_shows_how_many_facts_each_hit_left_out(cli: Cli) -> None:
    facts = [f"river run number {n}" for n in range(6)]
    cli("remember", "Alice", *facts, "--type", "person")
    cli("relate", "Alice", "runs with", "Bob")
    hit = cli.json("search", "river run", "--facts-per-hit", "2")["hits"][0]
    assert hit["entity"]["name"] == "Alice"
    assert len(hit["observations"]) == 2 and hit["more_observations"] == 4
    shown = cli("search", "river run", "--facts-per-hit", "2").stdout
    assert "… and 4 more facts" in shown
    assert sum(line.strip().startswith("- ") for line in shown.splitlines()) == 2  # Bob: none
    hit = cli.json("search", "river run")["hits"][0]  # five by default
    assert len(hit["observations"]) + hit["more_observations"] == 6
    assert len(hit["observations"]) == 5
    cli("search", "x", "--facts-per-hit", "21", code=2)


def test_read_graph_pages_of_fifty_by_default(cli: Cli) -> None:
    async def seed() -> None:
        async with GraphMemory.open(cli.db) as memory:
            scope = memory.scope(app="coach", user="default")
            for n in range(60):
                await scope.remember(f"Person {n:02}", [f"fact {n}"])

    anyio.run(seed)
    page = cli.json("read-graph")
    assert (len(page["entities"]), page["total_entities"]) == (50, 60)
    rest = cli.json("read-graph", "--cursor", page["next_cursor"])
    assert len(rest["entities"]) == 10 and rest["next_cursor"] is None
    assert "50 of 60 entities" in cli("read-graph").stdout


def test_exit_codes(cli: Cli) -> None:
    bad = cli("remember", "", "x", code=2)
    assert bad.stderr.strip() == "chronomem: entity: must not be empty"
    assert "limit: 99 is too large" in cli("search", "x", "--limit", "99", code=2).stderr
    assert "entity: no entity named 'Ghost'" in cli("history", "Ghost", code=2).stderr
    cli("remember", "--no-such-flag", code=2)
    foreign = cli.db.parent / "other.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER)")
    failed = cli("stats", "--db", str(foreign), code=1)
    assert "another program" in failed.stderr


def test_export_import_export_gives_the_same_lines(cli: Cli, tmp_path: Path) -> None:
    cli("remember", "Alice", "likes tea", "--type", "person")
    cli("remember", "Alice", "basic", "--attribute", "plan", "--valid-from", "2026-01-01")
    cli("remember", "Alice", "pro", "--attribute", "plan")
    cli("relate", "Alice", "works at", "Acme")
    cli("record-turns", "s1", "--turn", "user", "héllo “quotes” \n newline")
    cli("remember", "Repo", "in rust", "--project", "p1")
    first = cli("export").stdout
    assert len(first.splitlines()) == 9  # 3 entities, 4 facts, 1 relation, 1 turn
    out = tmp_path / "backup.jsonl"
    cli("export", "--out", str(out))
    assert out.read_text() == first

    other = Cli(tmp_path / "restored.db")
    summary = other.json("import", str(out))
    assert (summary["entities"], summary["observations"], summary["relations"]) == (3, 4, 1)
    assert summary["turns"] == 1 and summary["skipped"] == 0
    assert other("export").stdout == first
    again = other.json("import", str(out))  # a repeated import changes nothing
    assert again["skipped"] == 9 and other("export").stdout == first
    only_project = other("export", "--project", "p1").stdout.splitlines()
    assert [json.loads(line)["type"] for line in only_project] == ["entity", "observation"]


def test_an_export_that_fails_midway_leaves_the_out_file_as_it_was(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli("remember", "Alice", "likes tea", "lives in Oslo")
    out = tmp_path / "backup.jsonl"
    out.write_text("yesterday's backup\n")
    export_records = MemoryScope.export_records

    async def fails_after_one(self: MemoryScope, page_size: int = 1) -> AsyncIterator[Any]:
        async for record in export_records(self, page_size=1):
            yield record
            raise DatabaseFileError("the database file is damaged")

    monkeypatch.setattr(MemoryScope, "export_records", fails_after_one)
    failed = cli("export", "--out", str(out), code=1)
    assert "damaged" in failed.stderr
    assert out.read_text() == "yesterday's backup\n"
    assert sorted(path.name for path in tmp_path.iterdir() if "backup" in path.name) == [
        "backup.jsonl"
    ]


def test_an_export_to_a_folder_that_is_not_there_says_so(cli: Cli, tmp_path: Path) -> None:
    cli("remember", "Alice", "likes tea")
    failed = cli("export", "--out", str(tmp_path / "missing" / "backup.jsonl"), code=1)
    assert failed.stderr.startswith("chronomem: cannot write ") and "No such file" in failed.stderr


def test_import_of_the_reference_servers_memory_jsonl(cli: Cli, tmp_path: Path) -> None:
    reference = tmp_path / "memory.jsonl"
    lines = [
        {
            "type": "entity",
            "name": "John_Smith",
            "entityType": "person",
            "observations": ["Speaks fluent Spanish", "Graduated in 2019"],
        },
        {"type": "entity", "name": "Anthropic", "entityType": "organization", "observations": []},
        {"type": "relation", "from": "John_Smith", "to": "Anthropic", "relationType": "works_at"},
    ]
    reference.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    summary = cli.json("import", str(reference))
    assert (summary["entities"], summary["observations"], summary["relations"]) == (2, 2, 1)
    graph = cli.json("open", "John_Smith")
    assert graph["entities"][0]["entity_type"] == "person"
    assert {o["text"] for o in graph["entities"][0]["observations"]} == {
        "Speaks fluent Spanish",
        "Graduated in 2019",
    }
    assert graph["relations"][0]["target"] == "Anthropic"
    assert cli.json("import", str(reference))["skipped"] == 4  # 2 facts, 1 entity, 1 relation


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "line 3: Expecting property name"),
        ('{"type": "entity", "name": "X"}', "line 3: an entity needs 'entityType'"),
        ('{"type": "planet"}', "line 3: not a record"),
        (
            '{"type": "entity", "name": "", "entityType": "p", "observations": ["a"]}',
            "line 3: entity: must not be empty",
        ),
        (
            '{"type": "relation", "from": "A", "to": "B", "relationType": "!!"}',
            "line 3: relation: '!!' has no letters or digits",
        ),
    ],
)
def test_a_malformed_line_is_named_and_nothing_is_kept(
    cli: Cli, tmp_path: Path, line: str, message: str
) -> None:
    good = '{"type": "entity", "name": "Kept?", "entityType": "t", "observations": ["no"]}'
    source = tmp_path / "broken.jsonl"
    source.write_text(f"{good}\n\n{line}\n{good}\n")
    failed = cli("import", str(source), code=2)
    assert message in failed.stderr
    assert cli.json("stats")["entities"] == 0


def test_a_line_that_is_not_utf8_is_named_and_nothing_is_kept(cli: Cli, tmp_path: Path) -> None:
    good = b'{"type": "entity", "name": "Kept?", "entityType": "t", "observations": ["no"]}'
    source = tmp_path / "latin1.jsonl"
    source.write_bytes(good + b"\n" + good.replace(b"Kept?", b"Caf\xe9") + b"\n")
    failed = cli("import", str(source), code=2)
    assert "line 2: not UTF-8 text (byte 32 of the line)" in failed.stderr
    assert cli.json("stats")["entities"] == 0


def test_a_byte_order_mark_before_the_first_line_is_read_as_nothing(
    cli: Cli, tmp_path: Path
) -> None:
    source = tmp_path / "notepad.jsonl"
    line = '{"type": "entity", "name": "Zoë", "entityType": "t", "observations": ["ok"]}'
    source.write_bytes(line.encode("utf-8-sig") + b"\r\n")
    assert cli.json("import", str(source))["observations"] == 1
    assert cli.json("open", "Zoë")["entities"][0]["name"] == "Zoë"


def _raw(db: Path) -> bytes:
    return b"".join(p.read_bytes() for p in db.parent.glob(db.name + "*"))


def test_purge_leaves_no_trace_and_spares_other_scopes(cli: Cli) -> None:
    secret = "zanzibar-moonlight-secret"
    cli("remember", "Secret Keeper", f"knows the {secret}", "--user", "alice")
    cli("relate", "Secret Keeper", "guards", f"Vault {secret}", "--user", "alice")
    cli("record-turns", "s1", "--turn", "user", f"tell me the {secret}", "--user", "alice")
    cli("remember", "Bob", "keeps bees near the lighthouse", "--user", "bob")
    assert secret.encode() in _raw(cli.db)

    refused = cli("purge", "--user", "alice", stdin="n\n", code=1)
    assert "nothing erased" in refused.stderr
    assert cli.json("stats", "--user", "alice")["entities"] == 2

    erased = cli.json("purge", "--user", "alice", "--yes")
    assert (erased["entities"], erased["observations"], erased["turns"]) == (2, 1, 1)
    assert secret.encode() not in _raw(cli.db)
    assert b"Secret Keeper" not in _raw(cli.db)
    assert b"keeps bees near the lighthouse" in _raw(cli.db)
    assert cli.json("stats", "--user", "alice")["entities"] == 0
    assert cli.json("search", "bees", "--user", "bob")["hits"][0]["entity"]["name"] == "Bob"
    with sqlite3.connect(cli.db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_purge_of_a_project_and_of_a_session(cli: Cli) -> None:
    cli("remember", "Global", "stays forever")
    cli("remember", "Proj Thing", "project-only-whisper", "--project", "p1")
    cli("remember", "Global", "project fact about global", "--project", "p1")
    cli("record-turns", "keep", "--turn", "user", "kept conversation")
    cli("record-turns", "drop", "--turn", "user", "dropped-conversation-murmur")
    cli("purge", "--project", "p1", "--yes")
    assert b"project-only-whisper" not in _raw(cli.db)
    assert b"project fact about global" not in _raw(cli.db)
    assert cli.json("open", "Global")["entities"][0]["observations"][0]["text"] == "stays forever"
    cli("purge", "--session", "drop", "--yes")
    assert b"dropped-conversation-murmur" not in _raw(cli.db)
    assert cli.json("recall", "kept")["turns"][0]["text"] == "kept conversation"
    assert "say what to erase" in cli("purge", "--yes", code=2).stderr


def test_writes_obey_the_storage_caps_and_a_refused_one_changes_nothing(
    cli: Cli, tmp_path: Path
) -> None:
    cli("remember", "Alice", "likes tea", "runs 5k", "--max-facts", "3")
    before = dump(cli.db)
    refused = cli("remember", "Alice", "swims", "sings", "--max-facts", "3", code=2)
    assert refused.stderr.startswith("chronomem: memory full: this user already stores 2 facts")
    assert "(max_facts)" in refused.stderr and refused.stderr.count("\n") == 1
    cli.env["CHRONOMEM_MAX_FACTS"] = "2"  # the same variable as serve's
    cli("relate", "Alice", "knows", "Bob", code=2)
    cli("remember", "Alice", "swims", code=2)
    assert dump(cli.db) == before
    cli("forget", "--entity", "Alice", "--max-facts", "2")  # closing adds nothing
    cli.env["CHRONOMEM_MAX_FACTS"] = None
    cli("remember", "Alice", "swims")  # the default cap is far away

    two = ["--turn", "user", "hi", "--turn", "assistant", "hello"]
    full = cli("record-turns", "s1", *two, "--max-turns", "1", code=2)
    assert "(max_turns)" in full.stderr
    cli.env["CHRONOMEM_MAX_TURNS"] = "1"
    cli("record-turns", "s1", *two, code=2)
    assert cli.json("stats")["turns"] == 0

    source = tmp_path / "memory.jsonl"
    line = {"type": "entity", "name": "Bob", "entityType": "person", "observations": ["a", "b"]}
    source.write_text(json.dumps(line) + "\n")
    before = dump(cli.db)
    assert "(max_facts)" in cli("import", str(source), "--max-facts", "4", code=2).stderr
    assert dump(cli.db) == before
    assert cli.json("import", str(source), "--max-facts", "5")["observations"] == 2


def test_each_flag_means_one_thing_the_fact_cap_is_not_the_profile_card_s(cli: Cli) -> None:
    cli("remember", "Alice", "likes tea", "runs 5k", "swims", "--type", "person")
    card = cli.json("profile", "--max-facts-per-entity", "1")["text"]
    assert sum(fact in card for fact in ("likes tea", "runs 5k", "swims")) == 1
    assert (
        sum(fact in cli.json("profile")["text"] for fact in ("likes tea", "runs 5k", "swims")) == 3
    )
    refused = cli("profile", "--max-facts", "1", code=2)
    assert "No such option '--max-facts'" in refused.stderr
    for command in ("remember", "relate", "forget", "record-turns", "import", "serve"):
        shown = cli(command, "--help").stdout
        assert "--max-facts " in shown and "--max-turns " in shown, command
        assert "Most facts and relations one user may store." in shown, command


def test_language_makes_the_files_default_and_says_it_indexes_the_words_again(
    cli: Cli,
) -> None:
    cli("remember", "Moka", "animaux interdits")
    assert "animaux" not in cli("search", "animal").stdout  # English stems it "anim"
    changed = cli("search", "animal", "--language", "fr")
    assert "indexing the words of 2 rows again" in changed.stderr  # the entity, its fact
    assert "words indexed: 2 of 2 rows" in changed.stderr
    assert "animaux interdits" in changed.stdout
    kept = cli("search", "animal")  # the file's language now, nothing to index
    assert "animaux interdits" in kept.stdout and "indexing" not in kept.stderr
    refused = cli("search", "animal", "--language", "klingon", code=2)
    assert "Invalid value for '--language'" in refused.stderr
