"""``Idempotency-Key`` on the creating POSTs: a retry answers the first answer and writes nothing."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx2
import pytest
import redis

from capture.models import CaptureJob
from memories.models import Memory

pytestmark = pytest.mark.django_db(transaction=True)

BODY = {"user_id": "alice", "content": "Alice deploys on Fridays."}


def post(api: Any, path: str, body: Any, key: str | None) -> Any:
    headers = {"Authorization": f"Bearer {api.key}"}
    if key is not None:
        headers["Idempotency-Key"] = key
    return api.client.post(f"/api/v1{path}", body, content_type="application/json", headers=headers)


def test_a_retried_create_answers_the_first_memory_and_writes_once(api):
    first = post(api, "/memories", BODY, "retry-1")
    again = post(api, "/memories", {"content": BODY["content"], "user_id": "alice"}, "retry-1")
    assert (first.status_code, again.status_code) == (201, 201)
    assert again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true"
    assert Memory.objects.filter(project=api.project).count() == 1


def test_without_a_key_a_repeated_post_runs_again(api):
    # Not replayed (that would answer 201 again): it runs, and finds the memory it repeats.
    answers = [post(api, "/memories", BODY, None) for _ in range(2)]
    assert [a.status_code for a in answers] == [201, 200]
    assert answers[1].json()["duplicate_of"] == answers[0].json()["id"]
    assert Memory.objects.filter(project=api.project).count() == 1


def test_the_same_key_with_another_body_is_a_conflict(api):
    post(api, "/memories", BODY, "k")
    other = post(api, "/memories", {**BODY, "content": "Alice deploys on Mondays."}, "k")
    assert other.status_code == 422
    assert other.json()["error"]["code"] == "idempotency_conflict"
    assert list(Memory.objects.values_list("content", flat=True)) == [BODY["content"]]


def test_the_same_key_on_another_endpoint_is_a_conflict(api):
    post(api, "/memories", BODY, "k")
    bulk = post(api, "/memories/bulk", {"memories": [BODY]}, "k")
    assert bulk.status_code == 422 and bulk.json()["error"]["code"] == "idempotency_conflict"


def test_keys_belong_to_one_project(api, other_api):
    post(api, "/memories", BODY, "shared-key")
    theirs = post(other_api, "/memories", BODY, "shared-key")
    assert theirs.status_code == 201 and "Idempotent-Replayed" not in theirs
    assert Memory.objects.filter(project=other_api.project).count() == 1


def test_a_refused_write_is_not_kept_so_the_fixed_retry_runs(api):
    refused = post(api, "/memories", {**BODY, "kind": "rumour"}, "k")
    fixed = post(api, "/memories", BODY, "k")
    assert refused.status_code == 422
    assert fixed.status_code == 201 and "Idempotent-Replayed" not in fixed


def test_a_retried_bulk_writes_its_memories_once(api):
    body = {"memories": [BODY, {**BODY, "content": "Alice uses vim."}]}
    first, again = post(api, "/memories/bulk", body, "b"), post(api, "/memories/bulk", body, "b")
    assert again.status_code == 201 and again.json()["ids"] == first.json()["ids"]
    assert Memory.objects.filter(project=api.project).count() == 2


def test_a_retried_capture_and_observation_queue_one_job_each(api):
    capture = {
        "user_id": "alice",
        "session_id": "s1",
        "trigger": "turn",
        "messages": [{"role": "user", "content": "I use vim."}],
    }
    jobs = {post(api, "/capture", capture, "c").json()["job_id"] for _ in range(3)}
    observation = {
        "user_id": "alice",
        "step_name": "lint",
        "output": "ruff found no problems in 120 files; formatting is clean.",
    }
    observed = {post(api, "/observations", observation, "o").json()["job_id"] for _ in range(3)}
    assert len(jobs) == 1 and len(observed) == 1
    assert CaptureJob.objects.filter(project=api.project).count() == 2


def test_a_key_that_is_not_printable_ascii_is_refused(api):
    for bad in ("", "k" * 256, "clé"):
        answer = post(api, "/memories", BODY, bad)
        assert answer.status_code == 422, bad
        assert answer.json()["error"]["code"] == "invalid_idempotency_key"
    assert not Memory.objects.exists()


def test_eight_parallel_retries_write_exactly_one_memory(live_server, api):
    def send(_: int) -> httpx2.Response:
        headers = {"Authorization": f"Bearer {api.key}", "Idempotency-Key": "parallel"}
        return httpx2.post(f"{live_server.url}/api/v1/memories", json=BODY, headers=headers, timeout=30)

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(send, range(8)))
    assert {answer.status_code for answer in answers} == {201}
    assert len({answer.json()["id"] for answer in answers}) == 1
    assert Memory.objects.filter(project=api.project).count() == 1


def test_with_redis_unreachable_a_keyed_write_still_runs(api, monkeypatch, tmp_path):
    from common import redis as process_redis  # noqa: PLC0415

    gone = redis.Redis(unix_socket_path=str(tmp_path / "no-redis.sock"), socket_timeout=0.5)
    monkeypatch.setattr(process_redis, "_client", gone)
    answers = [post(api, "/memories", BODY, "k").status_code for _ in range(2)]
    assert answers == [201, 200]  # no guard without Redis: the write runs again, not refused
