"""The web process's resident copy of the vector groups (``retrieval.vectors.resident_vectors``): the search
picks the same nearest rows from it as Postgres's own read, and never from vectors older than the
ones its statements see, whatever wrote them (the generations Postgres keeps, migration 0015)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from django.db import connection

from common.per_process import PerProcess
from evaluation.synthetic import varied_memories
from memories.models import Embedding, Memory, VectorGroup
from retrieval.embedding.embedders import embedder_for_model
from retrieval.embedding.vector_cache import embed_texts
from retrieval.ranking.search import SearchParams, hybrid_search
from retrieval.vectors import resident_vectors
from retrieval.vectors.memory_vectors import active_model
from tests.support.search import statements_containing, stored

pytestmark = pytest.mark.django_db


def search(project: Any, user_id: str, query: str) -> tuple[list[Any], bool]:
    """The candidates, and whether the nearest rows came from the process's copy."""
    model = active_model(project)
    vectors = embed_texts([query], embedder=embedder_for_model(model))
    params = SearchParams(project_id=project.pk, user_id=user_id, query=query, model=model, vectors=vectors)
    with statements_containing("nearest_rows") as sent:
        candidates = hybrid_search(params).candidates
    return candidates, "near_ids" in sent[-1][0]


def generation(project: Any, owner: str) -> int | None:
    row = VectorGroup.objects.filter(project=project, owner=owner).values_list("generation", flat=True).first()
    return None if row is None else int(row)


def test_the_resident_pick_finds_what_postgres_reads(api, settings):
    texts = varied_memories(460, seed=21)
    # Each user has project-scope memories too: they are in the user's own group and left out of
    # the shared one, or a memory would be found twice.
    stored(api.project, "alice", texts[:200])
    stored(api.project, "alice", texts[200:240], scope="project")
    stored(api.project, "bob", texts[240:400])
    stored(api.project, "bob", texts[400:], scope="project")
    questions = [f"{text.rstrip('.')}?" for text in varied_memories(12, seed=22)]
    for user_id in ("alice", "bob"):
        for question in questions:
            settings.MEMORYHUB_RESIDENT_VECTORS_MB = 0
            read, resident = search(api.project, user_id, question)
            assert not resident
            settings.MEMORYHUB_RESIDENT_VECTORS_MB = 64
            picked, resident = search(api.project, user_id, question)
            assert resident
            assert {c.memory_id for c in picked} == {c.memory_id for c in read}
            by_rank = [
                sorted((c for c in found if c.vector_rank), key=lambda c: c.vector_rank) for found in (read, picked)
            ]
            assert len(by_rank[0]) == len(by_rank[1]) > 40
            # The same distances in the same order (two rows as near as float32 rounding may swap).
            assert np.allclose([c.cosine for c in by_rank[0]], [c.cosine for c in by_rank[1]], atol=1e-5)
            # Every candidate's cosine, keyword-only hits' too: Postgres's, and from the copy.
            read_cosines = {c.memory_id: c.cosine for c in read}
            assert np.allclose([read_cosines[c.memory_id] for c in picked], [c.cosine for c in picked], atol=1e-5)
            assert all(c.hyde_cosine is None for c in picked)
            mismatched = [a for a, b in zip(*by_rank, strict=True) if a.memory_id != b.memory_id]
            assert len(mismatched) <= 2


def test_a_search_picks_from_vectors_as_new_as_its_statements_see(api):
    stored(api.project, "alice", ["Alice deploys with Kubernetes.", "Alice drinks coffee at nine."])
    first, resident = search(api.project, "alice", "What does Alice brew in the morning?")
    assert resident
    held = generation(api.project, "alice")
    assert held is not None and generation(api.project, "") is None  # no shared vector yet: empty group

    [tea] = stored(api.project, "alice", ["Alice's favourite drink is oolong tea."])
    assert generation(api.project, "alice") != held
    found, _ = search(api.project, "alice", "Which tea does Alice like?")
    assert [c.memory_id for c in found if c.vector_rank == 1] == [str(tea.pk)]

    # Removed with its vector (as erasure does): the user's group changes, the row is gone.
    before = generation(api.project, "alice")
    Memory.objects.filter(pk=tea.pk).delete()
    assert generation(api.project, "alice") != before
    found, _ = search(api.project, "alice", "Which tea does Alice like?")
    assert str(tea.pk) not in {c.memory_id for c in found}

    # Another user's project-scope memory joins the shared group, and alice's search finds it.
    [shared] = stored(api.project, "bob", ["The office kettle is in the second-floor kitchen."], scope="project")
    assert generation(api.project, "") is not None
    found, _ = search(api.project, "alice", "Where is the kettle?")
    assert found and found[0].memory_id == str(shared.pk) and found[0].vector_rank == 1


def test_a_held_group_reads_again_only_the_vectors_of_its_recent_memories(api):
    from retrieval.vectors.memory_vectors import store_vectors

    memories = stored(api.project, "alice", varied_memories(30, seed=24))
    search(api.project, "alice", "Who plays the violin?")  # the process now holds alice's group
    [added] = stored(api.project, "alice", ["Alice's favourite tea is oolong."])
    model = active_model(api.project)
    store_vectors([memories[0]], np.linspace(-1, 1, 384, dtype=np.float32)[None, :], model=model)  # re-embedded
    Memory.objects.filter(pk=memories[1].pk).delete()
    recent = VectorGroup.objects.get(project=api.project, owner="alice").recent_ids
    assert sorted(map(str, recent)) == sorted(str(m.pk) for m in (added, memories[0], memories[1]))
    with statements_containing("vector_send") as sent:
        found, resident = search(api.project, "alice", "Which tea does Alice like?")
    assert resident and found[0].memory_id == str(added.pk)
    assert len(sent) == 1 and "ANY(g.recent_ids)" in sent[0][0]  # not the whole group

    assert_holds_the_whole_group(api.project, model, "alice", rows=30)

    # Without a removal (a new memory, a rewritten one) the held vectors are appended to and replaced.
    [bread] = stored(api.project, "alice", ["Alice bakes bread on Sundays."])
    store_vectors([memories[2]], np.linspace(1, -1, 384, dtype=np.float32)[None, :], model=model)
    with statements_containing("vector_send") as sent:
        found, _ = search(api.project, "alice", "When does Alice bake bread?")
    assert found[0].memory_id == str(bread.pk) and len(sent) == 1 and "ANY(g.recent_ids)" in sent[0][0]
    assert_holds_the_whole_group(api.project, model, "alice", rows=31)


def assert_holds_the_whole_group(project: Any, model: str, owner: str, *, rows: int) -> None:
    """The process's copy of the group is what reading it whole gives (row order aside)."""
    held = resident_vectors.process_cache().get((connection.settings_dict["NAME"], project.pk, model, owner))
    with connection.cursor() as cursor:
        whole = resident_vectors.read(cursor, None, project=project.pk, model=model, owner=owner, budget=1 << 30)
    assert held is not None and held.vectors is not None and whole.vectors is not None
    assert held.generation == whole.generation == generation(project, owner)
    assert sorted(held.ids) == sorted(whole.ids) and len(held.ids) == rows
    assert all(held.rows[memory_id] == row for row, memory_id in enumerate(held.ids))
    assert np.array_equal(held.vectors, whole.vectors[[whole.rows[memory_id] for memory_id in held.ids]])


def test_a_holder_older_than_the_recent_ids_reads_the_whole_group(api):
    stored(api.project, "alice", varied_memories(VectorGroup.RECENT_IDS + 1, seed=25))
    search(api.project, "alice", "Who plays the violin?")
    # One statement writes more rows than a group lists: its recent ids are unknown from now on.
    Embedding.objects.filter(project=api.project, user_id="alice").update(content_hash="rewritten")
    assert VectorGroup.objects.get(project=api.project, owner="alice").recent_since is None
    with statements_containing("vector_send") as sent:
        search(api.project, "alice", "Who plays the violin?")
    assert len(sent) == 2 and "ANY(g.recent_ids)" not in sent[1][0]
    # The next write starts the list again from the generation before it.
    before = generation(api.project, "alice")
    stored(api.project, "alice", ["Alice waters the plants on Fridays."])
    row = VectorGroup.objects.get(project=api.project, owner="alice")
    assert row.recent_since == before and len(row.recent_ids) == 1


def test_every_kind_of_write_gives_the_groups_it_touches_a_new_generation(api):
    [mine] = stored(api.project, "alice", ["Alice deploys with Kubernetes."])
    [theirs] = stored(api.project, "bob", ["Bob's team shares one calendar."], scope="project")
    seen = {owner: generation(api.project, owner) for owner in ("alice", "bob", "")}
    assert None not in seen.values() and len(set(seen.values())) == 3

    def changed() -> set[str]:
        now = {owner: generation(api.project, owner) for owner in seen}
        moved = {owner for owner in seen if now[owner] != seen[owner]}
        seen.update(now)
        return moved

    Embedding.objects.filter(memory=mine).update(content_hash="edited")
    assert changed() == {"alice"}
    Embedding.objects.filter(memory=theirs).update(scope="user")  # leaves the shared group
    assert changed() == {"bob", ""}
    Embedding.objects.filter(pk=-1).update(content_hash="edited")  # a statement that touches no row
    assert changed() == set()
    Embedding.objects.filter(memory=theirs).delete()
    assert changed() == {"bob"}
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # the test's pending foreign-key checks first
        cursor.execute("TRUNCATE memories_embedding")
    assert changed() == {"alice", "bob", ""}


def test_a_group_too_large_to_hold_is_read_by_postgres(api, settings, monkeypatch):
    stored(api.project, "alice", varied_memories(40, seed=23))
    settings.MEMORYHUB_RESIDENT_VECTORS_MB = 512
    _, resident = search(api.project, "alice", "Who plays the violin?")
    assert resident
    # A budget below one group's vectors (40 x 1.5 kB): the process keeps nothing of it.
    monkeypatch.setattr(
        resident_vectors, "_cache", PerProcess(lambda: resident_vectors.GroupCache(budget_bytes=40_000))
    )
    read, resident = search(api.project, "alice", "Who plays the violin?")
    assert not resident and read
    assert resident_vectors.process_cache().held_bytes() == 0


def test_a_group_the_word_statistics_count_too_large_is_never_read(api, settings, monkeypatch):
    from retrieval.models import KeywordStats

    stored(api.project, "alice", varied_memories(10, seed=28))
    settings.MEMORYHUB_RESIDENT_VECTORS_MB = 1  # 1 MB: ~680 vectors of 384 dimensions
    monkeypatch.setattr(resident_vectors, "_cache", PerProcess(resident_vectors._new_cache))  # a cache of this budget
    KeywordStats.objects.create(project=api.project, owner="alice", rows=700)
    with statements_containing("vector_send") as sent:
        found, resident = search(api.project, "alice", "Who plays the violin?")
    assert not resident and found and sent == []
    KeywordStats.objects.filter(project=api.project, owner="alice").update(rows=600)
    _, resident = search(api.project, "alice", "Who plays the violin?")
    assert resident


def test_the_cache_lets_the_least_recently_used_group_go_first():
    def group(rows: int) -> resident_vectors.Group:
        return resident_vectors.Group.of(1, [str(n) for n in range(rows)], np.zeros((rows, 100), np.float32), None)

    cache = resident_vectors.GroupCache(budget_bytes=3 * group(10).nbytes)
    for owner in ("a", "b", "c"):
        cache.put(("db", 1, "m", owner), group(10))
    assert cache.get(("db", 1, "m", "a")) is not None  # a is now the most recent
    cache.put(("db", 1, "m", "d"), group(10))
    assert cache.get(("db", 1, "m", "b")) is None
    assert all(cache.get(("db", 1, "m", owner)) is not None for owner in ("a", "c", "d"))
    assert cache.held_bytes() == 3 * group(10).nbytes
    # A slow read of an older generation does not replace a newer copy.
    newer = resident_vectors.Group.of(5, ["x"], np.zeros((1, 100), np.float32), None)
    cache.put(("db", 1, "m", "a"), newer)
    cache.put(("db", 1, "m", "a"), group(10))
    assert cache.get(("db", 1, "m", "a")) is newer
    assert cache.held_bytes() == 2 * group(10).nbytes + newer.nbytes


def test_the_pick_leaves_out_the_callers_own_shared_rows_and_puts_vectors_without_direction_last():
    half = np.sqrt(0.5)
    own = resident_vectors.Group.of(1, ["o1", "o2"], np.eye(4, dtype=np.float32)[:2], None)
    # As loaded: unit length, and a zero vector as NaN (pgvector's cosine with it is NaN).
    shared = resident_vectors.Group.of(
        2,
        ["s-alice", "s-bob", "s-zero"],
        np.array([[0, 0, 1, 0], [half, half, 0, 0], [np.nan] * 4], dtype=np.float32),
        ["alice", "bob", "bob"],
    )
    picked = resident_vectors.pick(own, shared, user_id="alice", queries=np.array([[2.0, 0, 0, 0]]), fetch=10)
    assert picked.ids == ["o1", "s-bob", "o2", "s-zero"]  # s-alice is alice's own: in her group
    assert picked.ords == [1, 1, 1, 1]
    assert np.allclose(picked.distances[:3], [0.0, 1 - half, 1.0]) and np.isnan(picked.distances[3])
    queries = np.array([[0, 1.0, 0.5, 0], [1.0, 0, 0.2, 0]])
    two = resident_vectors.pick(own, shared, user_id="bob", queries=queries, fetch=2)
    assert two.ords == [1, 1, 2, 2] and two.ids == ["o2", "s-alice", "o1", "s-alice"]


def test_a_vector_without_direction_is_picked_after_every_other():
    rng = np.random.default_rng(34)
    vectors = rng.standard_normal((50, 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    vectors[7] = np.nan  # a zero vector, as loaded
    group = resident_vectors.Group.of(1, [str(n) for n in range(len(vectors))], vectors, None)
    empty = resident_vectors.Group.of(2, [], np.zeros((0, 16), dtype=np.float32), [])
    picked = resident_vectors.pick(group, empty, user_id="x", queries=vectors[:1], fetch=50)
    assert picked.ids[0] == "0" and picked.ids[-1] == "7" and np.isnan(picked.distances[-1])


def test_the_candidates_cosines_come_from_either_group_as_postgres_would_give_them():
    half = np.sqrt(0.5)
    own = resident_vectors.Group.of(1, ["o1", "o2"], np.eye(4, dtype=np.float32)[:2], None)
    shared = resident_vectors.Group.of(
        2, ["s1", "s-zero"], np.array([[half, half, 0, 0], [np.nan] * 4], dtype=np.float32), ["bob", "bob"]
    )
    ids = ["s1", "gone", "o2", "s-zero"]
    # Two query vectors (the question and its context), then one hypothesis.
    queries = np.array([[2.0, 0, 0, 0], [0, 0, 3.0, 0], [0, 1.0, 0, 0]])
    found = resident_vectors.cosines(own, shared, ids=ids, queries=queries, query_vectors=2)
    assert found[1] == (None, None)  # no vector (pending): Postgres's LEFT JOIN gives NULL
    assert np.allclose(found[0], (half, half)) and np.allclose(found[2], (0.0, 1.0))
    assert all(np.isnan(value) for value in found[3])  # a vector of length zero: NaN, as pgvector's
    # Without hypotheses there is no hyde cosine; a query vector of length zero does not hide the other's.
    alone = resident_vectors.cosines(
        own, shared, ids=["o1"], queries=np.array([[0.0, 0, 0, 0], [1.0, 0, 0, 0]]), query_vectors=2
    )
    assert alone == [(1.0, None)]
    assert resident_vectors.cosines(own, shared, ids=["gone"], queries=queries, query_vectors=2) == [(None, None)]


@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_a_group_is_read_whole_off_the_request_path(api):
    stored(api.project, "alice", varied_memories(20, seed=27))
    first, resident = search(api.project, "alice", "Who plays the violin?")
    assert not resident  # Postgres read the vectors; the loader reads the group meanwhile
    resident_vectors.process_loader().wait()
    again, resident = search(api.project, "alice", "Who plays the violin?")
    assert resident and [c.memory_id for c in again] == [c.memory_id for c in first]
    # A new memory: brought in from the group's recent ids, in the search that sees it first.
    [added] = stored(api.project, "alice", ["Alice's favourite tea is oolong."])
    found, resident = search(api.project, "alice", "Which tea does Alice like?")
    assert resident and found[0].memory_id == str(added.pk)
