"""``AsyncMemoryHub``: the asyncio client, method for method the same as ``client.MemoryHub``.

The API methods are written once, in ``_methods.Methods``, and are coroutines here; this module
holds what is async about this client: sending with retries, closing, and the helpers that
iterate pages and poll.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from types import TracebackType
from typing import Any, TypeVar

import httpx2

from memoryhub_client import _core
from memoryhub_client._endpoint import AsyncSender
from memoryhub_client._methods import Methods
from memoryhub_client.models import CaptureJob, Consolidation, Memory

R = TypeVar("R")


class AsyncMemoryHub(AsyncSender, Methods):
    """An asyncio MemoryHub API client for one project (its API key).

    ``base_url`` is the server's root (``http://localhost:8000``). ``sleep`` is how the client
    waits between retries (``asyncio.sleep``); pass ``retry=NO_RETRY`` to see every 429 at once.
    """

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        timeout: float = 30.0,
        retry: _core.RetryPolicy | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        http: httpx2.AsyncClient | None = None,
    ) -> None:
        self.retry = retry or _core.RetryPolicy()
        self._sleep = sleep
        self._owns_http = http is None
        self._http = http or httpx2.AsyncClient(timeout=timeout)
        self._server = _core.Server(base_url=base_url, api_key=api_key)

    async def close(self) -> None:
        """Close the connection pool (when the client made it)."""
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> AsyncMemoryHub:
        return self

    async def __aexit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        await self.close()

    async def _send(self, call: _core.Call[R]) -> R:
        attempt = 0
        while True:
            try:
                response = await self._http.request(**call.request(self._server))
            except httpx2.TransportError as error:
                pause = self.retry.wait_after_transport_error(attempt=attempt, call=call)
                if pause is None:
                    raise _core.transport_error(error) from error
                await self._sleep(pause)
                attempt += 1
                continue
            wait = self.retry.wait(attempt=attempt, status=response.status_code, headers=response.headers)
            if wait is None:
                return _core.result(call, response)
            await self._sleep(wait)
            attempt += 1

    def iter_memories(
        self,
        *,
        user_id: str,
        kind: str | None = None,
        category: str | None = None,
        scope: str | None = None,
        status: str | None = None,
        q: str | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[Memory]:
        """Every memory matching the filters, page after page (``limit`` is the page size)."""
        filters = dict(locals())
        del filters["self"]
        return self._pages(filters)

    async def _pages(self, filters: dict[str, Any]) -> AsyncIterator[Memory]:
        cursor: str | None = None
        while True:
            page = await self.list_memories(**filters, cursor=cursor)
            for memory in page.items:
                yield memory
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    async def wait_for_capture(
        self, *, job_id: str, user_id: str, timeout: float = 60.0, interval: float = 0.5
    ) -> CaptureJob:
        """Poll a capture job until it is finished (or ``timeout`` seconds have passed, when
        the job is returned as it is)."""
        deadline = time.monotonic() + timeout
        while True:
            job = await self.capture_job(job_id=job_id, user_id=user_id)
            if job.finished or time.monotonic() >= deadline:
                return job
            await self._sleep(interval)

    async def wait_for_consolidation(
        self, *, job_id: str, user_id: str, timeout: float = 120.0, interval: float = 0.5
    ) -> Consolidation:
        """Poll a consolidation until it is finished (or ``timeout`` seconds have passed, when it
        is returned as it is)."""
        deadline = time.monotonic() + timeout
        while True:
            run = await self.consolidation(job_id=job_id, user_id=user_id)
            if run.finished or time.monotonic() >= deadline:
                return run
            await self._sleep(interval)
