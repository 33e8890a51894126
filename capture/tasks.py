"""Celery tasks. Thin and idempotent: take ids, reload rows, return quietly when the
work is gone or done, call a service. ``acks_late`` everywhere, so a worker killed
mid-task leaves the message to be delivered again; sweepers re-queue whatever a
lost message or an outage left behind."""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import redis
from celery import shared_task
from django.conf import settings
from django.db.models.expressions import RawSQL
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerError

from memories.models import EmbeddingStatus, Memory, Status
from retrieval import reembed
from retrieval.embedders import EmbedderError
from retrieval.embedding import embed_memories, ensure_active_indexes, record_failure

log = logging.getLogger(__name__)

EMBED_CHUNK = 128
EMBED_MAX_RETRIES = 5
SWEEP_BATCH = 2000
# What publishing to a broker that is down raises: kombu's wrapper, or the raw socket/Redis error.
_BROKER_DOWN = (BrokerError, OSError, redis.RedisError)
# One attempt, no publish retries. Not ``retry=False``: kombu then connects through
# ``Connection.default_channel``, which keeps trying at 2 s intervals until the 4 s connect
# timeout (6 s per publish against a dead broker, measured with kombu 5.7); ``.delay``'s default
# policy retries for 0.6 s; this policy fails at once.
_NO_PUBLISH_RETRIES: dict[str, Any] = {"retry": True, "retry_policy": {"max_retries": 0}}


def _publish(task: Any, args: tuple[Any, ...], *, waiting: str) -> bool:
    """Send ``task`` once, without publish retries; whether it was sent.

    A caller may be a web request: it must not wait for a broker that is down. Every caller
    has a sweeper that queues later what could not be sent now; ``waiting`` says what waits
    for which sweeper, for the warning logged when the broker is down.
    """
    try:
        task.apply_async(args, **_NO_PUBLISH_RETRIES)
    except _BROKER_DOWN as error:
        log.warning("broker unavailable (%s); %s", error, waiting)
        return False
    return True


def _publish_chunks(task: Any, ids: Sequence[str], chunk: int, *, waiting: str) -> None:
    """Send ``task`` once per ``chunk`` ids, stopping at the first that cannot be sent."""
    for start in range(0, len(ids), chunk):
        if not _publish(task, (list(ids[start : start + chunk]),), waiting=waiting):
            return


def queue_embedding(memory_ids: Sequence[str]) -> None:
    """Queue background embedding; if the broker is down, the sweeper catches up later."""
    waiting = f"{len(memory_ids)} memories wait for the embedding sweeper"
    _publish_chunks(embed_memories_task, memory_ids, EMBED_CHUNK, waiting=waiting)


@shared_task(
    bind=True,
    acks_late=True,
    max_retries=EMBED_MAX_RETRIES,
    soft_time_limit=300,
    time_limit=330,
    name="capture.tasks.embed_memories_task",
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


@shared_task(acks_late=True, soft_time_limit=60, time_limit=90, name="capture.tasks.sweep_embeddings")
def sweep_embeddings() -> int:
    """Re-queue pending and failed embeddings (beat runs this every minute)."""
    ensure_active_indexes()
    ids = [str(pk) for pk in embedding_backlog().values_list("pk", flat=True)[:SWEEP_BATCH]]
    if ids:
        # Touch the rows so the next sweep waits for their back-off instead of re-queueing.
        Memory.objects.filter(pk__in=ids).update(updated_at=timezone.now())
        queue_embedding(ids)
    return len(ids)


# A re-embed runs in steps of about this many seconds, each queueing the next: a worker that
# dies loses one step, and no run comes near the broker's visibility timeout (one hour; every
# hard limit stays below it, or a second worker would take the same message mid-run). The
# limits leave the last step time to build the model's index (~20 s at 100k vectors).
REEMBED_STEP_SECONDS = 240.0


@shared_task(acks_late=True, soft_time_limit=1800, time_limit=1860, name="capture.tasks.reembed_project_task")
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


@shared_task(acks_late=True, name="capture.tasks.drop_old_vectors_task")
def drop_old_vectors_task(project_id: int) -> int:
    """Delete vectors of models the project no longer uses (after a grace period)."""
    return reembed.drop_inactive_vectors(project_id=project_id)


# --- Capture: classification / extraction jobs, their sweeper, message embeddings -------

CAPTURE_SWEEP_BATCH = 500
MESSAGE_EMBED_CHUNK = 128


def queue_capture(job_id: str) -> None:
    """Nudge a worker about a capture job. No publish retries: the request must not wait for a
    broker that is down; the job row stays ``queued`` and the sweeper queues it later."""
    _publish(capture_job_task, (job_id,), waiting=f"capture job {job_id} waits for the sweeper")


@shared_task(
    bind=True,
    acks_late=True,
    max_retries=None,
    soft_time_limit=240,
    time_limit=300,
    name="capture.tasks.capture_job_task",
)
def capture_job_task(self: Any, job_id: str) -> str:
    """Run one capture job (see ``capture.pipeline``); idempotent, so duplicates are harmless."""
    from capture.pipeline import Outcome, run_job

    result = run_job(job_id=job_id)
    if result.outcome == Outcome.BUSY:
        # Another job of this user is classifying; come back shortly (order per user is kept
        # by the lock, not by the queue).
        raise self.retry(countdown=1 + random.random(), max_retries=None)
    if result.outcome == Outcome.RETRY:
        delay = settings.MEMORYHUB_CAPTURE_RETRY_SECONDS * 2 ** max(0, result.attempts - 1)
        raise self.retry(countdown=delay, max_retries=None)
    return str(result.outcome)


@shared_task(acks_late=True, soft_time_limit=60, time_limit=90, name="capture.tasks.sweep_capture_jobs")
def sweep_capture_jobs() -> int:
    """Re-queue capture jobs stuck in ``queued`` or ``running`` (beat runs this every 30 s)."""
    from capture.services import capture_jobs_requeue

    now = timezone.now()
    ids = capture_jobs_requeue(
        queued_before=now - timedelta(seconds=settings.MEMORYHUB_CAPTURE_REQUEUE_QUEUED_AFTER),
        running_before=now - timedelta(seconds=settings.MEMORYHUB_CAPTURE_REQUEUE_RUNNING_AFTER),
        limit=CAPTURE_SWEEP_BATCH,
    )
    return len(ids)


def queue_message_embedding(message_ids: Sequence[str]) -> None:
    """Queue embedding of conversation messages; the message sweeper catches up after an outage."""
    waiting = f"{len(message_ids)} messages wait for the message-embedding sweeper"
    _publish_chunks(embed_messages_task, message_ids, MESSAGE_EMBED_CHUNK, waiting=waiting)


@shared_task(
    bind=True,
    acks_late=True,
    max_retries=EMBED_MAX_RETRIES,
    soft_time_limit=300,
    time_limit=330,
    name="capture.tasks.embed_messages_task",
)
def embed_messages_task(self: Any, message_ids: list[str]) -> int:
    """Embed the messages among ``message_ids`` that have no vector yet."""
    from memories.conversations import embed_messages

    try:
        return embed_messages(message_ids=message_ids)
    except EmbedderError as error:
        if self.request.retries >= EMBED_MAX_RETRIES:
            return 0
        raise self.retry(exc=error, countdown=min(300, 5 * 2**self.request.retries)) from error


@shared_task(acks_late=True, soft_time_limit=60, time_limit=90, name="capture.tasks.sweep_message_embeddings")
def sweep_message_embeddings() -> int:
    """Queue messages still waiting for a vector (older than a minute, so fresh ones are left alone)."""
    from memories.conversations import messages_awaiting_embedding

    ids = messages_awaiting_embedding(older_than=timezone.now() - timedelta(minutes=1), limit=SWEEP_BATCH)
    queue_message_embedding(ids)
    return len(ids)
