"""memories_by_id: the retrieval engine's one-statement load answers what the ORM path answers."""

from __future__ import annotations

from memories import edges, lifecycle, services
from memories.models import ApiKey, Memory
from memories.schemas import memory_out
from memories.selectors import api_key_active, memories_by_id, memories_visible, with_relations
from memories.tenancy import api_key_revoke, hash_api_key


def stored(make_memory, **fields) -> Memory:
    return Memory.objects.get(pk=make_memory(**fields)["id"])


def test_memories_by_id_shows_what_the_orm_path_shows_without_another_query(
    make_memory, api, django_assert_num_queries
):
    old = stored(make_memory, content="Alice uses black.")
    new = services.memory_supersede(
        memory=old, draft=services.MemoryDraft(user_id="alice", content="Alice uses ruff."), actor="system:test"
    )
    other = stored(make_memory, content="Alice lints on save.")
    edges.edge_link(source=new, target=other, relationship="related", actor="system:test")
    dropped = stored(make_memory, content="Alice once used flake8.")
    edges.edge_link(source=new, target=dropped, relationship="contradicts", actor="system:test")
    lifecycle.memory_delete(memory=dropped, actor="system:test")
    ids = [str(old.pk), str(new.pk), str(other.pk)]
    expected = {
        str(m.pk): memory_out(m)
        for m in with_relations(memories_visible(project=api.project, user_id="alice"), user_id="alice").filter(
            pk__in=ids
        )
    }
    with django_assert_num_queries(1):
        found = memories_by_id(project=api.project, user_id="alice", ids=ids)
        shown = {memory_id: memory_out(m) for memory_id, m in found.items()}
    assert shown == expected
    assert shown[str(old.pk)]["superseded_by"] == str(new.pk)
    assert shown[str(new.pk)]["related"] == [{"id": str(other.pk), "relationship": "related"}]


def test_memories_by_id_never_returns_another_users_or_a_deleted_memory(make_memory, api):
    mine, bobs = stored(make_memory), stored(make_memory, user_id="bob")
    gone = stored(make_memory, content="Alice forgot this.")
    lifecycle.memory_delete(memory=gone, actor="system:test")
    found = memories_by_id(project=api.project, user_id="alice", ids=[str(mine.pk), str(bobs.pk), str(gone.pk)])
    assert list(found) == [str(mine.pk)]


def test_memories_by_id_says_which_memories_have_links_either_way(make_memory, api):
    source, target, alone = stored(make_memory), stored(make_memory, content="B."), stored(make_memory, content="C.")
    edges.edge_link(source=source, target=target, relationship="related", actor="system:test")
    found = memories_by_id(project=api.project, user_id="alice", ids=[str(m.pk) for m in (source, target, alone)])
    assert [found[str(m.pk)].linked for m in (source, target, alone)] == [True, True, False]


def values(instance) -> list:
    return [getattr(instance, f.attname) for f in type(instance)._meta.concrete_fields]


def test_api_key_active_loads_the_key_and_its_project_as_the_orm_does(api, django_assert_num_queries):
    with django_assert_num_queries(1):
        key = api_key_active(key_hash=hash_api_key(api.key))
        assert key is not None
        project = key.project
    orm = ApiKey.objects.select_related("project").get(pk=key.pk)
    assert (values(key), values(project)) == (values(orm), values(orm.project))
    assert isinstance(project.taxonomy, list)  # JSON decoded as the ORM decodes it
    api_key_revoke(key=key)
    assert api_key_active(key_hash=hash_api_key(api.key)) is None
