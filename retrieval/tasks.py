"""Retrieval's Celery tasks: embedding memories and messages, their sweepers, re-embedding a
project and the keyword counts.

Thin and idempotent: take ids, reload rows, return quietly when the work is gone or done,
call a service. ``acks_late`` everywhere, so a worker killed mid-task leaves the message to
be delivered again; sweepers re-queue whatever a lost message or an outage left behind.
Names are pinned (``retrieval/queueing.py``): most were first published from ``capture/tasks.py``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from celery import shared_task
from django.db.models.expressions import RawSQL
from django.utils import timezone

from memories.models import EmbeddingStatus, Memory, Status
from retrieval.embedding import reembed
from retrieval.embedding.protocol import EmbedderError
from retrieval.queueing import (
    BUILD_VECTOR_INDEX_TASK,
    DROP_OLD_VECTORS_TASK,
    EMBED_MEMORIES_TASK,
    EMBED_MESSAGES_TASK,
    REEMBED_PROJECT_TASK,
    REFRESH_KEYWORD_STATS_TASK,
    SWEEP_EMBEDDINGS_TASK,
    SWEEP_MESSAGE_EMBEDDINGS_TASK,
    queue_embedding,
    queue_message_embedding,
)
from retrieval.ranking.keyword_stats import refresh_keyword_stats
from retrieval.vectors.memory_vectors import embed_memories, record_failure
from retrieval.vectors.message_vectors import embed_messages, messages_awaiting_embedding
from retrieval.vectors.vector_index import ensure_needed_index, queue_needed_indexes

EMBED_MAX_RETRIES = 5
SWEEP_BATCH = 2000


@shared_task(
    bind=True,
    acks_late=True,
    max_retries=EMBED_MAX_RETRIES,
    soft_time_limit=300,
    time_limit=330,
    name=EMBED_MEMORIES_TASK,
)
def embed_memories_task(self: Any, memory_ids: list[str]) -> int:
    """Embed the memories among ``memory_ids`` that still need it."""
    memories = list(
        Memory.objects.select_related("project")
        .filter(pk__in=memory_ids)
        .exclude(status=Status.DELETED)
        .exclude(embedding_status=EmbeddingStatus.READY)
    )
    if not memories:
        return 0
    try:
        return embed_memories(memories)
    except EmbedderError as error:
        final = self.request.retries >= EMBED_MAX_RETRIES
        record_failure([m.pk for m in memories], error, final=final)
        if final:
            return 0
        raise self.retry(exc=error, countdown=min(300, 5 * 2**self.request.retries)) from error


def embedding_backlog() -> Any:
    """Memories whose embedding is pending or failed and whose back-off has passed.

    Back-off doubles per attempt from 30 s, capped at one hour.
    """
    due = RawSQL("now() - make_interval(secs => least(3600, 30 * power(2, embedding_attempts)))", [])
    return (
        Memory.objects.exclude(status=Status.DELETED)
        .exclude(embedding_status=EmbeddingStatus.READY)
        .filter(updated_at__lt=due)
        .order_by("updated_at")
    )


@shared_task(acks_late=True, soft_time_limit=60, time_limit=90, name=SWEEP_EMBEDDINGS_TASK)
def sweep_embeddings() -> int:
    """Re-queue pending and failed embeddings, and the build of a vector index a search may now walk
    (beat runs this every minute)."""
    queue_needed_indexes()
    ids = [str(pk) for pk in embedding_backlog().values_list("pk", flat=True)[:SWEEP_BATCH]]
    if ids:
        # Touch the rows so the next sweep waits for their back-off instead of re-queueing.
        Memory.objects.filter(pk__in=ids).update(updated_at=timezone.now())
        queue_embedding(ids)
    return len(ids)


# Below the broker's visibility timeout (one hour), like every hard limit here. 100k vectors built in
# 38 s on two cores.
@shared_task(acks_late=True, soft_time_limit=3300, time_limit=3420, name=BUILD_VECTOR_INDEX_TASK)
def build_vector_index_task(model: str, dimension: int) -> bool:
    """Build ``model``'s HNSW index if a search may walk one of its groups (``retrieval.vectors.vector_index``);
    whether it is in place."""
    return ensure_needed_index(model, dimension)


# A re-embed runs in steps of about this many seconds, each queueing the next: a worker that
# dies loses one step, and no run comes near the broker's visibility timeout (one hour; every
# hard limit stays below it, or a second worker would take the same message mid-run). The
# limits leave the last step time to build the model's index (~20 s at 100k vectors).
REEMBED_STEP_SECONDS = 240.0


@shared_task(acks_late=True, soft_time_limit=1800, time_limit=1860, name=REEMBED_PROJECT_TASK)
def reembed_project_task(
    project_id: int, model: str, step_seconds: float = REEMBED_STEP_SECONDS
) -> dict[str, Any] | None:
    """Build ``model``'s vectors for a project beside the old ones, then switch to them (in steps)."""
    result = reembed.reembed_step(project_id=project_id, model=model, budget_s=step_seconds)
    if result is None:
        reembed_project_task.apply_async((project_id, model, step_seconds))
        return None
    drop_old_vectors_task.apply_async((project_id,), countdown=reembed.OLD_VECTORS_GRACE_SECONDS)
    return result


@shared_task(acks_late=True, name=DROP_OLD_VECTORS_TASK)
def drop_old_vectors_task(project_id: int) -> int:
    """Delete vectors of models the project no longer uses (after a grace period)."""
    return reembed.drop_inactive_vectors(project_id=project_id)


@shared_task(
    bind=True,
    acks_late=True,
    max_retries=EMBED_MAX_RETRIES,
    soft_time_limit=300,
    time_limit=330,
    name=EMBED_MESSAGES_TASK,
)
def embed_messages_task(self: Any, message_ids: list[str]) -> int:
    """Embed the messages among ``message_ids`` that have no vector yet."""
    try:
        return embed_messages(message_ids=message_ids)
    except EmbedderError as error:
        if self.request.retries >= EMBED_MAX_RETRIES:
            return 0
        raise self.retry(exc=error, countdown=min(300, 5 * 2**self.request.retries)) from error


@shared_task(acks_late=True, soft_time_limit=60, time_limit=90, name=SWEEP_MESSAGE_EMBEDDINGS_TASK)
def sweep_message_embeddings() -> int:
    """Queue messages still waiting for a vector (older than a minute, so fresh ones are left alone)."""
    ids = messages_awaiting_embedding(older_than=timezone.now() - timedelta(minutes=1), limit=SWEEP_BATCH)
    queue_message_embedding(ids)
    return len(ids)


@shared_task(acks_late=True, soft_time_limit=300, time_limit=330, name=REFRESH_KEYWORD_STATS_TASK)
def refresh_keyword_stats_task() -> dict[str, Any]:
    """Recount common words for groups that grew or shrank (beat runs this every 10 minutes)."""
    result = refresh_keyword_stats()
    return {"refreshed": result.refreshed, "removed": result.removed, "kept": result.kept}
