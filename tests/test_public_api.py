from __future__ import annotations

import inspect
import subprocess
import sys

import memory
from memory import models

EXPECTED = {
    "ChronomemError",
    "DatabaseFileError",
    "DeleteEntitiesResult",
    "Entity",
    "EntityInfo",
    "EmbedderError",
    "EntityRef",
    "ForgetResult",
    "GraphMemory",
    "HistoryResult",
    "IndexerSettings",
    "InvalidInputError",
    "MemoryFullError",
    "MemoryScope",
    "Observation",
    "OpenNodesResult",
    "ProfileCard",
    "ReadGraphResult",
    "RecallResult",
    "RecalledTurn",
    "RecordTurnsResult",
    "RelateResult",
    "Relation",
    "RememberResult",
    "SearchHit",
    "SearchNodesResult",
    "TurnIn",
}


def test_public_names_are_pinned() -> None:
    assert set(memory.__all__) == EXPECTED
    for name in memory.__all__:
        assert getattr(memory, name) is not None


def test_the_engine_imports_no_protocol_code() -> None:
    code = (
        "import sys, memory, memory.__main__; "
        "bad = [m for m in sys.modules if m.split('.')[0] in"
        " ('mcp', 'server', 'starlette', 'click', 'numpy', 'onnxruntime')]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_operation_signatures_match_the_design() -> None:
    """DESIGN §3: argument names and defaults of every operation."""
    expected = {
        "remember": "(entity, facts, entity_type=None, valid_from=None, replaces=None, attribute=None)",
        "relate": "(source, relation, target, source_type=None, target_type=None, valid_from=None, exclusive=False, replaces=None)",
        "forget": "(ids=None, entities=None, valid_to=None, reason=None)",
        "open_nodes": "(names, as_of=None, known_at=None, include_history=False)",
        "read_graph": "(as_of=None, known_at=None, include_history=False, limit=50, cursor=None)",
        "history": "(entity)",
        "search_nodes": "(query, limit=10, facts_per_hit=5, entity_type=None, as_of=None, known_at=None, include_history=False)",
        "profile_card": "(max_entities=12, max_facts_per_entity=5, max_chars=2000, query=None, as_of=None)",
        "recall": "(query, limit=10, session_id=None, after=None, before=None)",
        "record_turns": "(session_id, turns)",
        "create_entity": "(name, entity_type=None)",
        "delete_entities": "(names, valid_to=None, reason=None)",
    }
    for name, signature in expected.items():
        params = inspect.signature(getattr(memory.MemoryScope, name)).parameters.values()
        shown = ", ".join(
            p.name if p.default is inspect.Parameter.empty else f"{p.name}={p.default!r}"
            for p in params
            if p.name != "self"
        )
        assert f"({shown})" == signature, name


def test_result_fields_match_the_design() -> None:
    fields = {
        models.RememberResult: ["entity", "added", "duplicates", "superseded", "similar"],
        models.EntityRef: ["name", "entity_type", "created"],
        models.RelateResult: ["relation", "existing", "created_entities", "superseded"],
        models.ForgetResult: ["invalidated", "already_invalid", "not_found"],
        models.OpenNodesResult: ["entities", "relations", "missing"],
        models.ReadGraphResult: ["entities", "relations", "total_entities", "next_cursor"],
        models.HistoryResult: ["entity", "entity_types", "deleted_at", "deletions", "timeline"],
        models.DeleteEntitiesResult: ["deleted", "invalidated", "not_found"],
        models.RecordTurnsResult: ["stored", "ids"],
        models.SearchNodesResult: ["hits"],
        models.SearchHit: [
            "entity",
            "score",
            "observations",
            "relations",
            "more_observations",
            "more_relations",
        ],
        models.RecallResult: ["turns"],
        models.RecalledTurn: ["id", "session_id", "role", "text", "at", "score"],
        models.ProfileCard: ["text", "entities", "truncated"],
    }
    for model, names in fields.items():
        assert list(model.model_fields) == names, model.__name__
    observation = set(models.Observation.model_fields)
    assert {
        "id",
        "text",
        "attribute",
        "valid_from",
        "valid_to",
        "recorded_at",
        "invalidated_at",
        "current",
    } <= observation
    relation = set(models.Relation.model_fields)
    assert {
        "id",
        "source",
        "relation",
        "target",
        "valid_from",
        "valid_to",
        "recorded_at",
        "invalidated_at",
        "current",
    } <= relation


def test_demo_runs() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "memory"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "In February:   ['on the basic plan']" in done.stdout
