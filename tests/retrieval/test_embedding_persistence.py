"""Memories get vectors: before the answer for single writes, in Celery otherwise."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from memories.models import Embedding, Memory
from retrieval.embedding import embedders
from retrieval.embedding.embedders import embedder_health
from retrieval.tasks import embed_memories_task, sweep_embeddings
from tests.support.openai_server import Fault


@pytest.fixture
def openai_embedder(settings, fake_openai):
    """Point the embedder at the loopback OpenAI-compatible server."""
    settings.MEMORYHUB_EMBEDDER = "openai"
    settings.MEMORYHUB_EMBEDDING_MODEL = "fake-embed"
    settings.MEMORYHUB_LLM_BASE_URL = fake_openai.base_url
    settings.OPENAI_API_KEY = "test-key"
    settings.MEMORYHUB_EMBED_TIMEOUT = 0.5
    embedders.reset_embedder_cache()
    yield fake_openai
    embedders.reset_embedder_cache()


def test_created_memory_is_embedded_before_the_response(make_memory):
    memory = make_memory(content="Alice deploys with Kubernetes on Fridays.")
    assert memory["embedding_status"] == "ready"
    row = Embedding.objects.get(memory_id=memory["id"])
    assert (row.model, row.dimension, len(row.vector)) == ("all-MiniLM-L6-v2", 384, 384)


def test_long_content_is_stored_whole_and_embedded(make_memory):
    content = "Alice keeps notes about the billing service. " * 120
    memory = make_memory(content=content.strip())
    assert memory["embedding_status"] == "ready"
    assert Memory.objects.get(pk=memory["id"]).content == content.strip()


def test_memory_is_saved_pending_when_the_embedder_fails(api, openai_embedder):
    openai_embedder.script_embeddings(Fault(status=500))
    response = api.post("/memories", {"user_id": "alice", "content": "Alice likes green tea."})
    assert (response.status_code, response.json()["embedding_status"]) == (201, "pending")
    stored = Memory.objects.get(pk=response.json()["id"])
    assert "500" in stored.embedding_error
    assert not Embedding.objects.exists()


@pytest.mark.parametrize("fault", [Fault(wrong_dimension=True), Fault(body="not json"), Fault(empty=True)])
def test_a_bad_provider_reply_never_stores_a_vector(api, openai_embedder, fault):
    openai_embedder.dimension = 64
    api.post("/memories", {"user_id": "alice", "content": "Warm-up so the dimension is known."})
    openai_embedder.script_embeddings(fault)
    response = api.post("/memories", {"user_id": "alice", "content": "Alice likes green tea."})
    assert response.json()["embedding_status"] == "pending"
    assert set(Embedding.objects.values_list("dimension", flat=True)) == {64}
    assert not Embedding.objects.filter(memory_id=response.json()["id"]).exists()


def test_a_timeout_leaves_the_memory_pending(api, openai_embedder):
    openai_embedder.script_embeddings(Fault(delay=2.0))
    response = api.post("/memories", {"user_id": "alice", "content": "Alice likes green tea."})
    assert (response.status_code, response.json()["embedding_status"]) == (201, "pending")


def test_identical_texts_are_embedded_once(api, openai_embedder):
    for user in ("alice", "bob"):
        api.post("/memories", {"user_id": user, "content": "The team uses trunk-based development."})
    assert openai_embedder.count("/embeddings") == 1
    assert Embedding.objects.count() == 2


def test_sweeper_requeues_pending_memories_after_their_backoff(api, openai_embedder):
    openai_embedder.script_embeddings(Fault(status=503))
    memory_id = api.post("/memories", {"user_id": "alice", "content": "Alice likes oolong."}).json()["id"]
    assert sweep_embeddings() == 0  # back-off not over yet
    Memory.objects.filter(pk=memory_id).update(updated_at=timezone.now() - timedelta(minutes=5))
    assert sweep_embeddings() == 1
    embed_memories_task.apply(args=[[memory_id]])
    assert Memory.objects.get(pk=memory_id).embedding_status == "ready"


def test_final_failure_marks_the_memory_failed_with_the_error(api, openai_embedder):
    openai_embedder.script_embeddings(*[Fault(status=500)] * 10)
    memory_id = api.post("/memories", {"user_id": "alice", "content": "Alice likes rooibos."}).json()["id"]
    embed_memories_task.apply(args=[[memory_id]], retries=embed_memories_task.max_retries)
    stored = Memory.objects.get(pk=memory_id)
    assert (stored.embedding_status, "500" in stored.embedding_error) == ("failed", True)


def test_health_reports_the_embedder(openai_embedder):
    from retrieval.embedding import embedders

    embedders._health = (0.0, "")
    openai_embedder.script_embeddings(Fault(status=500))
    assert embedder_health().startswith("error")


def test_a_batch_is_marked_ready_except_a_memory_edited_while_it_was_embedded(api):
    from memories import services
    from retrieval.vectors.memory_vectors import embed_memories

    drafts = [services.MemoryDraft(user_id="alice", content=f"Alice fact number {n}.") for n in range(3)]
    stored = services.memory_bulk_create(project=api.project, drafts=drafts, actor="system:test")
    Memory.objects.filter(pk__in=[m.pk for m in stored]).update(embedding_status="pending")
    loaded = list(Memory.objects.select_related("project").filter(pk__in=[m.pk for m in stored]).order_by("content"))
    Memory.objects.filter(pk=loaded[1].pk).update(content="Alice edited this.", content_hash="edited")
    embed_memories(loaded)
    statuses = [Memory.objects.get(pk=m.pk).embedding_status for m in loaded]
    assert statuses == ["ready", "pending", "ready"]


def _pending_memories(api, contents):
    from memories import services

    drafts = [services.MemoryDraft(user_id="alice", content=content) for content in contents]
    stored = services.memory_bulk_create(project=api.project, drafts=drafts, actor="system:test")
    Memory.objects.filter(pk__in=[m.pk for m in stored]).update(embedding_status="pending")
    return list(Memory.objects.select_related("project").filter(pk__in=[m.pk for m in stored]).order_by("content"))


def test_many_memories_are_stored_a_slice_at_a_time_each_with_its_own_vector(api, monkeypatch):
    from retrieval.vectors import memory_vectors

    monkeypatch.setattr(memory_vectors, "STORE_CHUNK", 4)  # three slices, the next embedding while one is written
    memories = _pending_memories(api, [f"Alice's fact {n:02d}: she keeps {n} hives in Lyon." for n in range(10)])

    assert memory_vectors.embed_memories(memories) == 10

    embedder = embedders.embedder_for_model("all-MiniLM-L6-v2")
    for memory in memories:
        stored = Memory.objects.get(pk=memory.pk)
        vector = Embedding.objects.get(memory_id=memory.pk).vector
        assert stored.embedding_status == "ready"
        assert list(vector) == pytest.approx(list(embedder.embed([memory.content])[0]), abs=1e-6)


def test_an_embedder_failure_mid_way_keeps_the_slices_stored_and_leaves_the_rest_pending(
    api, openai_embedder, monkeypatch
):
    from retrieval.embedding.protocol import EmbedderError
    from retrieval.vectors import memory_vectors

    monkeypatch.setattr(memory_vectors, "STORE_CHUNK", 2)
    memories = _pending_memories(api, [f"Bob's fact {n}: he brews {n} kinds of tea." for n in range(5)])
    openai_embedder.script_embeddings(None, Fault(status=500))  # the first slice embeds, the second fails

    with pytest.raises(EmbedderError):
        memory_vectors.embed_memories(memories)

    statuses = [Memory.objects.get(pk=m.pk).embedding_status for m in memories]
    assert statuses == ["ready", "ready", "pending", "pending", "pending"]
    assert Embedding.objects.filter(memory_id__in=[m.pk for m in memories]).count() == 2
