"""The client's creating calls carry an ``Idempotency-Key``, the same on every retry, so a write
whose answer was lost on the way back is retried without writing twice (against the live server)."""

from __future__ import annotations

import asyncio
from uuid import UUID

import httpx2
import pytest
from memoryhub_client import AsyncMemoryHub, MemoryHub, TransportError

from memories.models import Memory

pytestmark = pytest.mark.django_db(transaction=True)


class LosesFirstAnswers(httpx2.HTTPTransport):
    """Delivers each request to the server, then drops the first ``lose`` answers on the floor."""

    def __init__(self, lose: int) -> None:
        super().__init__()
        self.lose = lose
        self.keys: list[str | None] = []

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        self.keys.append(request.headers.get("Idempotency-Key"))
        response = super().handle_request(request)
        if self.lose:
            self.lose -= 1
            response.close()
            raise httpx2.ReadError("connection reset before the answer", request=request)
        return response


def no_wait(_: float) -> None:
    return None


def test_a_create_whose_answer_was_lost_is_retried_and_written_once(server, key, project):
    transport = LosesFirstAnswers(lose=2)
    with MemoryHub(
        base_url=server, api_key=key, http=httpx2.Client(transport=transport, timeout=30), sleep=no_wait
    ) as hub:
        memory = hub.create_memory(user_id="alice", content="Alice deploys on Fridays.")
    assert len(transport.keys) == 3 and transport.keys[0] and len(set(transport.keys)) == 1
    assert list(Memory.objects.filter(project=project).values_list("id", flat=True)) == [UUID(memory.id)]


def test_two_calls_send_two_keys_and_write_two_memories(server, key, project):
    transport = LosesFirstAnswers(lose=0)
    with MemoryHub(base_url=server, api_key=key, http=httpx2.Client(transport=transport, timeout=30)) as hub:
        hub.capture(user_id="alice", trigger="turn", session_id="s", messages=[{"role": "user", "content": "hi"}])
        hub.capture(user_id="alice", trigger="turn", session_id="s", messages=[{"role": "user", "content": "hi"}])
    assert len(set(transport.keys)) == 2 and None not in transport.keys


def test_reads_carry_no_key_and_are_not_resent_after_a_lost_answer(server, key):
    transport = LosesFirstAnswers(lose=1)
    with (
        MemoryHub(
            base_url=server, api_key=key, http=httpx2.Client(transport=transport, timeout=30), sleep=no_wait
        ) as hub,
        pytest.raises(TransportError),
    ):
        hub.list_memories(user_id="alice")
    assert transport.keys == [None]


def test_the_async_client_resends_a_lost_create_with_its_key(server, key, project):
    class AsyncLoses(httpx2.AsyncHTTPTransport):
        lose = 1

        async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
            response = await super().handle_async_request(request)
            if self.lose:
                self.lose -= 1
                await response.aclose()
                raise httpx2.ReadError("reset", request=request)
            return response

    async def nap(_: float) -> None:
        return None

    async def run() -> str:
        http = httpx2.AsyncClient(transport=AsyncLoses(), timeout=30)
        async with AsyncMemoryHub(base_url=server, api_key=key, http=http, sleep=nap) as hub:
            created = await hub.bulk_create_memories(memories=[{"user_id": "alice", "content": "Alice uses vim."}])
        await http.aclose()
        return created.ids[0]

    first = asyncio.run(run())
    assert list(Memory.objects.filter(project=project).values_list("id", flat=True)) == [UUID(first)]
