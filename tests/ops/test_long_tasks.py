"""No task outlives the broker's visibility timeout; a re-embed runs in resumable steps."""

from __future__ import annotations

import pytest
from django.conf import settings

from common.redis import redis_client
from memories.models import Embedding, Project
from memoryhub.celery import app
from retrieval.embedding import embedders, reembed
from retrieval.embedding.local_embedder import LOCAL_MODEL_NAME
from retrieval.tasks import reembed_project_task
from tests.support.celery_worker import celery_worker, purge_queue, wait_until


def test_every_task_stops_before_the_broker_would_deliver_it_again():
    visibility = app.conf.broker_transport_options["visibility_timeout"]
    assert visibility == settings.BROKER_VISIBILITY_TIMEOUT_S
    apps = ("capture", "retrieval", "memories", "consolidation")
    ours = {name: task for name, task in app.tasks.items() if name.split(".")[0] in apps}
    assert "capture.tasks.reembed_project_task" in ours
    for name, task in ours.items():
        hard = task.time_limit or app.conf.task_time_limit
        soft = task.soft_time_limit or app.conf.task_soft_time_limit
        assert hard is not None and soft is not None and soft < hard < visibility, name


@pytest.fixture
def five_memories(settings, fake_openai, make_memory):
    for n in range(5):
        make_memory(content=f"Alice's note number {n} about the deploy.")
    settings.MEMORYHUB_LLM_BASE_URL, settings.OPENAI_API_KEY = fake_openai.base_url, "k"
    embedders.reset_embedder_cache()
    yield Project.objects.get(slug="acme-agent")
    embedders.reset_embedder_cache()


@pytest.mark.django_db(transaction=True)
def test_each_reembed_step_keeps_its_work_and_the_next_resumes_from_there(five_memories, fake_openai):
    project = five_memories
    assert reembed.reembed_step(project_id=project.pk, model="fake-embed", budget_s=0, batch=2) is None
    assert Embedding.objects.filter(model="fake-embed").count() == 2
    assert Project.objects.get(pk=project.pk).active_embedding_model in ("", None, LOCAL_MODEL_NAME)
    assert reembed.get_progress(project.pk)["done"] == 2
    results = [reembed.reembed_step(project_id=project.pk, model="fake-embed", budget_s=0, batch=2) for _ in range(3)]
    assert results[:2] == [None, None]
    assert (results[2]["embedded"], results[2]["previous"]) == (5, LOCAL_MODEL_NAME)
    assert Project.objects.get(pk=project.pk).active_embedding_model == "fake-embed"
    assert fake_openai.count("/embeddings") == 3  # 2 + 2 + 1 texts: nothing embedded twice


@pytest.mark.django_db(transaction=True)
def test_one_reembed_step_embeds_the_next_batch_while_it_stores_one(five_memories, fake_openai, monkeypatch):
    project = five_memories
    store = reembed.store_vectors
    embedded_while_storing: list[bool] = []

    def storing(rows, vectors, *, model):
        # Each store waits (up to 5 s) for the next batch's request to reach the embedder: it
        # comes while the store runs only when the step embeds ahead (the last batch has no next).
        expected = min(len(embedded_while_storing) + 2, 3)
        embedded_while_storing.append(wait_until(lambda: fake_openai.count("/embeddings") >= expected, timeout=5))
        store(rows, vectors, model=model)

    monkeypatch.setattr(reembed, "store_vectors", storing)
    result = reembed.reembed_step(project_id=project.pk, model="fake-embed", budget_s=60, batch=2)

    assert result is not None and result["embedded"] == 5
    assert embedded_while_storing == [True, True, True]
    vectors = Embedding.objects.filter(model="fake-embed", memory__project=project)
    assert sorted(vectors.values_list("content_hash", flat=True)) == sorted(
        project.memories.values_list("content_hash", flat=True)
    )
    assert fake_openai.count("/embeddings") == 3  # three batches, each embedded once


@pytest.mark.django_db(transaction=True)
def test_the_reembed_task_queues_its_next_step_and_a_worker_finishes_it(five_memories):
    purge_queue()
    project = five_memories
    assert reembed_project_task.apply(args=(project.pk, "fake-embed", 0.0)).get() is None
    assert redis_client().llen("celery") == 1  # the next step, queued
    assert Embedding.objects.filter(model="fake-embed").count() == 5
    with celery_worker():
        assert wait_until(lambda: Project.objects.get(pk=project.pk).active_embedding_model == "fake-embed")
    assert reembed.get_progress(project.pk)["status"] == "done"
