"""bench_capture takes back the nudges of the jobs it accepted (no worker runs them)."""

from __future__ import annotations

from capture.services import CAPTURE_JOB_TASK
from common.queue import publish
from common.redis import redis_client
from evaluation.management.commands.bench_capture import drop_nudges
from tests.support.celery_worker import purge_queue


def test_drop_nudges_takes_out_only_the_given_jobs_messages(redis):
    purge_queue()
    for job_id in ("job-a", "job-b", "job-c"):
        assert publish(CAPTURE_JOB_TASK, (job_id,), waiting="test")
    assert publish("capture.tasks.sweep_capture_jobs", (), waiting="test")
    assert drop_nudges(["job-a", "job-c", "job-gone"]) == 2
    left = redis_client().lrange("celery", 0, -1)
    assert len(left) == 2 and b"job-b" in left[0] + left[1]
    purge_queue()
