"""Typed Python client for the MemoryHub HTTP API: ``MemoryHub`` (sync) and ``AsyncMemoryHub``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memoryhub_client._core import NO_RETRY, RetryPolicy
from memoryhub_client.client import MemoryHub
from memoryhub_client.errors import (
    BadRequest,
    Conflict,
    MemoryHubError,
    MethodNotAllowed,
    NotFound,
    PayloadTooLarge,
    RateLimited,
    ServerError,
    TransportError,
    Unauthorized,
    Unavailable,
    ValidationError,
)
from memoryhub_client.models import (
    CaptureJob,
    Consolidation,
    Episode,
    History,
    JobAccepted,
    Link,
    Memory,
    MemoryPage,
    QueryMemoryResult,
    RetrievedMemory,
    RetrieveResult,
    ScratchpadEntry,
)

__all__ = [
    "NO_RETRY",
    "AsyncMemoryHub",
    "BadRequest",
    "CaptureJob",
    "Conflict",
    "Consolidation",
    "Episode",
    "History",
    "JobAccepted",
    "Link",
    "Memory",
    "MemoryHub",
    "MemoryHubError",
    "MemoryPage",
    "MethodNotAllowed",
    "NotFound",
    "PayloadTooLarge",
    "QueryMemoryResult",
    "RateLimited",
    "RetrieveResult",
    "RetrievedMemory",
    "RetryPolicy",
    "ScratchpadEntry",
    "ServerError",
    "TransportError",
    "Unauthorized",
    "Unavailable",
    "ValidationError",
]


if TYPE_CHECKING:
    from memoryhub_client.aio import AsyncMemoryHub


def __getattr__(name: str) -> Any:
    # The async client (and asyncio) load on first use: the command line's hooks start a process
    # per event and never need them.
    if name == "AsyncMemoryHub":
        from memoryhub_client.aio import AsyncMemoryHub  # noqa: PLC0415

        return AsyncMemoryHub
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
