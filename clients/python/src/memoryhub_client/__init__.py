"""Typed Python client for the MemoryHub HTTP API: ``MemoryHub`` (sync) and ``AsyncMemoryHub``."""

from __future__ import annotations

from memoryhub_client._core import NO_RETRY, RetryPolicy
from memoryhub_client.aio import AsyncMemoryHub
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
