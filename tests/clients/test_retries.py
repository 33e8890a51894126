"""The client and rate limits. Over the API's own per-user limit of /retrieve
(Project.retrieval_rate_limit) the answer is a 200 that names ``rate_limited``: the client
returns it at once. A gateway in front of the API may still answer 429 with ``Retry-After``
(tests/support/rate_limiting_proxy.py): the client waits what it says and retries.

The client's ``sleep`` is where time would pass; instead of waiting, the test's sleep reopens
the gateway (what its window closing would do). Every response's ``Retry-After`` is recorded
on the wire (an httpx event hook) to check the client waited what the server said.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx2
import pytest
from memoryhub_client import MemoryHub, RateLimited, RetryPolicy
from memoryhub_client._core import retry_after

from common.redis import redis_client
from memories.models import Project


def close_rate_windows() -> None:
    for key in redis_client().scan_iter("memoryhub:rate:*"):
        redis_client().delete(key)


class Wire:
    """The status and Retry-After of every response the client received."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, str | None]] = []

    def __call__(self, response: httpx2.Response) -> None:
        self.seen.append((response.status_code, response.headers.get("Retry-After")))


def sleeper(waits: list[float], *, then: Callable[[], None]) -> Callable[[float], None]:
    def sleep(seconds: float) -> None:
        waits.append(seconds)
        then()

    return sleep


@pytest.fixture
def limit_one(project: Project) -> None:
    Project.objects.filter(pk=project.pk).update(retrieval_rate_limit=1)


def test_over_the_apis_rate_limit_the_client_gets_an_empty_answer_at_once(server, key, limit_one):
    wire, waits = Wire(), []
    with httpx2.Client(event_hooks={"response": [wire]}) as http:
        hub = MemoryHub(base_url=server, api_key=key, http=http, sleep=sleeper(waits, then=close_rate_windows))
        hub.retrieve(user_id="alice", query="green tea")
        result = hub.retrieve(user_id="alice", query="green tea")
    assert (result.memories, result.degraded) == ([], ["rate_limited"])
    assert [status for status, _ in wire.seen] == [200, 200] and waits == []
    told = wire.seen[1][1]
    assert told is not None and 1 <= int(told) <= 60


def test_a_429_is_retried_after_the_servers_retry_after(gateway, key):
    wire, waits = Wire(), []
    with httpx2.Client(event_hooks={"response": [wire]}) as http:
        hub = MemoryHub(base_url=gateway.url, api_key=key, http=http, sleep=sleeper(waits, then=gateway.reopen))
        hub.retrieve(user_id="alice", query="green tea")
        result = hub.retrieve(user_id="alice", query="green tea")
    assert result.degraded == []
    assert wire.seen == [(200, None), (429, "7"), (200, None)]
    assert waits == [7.0]


def test_a_retry_after_longer_than_max_wait_is_raised_at_once(gateway, key):
    waits: list[float] = []
    with MemoryHub(
        base_url=gateway.url, api_key=key, retry=RetryPolicy(max_wait=0.5), sleep=sleeper(waits, then=gateway.reopen)
    ) as hub:
        hub.retrieve(user_id="alice", query="green tea")
        with pytest.raises(RateLimited) as limited:
            hub.retrieve(user_id="alice", query="green tea")
    assert (limited.value.status, limited.value.code, limited.value.retry_after) == (429, "rate_limited", 7.0)
    assert waits == []


def test_retries_stop_after_max_retries(gateway, key):
    waits: list[float] = []
    with MemoryHub(
        base_url=gateway.url, api_key=key, retry=RetryPolicy(max_retries=2), sleep=sleeper(waits, then=lambda: None)
    ) as hub:
        hub.retrieve(user_id="alice", query="green tea")
        with pytest.raises(RateLimited):
            hub.retrieve(user_id="alice", query="green tea")
    assert len(waits) == 2


def headers(**values: Any) -> httpx2.Headers:
    return httpx2.Headers({name.replace("_", "-"): str(value) for name, value in values.items()})


def test_without_retry_after_the_back_off_grows_and_stays_under_its_ceiling():
    policy = RetryPolicy(max_retries=5, backoff=1.0, max_backoff=4.0)
    waits = [policy.wait(attempt=n, status=503, headers=headers()) for n in range(5)]
    ceilings = [1.0, 2.0, 4.0, 4.0, 4.0]
    assert all(w is not None and c / 2 <= w <= c for w, c in zip(waits, ceilings, strict=True))
    assert policy.wait(attempt=5, status=503, headers=headers()) is None
    assert policy.wait(attempt=0, status=500, headers=headers()) is None


def test_retry_after_is_read_as_seconds_or_as_an_http_date():
    assert retry_after(headers(Retry_After="7")) == 7.0
    assert retry_after(headers(Retry_After="Wed, 21 Oct 2015 07:28:00 GMT")) == 0.0  # a date gone by
    assert retry_after(headers(Retry_After="soon")) is None
