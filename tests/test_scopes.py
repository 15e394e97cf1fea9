from __future__ import annotations

import pytest

from memory import GraphMemory, InvalidInputError

pytestmark = pytest.mark.anyio


async def test_users_and_apps_never_see_each_other(mem: GraphMemory) -> None:
    scopes = {
        ("coach", "alice"): mem.scope(app="coach", user="alice"),
        ("coach", "bob"): mem.scope(app="coach", user="bob"),
        ("diary", "alice"): mem.scope(app="diary", user="alice"),
    }
    for (app, user), scope in scopes.items():
        await scope.remember(entity="Shared Name", facts=[f"{app}/{user} secret"])
        await scope.relate(source="Shared Name", relation="knows", target=f"{app}-{user}")
    for (app, user), scope in scopes.items():
        graph = await scope.read_graph(include_history=True)
        texts = [o.text for e in graph.entities for o in e.observations]
        assert texts == [f"{app}/{user} secret"]
        assert [r.target for r in graph.relations] == [f"{app}-{user}"]
        assert graph.total_entities == 2
        history = await scope.history("shared name")
        assert len(history.timeline) == 2


async def test_project_sees_global_and_its_own_only(mem: GraphMemory) -> None:
    home = mem.scope(app="coder", user="u")
    alpha = mem.scope(app="coder", user="u", project="alpha")
    beta = mem.scope(app="coder", user="u", project="beta")
    await home.remember(entity="User", facts=["prefers tabs"])
    await alpha.remember(entity="User", facts=["alpha uses spaces"])
    await alpha.remember(entity="Alpha Repo", facts=["written in Rust"])
    await beta.relate(source="User", relation="maintains", target="Beta Repo")

    def facts(graph) -> set[str]:
        return {o.text for e in graph.entities for o in e.observations}

    assert facts(await home.read_graph()) == {"prefers tabs"}
    assert facts(await alpha.read_graph()) == {
        "prefers tabs",
        "alpha uses spaces",
        "written in Rust",
    }
    assert facts(await beta.read_graph()) == {"prefers tabs"}
    assert {e.name for e in (await home.read_graph()).entities} == {"User"}
    assert {e.name for e in (await alpha.read_graph()).entities} == {"User", "Alpha Repo"}
    assert {e.name for e in (await beta.read_graph()).entities} == {"User", "Beta Repo"}
    assert (await home.read_graph()).relations == []
    assert (await home.open_nodes(["Alpha Repo", "Beta Repo"])).missing == [
        "Alpha Repo",
        "Beta Repo",
    ]
    with pytest.raises(InvalidInputError, match="^entity: no entity named 'Alpha Repo'"):
        await home.history("Alpha Repo")


async def test_a_project_entity_becomes_global_through_a_global_fact(mem: GraphMemory) -> None:
    home = mem.scope(app="coder", user="u")
    alpha = mem.scope(app="coder", user="u", project="alpha")
    created = await alpha.remember(entity="Postgres", facts=["alpha's database"])
    assert created.entity.created is True
    reused = await home.remember(entity="postgres", facts=["user knows it well"])
    assert reused.entity.created is False  # names are unique per (app, user)
    graph = await home.read_graph()
    assert [(e.name, [o.text for o in e.observations]) for e in graph.entities] == [
        ("Postgres", ["user knows it well"])
    ]


async def test_writes_in_one_project_cannot_touch_another(mem: GraphMemory) -> None:
    alpha = mem.scope(app="coder", user="u", project="alpha")
    beta = mem.scope(app="coder", user="u", project="beta")
    home = mem.scope(app="coder", user="u")
    fact = (await alpha.remember(entity="Repo", facts=["uses tabs"], attribute="indent")).added[0]
    assert (await beta.forget(ids=[fact.id])).not_found == [fact.id]
    assert (await home.forget(ids=[fact.id])).not_found == [fact.id]
    with pytest.raises(InvalidInputError, match=r"replaces\[0\]: no observation"):
        await beta.remember(entity="Repo", facts=["x"], replaces=[fact.id])
    # A global attribute write does not close the project's slot.
    await home.remember(entity="Repo", facts=["uses spaces"], attribute="indent")
    assert {o.text for o in (await alpha.open_nodes(["Repo"])).entities[0].observations} == {
        "uses tabs",
        "uses spaces",
    }


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"app": "", "user": "u"}, "^app: must not be empty"),
        ({"app": "a", "user": "   "}, "^user: must not be blank"),
        ({"app": "a", "user": "u", "project": ""}, "^project: must not be empty"),
        ({"app": "a" * 201, "user": "u"}, "^app: 201 characters; at most 200"),
    ],
)
async def test_bad_scopes_are_rejected(mem: GraphMemory, kwargs: dict, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        mem.scope(**kwargs)
