"""A stateful property test: random remember / relate / forget calls, in random projects
and at random valid times, run against the engine and against a small in-memory model
of DESIGN §2 written here from the design's words. After every step, random reads
(`as_of`, `known_at`, `include_history`, project) of both must agree row for row.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule

from memory import GraphMemory, InvalidInputError
from memory.timestamps import format_time, parse_time

from .conftest import FakeClock

SECOND = 1_000_000
T0 = parse_time("2026-06-01T00:00:00Z")
# Valid times that interleave with transaction times (one write a second from T0).
TIMES = [T0 + k * SECOND // 2 for k in range(-8, 70)]


def stamp(moment: int | None) -> str | None:
    return None if moment is None else format_time(moment)


NAMES = ["Alice", "alice", " ALICE ", "Bob", "bob", "Carol"]
TEXTS = ["likes tea", "Likes  Tea", "basic plan", "pro plan", "lives in Rome"]
ATTRIBUTES = [None, None, "plan", "Plan"]
RELATIONS = {"knows": "knows", "works at": "works_at", "works_at": "works_at"}
PROJECTS = [None, "p", "q"]
TYPES = [None, None, "person", "pet"]


def key(text: str) -> str:
    return " ".join(text.split()).casefold()


@dataclass
class Ent:
    name: str
    type: str
    project: str
    recorded_at: int
    types: dict[str, str] = field(default_factory=dict)  # a project's own types
    # Every type given, as (project or '', type, recorded_at), oldest first.
    versions: list[tuple[str, str, int]] = field(default_factory=list)
    # Deletions (False) and returns (True) by context, as (project or '', at, alive).
    lives: list[tuple[str, int, bool]] = field(default_factory=list)

    def deleted(self, ctx: str | None, known_at: int) -> bool:
        seen = [alive for p, at, alive in self.lives if p in ("", ctx or "") and at <= known_at]
        return bool(seen) and not seen[-1]

    def type_in(self, ctx: str | None) -> str:
        return self.types.get(ctx, self.type) if ctx else self.type

    def type_at(self, ctx: str | None, until: int) -> str:
        """The type recorded by `until`: the context's own, else the global one; before
        the first, the first."""
        for project in ([ctx] if ctx else []) + [""]:
            given = [t for p, t, at in self.versions if p == project and at <= until]
            if given:
                return given[-1]
        return self.versions[0][1]


@dataclass
class Row:
    """An observation (entity, text, attribute) or a relation (source, relation, target)."""

    id: str
    project: str
    valid_from: int
    recorded_at: int
    seq: int
    entity: str = ""
    text: str = ""
    attribute: str | None = None
    source: str = ""
    relation: str = ""
    target: str = ""
    valid_to: int | None = None
    invalidated_at: int | None = None
    reason: str | None = None
    # A project's own closing of a global row (DESIGN §2, "A project is an overlay").
    closings: dict[str, tuple[int, int, str | None]] = field(default_factory=dict)

    def seen(self, ctx: str | None) -> Row:
        """The row as context `ctx` sees it."""
        if ctx and self.project == "" and ctx in self.closings:
            valid_to, invalidated_at, reason = self.closings[ctx]
            return replace(self, valid_to=valid_to, invalidated_at=invalidated_at, reason=reason)
        return self

    @property
    def is_fact(self) -> bool:
        return self.id.startswith("o_")

    def seen_closed(self, known_at: int) -> bool:
        return self.invalidated_at is not None and self.invalidated_at <= known_at

    def current(self, as_of: int, known_at: int) -> bool:
        end = self.valid_to if self.seen_closed(known_at) else None
        return self.valid_from <= as_of and (end is None or as_of < end)


class Refused(Exception):
    """The model says the engine must reject this call."""


@dataclass
class Model:
    entities: dict[str, Ent] = field(default_factory=dict)  # insertion order = creation order
    rows: list[Row] = field(default_factory=list)

    # ---------------------------------------------------------- visibility
    @staticmethod
    def projects(ctx: str | None) -> set[str]:
        return {"", ctx or ""}

    def in_ctx(self, ctx: str | None) -> list[Row]:
        return [r.seen(ctx) for r in self.rows if r.project in self.projects(ctx)]

    def entity_visible(self, k: str, ctx: str | None, known_at: int) -> bool:
        ent = self.entities.get(k)
        if ent is None or ent.recorded_at > known_at or ent.deleted(ctx, known_at):
            return False
        if ent.project in self.projects(ctx):
            return True
        return any(
            k in (r.entity, r.source, r.target) and r.recorded_at <= known_at
            for r in self.in_ctx(ctx)
        )

    def view(self, row: Row, as_of: int, known_at: int) -> dict[str, Any]:
        closed = row.seen_closed(known_at)
        times = {
            "valid_from": format_time(row.valid_from),
            "valid_to": format_time(row.valid_to) if closed and row.valid_to is not None else None,
            "recorded_at": format_time(row.recorded_at),
            "invalidated_at": format_time(row.invalidated_at)
            if closed and row.invalidated_at is not None
            else None,
            "current": row.current(as_of, known_at),
            "reason": row.reason if closed else None,
        }
        if row.is_fact:
            fields = {"id": row.id, "text": row.text, "attribute": row.attribute, **times}
        else:
            fields = {
                "id": row.id,
                "source": self.entities[row.source].name,
                "relation": row.relation,
                "target": self.entities[row.target].name,
                **times,
            }
        # A result leaves out the fields that are null (DESIGN §3).
        return {name: value for name, value in fields.items() if value is not None}

    def shown(self, rows: list[Row], as_of: int, known_at: int, history: bool) -> list[Row]:
        rows = [r for r in rows if r.recorded_at <= known_at]
        if not history:
            rows = [r for r in rows if r.current(as_of, known_at)]
        return sorted(rows, key=lambda r: (r.valid_from, r.recorded_at, r.seq))

    # ---------------------------------------------------------- reads
    def open_nodes(self, ctx, names, as_of, known_at, history) -> dict[str, Any]:
        found: list[str] = []
        missing: list[str] = []
        for name in names:
            k = key(name)
            if k in found:
                continue
            if self.entity_visible(k, ctx, known_at):
                found.append(k)
            elif name.strip() not in missing:
                missing.append(name.strip())
        rows = self.in_ctx(ctx)
        touching = [r for r in rows if not r.is_fact and (r.source in found or r.target in found)]
        return {
            "entities": [self.entity_view(k, rows, as_of, known_at, history, ctx) for k in found],
            "relations": [
                self.view(r, as_of, known_at)
                for r in self.shown(touching, as_of, known_at, history)
            ],
            "missing": missing,
        }

    def read_graph(self, ctx, as_of, known_at, history) -> dict[str, Any]:
        page = [k for k in self.entities if self.entity_visible(k, ctx, known_at)]
        rows = self.in_ctx(ctx)
        outgoing = [r for r in rows if not r.is_fact and r.source in page]
        return {
            "entities": [self.entity_view(k, rows, as_of, known_at, history, ctx) for k in page],
            "relations": [
                self.view(r, as_of, known_at)
                for r in self.shown(outgoing, as_of, known_at, history)
            ],
            "total_entities": len(page),
            "next_cursor": None,
        }

    def entity_view(self, k, rows, as_of, known_at, history, ctx) -> dict[str, Any]:
        facts = [r for r in rows if r.is_fact and r.entity == k]
        return {
            "name": self.entities[k].name,
            "entity_type": self.entities[k].type_at(ctx, min(as_of, known_at)),
            "observations": [
                self.view(r, as_of, known_at) for r in self.shown(facts, as_of, known_at, history)
            ],
        }

    # ---------------------------------------------------------- writes
    def upsert(self, name: str, kind: str | None, ctx: str | None, now: int) -> bool:
        k = key(name)
        if k not in self.entities:
            display = " ".join(name.split())
            self.entities[k] = Ent(display, kind or "general", ctx or "", now)
            self.entities[k].versions.append(("", kind or "general", now))
            return True
        ent = self.entities[k]
        if ent.deleted(ctx, now):  # written about again: back
            ent.lives.append((ctx or "", now, True))
        if kind and kind != ent.type_in(ctx):
            if ctx and ent.recorded_at < now:  # a project's own type
                ent.types[ctx] = kind
                ent.versions.append((ctx, kind, now))
            else:
                ent.type = kind
                ent.versions = [v for v in ent.versions if v[2] != now or v[0]]
                ent.versions.append(("", kind, now))
        return False

    def replaced(self, ctx, ids, want_fact: bool, valid_from: int) -> list[Row]:
        found = []
        for item in ids:
            row = next((r for r in self.in_ctx(ctx) if r.id == item), None)
            if row is None or row.is_fact != want_fact:
                raise Refused
            if row.valid_to is None and row not in found:
                found.append(row)
        if any(valid_from < r.valid_from for r in found):
            raise Refused
        return found

    @staticmethod
    def backfill_end(slot: list[Row], valid_from: int) -> int | None:
        later = [r.valid_from for r in slot if r.valid_from > valid_from]
        return min(later) if later else None

    def close(
        self, ctx: str | None, rows: list[Row], valid_to: int, now: int, reason: str | None
    ) -> None:
        """Close rows as seen from `ctx`: a global row closed inside a project is closed
        for that project only."""
        for seen in rows:
            row = next(r for r in self.rows if r.id == seen.id)
            if ctx and row.project == "":
                row.closings[ctx] = (valid_to, now, reason)
            else:
                row.valid_to, row.invalidated_at, row.reason = valid_to, now, reason


@settings(
    max_examples=60,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
class TemporalMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.clock = FakeClock(step=SECOND)  # one reading per transaction
        self.opened = GraphMemory.open(":memory:", clock=self.clock)
        self.mem = self.loop.run_until_complete(self.opened.__aenter__())
        self.model = Model()
        self.seq = 0

    def teardown(self) -> None:
        self.loop.run_until_complete(self.opened.__aexit__(None, None, None))
        self.loop.close()

    def call(self, ctx: str | None, operation: str, **kwargs: Any) -> Any:
        scope = self.mem.scope(app="a", user="u", project=ctx)
        try:
            return self.loop.run_until_complete(getattr(scope, operation)(**kwargs))
        except InvalidInputError as exc:
            return exc

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def ids(self) -> list[str]:
        return [r.id for r in self.model.rows] + ["o_missing", "r_missing"]

    # ---------------------------------------------------------- rules
    @rule(
        ctx=st.sampled_from(PROJECTS),
        entity=st.sampled_from(NAMES),
        entity_type=st.sampled_from(TYPES),
        facts=st.lists(st.sampled_from(TEXTS), min_size=1, max_size=3),
        attribute=st.sampled_from(ATTRIBUTES),
        valid_from=st.none() | st.sampled_from(TIMES),
        data=st.data(),
    )
    def remember(self, ctx, entity, entity_type, facts, attribute, valid_from, data) -> None:
        replaces = data.draw(st.lists(st.sampled_from(self.ids()), max_size=2))
        m, now = self.model, self.clock.now
        vf = now if valid_from is None else valid_from
        k = key(entity)
        plan: tuple | None
        try:
            closing = m.replaced(ctx, replaces, True, vf)
            facts_open = [
                r
                for r in m.in_ctx(ctx)
                if r.is_fact and r.entity == k and r.valid_to is None and r not in closing
            ]
            end = None
            if attribute:
                in_slot = [
                    r
                    for r in m.in_ctx(ctx)
                    if r.is_fact
                    and r.entity == k
                    and r.attribute
                    and key(r.attribute) == key(attribute)
                ]
                end = m.backfill_end(in_slot, vf)
                keep = {key(f) for f in facts}
                if end is None:  # the call becomes the whole slot
                    closing += [
                        r
                        for r in in_slot
                        if r.valid_to is None and key(r.text) not in keep and r not in closing
                    ]
                    moved = [
                        r
                        for r in facts_open
                        if r not in in_slot and key(r.text) in keep and r not in closing
                    ]
                    if any(vf < r.valid_from for r in moved):
                        raise Refused
                    closing += moved
                facts_open = [r for r in facts_open if r in in_slot and r not in closing]
            plan = (closing, facts_open, end)
        except Refused:
            plan = None
        result = self.call(
            ctx,
            "remember",
            entity=entity,
            facts=facts,
            entity_type=entity_type,
            valid_from=stamp(valid_from),
            attribute=attribute,
            replaces=replaces,
        )
        assert self.clock.last == now
        if plan is None:
            assert isinstance(result, InvalidInputError), result
            return
        assert not isinstance(result, InvalidInputError), result
        closing, facts_open, end = plan
        created = m.upsert(entity, entity_type, ctx, now)
        open_rows = {key(r.text): r for r in facts_open}
        new: dict[str, str] = {}
        dups: list[str] = []
        for fact in facts:
            if key(fact) in open_rows or key(fact) in new:
                dups.append(key(fact))
            else:
                new[key(fact)] = fact

        assert result.entity.created is created
        assert [o.text for o in result.added] == list(new.values())
        assert {o.id for o in result.superseded} == {r.id for r in closing}
        new_ids = [o.id for o in result.added]
        reason = "superseded by " + ", ".join(new_ids) if new_ids else "superseded"
        m.close(ctx, closing, vf, now, reason)
        for (fact_key, text), new_id in zip(new.items(), new_ids, strict=True):
            m.rows.append(
                Row(
                    id=new_id,
                    project=ctx or "",
                    valid_from=vf,
                    recorded_at=now,
                    seq=self.next_seq(),
                    entity=k,
                    text=text,
                    attribute=attribute,
                    valid_to=end,
                    invalidated_at=now if end is not None else None,
                )
            )
            open_rows.setdefault(fact_key, m.rows[-1])
        assert [o.id for o in result.duplicates] == [open_rows[d].id for d in dups]

    @rule(
        ctx=st.sampled_from(PROJECTS),
        source=st.sampled_from(NAMES),
        relation=st.sampled_from(sorted(RELATIONS)),
        to=st.sampled_from(NAMES),
        exclusive=st.booleans(),
        valid_from=st.none() | st.sampled_from(TIMES),
        data=st.data(),
    )
    def relate(self, ctx, source, relation, to, exclusive, valid_from, data) -> None:
        replaces = data.draw(st.lists(st.sampled_from(self.ids()), max_size=2))
        m, now = self.model, self.clock.now
        vf = now if valid_from is None else valid_from
        target = to  # `target` is reserved by @rule
        kind, s, t = RELATIONS[relation], key(source), key(target)
        expected: tuple | None
        try:
            closing = m.replaced(ctx, replaces, False, vf)
            existing = next(
                (
                    r
                    for r in m.in_ctx(ctx)
                    if not r.is_fact
                    and (r.source, r.relation, r.target) == (s, kind, t)
                    and r.valid_to is None
                    and r not in closing
                ),
                None,
            )
            end = None
            if exclusive:
                slot = [
                    r
                    for r in m.in_ctx(ctx)
                    if not r.is_fact and (r.source, r.relation) == (s, kind) and r != existing
                ]
                end = m.backfill_end(slot, vf)
                if end is None:
                    others = [r for r in slot if r.valid_to is None and r not in closing]
                    if any(vf < r.valid_from for r in others):
                        raise Refused
                    closing += others
            expected = (closing, existing, end)
        except Refused:
            expected = None
        result = self.call(
            ctx,
            "relate",
            source=source,
            relation=relation,
            target=target,
            valid_from=stamp(valid_from),
            exclusive=exclusive,
            replaces=replaces,
        )
        assert self.clock.last == now
        if expected is None:
            assert isinstance(result, InvalidInputError), result
            return
        assert not isinstance(result, InvalidInputError), result
        closing, existing, end = expected
        created = [
            name
            for name, made in (
                (source, m.upsert(source, None, ctx, now)),
                (target, m.upsert(target, None, ctx, now)),
            )
            if made
        ]
        assert result.created_entities == [" ".join(n.split()) for n in created]
        assert result.existing is (existing is not None)
        assert {r.id for r in result.superseded} == {r.id for r in closing}
        m.close(ctx, closing, vf, now, f"superseded by {result.relation.id}")
        if existing is None:
            m.rows.append(
                Row(
                    id=result.relation.id,
                    project=ctx or "",
                    valid_from=vf,
                    recorded_at=now,
                    seq=self.next_seq(),
                    source=s,
                    relation=kind,
                    target=t,
                    valid_to=end,
                    invalidated_at=now if end is not None else None,
                )
            )
        else:
            assert result.relation.id == existing.id

    @rule(
        ctx=st.sampled_from(PROJECTS),
        names=st.lists(st.sampled_from([*NAMES, "Nobody"]), max_size=2),
        valid_to=st.none() | st.sampled_from(TIMES),
        reason=st.sampled_from([None, "user asked"]),
        data=st.data(),
    )
    def forget(self, ctx, names, valid_to, reason, data) -> None:
        ids = data.draw(
            st.lists(st.sampled_from(self.ids()), min_size=0 if names else 1, max_size=3)
        )
        m, now = self.model, self.clock.now
        vt = now if valid_to is None else valid_to
        closing: list[Row] = []
        already, not_found = [], []
        for item in dict.fromkeys(ids):
            row = next((r for r in m.in_ctx(ctx) if r.id == item), None)
            if row is None:
                not_found.append(item)
            elif row.valid_to is not None:
                already.append(item)
            else:
                closing.append(row)
        for name in dict.fromkeys(n.strip() for n in names):
            k = key(name)
            if not m.entity_visible(k, ctx, now):
                not_found.append(name)
                continue
            closing += [
                r
                for r in m.in_ctx(ctx)
                if r.valid_to is None and r not in closing and k in (r.entity, r.source, r.target)
            ]
        refused = any(vt < r.valid_from for r in closing)
        result = self.call(
            ctx, "forget", ids=ids, entities=names, valid_to=stamp(valid_to), reason=reason
        )
        assert self.clock.last == now
        if refused:
            assert isinstance(result, InvalidInputError), result
            return
        assert not isinstance(result, InvalidInputError), result
        assert set(result.invalidated) == {r.id for r in closing}
        assert len(result.invalidated) == len(closing)
        assert result.already_invalid == already
        assert result.not_found == not_found
        m.close(ctx, closing, vt, now, reason)

    @rule(
        ctx=st.sampled_from(PROJECTS),
        names=st.lists(st.sampled_from([*NAMES, "Nobody"]), min_size=1, max_size=3),
        valid_to=st.none() | st.sampled_from(TIMES),
    )
    def delete_entities(self, ctx, names, valid_to) -> None:
        m, now = self.model, self.clock.now
        vt = now if valid_to is None else valid_to
        deleted, not_found, closing = [], [], []
        for name in {key(n): n.strip() for n in names}.values():
            k = key(name)
            if not m.entity_visible(k, ctx, now):
                not_found.append(name)
                continue
            deleted.append(k)
            closing += [
                r
                for r in m.in_ctx(ctx)
                if r.valid_to is None and r not in closing and k in (r.entity, r.source, r.target)
            ]
        result = self.call(ctx, "delete_entities", names=names, valid_to=stamp(valid_to))
        assert self.clock.last == now
        # An end the caller chose must follow every start; deleting now ends a fact
        # still to begin where it begins.
        if valid_to is not None and any(vt < r.valid_from for r in closing):
            assert isinstance(result, InvalidInputError), result
            return
        assert not isinstance(result, InvalidInputError), result
        assert result.deleted == [m.entities[k].name for k in deleted]
        assert result.not_found == not_found
        assert set(result.invalidated) == {r.id for r in closing}
        m.close(ctx, [r for r in closing if r.valid_from <= vt], vt, now, None)
        for r in closing:
            if r.valid_from > vt:
                m.close(ctx, [r], r.valid_from, now, None)
        for k in deleted:
            m.entities[k].lives.append((ctx or "", now, False))

    @rule(
        ctx=st.sampled_from(PROJECTS),
        history=st.booleans(),
        data=st.data(),
    )
    def reads_agree(self, ctx, history, data) -> None:
        m = self.model
        points = sorted(
            {
                t
                for r in m.rows
                for t in (r.valid_from, r.recorded_at, r.valid_to or T0, r.invalidated_at or T0)
            }
        )
        moments = st.none() | st.sampled_from(points or [T0]).flatmap(
            lambda t: st.sampled_from([t, t, t - 1, t + 1])
        )
        as_of, known_at = data.draw(moments), data.draw(moments)
        names = data.draw(st.lists(st.sampled_from([*NAMES, "Nobody"]), min_size=1, max_size=4))
        times = {"as_of": stamp(as_of), "known_at": stamp(known_at)}

        now = self.clock.now
        got = self.call(ctx, "open_nodes", names=names, include_history=history, **times)
        a, k = (now if as_of is None else as_of), (now if known_at is None else known_at)
        assert got.model_dump() == m.open_nodes(ctx, names, a, k, history)

        now = self.clock.now
        graph = self.call(ctx, "read_graph", include_history=history, limit=500, **times)
        a, k = (now if as_of is None else as_of), (now if known_at is None else known_at)
        assert graph.model_dump() == m.read_graph(ctx, a, k, history)


TestTemporalModel = TemporalMachine.TestCase
