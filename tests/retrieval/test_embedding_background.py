"""Background embedding and the model switch, with a real Celery worker and real threads."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from memories.models import Embedding, Memory, Project
from retrieval.embedding import embedders, reembed
from retrieval.ranking.search import vector_search
from tests.support.celery_worker import celery_worker, purge_queue, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def test_bulk_created_memories_are_embedded_by_a_real_worker(api):
    purge_queue()
    body = {"memories": [{"user_id": "alice", "content": f"Alice's fact number {n}."} for n in range(40)]}
    ids = api.post("/memories/bulk", body).json()["ids"]
    assert Memory.objects.filter(pk__in=ids, embedding_status="pending").count() == 40
    with celery_worker():
        assert wait_until(lambda: Memory.objects.filter(pk__in=ids, embedding_status="ready").count() == 40)
    assert Embedding.objects.filter(memory_id__in=ids).count() == 40


def test_searches_during_a_model_switch_each_see_one_complete_model(settings, fake_openai, make_memory):
    contents = [f"Alice's note {n} about deployments and tea." for n in range(30)]
    for content in contents:
        make_memory(content=content)
    project = Project.objects.get(slug="acme-agent")
    settings.MEMORYHUB_LLM_BASE_URL, settings.OPENAI_API_KEY = fake_openai.base_url, "k"
    embedders.reset_embedder_cache()
    seen: list[tuple[str, int]] = []
    stop = threading.Event()

    def search_forever() -> None:
        while not stop.is_set():
            current = Project.objects.get(pk=project.pk)
            model, hits = vector_search(project=current, user_id="alice", query="tea", limit=100)
            seen.append((model, len(hits)))
        connection.close()

    searcher = threading.Thread(target=search_forever)
    searcher.start()
    reembed.reembed_project(project_id=project.pk, model="fake-embed")
    wait_until(lambda: any(model == "fake-embed" for model, _ in seen), timeout=10)
    reembed.drop_inactive_vectors(project_id=project.pk)  # the grace period is over
    stop.set()
    searcher.join()
    assert {model for model, _ in seen} == {"all-MiniLM-L6-v2", "fake-embed"}
    assert {count for _, count in seen} == {30}
    assert set(Embedding.objects.values_list("model", flat=True)) == {"fake-embed"}
