"""Faults: a failing, slow or babbling LLM, a worker killed mid-job, a broker that is down.

The worker tests run a REAL Celery worker process against the test database and Redis, and
the LLM is the real loopback chat server; nothing in the pipeline is patched.
"""

from __future__ import annotations

import json
import time
from contextlib import contextmanager
from datetime import timedelta

import pytest
from django.utils import timezone

from capture import services
from capture.models import CaptureJob
from capture.pipeline import Outcome, run_job
from common.redis import redis_client
from memories.models import Memory
from memoryhub.celery import app as celery_app
from tests.support.celery_worker import celery_worker, purge_queue, wait_until
from tests.support.openai_server import Fault

WINDOW = [{"role": "user", "content": "I always use pytest fixtures, never setUp."}]
GOOD = json.dumps(
    [
        {"content": "The user prefers pytest fixtures.", "category": "coding-preferences", "confidence": 0.9},
        {"content": "The user avoids unittest setUp methods.", "category": "coding-preferences", "confidence": 0.9},
    ]
)


@pytest.fixture
def llm(settings, fake_openai):
    settings.MEMORYHUB_LLM_BASE_URL, settings.OPENAI_API_KEY = fake_openai.base_url, "test-key"
    settings.MEMORYHUB_CAPTURE_MAX_ATTEMPTS = 2
    return fake_openai


def submit(api, messages=WINDOW):
    body = {"user_id": "alice", "session_id": "s1", "trigger": "turn", "messages": messages}
    response = api.post("/capture", body)
    assert response.status_code == 202, response.content
    return CaptureJob.objects.get(pk=response.json()["job_id"])


def run(job):
    result = run_job(job_id=str(job.pk))
    job.refresh_from_db()
    return result


def requeue_everything_unfinished():
    later = timezone.now() + timedelta(seconds=1)
    return services.capture_jobs_requeue(queued_before=later, running_before=later)


# --- the LLM misbehaves (in-process) ----------------------------------------------------


@pytest.mark.django_db
def test_an_llm_http_error_puts_the_job_back_in_the_queue_with_the_error(api, llm):
    llm.script_chat(Fault(status=500))
    job = submit(api)
    assert run(job).outcome == Outcome.RETRY
    assert (job.status, job.attempts, Memory.objects.count()) == ("queued", 1, 0)
    assert job.error.startswith("LLM gpt-4o-mini: HTTP 500") and job.error.endswith("(attempt 1 of 2; will retry)")


@pytest.mark.django_db
def test_a_job_whose_llm_keeps_failing_fails_after_its_attempts(api, llm):
    llm.script_chat(Fault(status=500), Fault(status=503))
    job = submit(api)
    assert [run(job).outcome, run(job).outcome] == [Outcome.RETRY, Outcome.FAILED]
    assert (job.status, job.attempts, job.memory_ids) == ("failed", 2, [])
    assert job.error.endswith("(gave up after 2 attempts)")
    assert api.get(f"/capture/{job.pk}", user_id="alice").json()["error"] == job.error


@pytest.mark.django_db
def test_an_llm_that_times_out_is_retried_then_the_job_succeeds(api, llm, settings):
    settings.MEMORYHUB_CAPTURE_LLM_TIMEOUT = 0.5
    llm.script_chat(Fault(delay=2.0), GOOD)
    job = submit(api)
    assert run(job).outcome == Outcome.RETRY
    assert "timed out after 0.5s" in job.error
    assert run(job).outcome == Outcome.DONE
    assert (job.status, job.error, len(job.memory_ids)) == ("done", "", 2)


@pytest.mark.parametrize(
    "answer", ["I could not find anything memorable, sorry!", Fault(body="garbage"), Fault(empty=True)]
)
@pytest.mark.django_db
def test_garbage_from_the_llm_fails_the_job_without_writing_anything(api, llm, answer):
    llm.script_chat(answer, answer)
    job = submit(api)
    run(job)
    run(job)
    assert (job.status, job.attempts, Memory.objects.count()) == ("failed", 2, 0)


@pytest.mark.django_db
def test_a_truncated_answer_writes_only_its_complete_items(api, llm):
    llm.script_chat(GOOD[: GOOD.index("avoids") + 10])
    job = submit(api)
    run(job)
    assert [m.content for m in Memory.objects.all()] == ["The user prefers pytest fixtures."]


@pytest.mark.django_db
def test_a_job_out_of_attempts_is_failed_when_claimed_again(api, llm):
    job = submit(api)
    CaptureJob.objects.filter(pk=job.pk).update(status="running", attempts=2)
    assert run(job).outcome == Outcome.SKIPPED
    assert (job.status, job.error) == ("failed", "gave up after 2 attempts")


@pytest.mark.django_db
def test_a_failed_job_retried_from_the_ui_runs_again_with_fresh_attempts(api, llm):
    llm.script_chat("garbage", "garbage")
    job = submit(api)
    run(job)
    run(job)
    assert (job.status, job.attempts) == ("failed", 2)
    llm.script_chat(GOOD)
    job = services.capture_job_retry(job=job)
    assert (job.status, job.attempts, job.error) == ("queued", 0, "")
    assert run(job).outcome == Outcome.DONE
    assert Memory.objects.filter(content="The user prefers pytest fixtures.").exists()


# --- real worker processes -----------------------------------------------------------------


def worker_env(llm):
    return {
        "MEMORYHUB_LLM_BASE_URL": llm.base_url,
        "OPENAI_API_KEY": "test-key",
        "MEMORYHUB_CAPTURE_RETRY_SECONDS": "0.2",
    }


def job_status(job):
    return CaptureJob.objects.get(pk=job.pk).status


@pytest.mark.django_db(transaction=True)
def test_capture_goes_from_post_to_memories_through_a_real_worker_and_llm(api, llm):
    purge_queue()
    llm.script_chat(GOOD)
    job = submit(api)
    with celery_worker(**worker_env(llm)):
        assert wait_until(lambda: job_status(job) == "done")
    body = api.get(f"/capture/{job.pk}", user_id="alice").json()
    assert sorted(Memory.objects.filter(pk__in=body["memory_ids"]).values_list("content", flat=True)) == [
        "The user avoids unittest setUp methods.",
        "The user prefers pytest fixtures.",
    ]
    assert (body["status"], body["error"], body["attempts"]) == ("done", None, 1)


@pytest.mark.django_db(transaction=True)
def test_a_worker_retries_a_failed_llm_call_and_then_succeeds(api, llm):
    purge_queue()
    llm.script_chat(Fault(status=500), GOOD)
    job = submit(api)
    with celery_worker(**worker_env(llm)):
        assert wait_until(lambda: job_status(job) == "done")
    job.refresh_from_db()
    assert (job.attempts, len(job.memory_ids), llm.count("/chat/completions")) == (2, 2, 2)


@pytest.mark.django_db(transaction=True)
def test_a_job_whose_worker_is_killed_mid_flight_completes_once_on_a_new_worker(api, llm):
    purge_queue()
    llm.default_chat = GOOD
    llm.script_chat(Fault(delay=30.0))  # the first worker dies while waiting for this answer
    job = submit(api)
    with celery_worker(**worker_env(llm)) as doomed:
        assert wait_until(lambda: job_status(job) == "running" and llm.count("/chat/completions") == 1)
        doomed.kill()
        doomed.wait(10)
    assert job_status(job) == "running"
    assert requeue_everything_unfinished() == [str(job.pk)]
    with celery_worker(**worker_env(llm)):
        assert wait_until(lambda: job_status(job) == "done")
    job.refresh_from_db()
    assert (job.attempts, len(job.memory_ids), Memory.objects.count()) == (2, 2, 2)


@contextmanager
def broker_at(url):
    """Point this process's Celery app at another broker (forgetting which pools it uses)."""

    def reset_pools():
        celery_app._pool = None
        celery_app.amqp._producer_pool = None

    previous = celery_app.conf.broker_url
    celery_app.conf.broker_url = url
    reset_pools()
    try:
        yield
    finally:
        celery_app.conf.broker_url = previous
        reset_pools()


@pytest.mark.django_db(transaction=True)
def test_capture_accepted_while_the_broker_is_down_is_processed_once_it_is_back(api, settings, tmp_path):
    settings.MEMORYHUB_LLM_BASE_URL, settings.OPENAI_API_KEY = "", ""
    purge_queue()
    with broker_at(f"redis+socket://{tmp_path}/no-broker-here.sock"):
        job = submit(api, messages=[{"role": "user", "content": "I prefer tabs over spaces in Python."}])
    assert (job_status(job), redis_client().llen("celery")) == ("queued", 0)
    assert requeue_everything_unfinished() == [str(job.pk)]
    with celery_worker():
        assert wait_until(lambda: job_status(job) == "done")
    assert list(Memory.objects.values_list("content", flat=True)) == ["The user prefers tabs over spaces in Python."]


def test_queueing_embeddings_while_the_broker_is_down_neither_waits_nor_raises(tmp_path, caplog, redis):
    from retrieval.queueing import EMBED_CHUNK, MESSAGE_EMBED_CHUNK, queue_embedding, queue_message_embedding

    purge_queue()
    ids = [f"id-{n}" for n in range(3 * max(EMBED_CHUNK, MESSAGE_EMBED_CHUNK))]
    with broker_at(f"redis+socket://{tmp_path}/no-broker-here.sock"):
        started = time.monotonic()
        queue_embedding(ids)
        queue_message_embedding(ids)
        elapsed = time.monotonic() - started
    # A hang guard, not a speed target: one failed attempt takes ~0.03 s, while connection
    # retries (``retry=False`` in kombu 5.7) took 6 s per call, 12 s here.
    assert elapsed < 3, "publishing must not wait for a broker that is down"
    assert redis_client().llen("celery") == 0
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 2  # one per call: the first chunk that fails stops the rest
    assert f"{len(ids)} memories wait for the embedding sweeper" in warnings[0]
    assert f"{len(ids)} messages wait for the message-embedding sweeper" in warnings[1]
