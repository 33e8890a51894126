"""Consolidation's Celery tasks: run one queued consolidation, and beat's round.

Thin and idempotent, as capture's: take ids, reload rows, call a service. ``acks_late``, so a
worker killed mid-run leaves the message to be delivered again (the run is claimed again,
within its attempts).
"""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

from celery import shared_task
from django.utils import timezone

from consolidation.services import RUN_TASK, SCHEDULE_TASK, consolidation_run, runs_requeue, schedule_round

# A run waiting this long was not delivered; one running this long (past the task's hard limit)
# lost its worker.
REQUEUE_QUEUED_AFTER = timedelta(minutes=2)
REQUEUE_RUNNING_AFTER = timedelta(minutes=11)


@shared_task(bind=True, acks_late=True, max_retries=None, soft_time_limit=540, time_limit=600, name=RUN_TASK)
def consolidation_run_task(self: Any, run_id: str) -> str:
    """Run one consolidation (``consolidation.services.consolidation_run``)."""
    outcome = consolidation_run(run_id=run_id)
    if outcome == "busy":  # another run of this user holds the lock
        raise self.retry(countdown=5 + random.random(), max_retries=None)
    if outcome == "retry":
        raise self.retry(countdown=30, max_retries=None)
    return outcome


@shared_task(acks_late=True, soft_time_limit=120, time_limit=150, name=SCHEDULE_TASK)
def schedule_consolidations() -> int:
    """Beat's round (every ``MEMORYHUB_CONSOLIDATION_INTERVAL_S``): queue a run for each end user
    whose memories changed since their last one, and re-queue runs left behind."""
    now = timezone.now()
    runs_requeue(queued_before=now - REQUEUE_QUEUED_AFTER, running_before=now - REQUEUE_RUNNING_AFTER)
    return len(schedule_round())
