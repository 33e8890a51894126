"""Capture's Celery tasks: run a capture job, and sweep jobs a lost message left behind.

Thin and idempotent: take ids, reload rows, return quietly when the work is gone or done,
call a service. ``acks_late``, so a worker killed mid-task leaves the message to be
delivered again. Embedding and re-embedding tasks are retrieval's (``retrieval/tasks.py``).
"""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from capture.pipeline import Outcome, run_job
from capture.services import CAPTURE_JOB_TASK, SWEEP_CAPTURE_JOBS_TASK, capture_jobs_requeue

CAPTURE_SWEEP_BATCH = 500


@shared_task(
    bind=True,
    acks_late=True,
    max_retries=None,
    soft_time_limit=240,
    time_limit=300,
    name=CAPTURE_JOB_TASK,
)
def capture_job_task(self: Any, job_id: str) -> str:
    """Run one capture job (see ``capture.pipeline``); idempotent, so duplicates are harmless."""
    result = run_job(job_id=job_id)
    if result.outcome == Outcome.BUSY:
        # Another job of this user is classifying; come back shortly (order per user is kept
        # by the lock, not by the queue).
        raise self.retry(countdown=1 + random.random(), max_retries=None)
    if result.outcome == Outcome.RETRY:
        delay = settings.MEMORYHUB_CAPTURE_RETRY_SECONDS * 2 ** max(0, result.attempts - 1)
        raise self.retry(countdown=delay, max_retries=None)
    return str(result.outcome)


@shared_task(acks_late=True, soft_time_limit=60, time_limit=90, name=SWEEP_CAPTURE_JOBS_TASK)
def sweep_capture_jobs() -> int:
    """Re-queue capture jobs stuck in ``queued`` or ``running`` (beat runs this every 30 s)."""
    now = timezone.now()
    ids = capture_jobs_requeue(
        queued_before=now - timedelta(seconds=settings.MEMORYHUB_CAPTURE_REQUEUE_QUEUED_AFTER),
        running_before=now - timedelta(seconds=settings.MEMORYHUB_CAPTURE_REQUEUE_RUNNING_AFTER),
        limit=CAPTURE_SWEEP_BATCH,
    )
    return len(ids)
