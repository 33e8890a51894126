"""Vector indexes are built CONCURRENTLY, found in the catalogue, and report their progress."""

from __future__ import annotations

import threading

import numpy as np
import psycopg
import pytest
from django.db import connection

from memories.models import Memory
from retrieval.embedding.local_embedder import LOCAL_MODEL_NAME
from retrieval.models import KeywordStats
from retrieval.ranking.search import VECTOR_EXACT_MAX_ROWS
from retrieval.tasks import build_vector_index_task, sweep_embeddings
from retrieval.vectors import vector_index
from retrieval.vectors.memory_vectors import store_vectors
from retrieval.vectors.vector_index import (
    ensure_needed_index,
    ensure_vector_index,
    index_name,
    queue_needed_indexes,
    vector_index_builds,
    vector_index_needed,
    vector_index_state,
)
from tests.support.celery_worker import database_url_for_tests, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def vectors_of(make_memory):
    """Store a 3-dimensional vector for a new memory under a test model; drop its index afterwards."""
    models: list[str] = []

    def store(model: str) -> str:
        memory = Memory.objects.get(pk=make_memory(content=f"Alice's memory for {model}.")["id"])
        store_vectors([memory], np.ones((1, 3), dtype=np.float32), model=model)
        models.append(model)
        return index_name(model, 3)

    yield store
    with connection.cursor() as cursor:
        for model in models:
            cursor.execute(f"DROP INDEX IF EXISTS {index_name(model, 3)}")


def test_a_dropped_vector_index_is_built_again(vectors_of):
    name = vectors_of("ops-rebuild")
    assert ensure_vector_index("ops-rebuild", 3) is True
    assert vector_index_state(name) is True
    with connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX {name}")
    assert ensure_vector_index("ops-rebuild", 3) is True
    assert vector_index_state(name) is True


def test_a_new_database_has_no_graph_for_the_default_model():
    # Migration 0016: no group is large enough to be walked, so no vector pays for a graph insert.
    assert vector_index_state(index_name(LOCAL_MODEL_NAME, 384)) is None
    assert not vector_index_needed(LOCAL_MODEL_NAME)


def test_a_models_graph_is_built_once_the_search_may_walk_one_of_its_groups_and_then_kept(vectors_of, api):
    # As the search decides it (reads_exactly): by the word statistics' count of a group's memories.
    name = vectors_of("ops-walked")
    KeywordStats.objects.create(project=api.project, owner="alice", rows=VECTOR_EXACT_MAX_ROWS)
    assert ensure_needed_index("ops-walked", 3) is False  # read exactly
    assert vector_index_state(name) is None
    KeywordStats.objects.create(project=api.project, owner="", rows=VECTOR_EXACT_MAX_ROWS + 1)  # the shared group
    assert vector_index_needed("ops-walked")
    assert not vector_index_needed("ops-other-model")  # no vectors of it in that project
    assert ensure_needed_index("ops-walked", 3) is True
    assert vector_index_state(name) is True
    KeywordStats.objects.all().delete()
    assert ensure_needed_index("ops-walked", 3) is True  # built once, kept


def test_the_sweeper_queues_the_active_models_build_only_when_needed_and_the_task_builds_it(
    vectors_of, api, monkeypatch
):
    queued: list[tuple[str, int]] = []
    monkeypatch.setattr(vector_index, "queue_vector_index", lambda model, dimension: queued.append((model, dimension)))
    name = vectors_of("ops-active")
    api.project.active_embedding_model = "ops-active"  # the only project's, so the sweeper's only model
    api.project.save(update_fields=["active_embedding_model"])
    assert sweep_embeddings() == 0 and queued == []
    KeywordStats.objects.create(project=api.project, owner="alice", rows=VECTOR_EXACT_MAX_ROWS + 1)
    assert sweep_embeddings() == 0 and queued == [("ops-active", 3)]
    assert vector_index_state(name) is None  # not built by the sweeper itself: a build can outlast it
    assert build_vector_index_task("ops-active", 3) is True
    assert vector_index_state(name) is True
    assert queue_needed_indexes() == []  # in place: nothing more to queue


def test_inserts_go_on_while_an_index_builds_and_the_build_reports_its_phase(vectors_of):
    name = vectors_of("ops-concurrent")
    url = database_url_for_tests()
    # A writer's open transaction: any index build has to wait for it to end.
    with psycopg.connect(url) as writer:
        writer.execute("UPDATE memories_embedding SET created_at = created_at WHERE model = 'ops-concurrent'")
        builder = threading.Thread(target=_build, args=("ops-concurrent",))
        builder.start()
        try:
            assert wait_until(lambda: _build_waits(url))
            with psycopg.connect(url, autocommit=True) as inserter:
                inserter.execute("SET lock_timeout = '5s'")
                inserter.execute(
                    "INSERT INTO memories_embedding (memory_id, project_id, user_id, scope, model, dimension, vector,"
                    " content_hash, created_at) SELECT memory_id, project_id, user_id, scope, 'ops-other', dimension,"
                    " vector, content_hash, now() FROM memories_embedding WHERE model = 'ops-concurrent'"
                )
            assert [(b.name, b.phase) for b in vector_index_builds()] == [(name, "waiting for writers before build")]
        finally:
            writer.commit()
            builder.join(60)
    assert vector_index_state(name) is True
    assert vector_index_builds() == []


def _build_waits(url: str) -> bool:
    """Whether an index build is waiting on a lock (the writer's transaction)."""
    with psycopg.connect(url, autocommit=True) as probe:
        row = probe.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'CREATE INDEX%' AND wait_event_type = 'Lock'"
        ).fetchone()
    return bool(row and row[0])


def _build(model: str) -> None:
    try:
        ensure_vector_index(model, 3)
    finally:
        connection.close()
