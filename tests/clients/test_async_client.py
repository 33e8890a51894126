"""The asyncio client against the live test server: the same calls, awaited (each test runs
its own event loop with ``asyncio.run``)."""

from __future__ import annotations

import asyncio

import httpx2
import pytest
from memoryhub_client import AsyncMemoryHub, NotFound, RetrievedMemory, Unauthorized

from memories.models import Project
from tests.clients.test_retries import Wire


def test_the_async_client_creates_lists_every_page_and_retrieves(server, key):
    async def scenario() -> None:
        async with AsyncMemoryHub(base_url=server, api_key=key) as hub:
            peanuts = await hub.create_memory(user_id="alice", content="Alice is allergic to peanuts.")
            for n in range(4):
                await hub.create_memory(user_id="alice", content=f"Alice fact number {n}.")
            walked = [memory.id async for memory in hub.iter_memories(user_id="alice", limit=2)]
            assert len(set(walked)) == 5 and peanuts.id in walked
            found = await hub.retrieve(user_id="alice", query="peanut allergy")
            assert isinstance(found.memories[0], RetrievedMemory)
            assert found.memories[0].content == "Alice is allergic to peanuts."

    asyncio.run(scenario())


def test_the_async_client_maps_errors(server, key):
    async def scenario() -> None:
        async with AsyncMemoryHub(base_url=server, api_key=key) as hub:
            with pytest.raises(NotFound):
                await hub.get_memory(memory_id="00000000-0000-0000-0000-000000000000", user_id="alice")
        async with AsyncMemoryHub(base_url=server, api_key="mh_not_a_key") as stranger:
            with pytest.raises(Unauthorized):
                await stranger.retrieve(user_id="alice", query="anything")

    asyncio.run(scenario())


def test_the_async_client_retries_a_429_after_retry_after(gateway, key):
    wire, waits = Wire(), []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        gateway.reopen()

    async def scenario() -> None:
        async with httpx2.AsyncClient(event_hooks={"response": [wire_async]}) as http:
            hub = AsyncMemoryHub(base_url=gateway.url, api_key=key, http=http, sleep=sleep)
            await hub.retrieve(user_id="alice", query="green tea")
            assert (await hub.retrieve(user_id="alice", query="green tea")).degraded == []

    async def wire_async(response: httpx2.Response) -> None:
        wire(response)

    asyncio.run(scenario())
    assert wire.seen == [(200, None), (429, "7"), (200, None)]
    assert waits == [7.0]


def test_over_the_apis_rate_limit_the_async_client_gets_an_empty_answer(server, key, project):
    Project.objects.filter(pk=project.pk).update(retrieval_rate_limit=1)

    async def scenario() -> None:
        async with AsyncMemoryHub(base_url=server, api_key=key) as hub:
            await hub.retrieve(user_id="alice", query="green tea")
            over = await hub.retrieve(user_id="alice", query="green tea")
            assert (over.memories, over.degraded) == ([], ["rate_limited"])

    asyncio.run(scenario())
