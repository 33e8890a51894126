"""``AsyncMemoryHub``: the asyncio client, method for method the same as ``client.MemoryHub``.

Every method is keyword-only and maps to one row of ``operations.OPERATIONS``; an argument
left at None is not sent, so the server's default applies.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, TypeVar, cast

import httpx2

from memoryhub_client import _core
from memoryhub_client.models import (
    BulkResult,
    CaptureJob,
    Consolidation,
    Erasure,
    Health,
    History,
    ImportResult,
    JobAccepted,
    Link,
    Memory,
    MemoryPage,
    MemoryWrite,
    Profile,
    QueryMemoryResult,
    RetrieveResult,
    ScratchpadEntry,
    ScratchpadList,
)

T = TypeVar("T")
Links = Sequence[Link | dict[str, str]] | None


class AsyncMemoryHub:
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

    async def _call(self, name: str, arguments: dict[str, Any], returns: type[T], *, content: str | None = None) -> T:
        call = _core.prepare(name, arguments, content=content)
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
                return cast(T, _core.result(call, response))
            await self._sleep(wait)
            attempt += 1

    # -- memories ---------------------------------------------------------------------------

    async def health(self) -> Health:
        """The server's dependencies (no key needed, but it is sent)."""
        return await self._call("health", {}, Health)

    async def create_memory(
        self,
        *,
        user_id: str,
        content: str,
        kind: str | None = None,
        category: str | None = None,
        scope: str | None = None,
        importance: float | None = None,
        metadata: dict[str, Any] | None = None,
        expires_at: datetime | None = None,
        supersedes: str | None = None,
        related: Links = None,
        idempotency_key: str | None = None,
    ) -> MemoryWrite:
        """Create one memory; ``related`` links it to others (``Link(id, relationship)``)."""
        return await self._call("create_memory", locals(), MemoryWrite)

    async def bulk_create_memories(
        self, *, memories: Sequence[dict[str, Any]], idempotency_key: str | None = None
    ) -> BulkResult:
        """Create up to 1,000 memories in one request; they are embedded in the background."""
        return await self._call("bulk_create_memories", locals(), BulkResult)

    async def get_memory(self, *, memory_id: str, user_id: str) -> Memory:
        """One memory the user can see (``NotFound`` otherwise)."""
        return await self._call("get_memory", locals(), Memory)

    async def update_memory(
        self,
        *,
        memory_id: str,
        user_id: str,
        content: str | None = None,
        kind: str | None = None,
        category: str | None = None,
        importance: float | None = None,
        metadata: dict[str, Any] | None = None,
        expires_at: datetime | None = None,
        reason: str | None = None,
    ) -> Memory:
        """Edit a memory in place; the server records a revision."""
        return await self._call("update_memory", locals(), Memory)

    async def delete_memory(self, *, memory_id: str, user_id: str) -> None:
        """Soft-delete a memory."""
        await self._call("delete_memory", locals(), type(None))

    async def memory_history(self, *, memory_id: str, user_id: str) -> History:
        """Every revision of a memory and its supersede chain."""
        return await self._call("memory_history", locals(), History)

    async def supersede_memory(
        self,
        *,
        memory_id: str,
        user_id: str,
        content: str,
        kind: str | None = None,
        category: str | None = None,
        scope: str | None = None,
        importance: float | None = None,
        metadata: dict[str, Any] | None = None,
        expires_at: datetime | None = None,
        related: Links = None,
        reason: str | None = None,
        idempotency_key: str | None = None,
    ) -> MemoryWrite:
        """Replace a memory with a new version; the old one becomes ``superseded``."""
        return await self._call("supersede_memory", locals(), MemoryWrite)

    async def list_memories(
        self,
        *,
        user_id: str,
        kind: str | None = None,
        category: str | None = None,
        scope: str | None = None,
        status: str | None = None,
        q: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> MemoryPage:
        """One page of a user's memories; ``iter_memories`` walks them all."""
        return await self._call("list_memories", locals(), MemoryPage)

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

    # -- retrieval and tools ----------------------------------------------------------------

    async def retrieve(
        self,
        *,
        user_id: str,
        query: str | None = None,
        messages: Sequence[dict[str, Any]] | None = None,
        turn_id: str | None = None,
        limit: int | None = None,
        token_budget: int | None = None,
        min_score: float | None = None,
        kinds: Sequence[str] | None = None,
        categories: Sequence[str] | None = None,
        hyde: bool | None = None,
        hop_depth: int | None = None,
        include_superseded: bool | None = None,
        judge: bool | None = None,
        episodes: bool | None = None,
        profile: bool | None = None,
    ) -> RetrieveResult:
        """The memories relevant to ``query`` (or the conversation ``messages``) and the
        injection text for a system prompt."""
        return await self._call("retrieve", locals(), RetrieveResult)

    async def tools(self) -> list[dict[str, Any]]:
        """The OpenAI function-tool schemas an agent framework can register as they are."""
        return await self._call("tools", {}, list)

    async def query_memory(
        self,
        *,
        user_id: str,
        query: str,
        types: Sequence[str] | None = None,
        categories: Sequence[str] | None = None,
        limit: int | None = None,
    ) -> QueryMemoryResult:
        """The ``query_memory`` tool: retrieval in the compact shape a tool call returns."""
        return await self._call("query_memory", locals(), QueryMemoryResult)

    # -- capture ----------------------------------------------------------------------------

    async def capture(
        self,
        *,
        user_id: str,
        messages: Sequence[dict[str, Any]],
        trigger: str,
        session_id: str | None = None,
        conversation_id: str | None = None,
        idempotency_key: str | None = None,
    ) -> JobAccepted:
        """Hand a conversation to the server (``trigger`` ``"turn"`` or ``"compaction"``); it
        extracts memories in the background."""
        return await self._call("capture", locals(), JobAccepted)

    async def capture_job(self, *, job_id: str, user_id: str) -> CaptureJob:
        """A capture job's state."""
        return await self._call("capture_job", locals(), CaptureJob)

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

    # -- scratchpad -------------------------------------------------------------------------

    async def put_scratchpad(self, *, key: str, user_id: str, value: Any) -> ScratchpadEntry:
        """Set one key of the user's scratchpad (any JSON value)."""
        return await self._call("put_scratchpad", locals(), ScratchpadEntry)

    async def get_scratchpad(self, *, key: str, user_id: str) -> ScratchpadEntry:
        """One key of the user's scratchpad (``NotFound`` when unset)."""
        return await self._call("get_scratchpad", locals(), ScratchpadEntry)

    async def delete_scratchpad(self, *, key: str, user_id: str) -> None:
        """Remove one key of the user's scratchpad."""
        await self._call("delete_scratchpad", locals(), type(None))

    async def list_scratchpad(
        self, *, user_id: str, prefix: str | None = None, limit: int | None = None
    ) -> ScratchpadList:
        """The user's scratchpad keys starting with ``prefix``."""
        return await self._call("list_scratchpad", locals(), ScratchpadList)

    async def search_scratchpad(self, *, user_id: str, q: str, limit: int | None = None) -> ScratchpadList:
        """The user's scratchpad entries whose key or value contains ``q``."""
        return await self._call("search_scratchpad", locals(), ScratchpadList)

    # -- the project's data -----------------------------------------------------------------

    async def export(self, *, user_id: str | None = None, conversations: bool | None = None) -> str:
        """The project (or one user's part of it) as JSON lines (docs/api.md)."""
        return await self._call("export", locals(), str)

    async def import_jsonl(self, *, text: str, idempotency_key: str | None = None) -> ImportResult:
        """Import an export file's text; when any line is rejected nothing is imported and
        ``ValidationError`` (code ``import_rejected``) lists each line's reason in ``details``."""
        return await self._call("import_jsonl", {"idempotency_key": idempotency_key}, ImportResult, content=text)

    async def get_profile(self, *, user_id: str) -> Profile:
        """The user's profile (``NotFound`` before the first is built)."""
        return await self._call("get_profile", locals(), Profile)

    async def rebuild_profile(self, *, user_id: str) -> Profile:
        """Rebuild the user's profile from their active memories now, and answer it."""
        return await self._call("rebuild_profile", locals(), Profile)

    async def erase_user(self, *, user_id: str) -> Erasure:
        """Erase one end user of the project, irreversibly; answers what was removed."""
        return await self._call("erase_user", locals(), Erasure)

    # -- consolidation ----------------------------------------------------------------------

    async def consolidate(self, *, user_id: str, idempotency_key: str | None = None) -> JobAccepted:
        """Queue a consolidation of the user's memories (near-duplicates merged, unlinked changes
        of mind superseded, under the project's capture policy); the run already waiting answers
        when there is one."""
        return await self._call("consolidate", locals(), JobAccepted)

    async def consolidation(self, *, job_id: str, user_id: str) -> Consolidation:
        """A consolidation's state: status, counts per action, and what it did or proposed."""
        return await self._call("consolidation", locals(), Consolidation)

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
